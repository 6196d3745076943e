// src/health/endpoint-health.ts: the spec's "Backend health behavior" table per endpoint (eviction by consecutive
// failures or EWMA threshold, a single failure when neither is set, n × duration, restoreHealth or the held health),
// the UNHEALTHY marks in the cluster's ClusterLoadAssignment, and the bound (endpoints gone are forgotten).

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { HealthStatus } from "../../src/gen/envoy/config/core/v3/health_check_pb.js";
import { ClusterLoadAssignmentSchema } from "../../src/gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { EndpointHealth, EWMA_ALPHA, endpointKey } from "../../src/health/endpoint-health.js";
import type { HealthScoreIR } from "../../src/translate/ir.js";

const A = "10.0.0.1:80";
const B = "10.0.0.2:80";
let open: EndpointHealth[] = [];
afterEach(() => {
  for (const h of open) h.close();
  open = [];
});

function tracker(cfg: Partial<HealthScoreIR>, now = () => 0) {
  let changes = 0;
  const h = new EndpointHealth({ now, onChange: () => changes++ });
  open.push(h);
  h.configure(new Map([["c", { cfg: { responseBody: false, durationMs: 60_000, ...cfg }, endpoints: [A, B] }]]));
  return { h, changes: () => changes };
}

test("neither consecutiveFailures nor healthThreshold: a single unhealthy response evicts", () => {
  const { h, changes } = tracker({});
  h.record("c", A, false);
  assert.equal(h.evicted("c").length, 0);
  h.record("c", A, true);
  assert.deepEqual(h.evicted("c"), [A]);
  assert.equal(changes(), 1);
  // Responses while evicted change nothing.
  h.record("c", A, true);
  assert.equal(h.state("c", A)?.evictions, 1);
});

test("consecutiveFailures: a healthy response in between resets the count", () => {
  const { h } = tracker({ consecutiveFailures: 3 });
  h.record("c", A, true);
  h.record("c", A, true);
  h.record("c", A, false);
  h.record("c", A, true);
  h.record("c", A, true);
  assert.equal(h.evicted("c").length, 0);
  h.record("c", A, true);
  assert.deepEqual(h.evicted("c"), [A]);
});

test("healthThreshold: the EWMA (weight 0.3) below the threshold evicts, mixed responses included", () => {
  const { h } = tracker({ healthThreshold: 50 });
  // 100 → 70 → 79 → 55.3 → 38.71: evicted on the fourth response.
  h.record("c", A, true);
  h.record("c", A, false);
  h.record("c", A, true);
  assert.equal(h.evicted("c").length, 0);
  const before = h.state("c", A)?.health ?? 0;
  assert.ok(Math.abs(before - 55.3) < 1e-9, String(before));
  h.record("c", A, true);
  assert.deepEqual(h.evicted("c"), [A]);
  assert.ok(Math.abs((h.state("c", A)?.health ?? 0) - before * (1 - EWMA_ALPHA)) < 1e-9);
});

test("both set: either suffices", () => {
  const { h } = tracker({ consecutiveFailures: 10, healthThreshold: 80 });
  h.record("c", A, true);
  assert.equal(h.evicted("c").length, 1, "70 < 80 evicts before 10 failures");
});

test("return after duration × evictions with restoreHealth; without it, with the health held", async () => {
  let t = 0;
  const { h } = tracker({ restoreHealth: 90, durationMs: 20 }, () => t);
  h.record("c", A, true);
  assert.equal(h.state("c", A)?.evictedUntil, 20);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(h.evicted("c").length, 0);
  assert.equal(h.state("c", A)?.health, 90);
  t = 100;
  h.record("c", A, true);
  assert.equal(h.state("c", A)?.evictedUntil, 140, "second eviction: 2 × 20 ms");

  const held = tracker({ durationMs: 10 });
  held.h.record("c", B, true);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(held.h.evicted("c").length, 0);
  assert.equal(held.h.state("c", B)?.health, 70);
  assert.equal(held.changes(), 2, "evicted, returned");
});

test("overlay marks evicted endpoints UNHEALTHY in that cluster's assignment only", () => {
  const { h } = tracker({});
  h.record("c", B, true);
  const cla = (name: string) =>
    create(ClusterLoadAssignmentSchema, {
      clusterName: name,
      endpoints: [
        {
          lbEndpoints: [A, B].map((k) => ({
            hostIdentifier: {
              case: "endpoint" as const,
              value: {
                address: {
                  address: {
                    case: "socketAddress" as const,
                    value: {
                      address: k.split(":")[0] ?? "",
                      portSpecifier: { case: "portValue" as const, value: 80 },
                    },
                  },
                },
              },
            },
            healthStatus: HealthStatus.HEALTHY,
          })),
        },
      ],
    });
  const other = cla("other");
  const [c, o] = h.overlay([cla("c"), other]);
  assert.deepEqual(
    c?.endpoints[0]?.lbEndpoints.map((e) => e.healthStatus),
    [HealthStatus.HEALTHY, HealthStatus.UNHEALTHY],
  );
  assert.equal(o, other, "an assignment with nothing evicted is passed through");
});

test("bounded: unknown endpoints are not tracked; endpoints and clusters gone are forgotten", () => {
  const { h, changes } = tracker({});
  h.record("c", "10.9.9.9:80", true);
  h.record("nope", A, true);
  assert.equal(h.size, 2);
  h.record("c", A, true);
  h.configure(
    new Map([["c", { cfg: { responseBody: false, durationMs: 60_000 }, endpoints: [B, endpointKey("::1", 8080)] }]]),
  );
  assert.equal(h.size, 2);
  assert.equal(h.state("c", A), undefined);
  assert.equal(h.state("c", "[::1]:8080")?.health, 100);
  assert.equal(changes(), 2, "the evicted endpoint's removal republishes");
  h.configure(new Map());
  assert.equal(h.size, 0);
});
