// The attachment engine never throws on user input: GwPolicies of every malformed shape end up as Invalid status.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { Resource } from "../../src/api/resource.js";
import { makeInput } from "../../src/translate/input.js";
import { translate } from "../../src/translate/translate.js";

const gateway: Resource = {
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "Gateway",
  metadata: { name: "gw", namespace: "default" },
  spec: { gatewayClassName: "sluice", listeners: [{ name: "http", protocol: "HTTP", port: 8080 }] },
};

const specs: unknown[] = [
  null,
  "spec",
  [],
  {},
  { targetRefs: "gw" },
  { targetRefs: [null, 5, "x", {}], traffic: {} },
  { targetRefs: [{ group: 1, kind: [], name: {} }], traffic: [] },
  { targetSelectors: [{ group: "gateway.networking.k8s.io", kind: "Gateway", matchLabels: { a: 1 } }], backend: 3 },
  { targetSelectors: [], frontend: {} },
  { targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw", port: "80" }], frontend: {} },
  { targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw" }], strategy: "Override" },
  { targetRefs: [{ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw" }], traffic: { phase: 1 } },
  { targetRefs: new Array(17).fill({ group: "gateway.networking.k8s.io", kind: "Gateway", name: "gw" }), traffic: {} },
];

test("malformed GwPolicies: no throw, each reported Invalid", () => {
  const policies: Resource[] = specs.map((spec, i) => ({
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwPolicy",
    metadata: { name: `p${i}`, namespace: "default" },
    spec,
  }));
  const result = translate(makeInput([gateway, ...policies]), { impliedGatewayClass: true });
  const statuses = result.statuses.filter((s) => s.kind === "GwPolicy");
  assert.equal(statuses.length, specs.length);
  for (const s of statuses) {
    const ancestors = (s.status as { ancestors: { conditions: { reason: string }[] }[] }).ancestors;
    assert.ok(ancestors.length > 0, `${s.name} has an ancestor entry`);
    assert.equal(ancestors[0]?.conditions[0]?.reason, "Invalid", `${s.name}: ${JSON.stringify(s.status)}`);
  }
});
