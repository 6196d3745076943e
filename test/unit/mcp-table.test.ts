// MCP backends through translation: the route to Sluice's MCP service with the backend named in a header it overwrites,
// the MCP table (static hosts, a Service's endpoints, selectors across namespaces), and the MCP policy fields that are
// not served yet reported with their field names. Plus the names the client sees (prefixes, long names, URIs).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { exposedName, exposedUri, MAX_NAME_CHARS, shorten, splitPrefixed, splitUri } from "../../src/mcp/names.js";
import { xdsToJson } from "../../src/translate/xds/json.js";

const YAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: v1
kind: Namespace
metadata: { name: tools, labels: { mcp: "yes" } }
---
apiVersion: v1
kind: Service
metadata: { name: local, namespace: default }
spec: { ports: [{ name: p, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: local-1, namespace: default, labels: { kubernetes.io/service-name: local } }
addressType: IPv4
ports: [{ name: p, port: 9000 }]
endpoints: [{ addresses: [10.0.0.2], conditions: { ready: false } }, { addresses: [10.0.0.1] }]
---
apiVersion: v1
kind: Service
metadata: { name: search, namespace: tools, labels: { kind: mcp } }
spec: { ports: [{ name: http, port: 81 }, { name: mcp, port: 82 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: search-1, namespace: tools, labels: { kubernetes.io/service-name: search } }
addressType: IPv4
ports: [{ name: mcp, port: 7000 }, { name: http, port: 7001 }]
endpoints: [{ addresses: [10.1.0.1] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hub, namespace: default }
spec:
  mcp:
    prefixMode: Always
    failureMode: FailOpen
    targets:
      - { name: remote, static: { host: mcp.example.com, port: 443, path: /api/mcp } }
      - { name: legacy, static: { host: 10.9.9.9, port: 8000, protocol: SSE, policies: { tls: { sni: x } } } }
      - { name: svc, static: { backendRef: { name: local }, port: 80 } }
      - { name: found, selector: { namespaces: { matchLabels: { mcp: "yes" } }, services: { matchLabels: { kind: mcp } } } }
      - { name: none, selector: { services: { matchLabels: { kind: nothing } } } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: mcp
      matches: [{ path: { type: PathPrefix, value: /mcp } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: mcp-rules, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
  backend:
    mcp:
      authorization: { action: Allow, policy: { matchExpressions: ["mcp.tool.name == 'echo'", "mcp.tool.name == nope"] } }
      guardrails: { processors: [{ remote: { backendRef: { name: local, port: 80 } }, methods: { "tools/*": Request } }] }
`;

describe("MCP backends in translation", () => {
  test("the route, the table, the status", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-mcp-table-"));
    try {
      writeFileSync(join(dir, "all.yaml"), YAML);
      const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
      assert.deepEqual(load.problems, []);
      const key = "mcp/default/gw/default/hub";
      const entry = result.mcp.entries.get(key);
      assert.ok(entry !== undefined, [...result.mcp.entries.keys()].join(", "));
      assert.deepEqual(
        { ...entry, targets: entry.targets.map((t) => [t.name, t.protocol, t.urls]) },
        {
          key,
          gateway: "default/gw",
          backend: "default/hub",
          targets: [
            ["remote", "StreamableHTTP", ["http://mcp.example.com:443/api/mcp"]],
            // Its tls policy applies (the SDK's SSE transport sends through Sluice's requests): https.
            ["legacy", "SSE", ["https://10.9.9.9:8000/sse"]],
            // Ready endpoints first.
            ["svc", "StreamableHTTP", ["http://10.0.0.1:9000/mcp", "http://10.0.0.2:9000/mcp"]],
            // The Service's port named mcp, in another namespace: named with it.
            ["found-tools-search", "StreamableHTTP", ["http://10.1.0.1:7000/mcp"]],
          ],
          unresolved: [{ name: "none", message: "the selector matches no Service" }],
          sessionRouting: "Stateful",
          failureMode: "FailOpen",
          prefixMode: "Always",
          authorization: [
            {
              path: "GwPolicy default/mcp-rules: backend.mcp.authorization",
              action: "Allow",
              matchExpressions: ["mcp.tool.name == 'echo'", "mcp.tool.name == nope"],
            },
          ],
          // The processor's Service resolves to its first ready endpoint.
          guardrails: [
            {
              path: "GwPolicy default/mcp-rules: backend.mcp.guardrails.processors[0]",
              url: "http://10.0.0.1:9000/",
              failureMode: "FailClosed",
              methods: { "tools/*": "Request" },
              metadata: {},
              allowedRequestHeaders: [],
              disallowedRequestHeaders: [],
            },
          ],
        },
      );
      // Envoy: the route goes to sluice_mcp and sets the header; no cluster of the backend's own.
      const xds = xdsToJson(result.gateways[0]?.xds ?? ({} as never)) as unknown as {
        routes: { virtual_hosts: { routes: { name: string; route?: Record<string, unknown> }[] }[] }[];
        clusters: { name: string }[];
      };
      const route = xds.routes
        .flatMap((rc) => rc.virtual_hosts.flatMap((v) => v.routes))
        .find((r) => r.name.includes("/r/"));
      const action = JSON.stringify(route?.route);
      assert.match(action, /"name":"sluice_mcp"/);
      assert.match(action, /"key":"x-sluice-mcp-route","value":"mcp\/default\/gw\/default\/hub"/);
      assert.match(action, /OVERWRITE_IF_EXISTS_OR_ADD/);
      assert.match(action, /"timeout":"0s"/);
      assert.ok(!xds.clusters.some((c) => c.name.startsWith("mcp/")));
      // Status: the backend is served; what is not is named.
      const be = result.statuses.find((s) => s.kind === "GwBackend" && s.name === "hub");
      const text = JSON.stringify(be?.status);
      assert.doesNotMatch(text, /backend type is accepted but not served yet/);
      assert.doesNotMatch(text, /legacy/);
      const pol = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "mcp-rules")?.status);
      // Authorization and guardrails are served; an expression that cannot compile is named.
      assert.doesNotMatch(pol, /backend\.mcp\.authorization: /);
      assert.match(pol, /backend\.mcp\.authorization\.policy\.matchExpressions\[1\]: undeclared reference to 'nope'/);
      assert.doesNotMatch(pol, /guardrails/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("names: prefixes, the 64-character limit, URIs", () => {
    assert.equal(exposedName("Conditional", 1, "a", "echo"), "echo");
    assert.equal(exposedName("Conditional", 2, "a", "echo"), "a_echo");
    assert.equal(exposedName("Always", 1, "a", "echo"), "a_echo");
    assert.equal(exposedName("Never", 3, "a", "echo"), "echo");
    assert.deepEqual(splitPrefixed("my-target_tool_with_underscores"), {
      target: "my-target",
      name: "tool_with_underscores",
    });
    const long = `t_${"x".repeat(80)}`;
    const short = shorten(long);
    assert.equal(short.length, MAX_NAME_CHARS);
    assert.match(short, /^t_x+_[0-9a-f]{6}$/);
    assert.notEqual(shorten(`${long}y`), short, "two long names with the same start stay distinct");
    assert.equal(shorten(long), short, "deterministic");
    assert.equal(shorten("t_short"), "t_short");
    assert.equal(exposedUri("Never", 2, "a", "file:///x"), "sluice://a/file:///x");
    assert.equal(exposedUri("Conditional", 1, "a", "file:///x"), "file:///x");
    assert.deepEqual(splitUri("sluice://a/file:///{path}"), { target: "a", uri: "file:///{path}" });
    assert.equal(splitUri("file:///x"), undefined);
  });
});
