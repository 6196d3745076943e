// Per-target guardrails in translation (translate/mcp/table.ts): a GwPolicy selecting one MCP target by sectionName
// with backend.mcp.guardrails gives that target its processors in the MCP table (not the other target), and is not
// reported; the same policy's backend.mcp.authentication still is (the endpoint's, checked before a target is known).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";

const YAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: guard, namespace: default }
spec: { static: { host: 10.0.0.9, port: 9000 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hub, namespace: default }
spec:
  mcp:
    targets:
      - { name: alpha, static: { host: 10.0.0.1, port: 8000 } }
      - { name: beta, static: { host: 10.0.0.2, port: 8000 } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /mcp } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: beta-only, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub, sectionName: beta }]
  backend:
    mcp:
      guardrails:
        processors:
          - remote: { backendRef: { group: sluice.dev, kind: GwBackend, name: guard }, failureMode: FailOpen }
            methods: { "tools/call": Full }
      authentication:
        issuer: https://idp.example.com
        jwks: { jwksPath: /keys, backendRef: { group: sluice.dev, kind: GwBackend, name: guard } }
`;

describe("per-target MCP guardrails in translation", () => {
  test("the target's processors in the table; guardrails not reported, authentication reported", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-mcp-tguard-"));
    try {
      writeFileSync(join(dir, "all.yaml"), YAML);
      const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
      // Only the deprecation warning of the authentication form.
      assert.deepEqual(
        load.problems.map((x) => x.path),
        ["spec.backend.mcp.authentication"],
      );
      const entry = result.mcp.entries.get("mcp/default/gw/default/hub");
      assert.ok(entry !== undefined);
      assert.equal(entry.guardrails, undefined);
      assert.deepEqual(Object.keys(entry.targetGuardrails ?? {}), ["beta"]);
      const p = entry.targetGuardrails?.["beta"]?.[0];
      assert.equal(p?.url, "http://10.0.0.9:9000/");
      assert.equal(p?.failureMode, "FailOpen");
      assert.deepEqual(p?.methods, { "tools/call": "Full" });
      const status = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "beta-only"));
      assert.doesNotMatch(status, /backend\.mcp\.guardrails/);
      assert.match(status, /backend\.mcp\.authentication: is served per backend, not per target/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
