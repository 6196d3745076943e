// src/health/service.ts on a scored AI cluster (xds/llm-health.ts), fed a real translation and what Envoy sends: the
// providers' scoring read back from the xDS, responses judged per provider (the endpoint metadata attribute) with the
// provider's own condition when it has one, host names resolved by the (injected) resolver before publication, and an
// evicted provider's every address marked UNHEALTHY in the cluster's assignment.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { HealthStatus } from "../../src/gen/envoy/config/core/v3/health_check_pb.js";
import { providerKey } from "../../src/health/endpoint-health.js";
import { HealthService } from "../../src/health/service.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { reportProviderResponse } from "../helpers/health-ext-proc.js";
import { tempConfigDir } from "../helpers/processes.js";

const CLUSTER = "backend/default/llm";
const config = `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: api.example, port: 8443 }
          - name: teapot
            providerA: {}
            host: 10.0.0.8
            port: 8443
            policies:
              health: { unhealthyCondition: "response.code == 418" }
      - providers:
          - { name: backup, providerA: {}, host: 10.0.0.9, port: 8443 }
  policies:
    health: { unhealthyCondition: "response.code == 429", eviction: { restoreHealth: 60 } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }] }]
`;

let result: TranslationResult;
let changes = 0;
const lookups: string[] = [];
const health = new HealthService({
  log: () => {},
  onChange: () => changes++,
  resolve: async (host) => {
    lookups.push(host);
    return [
      { address: "192.0.2.2", family: 4 },
      { address: "192.0.2.1", family: 4 },
    ];
  },
});

before(async () => {
  const cfg = tempConfigDir();
  try {
    cfg.write("config.yaml", config);
    result = (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
  await health.prepare(result);
  health.update(result);
});
after(() => health.close());

/** One response of `provider` (at some address of it) with `status`. */
const respond = (provider: string, status: number) =>
  reportProviderResponse(health, { cluster: CLUSTER, provider, address: "192.0.2.1:8443", status });

/** `[address, status]` of each endpoint of the AI cluster as Envoy gets it. */
function published(): [string, HealthStatus][] {
  const a = health.overlay(result.gateways[0]?.xds.endpoints ?? []).find((x) => x.clusterName === CLUSTER);
  return (a?.endpoints ?? []).flatMap((l) =>
    l.lbEndpoints.map((lb): [string, HealthStatus] => {
      const sa = lb.hostIdentifier.case === "endpoint" ? lb.hostIdentifier.value.address?.address : undefined;
      return [sa?.case === "socketAddress" ? sa.value.address : "", lb.healthStatus];
    }),
  );
}

test("the providers are scored, each by its name; the host name was resolved before publication", () => {
  assert.deepEqual(lookups, ["api.example"]);
  assert.equal(health.health.state(CLUSTER, providerKey("primary"))?.health, 100);
  assert.equal(health.health.config(CLUSTER)?.providers?.["teapot"]?.condition, "response.code == 418");
  assert.deepEqual(published(), [
    ["192.0.2.1", HealthStatus.UNKNOWN],
    ["192.0.2.2", HealthStatus.UNKNOWN],
    ["10.0.0.8", HealthStatus.UNKNOWN],
    ["10.0.0.9", HealthStatus.UNKNOWN],
  ]);
});

test("a provider's own condition replaces the backend's: a 429 does not count for it, a 418 does", () => {
  respond("teapot", 429);
  assert.deepEqual(health.health.evicted(CLUSTER), []);
  respond("teapot", 418);
  assert.deepEqual(health.health.evicted(CLUSTER), [providerKey("teapot")]);
  // The backend's condition for the others: a 418 is fine there, a 429 evicts.
  respond("primary", 418);
  assert.deepEqual(health.health.evicted(CLUSTER), [providerKey("teapot")]);
  respond("primary", 429);
  assert.deepEqual(health.health.evicted(CLUSTER).sort(), [providerKey("primary"), providerKey("teapot")]);
  assert.equal(changes, 2);
});

test("every address of an evicted provider is UNHEALTHY; the healthy backup is not", () => {
  assert.deepEqual(published(), [
    ["192.0.2.1", HealthStatus.UNHEALTHY],
    ["192.0.2.2", HealthStatus.UNHEALTHY],
    ["10.0.0.8", HealthStatus.UNHEALTHY],
    ["10.0.0.9", HealthStatus.UNKNOWN],
  ]);
});
