// A route-level GwPolicy's backend.tls / backend.tunnel on an AI GwBackend (backend/ai-policy-tls.ts): a variant of the
// AI cluster with the route's providers' TLS, the other routes on the cluster; on one the relay serves (a guarded
// Realtime route) the relay twin names the variant, whose providers the relay dials; a tunnel of its own on a scored
// GwBackend gives the route's variant endpoints, and so an EDS resource and a scoring, of its own (xds/llm-health.ts).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { loadAndTranslate } from "../../src/cli/load.js";
import type { Cluster } from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import { ExternalProcessorSchema } from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { HttpProtocolOptionsSchema } from "../../src/gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { HEALTH_CLUSTER_METADATA } from "../../src/health/endpoint-health.js";
import { clusterVariantBase, REALTIME_CLUSTER_HEADER } from "../../src/translate/names.js";
import { HEALTH_FILTER_NAME } from "../../src/translate/xds/backend-health.js";
import { gatewayYaml, ruleBackendPolicy } from "../helpers/gateway.js";
import { caConfigMapYaml } from "../helpers/tls.js";

const backend = (policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: api.example.com, port: 8443 }
  policies:
    auth: { key: sk-provider }
${policies}`;

const routes = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: a
      matches: [{ path: { type: PathPrefix, value: /a } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
    - name: b
      matches: [{ path: { type: PathPrefix, value: /b } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
`;

const PROXY = `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: proxy, namespace: default }
spec: { static: { host: 10.0.0.5, port: 8888 } }
`;

interface Translated {
  /** Per route: its cluster, and the SNI of that cluster's provider socket ("" for none). */
  readonly routes: Map<string, { cluster: string; sni: string; eds: string; scoring: string }>;
  readonly warnings: string[];
  /** The LLM table entry of each route: under which cluster name its providers are. */
  readonly entries: Map<string, string[]>;
  /** Per relay twin route: the AI cluster it names to the relay (its header). */
  readonly relayCluster: Map<string, string>;
  /** Per AI cluster of the IR (what the relay reads): its first provider's TLS SNI ("" for none). */
  readonly irSni: Map<string, string>;
}

/** The scoring a cluster's health filter reports to ("" without one). */
function scoringOf(c: Cluster | undefined): string {
  const options = c?.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
  const http = options !== undefined ? anyUnpack(options, HttpProtocolOptionsSchema) : undefined;
  const f = http?.httpFilters.find((x) => x.name === HEALTH_FILTER_NAME);
  if (f?.configType.case !== "typedConfig") return "";
  const p = anyUnpack(f.configType.value, ExternalProcessorSchema);
  return p?.grpcService?.initialMetadata.find((m) => m.key === HEALTH_CLUSTER_METADATA)?.value ?? "";
}

async function translated(yaml: string): Promise<Translated> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-tls-variants-"));
  try {
    writeFileSync(join(dir, "in.yaml"), `${gatewayYaml(8080)}${caConfigMapYaml()}${yaml}`);
    const { load, result } = await loadAndTranslate([join(dir, "in.yaml")]);
    assert.deepEqual(load.problems, []);
    const gw = result.gateways[0];
    assert.ok(gw !== undefined);
    const clusters = new Map(gw.xds.clusters.map((c) => [c.name, c]));
    const routes = new Map<string, { cluster: string; sni: string; eds: string; scoring: string }>();
    const relayCluster = new Map<string, string>();
    for (const rc of gw.xds.routes) {
      for (const vh of rc.virtualHosts) {
        for (const r of vh.routes) {
          const named = r.requestHeadersToAdd.find((h) => h.header?.key === REALTIME_CLUSTER_HEADER);
          if (named !== undefined) relayCluster.set(r.name, named.header?.value ?? "");
          if (r.action.case !== "route" || r.action.value.clusterSpecifier.case !== "cluster") continue;
          const name = r.action.value.clusterSpecifier.value;
          const c = clusters.get(name);
          const socket = c?.transportSocketMatches[0]?.transportSocket;
          // The SNI is in the packed UpstreamTlsContext: read it as text.
          const packed = socket?.configType.case === "typedConfig" ? socket.configType.value.value : undefined;
          const sni =
            packed !== undefined
              ? (/api\.example\.com|example\.com/.exec(Buffer.from(packed).toString("latin1"))?.[0] ?? "?")
              : "";
          routes.set(r.name, {
            cluster: name,
            sni,
            eds: c?.edsClusterConfig?.serviceName ?? "",
            scoring: scoringOf(c),
          });
        }
      }
    }
    const warnings = result.statuses
      .filter((s) => s.kind === "GwPolicy" || s.kind === "GwBackend")
      .flatMap((s) => JSON.stringify(s.status).match(/"type":"Warning"[^}]*"message":"[^"]*"/g) ?? []);
    const entries = new Map(
      [...result.llm.routes].map(([k, id]) => [
        k.split("|")[1] ?? k,
        Object.keys(result.llm.entries.get(id)?.backends ?? {}),
      ]),
    );
    const irSni = new Map((gw.llmClusters ?? []).map((c) => [c.name, c.groups[0]?.[0]?.tls?.sni ?? ""] as const));
    return { routes, warnings, entries, relayCluster, irSni };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const A = "httproute/default/r/rule/0/match/0";
const B = "httproute/default/r/rule/1/match/0";

test("a route-level tls: the route's variant has it, the other route the cluster without; entries under the cluster", async () => {
  const t = await translated(
    backend("") +
      routes +
      ruleBackendPolicy("pa", "a", "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n"),
  );
  assert.deepEqual(t.warnings, []);
  const a = t.routes.get(A);
  const b = t.routes.get(B);
  assert.match(a?.cluster ?? "", /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.equal(a?.sni, "example.com");
  assert.deepEqual(b, { cluster: "backend/default/llm", sni: "", eds: "", scoring: "" });
  // The LLM ext_proc finds both routes' providers under the cluster's name.
  assert.deepEqual(t.entries.get(A), ["backend/default/llm"]);
  assert.deepEqual(t.entries.get(B), ["backend/default/llm"]);
  assert.equal(clusterVariantBase(a?.cluster ?? ""), "backend/default/llm");
});

test("two routes asking different tls: a variant each, named by its content", async () => {
  const yaml =
    backend("") +
    routes +
    ruleBackendPolicy("pa", "a", "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n") +
    ruleBackendPolicy("pb", "b", "    tls: { sni: api.example.com }\n");
  const t = await translated(yaml);
  assert.deepEqual(t.warnings, []);
  const [a, b] = [t.routes.get(A), t.routes.get(B)];
  assert.equal(a?.sni, "example.com");
  assert.equal(b?.sni, "api.example.com");
  assert.notEqual(a?.cluster, b?.cluster);
  for (const c of [a?.cluster, b?.cluster]) assert.match(c ?? "", /^backend\/default\/llm~[0-9a-f]{10}$/);
  // Translated again: the same names.
  const again = await translated(yaml);
  assert.equal(again.routes.get(A)?.cluster, a?.cluster);
  assert.equal(again.routes.get(B)?.cluster, b?.cluster);
});

test("on a route the Realtime relay serves (prompt guards), a route-level tls and tcp are its variant's, which the relay twin names; http.version reported for its sessions", async () => {
  const t = await translated(
    backend(`    ai:
      routes: { /v1/realtime: Realtime, /v1/chat/completions: Completions }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`) +
      routes +
      ruleBackendPolicy(
        "pa",
        "a",
        "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n    tcp: { connectTimeout: 2s }\n    http: { version: HTTP2 }\n",
      ),
  );
  const a = t.routes.get(A)?.cluster ?? "";
  assert.match(a, /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.equal(t.routes.get(A)?.sni, "example.com");
  // The relay twin names the variant (the relay dials its providers: the IR it reads has their TLS) ...
  assert.equal(t.relayCluster.get(`${A}/realtime`), a);
  assert.equal(t.irSni.get(a), "example.com");
  // ... and the other route's twin the cluster itself.
  assert.equal(t.relayCluster.get(`${B}/realtime`), "backend/default/llm");
  assert.equal(t.irSni.get("backend/default/llm"), "");
  // The entry keeps the providers under the cluster's name, where the relay finds them.
  assert.deepEqual(t.entries.get(A), ["backend/default/llm"]);
  // Only the HTTP version is reported: the relay's websocket to the provider is an HTTP/1.1 upgrade.
  const backendWarnings = t.warnings.filter((w) => w.includes("backend."));
  assert.equal(backendWarnings.length, 1, t.warnings.join("\n"));
  assert.match(
    backendWarnings[0] ?? "",
    /backend\.http\.version: applied to the requests of route \S+ that Envoy forwards, not to its Realtime sessions/,
  );
});

test("a GwBackend's own HTTP/2 on a route the Realtime relay serves: reported for its sessions, not for a route without Realtime", async () => {
  const t = await translated(
    backend(`    http: { version: HTTP2 }
    ai:
      routes: { /v1/realtime: Realtime, /v1/chat/completions: Completions }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`) + routes,
  );
  const all = t.warnings.join("\n");
  assert.equal(all.match(/http\.version/g)?.length, 2, all);
  for (const route of [A, B]) {
    assert.ok(
      all.includes(
        `spec.policies.http.version: applied to the requests of route ${route} that Envoy forwards, not to its Realtime sessions`,
      ),
      all,
    );
  }
  const plain = await translated(backend("    http: { version: HTTP2 }\n") + routes);
  assert.deepEqual(
    plain.warnings.filter((w) => w.includes("http.version")),
    [],
  );
});

test("a route-level tunnel on a GwBackend Sluice scores: the route's variant has endpoints, an EDS resource and a scoring of its own", async () => {
  const t = await translated(
    PROXY +
      backend(`    tls: { sni: api.example.com }
    health: { unhealthyCondition: "response.code >= 500" }
`) +
      routes +
      ruleBackendPolicy("pa", "a", "    tunnel: { backendRef: { group: sluice.dev, kind: GwBackend, name: proxy } }\n"),
  );
  const a = t.routes.get(A);
  assert.match(a?.cluster ?? "", /^backend\/default\/llm~[0-9a-f]{10}$/);
  // Scored by itself: its endpoints' host names are what its tunnel asks the proxy for, not the cluster's.
  assert.equal(a?.eds, a?.cluster);
  assert.equal(a?.scoring, a?.cluster);
  assert.deepEqual(t.routes.get(B), {
    cluster: "backend/default/llm",
    sni: "api.example.com",
    eds: "backend/default/llm",
    scoring: "backend/default/llm",
  });
  assert.deepEqual(t.warnings, []);
});

test("a route-level tls for a provider reached through its own hop, on a GwBackend Sluice scores: that route scored by its variant", async () => {
  const t = await translated(`---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: one, providerA: {}, host: api.example.com, port: 8443, policies: { tcp: { connectTimeout: 1s } } }
          - { name: two, providerA: {}, host: api.example.com, port: 9443 }
  policies:
    auth: { key: sk-provider }
    health: { unhealthyCondition: "response.code >= 500" }
${routes}${ruleBackendPolicy("pa", "a", "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n")}`);
  const a = t.routes.get(A);
  assert.notEqual(a?.cluster, "backend/default/llm");
  // An EDS resource of its own (its own hops), and so a scoring of its own.
  assert.equal(a?.eds, a?.cluster);
  assert.equal(a?.scoring, a?.cluster);
  assert.equal(t.routes.get(B)?.eds, "backend/default/llm");
  assert.equal(t.routes.get(B)?.scoring, "backend/default/llm");
  assert.deepEqual(t.warnings, []);
});
