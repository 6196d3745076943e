// Sluice's strategic merge on the cases users write. The expected values follow apimachinery's strategicpatch
// (normalizeElementOrder / mergeSortedSlice for the order of keyed lists); test/e2e/kube-provision-merge.test.ts holds
// every overlay golden, overlay-directives among them, to a live kube-apiserver.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type MergeProblem, strategicMerge } from "../../src/provision/strategic-merge.js";

type Json = Parameters<typeof strategicMerge>[1];

function merge(original: Json, patch: Json, fields: string[] = []): { value: unknown; problems: MergeProblem[] } {
  const problems: MergeProblem[] = [];
  return { value: strategicMerge(original, patch, problems, fields), problems };
}

const ports = (l: unknown) => (l as { containerPort: number }[]).map((p) => p.containerPort);

test("strategic merge: a keyed list keeps the object's order for the items it had, a new item goes before an old one unless two old ones decide", () => {
  const container = {
    name: "envoy",
    ports: [{ containerPort: 80 }, { containerPort: 8443 }, { containerPort: 19003 }],
  };
  const { value, problems } = merge(
    { containers: [container] },
    { containers: [{ name: "envoy", ports: [{ containerPort: 19003, name: "ready" }, { containerPort: 9901 }] }] },
  );
  assert.deepEqual(problems, []);
  const merged = (value as { containers: { ports: unknown }[] }).containers[0]?.ports;
  // 19003 stays after 80 and 8443 (all three were there); 9901, new, follows the patch's order after 19003.
  assert.deepEqual(ports(merged), [80, 8443, 19003, 9901]);
  assert.deepEqual((merged as { name?: string }[])[2]?.name, "ready");
  // A new item first in the patch goes before the old ones: of A (only the object's) and Z (new), Z; of A and B (both
  // the object's), the object's order.
  const front = merge({ env: [{ name: "A" }, { name: "B" }] }, { env: [{ name: "Z" }, { name: "B", value: "2" }] });
  assert.deepEqual(
    (front.value as { env: { name: string }[] }).env.map((e) => e.name),
    ["Z", "A", "B"],
  );
});

test("strategic merge: $setElementOrder orders the patched list, with or without the list itself in the patch", () => {
  const original = { containers: [{ name: "a" }, { name: "b" }, { name: "c" }] };
  const reordered = merge(original, { "$setElementOrder/containers": [{ name: "c" }, { name: "a" }, { name: "b" }] });
  assert.deepEqual(
    (reordered.value as { containers: { name: string }[] }).containers.map((c) => c.name),
    ["c", "a", "b"],
  );
  const withItems = merge(original, {
    "$setElementOrder/containers": [{ name: "b" }, { name: "a" }],
    containers: [{ name: "a", image: "x" }],
  });
  assert.deepEqual(
    (withItems.value as { containers: { name: string }[] }).containers.map((c) => c.name),
    ["b", "a", "c"],
  );
});

test("strategic merge: $retainKeys switches a union (rollout strategy, volume source); $patch delete removes a keyed item", () => {
  const strategy = merge(
    { strategy: { type: "RollingUpdate", rollingUpdate: { maxSurge: 1 } } },
    { strategy: { $retainKeys: ["type"], type: "Recreate" } },
  );
  assert.deepEqual(strategy.value, { strategy: { type: "Recreate" } });
  const volume = merge(
    {
      volumes: [
        { name: "scratch", emptyDir: {} },
        { name: "bootstrap", configMap: { name: "b" } },
      ],
    },
    { volumes: [{ name: "scratch", $retainKeys: ["name", "configMap"], configMap: { name: "extra" } }] },
  );
  assert.deepEqual(volume.value, {
    volumes: [
      { name: "scratch", configMap: { name: "extra" } },
      { name: "bootstrap", configMap: { name: "b" } },
    ],
  });
  const deleted = merge({ ports: [{ port: 80 }, { port: 8443 }] }, { ports: [{ port: 8443, $patch: "delete" }] }, [
    "spec",
  ]);
  assert.deepEqual(deleted.value, { ports: [{ port: 80 }] });
});

test("strategic merge: $deleteFromPrimitiveList removes values from a list of scalars", () => {
  const { value, problems } = merge({ finalizers: ["a", "b", "c"] }, { "$deleteFromPrimitiveList/finalizers": ["b"] });
  assert.deepEqual(problems, []);
  assert.deepEqual(value, { finalizers: ["a", "c"] });
});

test("strategic merge: a directive it cannot apply is a problem with its path, not a guess", () => {
  assert.deepEqual(
    merge({ a: 1 }, { $patch: "remove" }).problems.map((p) => p.path),
    ["$patch"],
  );
  const { problems } = merge(
    { tolerations: [{ key: "a" }] },
    { tolerations: [{ key: "a", $patch: "delete" }], "$setElementOrder/containers": "envoy" },
  );
  assert.deepEqual(
    problems.map((p) => p.path),
    ['["$setElementOrder/containers"]', "tolerations[0].$patch"],
  );
});
