// src/health/service.ts with what Envoy sends: the scored clusters read back from a real translation's xDS (the
// filter's metadata and the variant's own ClusterLoadAssignment), ProcessingRequests encoded by protobuf-es with the
// endpoint in `upstream.address`; the condition reading the streamed body; a non-boolean result counted healthy; other
// stages handed on; and the evicted endpoint marked UNHEALTHY in that cluster's assignment only.

import assert from "node:assert/strict";
import { before, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { HealthStatus } from "../../src/gen/envoy/config/core/v3/health_check_pb.js";
import type { BidiCall } from "../../src/grpc/unary-server.js";
import { HealthService } from "../../src/health/service.js";
import { LLM_STAGE_METADATA } from "../../src/translate/llm/table.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { backendHealthScore } from "../../src/translate/xds/backend-health.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { HealthCall, healthFilterCall, responseHeaders } from "../helpers/health-ext-proc.js";
import { tempConfigDir } from "../helpers/processes.js";

function service(name: string, health: string): string {
  return `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: default }
spec: { ports: [{ name: p, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: default, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: p, port: 8080 }]
endpoints: [{ addresses: [10.1.0.1] }, { addresses: [10.1.0.2] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: ${name} }]
  backend:
    health: ${health}
`;
}

const config = `${gatewayYaml(8080)}${service("body", `{ unhealthyCondition: 'response.body.contains("overloaded")' }`)}${service(
  "odd",
  '{ unhealthyCondition: \'response.headers["x-missing"] == "1"\' }',
)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /body } }]
      backendRefs: [{ name: body, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /odd } }]
      backendRefs: [{ name: odd, port: 80 }]
`;

let result: TranslationResult;
const logs: string[] = [];
let changes = 0;
const passed: BidiCall[] = [];
const health = new HealthService({
  log: (l) => logs.push(l),
  next: (call) => passed.push(call),
  onChange: () => changes++,
});

before(async () => {
  const cfg = tempConfigDir();
  try {
    cfg.write("config.yaml", config);
    result = (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
  health.update(result);
});

/** The scored cluster of Service `name` (its variant). */
function clusterOf(name: string): string {
  const c = result.gateways[0]?.xds.clusters.find((x) => x.name.startsWith(`service/default/${name}/port/80~`));
  assert.ok(c !== undefined, `a variant for ${name}`);
  return c.name;
}

function respond(cluster: string, endpoint: string, status: number, body?: string): HealthCall {
  const call = healthFilterCall(health, cluster);
  call.send(
    responseHeaders(status, body === undefined),
    endpoint !== "" ? { "upstream.address": endpoint } : undefined,
  );
  if (body !== undefined) {
    const bytes = new TextEncoder().encode(body);
    call.send({ case: "responseBody", value: { body: bytes.subarray(0, 3), endOfStream: false } });
    call.send({ case: "responseBody", value: { body: bytes.subarray(3), endOfStream: true } });
  }
  return call;
}

test("the scored clusters and their endpoints come from the translation's xDS", () => {
  assert.equal(health.health.size, 4);
  assert.equal(health.health.config(clusterOf("body"))?.responseBody, true);
  assert.equal(health.health.state(clusterOf("body"), "10.1.0.2:8080")?.health, 100);
});

test("the condition reads the streamed body; the evicted endpoint is UNHEALTHY in its own assignment", () => {
  const cluster = clusterOf("body");
  const ok = respond(cluster, "10.1.0.1:8080", 200, "fine, thanks");
  assert.ok(ok.ended);
  assert.equal(health.health.evicted(cluster).length, 0);
  // A 200 the condition calls unhealthy: neither consecutiveFailures nor healthThreshold set, so one evicts.
  respond(cluster, "10.1.0.2:8080", 200, "we are overloaded");
  assert.deepEqual(health.health.evicted(cluster), ["10.1.0.2:8080"]);
  assert.equal(changes, 1);
  const endpoints = health.health.overlay(result.gateways[0]?.xds.endpoints ?? []);
  const statuses = (name: string) =>
    endpoints.find((a) => a.clusterName === name)?.endpoints[0]?.lbEndpoints.map((e) => e.healthStatus);
  assert.deepEqual(statuses(cluster), [HealthStatus.HEALTHY, HealthStatus.UNHEALTHY]);
  assert.deepEqual(statuses(clusterOf("odd")), [HealthStatus.HEALTHY, HealthStatus.HEALTHY]);
  // Other routes to the Service (through the base cluster, without the policy) keep the endpoint.
  assert.deepEqual(statuses("service/default/body/port/80"), [HealthStatus.HEALTHY, HealthStatus.HEALTHY]);
});

test("a condition that gives no boolean counts healthy (logged once); a response without an endpoint is ignored", () => {
  const cluster = clusterOf("odd");
  for (let i = 0; i < 3; i++) respond(cluster, "10.1.0.1:8080", 503);
  assert.equal(health.health.evicted(cluster).length, 0);
  assert.equal(logs.filter((l) => l.includes("did not give a boolean")).length, 1);
  respond(cluster, "", 503);
  assert.equal(health.health.state(cluster, "10.1.0.1:8080")?.health, 100);
});

test("streams of other stages go on to the next ext_proc service", () => {
  const call = new HealthCall(health, { [LLM_STAGE_METADATA]: "transformation" });
  assert.equal(passed.at(-1), call);
});

test("backendHealthScore: which fields turn scoring on; consecutiveFailures 0 is unset; a bad condition reported", () => {
  const from = { kind: "GwPolicy", name: "default/p", level: "backend", target: "Service default/s" } as const;
  const score = (value: unknown) => backendHealthScore({ health: { value, from } });
  assert.equal(score({ eviction: { consecutiveFailures: 3, duration: "5s" } }).ir, undefined, "Envoy's alone");
  assert.deepEqual(score({ eviction: { healthThreshold: 40, consecutiveFailures: 0, duration: "5s" } }).ir, {
    responseBody: false,
    healthThreshold: 40,
    durationMs: 5000,
  });
  const bad = score({ unhealthyCondition: "response.code ==", eviction: { restoreHealth: 50 } });
  assert.deepEqual(bad.ir, { responseBody: false, restoreHealth: 50, durationMs: 3000 });
  assert.equal(bad.problems[0]?.field, "backend.health.unhealthyCondition");
  assert.match(bad.problems[0]?.message ?? "", /left out, the default \(any 5xx\) applies/);
});
