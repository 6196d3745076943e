// Route-level health scoring of an AI GwBackend (xds/llm-health.ts): a route whose `backend.health` differs from
// what the GwBackend's levels give goes to a variant of the AI cluster with an EDS resource and a scoring of its own,
// keyed by the variant's name (the health filter's metadata, the EDS service name); src/health/service.ts, fed that
// translation and what Envoy sends, evicts a provider in the variant the response came through, never in another.
// A variant scored as its cluster (another transformation) reads the cluster's EDS resource and reports to its scoring.
// An InferencePool GwBackend cannot be scored (its picker chooses the server): a route's scoring is reported.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { loadAndTranslate } from "../../src/cli/load.js";
import type { Cluster } from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import { HealthStatus } from "../../src/gen/envoy/config/core/v3/health_check_pb.js";
import { ExternalProcessorSchema } from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { HttpProtocolOptionsSchema } from "../../src/gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { HEALTH_CLUSTER_METADATA, providerKey } from "../../src/health/endpoint-health.js";
import { HealthService } from "../../src/health/service.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { HEALTH_FILTER_NAME } from "../../src/translate/xds/backend-health.js";
import { gatewayYaml, gwBackendRulesRoute, ruleBackendPolicy } from "../helpers/gateway.js";
import { inferencePoolYaml } from "../helpers/grpc-services.js";
import { reportProviderResponse } from "../helpers/health-ext-proc.js";
import { tempConfigDir } from "../helpers/processes.js";

const CLUSTER = "backend/default/llm";
const SHARED = "backend/default/shared";

const gwBackend = (name: string, policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: 10.0.0.1, port: 8443 }]
      - providers: [{ name: backup, providerA: {}, host: 10.0.0.2, port: 8443 }]
${policies}`;

// `llm`: routes a and b each ask a scoring of their own (a: 429 unhealthy, b: 503 after two in a row), c none.
// `shared`: the GwBackend's own scoring, route t a transformation of its own.
const config = `${gatewayYaml(8080)}${gwBackend("llm", "")}${gwBackend(
  "shared",
  `  policies:
    health: { unhealthyCondition: "response.code == 500" }
`,
)}${gwBackendRulesRoute([
  ["a", "llm"],
  ["b", "llm"],
  ["c", "llm"],
  ["s", "shared"],
  ["t", "shared"],
])}${ruleBackendPolicy(
  "pa",
  "a",
  `    health: { unhealthyCondition: "response.code == 429", eviction: { duration: 60s } }
`,
)}${ruleBackendPolicy(
  "pb",
  "b",
  `    health: { unhealthyCondition: "response.code == 503", eviction: { consecutiveFailures: 2, duration: 60s } }
`,
)}${ruleBackendPolicy(
  "pt",
  "t",
  `    transformation:
      request:
        set: [{ name: x-team, value: "'t'" }]
`,
)}`;

let result: TranslationResult;
const health = new HealthService({ log: () => {} });

before(async () => {
  const cfg = tempConfigDir();
  try {
    cfg.write("config.yaml", config);
    const loaded = await loadAndTranslate([cfg.dir]);
    assert.deepEqual(loaded.load.problems, []);
    result = loaded.result;
  } finally {
    cfg.cleanup();
  }
  await health.prepare(result);
  health.update(result);
});
after(() => health.close());

/** The cluster each rule's route sends to. */
function clusterOf(rule: string): Cluster {
  const gw = result.gateways[0];
  const clusters = new Map(gw?.xds.clusters.map((c) => [c.name, c]));
  for (const rc of gw?.xds.routes ?? []) {
    for (const vh of rc.virtualHosts) {
      for (const r of vh.routes) {
        if (!r.name.startsWith(`httproute/default/r/rule/${"abcst".indexOf(rule)}/`)) continue;
        if (r.action.case !== "route" || r.action.value.clusterSpecifier.case !== "cluster") continue;
        const c = clusters.get(r.action.value.clusterSpecifier.value);
        if (c !== undefined) return c;
      }
    }
  }
  assert.fail(`no cluster for rule ${rule}`);
}

/** The scoring a cluster's health filter reports to ("" without one). */
function scoringKey(c: Cluster): string {
  const options = c.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
  const http = options !== undefined ? anyUnpack(options, HttpProtocolOptionsSchema) : undefined;
  const f = http?.httpFilters.find((x) => x.name === HEALTH_FILTER_NAME);
  if (f?.configType.case !== "typedConfig") return "";
  const p = anyUnpack(f.configType.value, ExternalProcessorSchema);
  return p?.grpcService?.initialMetadata.find((m) => m.key === HEALTH_CLUSTER_METADATA)?.value ?? "";
}

/** One response of `provider` with `status`, reported through the health filter of the cluster scored as `key`. */
const respond = (key: string, provider: string, status: number) =>
  reportProviderResponse(health, { cluster: key, provider, address: "10.0.0.1:8443", status });

/** The health status of each provider's endpoint in the EDS resource `name` as Envoy gets it. */
function published(name: string): HealthStatus[] {
  const a = health.overlay(result.gateways[0]?.xds.endpoints ?? []).find((x) => x.clusterName === name);
  assert.ok(a !== undefined, `no EDS resource ${name}`);
  return a.endpoints.flatMap((l) => l.lbEndpoints.map((lb) => lb.healthStatus));
}

test("a route with a scoring of its own: a variant whose EDS resource and scoring key are its name", () => {
  const a = clusterOf("a");
  const b = clusterOf("b");
  assert.match(a.name, /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.match(b.name, /^backend\/default\/llm~[0-9a-f]{10}$/);
  assert.notEqual(a.name, b.name);
  for (const v of [a, b]) {
    assert.equal(v.edsClusterConfig?.serviceName, v.name);
    assert.equal(scoringKey(v), v.name);
  }
  // c asks none: the cluster itself, unscored (Envoy's DNS, no EDS resource, no health filter).
  assert.equal(clusterOf("c").name, CLUSTER);
  assert.equal(scoringKey(clusterOf("c")), "");
  assert.equal(clusterOf("c").edsClusterConfig, undefined);
  assert.equal(health.health.config(a.name)?.condition, "response.code == 429");
  assert.equal(health.health.config(b.name)?.condition, "response.code == 503");
  assert.equal(health.health.config(CLUSTER), undefined);
});

test("a variant with its cluster's scoring (another transformation) reads the cluster's EDS resource and scoring", () => {
  const s = clusterOf("s");
  const t = clusterOf("t");
  assert.equal(s.name, SHARED);
  assert.match(t.name, /^backend\/default\/shared~[0-9a-f]{10}$/);
  assert.equal(t.edsClusterConfig?.serviceName, SHARED);
  assert.equal(scoringKey(t), SHARED);
  assert.equal(scoringKey(s), SHARED);
  assert.equal(health.health.config(t.name), undefined);
  assert.ok(!result.gateways[0]?.xds.endpoints.some((e) => e.clusterName === t.name));
});

test("an eviction through one route's variant marks the provider there alone, and the other's stays", () => {
  const a = clusterOf("a").name;
  const b = clusterOf("b").name;
  // A 429 is unhealthy for a, healthy for b; one response evicts under a's scoring.
  respond(a, "primary", 429);
  respond(b, "primary", 429);
  assert.deepEqual(health.health.evicted(a), [providerKey("primary")]);
  assert.deepEqual(health.health.evicted(b), []);
  assert.deepEqual(published(a), [HealthStatus.UNHEALTHY, HealthStatus.UNKNOWN]);
  assert.deepEqual(published(b), [HealthStatus.UNKNOWN, HealthStatus.UNKNOWN]);
  // And the other way round: b's two 503s evict there, a (already evicting primary) is not touched for backup.
  respond(b, "backup", 503);
  respond(b, "backup", 503);
  assert.deepEqual(health.health.evicted(b), [providerKey("backup")]);
  assert.deepEqual(published(a), [HealthStatus.UNHEALTHY, HealthStatus.UNKNOWN]);
  assert.deepEqual(published(b), [HealthStatus.UNKNOWN, HealthStatus.UNHEALTHY]);
  // A response reported under the cluster's own name (unscored) changes nothing.
  respond(CLUSTER, "backup", 503);
  assert.equal(health.health.config(CLUSTER), undefined);
});

test("an InferencePool GwBackend: a route-level scoring is reported, not applied (its picker chooses the server)", async () => {
  const cfg = tempConfigDir();
  try {
    cfg.write(
      "config.yaml",
      `${gatewayYaml(8080)}${inferencePoolYaml(9002)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: pool, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { group: inference.networking.k8s.io, kind: InferencePool, name: llama }
        formats: [{ type: Completions }]
${gwBackendRulesRoute([
  ["a", "pool"],
  ["b", "pool"],
])}${ruleBackendPolicy(
  "pa",
  "a",
  `    health: { unhealthyCondition: "response.code == 429" }
`,
)}`,
    );
    const { result: r } = await loadAndTranslate([cfg.dir]);
    const clusters = r.gateways[0]?.xds.clusters.filter((c) => c.name.startsWith("backend/default/pool")) ?? [];
    assert.deepEqual(
      clusters.map((c) => [c.name, scoringKey(c)]),
      [["backend/default/pool", ""]],
    );
    const status = JSON.stringify(r.statuses.find((s) => s.kind === "GwPolicy" && s.name === "pa")?.status ?? {});
    assert.match(status, /backend\.health: not applied: AI GwBackend default\/pool's provider is an InferencePool/);
  } finally {
    cfg.cleanup();
  }
});
