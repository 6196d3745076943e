// Connection policies of MCP targets through translation (translate/mcp/connection.ts): each target's effective
// policy (GwPolicy < GwBackend spec.policies < GwPolicy with the target's sectionName < the target's own policies)
// resolved into the MCP table for Sluice's own transport (TLS material read from the ConfigMap and Secret, a static
// key, timeouts, a CONNECT proxy), a target whose CA cannot be had failing alone, and status naming only what that
// transport does not serve.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { makeInput } from "../../src/translate/input.js";
import type { PolicySourceIR } from "../../src/translate/ir.js";
import { mcpTargetConnection, mcpUnservedParts } from "../../src/translate/mcp/connection.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

const YAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
${caConfigMapYaml()}${tlsSecretYaml()}---
apiVersion: v1
kind: Secret
metadata: { name: backend-key, namespace: default }
stringData: { Authorization: "Bearer from-secret" }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: proxy, namespace: default }
spec:
  static: { host: 10.5.5.5, port: 3128 }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hub, namespace: default }
spec:
  policies:
    auth: { secretRef: { name: backend-key } }
  mcp:
    targets:
      - name: secure
        static:
          host: 127.0.0.1
          port: 8443
          policies:
            tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com, mtlsCertificateRef: [{ name: client-cert }] }
            auth: { key: own-key, location: { header: { name: x-api-key } } }
            tcp: { connectTimeout: 2s, keepalive: { time: 30s, interval: 5s } }
            http: { requestTimeout: 3s, version: HTTP2 }
      - name: proxied
        static: { host: mcp.example.com, port: 443, policies: { tls: {}, tunnel: { backendRef: { group: sluice.dev, kind: GwBackend, name: proxy } } } }
      - name: broken
        static: { host: 127.0.0.2, port: 8443, policies: { tls: { caCertificateRefs: [{ name: nowhere }] } } }
      - name: plain
        static: { host: 127.0.0.3, port: 8000 }
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
metadata: { name: whole, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
  backend:
    http: { requestTimeout: 9s }
    health: { eviction: { consecutiveFailures: 2 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: plain-only, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub, sectionName: plain }]
  backend:
    tls: { insecureSkipVerify: All }
`;

describe("MCP target connection policies in translation", () => {
  test("resolved per target, merged by level; a CA that cannot be had fails its target; status", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-mcp-conn-"));
    try {
      writeFileSync(join(dir, "all.yaml"), YAML);
      const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
      assert.deepEqual(load.problems, []);
      const entry = result.mcp.entries.get("mcp/default/gw/default/hub");
      assert.ok(entry !== undefined);
      const by = new Map(entry.targets.map((t) => [t.name, t]));
      assert.deepEqual([...by.keys()], ["secure", "proxied", "plain"]);

      const secure = by.get("secure");
      assert.deepEqual(secure?.urls, ["https://127.0.0.1:8443/mcp"]);
      const c = secure?.connection;
      assert.equal(c?.tls?.sni, "example.com");
      assert.deepEqual(c?.tls?.sans, ["example.com"]);
      assert.equal(c?.tls?.ca?.trim(), tlsFixture("example.com.crt").trim());
      assert.equal(c?.tls?.clientCert?.chain.trim(), tlsFixture("foo.example.com.crt").trim());
      // The target's own auth replaces the GwBackend's (a whole field); its timeouts replace the GwPolicy's.
      assert.deepEqual(c?.header, { name: "x-api-key", value: "own-key" });
      assert.equal(c?.connectTimeoutMs, 2000);
      assert.equal(c?.keepaliveMs, 30_000);
      assert.equal(c?.requestTimeoutMs, 3000);

      const proxied = by.get("proxied")?.connection;
      assert.deepEqual(proxied?.proxy, { address: "10.5.5.5", port: 3128, name: "GwBackend default/proxy" });
      // No CA: the system bundle; the host is the name checked.
      assert.equal(proxied?.tls?.ca, undefined);
      assert.deepEqual(proxied?.tls?.sans, ["mcp.example.com"]);
      // The GwBackend's Secret key (a Bearer prefix stripped and written back) and the GwPolicy's timeout.
      assert.deepEqual(proxied?.header, { name: "authorization", value: "Bearer from-secret" });
      assert.equal(proxied?.requestTimeoutMs, 9000);

      const plain = by.get("plain");
      assert.deepEqual(plain?.urls, ["https://127.0.0.3:8000/mcp"]);
      assert.equal(plain?.connection?.tls?.insecure, "All");

      const broken = entry.unresolved.find((u) => u.name === "broken");
      assert.match(
        broken?.message ?? "",
        /backend\.tls\.caCertificateRefs: ConfigMap default\/nowhere key ca\.crt not found/,
      );

      const backendStatus = JSON.stringify(result.statuses.find((s) => s.kind === "GwBackend" && s.name === "hub"));
      assert.match(
        backendStatus,
        /policies\.tcp\.keepalive\.interval: Node\.js v\d+\.\d+\.\d+, which runs Sluice, sets only the keepalive idle time .*libuv fixes the probe interval at 1 s/,
      );
      // HTTP/2 is served (target-request.ts), so not reported.
      assert.equal(c?.http2, true);
      assert.doesNotMatch(backendStatus, /http\.version/);
      assert.match(
        backendStatus,
        /ConfigMap default\/nowhere key ca\.crt not found; Sluice does not connect to MCP target broken/,
      );
      assert.doesNotMatch(backendStatus, /not served yet|without it/);
      const whole = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "whole"));
      // health is served per target (target-health.ts): the GwPolicy's reaches every target, with its own key.
      assert.doesNotMatch(whole, /NotYetSupported|backend\.health: /);
      assert.deepEqual(c?.health, {
        key: "mcp/default/gw/default/hub|secure",
        backend: "default/hub",
        target: "secure",
        durationMs: 3000,
        consecutiveFailures: 2,
      });
      assert.equal(proxied?.health?.key, "mcp/default/gw/default/hub|proxied");
      assert.doesNotMatch(whole, /backend\.http(\.[a-zA-Z]+)?: /);
      const plainOnly = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "plain-only"));
      assert.doesNotMatch(plainOnly, /NotYetSupported/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("health.unhealthyCondition: compiled and carried; one reading response.body or not compiling is left out", () => {
    const from: PolicySourceIR = {
      kind: "GwPolicy",
      name: "default/h",
      level: "backend",
      target: "GwBackend default/hub",
    };
    const input = makeInput([]);
    const of = (unhealthyCondition: string) =>
      mcpTargetConnection(
        { health: { value: { unhealthyCondition, eviction: { consecutiveFailures: 2 } }, from } },
        "GwBackend default/hub",
        "alpha",
        "127.0.0.1",
        input,
        "k|alpha",
      );
    const good = of("response.code == 429 || response.headers['x-overloaded'] == '1'");
    assert.deepEqual(good.notes, []);
    assert.equal(good.connection?.health?.condition, "response.code == 429 || response.headers['x-overloaded'] == '1'");
    assert.deepEqual(mcpUnservedParts("health", { unhealthyCondition: "response.code == 429" }), []);

    const bad = of("response.code ==");
    assert.equal(bad.connection?.health?.condition, undefined);
    assert.equal(bad.connection?.health?.consecutiveFailures, 2);
    assert.equal(bad.notes.length, 1);
    assert.equal(bad.notes[0]?.field, "backend.health.unhealthyCondition");
    assert.equal(bad.notes[0]?.reason, "Ignored");
    assert.match(bad.notes[0]?.message ?? "", /^backend\.health\.unhealthyCondition: .*the fixed rule applies$/);
    const unknown = of("nosuch.code == 429");
    assert.equal(unknown.connection?.health?.condition, undefined);
    assert.match(unknown.notes[0]?.message ?? "", /nosuch/);

    const body = of("response.body.contains('overloaded')");
    assert.equal(body.connection?.health?.condition, undefined);
    assert.deepEqual(body.notes, []);
    const parts = mcpUnservedParts("health", { unhealthyCondition: "response.body.contains('overloaded')" });
    assert.equal(parts.length, 1);
    assert.equal(parts[0]?.[0], "unhealthyCondition");
    assert.match(parts[0]?.[1] ?? "", /reads response\.body .*the fixed rule applies/);
  });
});
