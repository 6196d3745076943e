// MCP OAuth in translation: the discovery routes before an MCP route with jwtAuthentication.mcp (no filter of the
// route on them), the route's mark and the listener's 401 mapper, the MCP table's OAuth entry, the deprecated
// backend.mcp.authentication honoured with its warnings, and a regular-expression route reported instead of dropped.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { xdsToJson } from "../../src/translate/xds/json.js";

const JWKS = JSON.stringify({ keys: [{ kty: "oct", k: "c2VjcmV0", kid: "k" }] });

const YAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hub, namespace: default }
spec: { mcp: { targets: [{ name: a, static: { host: 10.0.0.1, port: 80 } }] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: old, namespace: default }
spec: { mcp: { targets: [{ name: a, static: { host: 10.0.0.1, port: 80 } }] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: keys, namespace: default }
spec: { static: { host: 10.0.0.9, port: 8443 } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: hub
      matches: [{ path: { type: PathPrefix, value: /hub } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
    - name: rx
      matches: [{ path: { type: RegularExpression, value: "/rx/.*" } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
    - name: old
      matches: [{ path: { type: PathPrefix, value: /old } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: old }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: jwt, namespace: default }
spec:
  targetRefs:
    - { group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: hub }
    - { group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: rx }
  traffic:
    jwtAuthentication:
      providers: [{ issuer: "https://idp.test/tenant", jwks: { inline: '${JWKS}' } }]
      mcp: { clientId: fixed, resourceMetadata: { scopes_supported: [mcp] } }
---
apiVersion: v1
kind: Secret
metadata: { name: client, namespace: default }
data: { clientSecret: c2VjcmV0 }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: legacy, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: old }]
  backend:
    mcp:
      authentication:
        issuer: https://idp.test
        audiences: [mcp]
        mode: Optional
        provider: Idp3
        jwks: { jwksPath: keys.json, backendRef: { group: sluice.dev, kind: GwBackend, name: keys } }
        clientSecretRef: { name: client }
`;

interface Route {
  name: string;
  match: Record<string, unknown>;
  route?: Record<string, unknown>;
  metadata?: unknown;
  typed_per_filter_config?: Record<string, unknown>;
}

test("MCP OAuth: discovery routes, the 401 mapper, the table entry, the deprecated form", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-mcp-oauth-"));
  try {
    writeFileSync(join(dir, "all.yaml"), YAML);
    const { result } = await loadAndTranslate([join(dir, "all.yaml")]);
    const xds = xdsToJson(result.gateways[0]?.xds ?? ({} as never)) as unknown as {
      routes: { virtual_hosts: { routes: Route[] }[] }[];
      listeners: unknown[];
    };
    const routes = xds.routes.flatMap((rc) => rc.virtual_hosts.flatMap((v) => v.routes));
    const names = routes.map((r) => r.name);
    const hub = names.indexOf("httproute/default/r/rule/0/match/0");
    assert.ok(hub > 0, names.join("\n"));
    // The three discovery twins come right before the route, with its MCP header and none of its filters.
    const twins = routes.slice(hub - 3, hub);
    assert.deepEqual(
      twins.map((t) => t.match),
      [
        { path_separated_prefix: "/.well-known/oauth-protected-resource/hub" },
        { path_separated_prefix: "/.well-known/oauth-authorization-server/hub" },
        { path_separated_prefix: "/.well-known/openid-configuration/hub" },
      ],
    );
    for (const t of twins) {
      assert.match(JSON.stringify(t.route), /"key":"x-sluice-mcp-route","value":"mcp\/default\/gw\/default\/hub"/);
      assert.equal(t.typed_per_filter_config, undefined);
    }
    assert.ok(routes[hub]?.typed_per_filter_config !== undefined, "the route itself keeps its JWT filter");
    assert.deepEqual(routes[hub]?.metadata, { filter_metadata: { sluice: { mcp_oauth: true } } });
    // The deprecated form: twins too (Sluice verifies the token); the regex route: none.
    assert.equal(names.filter((n) => n.includes("mcp-oauth")).length, 6, names.join("\n"));
    const listener = JSON.stringify(xds.listeners);
    assert.match(listener, /sluice\.mcp_oauth_401/);
    assert.ok(
      listener.includes(
        'Bearer resource_metadata=\\"%REQ(x-forwarded-proto)%://%REQ(:authority)%/.well-known/oauth-protected-resource%REQ(:path)%\\"',
      ),
      listener,
    );
    // The table.
    const hubEntry = result.mcp.entries.get("mcp/default/gw/default/hub");
    assert.deepEqual(hubEntry?.oauth, {
      path: "GwPolicy default/jwt: traffic.jwtAuthentication.mcp",
      issuer: "https://idp.test/tenant",
      resourceMetadata: { scopes_supported: ["mcp"] },
      clientId: "fixed",
    });
    const oldEntry = result.mcp.entries.get("mcp/default/gw/default/old");
    assert.deepEqual(oldEntry?.oauth?.verify, {
      jwksUrls: ["http://10.0.0.9:8443/keys.json"],
      audiences: ["mcp"],
      mode: "Optional",
      cacheMs: 300_000,
    });
    // Status: the deprecated field is a Warning saying so, its unused secret is named; the regex route is reported.
    const status = (name: string) =>
      JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === name)?.status);
    assert.match(status("legacy"), /"reason":"NotYetSupported"/);
    assert.match(status("legacy"), /backend\.mcp\.authentication: is deprecated: use traffic\.jwtAuthentication\.mcp/);
    assert.match(status("legacy"), /backend\.mcp\.authentication\.clientSecretRef: token requests are not proxied/);
    assert.match(
      status("jwt"),
      /route httproute\/default\/r\/rule\/1\/match\/0 matches a regular expression and gets none/,
    );
    assert.doesNotMatch(status("jwt"), /MCP GwBackend only/);
    // provider (Idp1..Idp6) changes nothing yet, and the status says so.
    assert.match(status("legacy"), /backend\.mcp\.authentication\.provider: has no effect yet/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
