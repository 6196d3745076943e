// A provider's own tcp / http (its policies, or a GwPolicy targeting it by sectionName) served through a hop of its
// own (xds/llm-provider-hop.ts): its endpoint in the AI cluster becomes an internal address naming an internal
// listener whose HCM sends everything to a cluster of that provider alone, with its settings. Only providers that
// differ from the cluster get one; when all agree the cluster takes their settings.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import type { Cluster } from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import type { ClusterLoadAssignment } from "../../src/gen/envoy/config/endpoint/v3/endpoint_pb.js";
import type { Listener } from "../../src/gen/envoy/config/listener/v3/listener_pb.js";
import { RouterSchema } from "../../src/gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import {
  type HttpConnectionManager,
  HttpConnectionManager_ServerHeaderTransformation,
  HttpConnectionManagerSchema,
} from "../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { UpstreamTlsContextSchema } from "../../src/gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import { HttpProtocolOptionsSchema } from "../../src/gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { LLM_METADATA_NAMESPACE } from "../../src/translate/llm/table.js";
import { gatewayYaml } from "../helpers/gateway.js";

const backend = (providers: string, policies = "") => `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
${policies}  ai:
    groups:
${providers}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
`;

const TWO = (aPolicies = "", bPolicies = "", cPolicies = "") => `      - providers:
          - { name: a, providerA: {}, host: 127.0.0.1, port: 9001${aPolicies} }
          - { name: b, providerA: {}, host: 127.0.0.1, port: 9002${bPolicies} }
      - providers:
          - { name: c, providerD: {}, host: 127.0.0.1, port: 9003${cPolicies} }
`;

const sectionPolicy = (section: string, spec: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: p, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: llm, sectionName: ${section} }]
  backend: ${spec}
`;

interface Out {
  readonly clusters: Map<string, Cluster>;
  readonly listeners: Map<string, Listener>;
  readonly endpoints: ClusterLoadAssignment[];
  /** Warning messages of every status, split per field. */
  readonly warnings: string[];
}

async function translate(yaml: string): Promise<Out> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-hop-"));
  try {
    writeFileSync(join(dir, "in.yaml"), yaml);
    const { load, result } = await loadAndTranslate([join(dir, "in.yaml")]);
    assert.deepEqual(load.problems, []);
    const gw = result.gateways[0];
    assert.ok(gw !== undefined);
    const warnings = result.statuses.flatMap(
      (s) =>
        JSON.stringify(s.status)
          .match(/"type":"Warning"[^}]*"message":"([^"]*)"/g)
          ?.flatMap((m) => m.split("; ")) ?? [],
    );
    return {
      clusters: new Map(gw.xds.clusters.map((c) => [c.name, c])),
      listeners: new Map(gw.xds.listeners.map((l) => [l.name, l])),
      endpoints: [...gw.xds.endpoints],
      warnings,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const AI = "backend/default/llm";
const hop = (p: string) => `llm-provider/${AI}/${p}`;

function http2(c: Cluster | undefined): boolean {
  const any = c?.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
  const o = any !== undefined ? fromBinary(HttpProtocolOptionsSchema, any.value) : undefined;
  return (
    o?.upstreamProtocolOptions.case === "explicitHttpConfig" &&
    o.upstreamProtocolOptions.value.protocolConfig.case === "http2ProtocolOptions"
  );
}

const seconds = (c: Cluster | undefined) =>
  Number(c?.connectTimeout?.seconds ?? 0n) + (c?.connectTimeout?.nanos ?? 0) / 1e9;

/** Each provider's endpoint address in an assignment: `host:port`, or `internal:<listener>`. */
function addresses(la: ClusterLoadAssignment | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const l of la?.endpoints ?? []) {
    for (const e of l.lbEndpoints) {
      const name = String(e.metadata?.filterMetadata[LLM_METADATA_NAMESPACE]?.["provider"] ?? "?");
      const a = e.hostIdentifier.case === "endpoint" ? e.hostIdentifier.value.address?.address : undefined;
      const text =
        a?.case === "socketAddress"
          ? `${a.value.address}:${a.value.portSpecifier.case === "portValue" ? a.value.portSpecifier.value : ""}`
          : a?.case === "envoyInternalAddress" && a.value.addressNameSpecifier.case === "serverListenerName"
            ? `internal:${a.value.addressNameSpecifier.value}`
            : "?";
      out[`${l.priority}/${name}`] = [...(out[`${l.priority}/${name}`] ?? []), text];
    }
  }
  return out;
}

function hcmOf(l: Listener | undefined): HttpConnectionManager {
  const any = l?.filterChains[0]?.filters[0]?.configType;
  assert.ok(any?.case === "typedConfig");
  return fromBinary(HttpConnectionManagerSchema, any.value.value);
}

test("a provider's own HTTP/2 and connect timeout: its endpoint is its hop, the group's others stay as they were", async () => {
  const r = await translate(
    backend(TWO(", policies: { http: { version: HTTP2 }, tcp: { connectTimeout: 2s, keepalive: { time: 30s } } }")),
  );
  assert.deepEqual(r.warnings, []);
  const ai = r.clusters.get(AI);
  assert.equal(http2(ai), false);
  assert.equal(seconds(ai), 5);
  // EDS (Envoy's DNS clusters take socket addresses only): Sluice resolves the other providers' host names.
  assert.equal(ai?.edsClusterConfig?.serviceName, AI);
  const la = r.endpoints.find((e) => e.clusterName === AI);
  assert.equal(la?.endpoints.length, 2, "the priority groups are kept");
  assert.deepEqual(addresses(la), {
    "0/a": [`internal:${hop("a")}`],
    "0/b": ["127.0.0.1:9002"],
    "1/c": ["127.0.0.1:9003"],
  });
  // Provider a's own cluster: its address, HTTP/2, 2 s, its keepalive.
  const own = r.clusters.get(hop("a"));
  assert.equal(http2(own), true);
  assert.equal(seconds(own), 2);
  assert.equal(own?.upstreamConnectionOptions?.tcpKeepalive?.keepaliveTime?.valueOf(), 30);
  const e = own?.loadAssignment?.endpoints[0]?.lbEndpoints[0]?.hostIdentifier;
  assert.ok(e?.case === "endpoint" && e.value.address?.address.case === "socketAddress");
  assert.deepEqual(
    [e.value.address.address.value.address, e.value.address.address.value.portSpecifier.value],
    ["127.0.0.1", 9001],
  );
  assert.equal(r.clusters.get(hop("b")), undefined, "no hop for providers with the cluster's settings");
  // The internal listener: transparent, routing everything to the provider's cluster with no deadline of its own.
  const l = r.listeners.get(hop("a"));
  assert.equal(l?.listenerSpecifier.case, "internalListener");
  const hcm = hcmOf(l);
  assert.equal(hcm.skipXffAppend, true);
  assert.equal(hcm.preserveExternalRequestId, true);
  assert.equal(hcm.serverHeaderTransformation, HttpConnectionManager_ServerHeaderTransformation.PASS_THROUGH);
  assert.deepEqual(
    hcm.upgradeConfigs.map((u) => u.upgradeType),
    ["websocket"],
  );
  assert.equal(hcm.accessLog.length, 0);
  const router = hcm.httpFilters[0]?.configType;
  assert.ok(router?.case === "typedConfig");
  assert.equal(fromBinary(RouterSchema, router.value.value).suppressEnvoyHeaders, true);
  assert.ok(hcm.routeSpecifier.case === "routeConfig");
  const route = hcm.routeSpecifier.value.virtualHosts[0]?.routes[0]?.action;
  assert.ok(route?.case === "route");
  assert.deepEqual(route.value.clusterSpecifier, { case: "cluster", value: hop("a") });
  assert.equal(Number(route.value.timeout?.seconds ?? -1n), 0);
  assert.equal(route.value.retryPolicy?.retryOn, "reset-before-request");
});

test("a provider's own http.requestTimeout is its hop's route timeout: a deadline per attempt", async () => {
  const r = await translate(backend(TWO("", "", ", policies: { http: { requestTimeout: 1500ms } }")));
  assert.deepEqual(r.warnings, []);
  assert.deepEqual(addresses(r.endpoints.find((e) => e.clusterName === AI))["1/c"], [`internal:${hop("c")}`]);
  const route = hcmOf(r.listeners.get(hop("c"))).routeSpecifier;
  assert.ok(route.case === "routeConfig");
  const action = route.value.virtualHosts[0]?.routes[0]?.action;
  assert.ok(action?.case === "route");
  assert.deepEqual([Number(action.value.timeout?.seconds), action.value.timeout?.nanos], [1, 500_000_000]);
  // Its http replaces the cluster's whole: HTTP/1.1 there.
  assert.equal(http2(r.clusters.get(hop("c"))), false);
});

test("every provider agreeing: the AI cluster has their settings, and there is no hop", async () => {
  const own = ", policies: { tcp: { connectTimeout: 2s }, http: { version: HTTP2 } }";
  const r = await translate(backend(TWO(own, own, own)));
  assert.deepEqual(r.warnings, []);
  const ai = r.clusters.get(AI);
  assert.deepEqual([seconds(ai), http2(ai)], [2, true]);
  assert.equal(ai?.edsClusterConfig, undefined, "a DNS cluster, as without any provider settings");
  assert.deepEqual(r.endpoints, []);
  assert.deepEqual(
    [...r.clusters.keys()].filter((n) => n.startsWith("llm-provider/")),
    [],
  );
  assert.deepEqual(
    [...r.listeners.keys()].filter((n) => n.startsWith("llm-provider/")),
    [],
  );
});

test("a provider's own tcp replaces the GwBackend's whole: Envoy's default connect timeout where it has none", async () => {
  const r = await translate(
    backend(TWO(", policies: { tcp: { keepalive: { time: 20s } } }"), "  policies: { tcp: { connectTimeout: 2s } }\n"),
  );
  assert.deepEqual(r.warnings, []);
  assert.equal(seconds(r.clusters.get(AI)), 2);
  assert.equal(seconds(r.clusters.get(hop("a"))), 5);
  assert.equal(r.clusters.get(hop("a"))?.upstreamConnectionOptions?.tcpKeepalive?.keepaliveTime?.valueOf(), 20);
});

test("a GwPolicy's tcp and http for one provider (sectionName) are that provider's, through its hop, unreported", async () => {
  const r = await translate(
    backend(TWO()) +
      sectionPolicy("b", "{ tcp: { connectTimeout: 3s }, http: { version: HTTP2, requestTimeout: 4s } }"),
  );
  assert.deepEqual(r.warnings, []);
  assert.deepEqual(addresses(r.endpoints.find((e) => e.clusterName === AI))["0/b"], [`internal:${hop("b")}`]);
  assert.deepEqual([seconds(r.clusters.get(hop("b"))), http2(r.clusters.get(hop("b")))], [3, true]);
  assert.equal(seconds(r.clusters.get(AI)), 5);
  // The GwBackend's own tcp wins over a GwPolicy's for a provider (spec: merge order): no hop then.
  const owned = await translate(
    backend(TWO(), "  policies: { tcp: { connectTimeout: 1s } }\n") +
      sectionPolicy("b", "{ tcp: { connectTimeout: 3s } }"),
  );
  assert.equal(owned.clusters.get(hop("b")), undefined);
  assert.equal(seconds(owned.clusters.get(AI)), 1);
});

test("a TLS provider's socket moves to its hop's cluster, with the ALPN of its own protocol", async () => {
  const r = await translate(
    backend(`      - providers:
          - { name: a, providerA: {}, policies: { http: { version: HTTP2 } } }
          - { name: b, providerA: {} }
`),
  );
  const ai = r.clusters.get(AI);
  assert.deepEqual(
    ai?.transportSocketMatches.map((m) => m.name),
    ["provider-b"],
  );
  const own = r.clusters.get(hop("a"));
  const socket = own?.transportSocket?.configType;
  assert.ok(socket?.case === "typedConfig");
  const tls = fromBinary(UpstreamTlsContextSchema, socket.value.value);
  assert.equal(tls.sni, "api.openai.com");
  assert.deepEqual(tls.commonTlsContext?.alpnProtocols, ["h2"]);
});

test("a scored AI cluster (EDS) names the hop in its endpoints; the hop's cluster resolves the provider itself", async () => {
  const r = await translate(
    backend(
      TWO(", policies: { http: { version: HTTP2 } }"),
      '  policies: { health: { unhealthyCondition: "response.code >= 500" } }\n',
    ),
  );
  assert.equal(r.clusters.get(AI)?.clusterDiscoveryType.case, "type");
  assert.ok(r.clusters.get(AI)?.edsClusterConfig !== undefined);
  const la = r.endpoints.find((e) => e.clusterName === AI);
  assert.deepEqual(addresses(la)["0/a"], [`internal:${hop("a")}`]);
  assert.equal(r.clusters.get(hop("a"))?.loadAssignment?.endpoints[0]?.lbEndpoints.length, 1);
});

test("a cluster of one provider with its own requestTimeout: the hop also retries a connect failure once", async () => {
  const r = await translate(
    backend(`      - providers:
          - { name: a, providerA: {}, host: 127.0.0.1, port: 9001, policies: { http: { requestTimeout: 2s } } }
`),
  );
  const route = hcmOf(r.listeners.get(hop("a"))).routeSpecifier;
  assert.ok(route.case === "routeConfig");
  const action = route.value.virtualHosts[0]?.routes[0]?.action;
  assert.ok(action?.case === "route");
  assert.equal(action.value.retryPolicy?.retryOn, "connect-failure,reset-before-request");
  assert.equal(Number(action.value.timeout?.seconds), 2);
});

const twoRules = (yaml: string) =>
  yaml.replace(
    "    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]\n",
    "    - name: a\n      matches: [{ path: { type: PathPrefix, value: /a } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]\n" +
      "    - name: b\n      matches: [{ path: { type: PathPrefix, value: /b } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]\n",
  );
const RULE_A_TRANSFORMATION = `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: t, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: a }]
  backend: { transformation: { request: { set: [{ name: x-team, value: "'a'" }] } } }
`;

test("a variant of the cluster (another route's transformation) has its own EDS naming its own hops", async () => {
  const r = await translate(twoRules(backend(TWO(", policies: { http: { version: HTTP2 } }"))) + RULE_A_TRANSFORMATION);
  assert.deepEqual(r.warnings, []);
  const variant = [...r.clusters.keys()].find((n) => n.startsWith(`${AI}~`));
  assert.ok(variant !== undefined, "the variant");
  assert.equal(r.clusters.get(variant)?.edsClusterConfig?.serviceName, variant);
  const la = r.endpoints.find((e) => e.clusterName === variant);
  assert.deepEqual(addresses(la)["0/a"], [`internal:llm-provider/${variant}/a`]);
  assert.ok(r.listeners.has(`llm-provider/${variant}/a`));
  assert.ok(r.listeners.has(hop("a")));
});

test("a variant of a scored cluster reads the cluster's endpoints, and so its hops: none of its own", async () => {
  const r = await translate(
    twoRules(
      backend(
        TWO(", policies: { http: { version: HTTP2 } }"),
        '  policies: { health: { unhealthyCondition: "response.code >= 500" } }\n',
      ),
    ) + RULE_A_TRANSFORMATION,
  );
  const variant = [...r.clusters.keys()].find((n) => n.startsWith(`${AI}~`));
  assert.ok(variant !== undefined, "the variant");
  assert.equal(r.clusters.get(variant)?.edsClusterConfig?.serviceName, AI);
  assert.equal(
    r.endpoints.find((e) => e.clusterName === variant),
    undefined,
  );
  assert.deepEqual(
    [...r.listeners.keys()].filter((n) => n.startsWith("llm-provider/")),
    [hop("a")],
  );
  assert.deepEqual(
    r.clusters.get(variant)?.transportSocketMatches.map((m) => m.name),
    r.clusters.get(AI)?.transportSocketMatches.map((m) => m.name),
  );
});
