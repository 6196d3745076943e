// A Service's backend policy (tls, tcp, http) reaches Envoy's calls to it from a traffic field (policy/engine.ts
// refBackends → xds/backend-connection.ts): the ext_authz filter calls a variant of the Service's cluster with the
// policy's TLS; a Service without one keeps its cluster. Where Sluice itself calls the service (an extAuth with a
// cache), its targets carry the same TLS.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import { gatewayYaml, localService, prefixRoute } from "../helpers/gateway.js";

const YAML = (
  cache: boolean,
) => `${gatewayYaml(8080)}${localService("app", 8081)}${localService("authz", 9000)}${prefixRoute(["app"])}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: check, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    extAuth:
      backendRef: { name: authz, port: 80 }
      grpc: {}${cache ? "\n      cache: { key: [\"request.headers['x-user']\"], ttl: 30s }" : ""}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: authz-tls, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: authz }]
  backend:
    tls: { sni: authz.example.com }
    tcp: { connectTimeout: 2s }
`;

async function translate(cache: boolean) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ref-tls-"));
  try {
    writeFileSync(join(dir, "all.yaml"), YAML(cache));
    return await loadAndTranslate([join(dir, "all.yaml")]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("Envoy's ext_authz calls the Service's variant with its TLS and connect timeout", async () => {
  const { load, result } = await translate(false);
  assert.deepEqual(load.problems, []);
  const json = JSON.stringify(xdsToJson(result.gateways[0]?.xds as Parameters<typeof xdsToJson>[0]));
  const clusters = (JSON.parse(json) as { clusters: Record<string, unknown>[] }).clusters;
  const variant = clusters.find((c) => /^service\/default\/authz\/port\/80.*~[0-9a-f]{10}$/.test(String(c.name)));
  assert.ok(variant !== undefined, JSON.stringify(clusters.map((c) => c.name)));
  assert.match(JSON.stringify(variant), /"sni":"authz\.example\.com"/);
  assert.equal(variant.connect_timeout ?? variant.connectTimeout, "2s");
  // The ext_authz filter's gRPC service is that variant.
  const calls = [...json.matchAll(/"envoy_grpc":\{"cluster_name":"(service\/default\/authz[^"]*)"/g)].map((m) => m[1]);
  assert.ok(calls.length > 0 && calls.every((c) => c === variant.name), JSON.stringify(calls));
  const status = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "authz-tls"));
  assert.match(status, /applies backend\.(tcp|tls)/);
});

test("an extAuth Sluice fronts (a cache): its own calls get the same TLS", async () => {
  const { load, result } = await translate(true);
  assert.deepEqual(load.problems, []);
  const table = JSON.stringify([...result.extAuthzPolicies.values()], (_k, v) =>
    typeof v === "bigint" ? String(v) : v,
  );
  assert.match(table, /"targets":\[\{"host":"127\.0\.0\.1","port":9000,"tls":\{"sni":"authz\.example\.com"/);
  assert.doesNotMatch(JSON.stringify(result.statuses), /extAuth\.backendRef/);
});

test("a static GwBackend's own spec.policies.tls reaches Envoy's JWKS fetches from it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ref-tls-"));
  try {
    writeFileSync(
      join(dir, "all.yaml"),
      `${YAML(false).split("\n---\napiVersion: sluice.dev/v1alpha1\nkind: GwPolicy")[0]}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: jwt, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    jwtAuthentication:
      providers: [{ issuer: "https://idp", jwks: { remote: { jwksPath: /keys, backendRef: { group: sluice.dev, kind: GwBackend, name: idp } } } }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: idp, namespace: default }
spec:
  static: { host: 127.0.0.1, port: 8443 }
  policies:
    tls: { sni: idp.example.com }
`,
    );
    const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
    assert.deepEqual(load.problems, []);
    const json = JSON.stringify(xdsToJson(result.gateways[0]?.xds as Parameters<typeof xdsToJson>[0]));
    const fetched = /"cluster":"(backend\/default\/idp[^"]*)"/.exec(json)?.[1];
    assert.match(fetched ?? "", /^backend\/default\/idp~[0-9a-f]{10}$/);
    const clusters = (JSON.parse(json) as { clusters: Record<string, unknown>[] }).clusters;
    assert.match(JSON.stringify(clusters.find((c) => c.name === fetched)), /"sni":"idp\.example\.com"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Service's other backend fields do nothing on those calls: a Warning names each", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-ref-tls-"));
  try {
    writeFileSync(
      join(dir, "all.yaml"),
      YAML(false).replace(
        "    tcp: { connectTimeout: 2s }",
        "    tcp: { connectTimeout: 2s }\n    auth: { key: not-sent }",
      ),
    );
    const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
    assert.deepEqual(load.problems, []);
    const status = JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "authz-tls"));
    assert.match(status, /applies backend\.tcp, backend\.tls/);
    assert.match(
      status,
      /backend\.auth: not applied to Envoy's calls to Service default\/authz port 80 as the service of traffic\.extAuth\.backendRef: only tls, tcp and http\.version apply there/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
