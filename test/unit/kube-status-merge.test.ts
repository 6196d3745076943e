// The status writer's pure parts: conditions stamped with lastTransitionTime (kept while a condition holds) and
// observedGeneration; shared lists merged with other controllers' entries; equality that ignores key order.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sameSpec } from "../../src/sources/kube/reflector.js";
import { jsonEqual, mergeStatus, rfc3339, stamp } from "../../src/sources/kube/status-writer.js";

const OURS = "sluice.dev/gateway-controller";
const THEIRS = "example.com/other";
const cond = (type: string, status: string) => ({ type, status, reason: type, message: "m" });

describe("status stamping and merging", () => {
  test("lastTransitionTime is kept while a condition's status holds, moves when it changes", () => {
    const previous = {
      conditions: [
        { ...cond("Accepted", "True"), lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1 },
        { ...cond("Programmed", "True"), lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1 },
      ],
    };
    const now = "2026-11-26T10:00:00Z";
    const out = stamp({ conditions: [cond("Accepted", "True"), cond("Programmed", "False")] }, previous, 2, now) as {
      conditions: { lastTransitionTime: string; observedGeneration: number }[];
    };
    assert.equal(out.conditions[0]?.lastTransitionTime, "2026-01-01T00:00:00Z");
    assert.equal(out.conditions[1]?.lastTransitionTime, now);
    assert.equal(out.conditions[0]?.observedGeneration, 2);
  });

  test("list entries are matched by name, parentRef or ancestorRef, not by position", () => {
    const previous = {
      listeners: [
        { name: "b", conditions: [{ ...cond("Accepted", "True"), lastTransitionTime: "B" }] },
        { name: "a", conditions: [{ ...cond("Accepted", "True"), lastTransitionTime: "A" }] },
      ],
    };
    const out = stamp(
      {
        listeners: [
          { name: "a", conditions: [cond("Accepted", "True")] },
          { name: "c", conditions: [cond("Accepted", "True")] },
        ],
      },
      previous,
      1,
      "NOW",
    ) as { listeners: { conditions: { lastTransitionTime: string }[] }[] };
    assert.equal(out.listeners[0]?.conditions[0]?.lastTransitionTime, "A");
    assert.equal(out.listeners[1]?.conditions[0]?.lastTransitionTime, "NOW");
  });

  test("shared lists keep other controllers' entries, replace ours, and drop ours when Sluice reports nothing", () => {
    const current = {
      parents: [
        { parentRef: { name: "x" }, controllerName: THEIRS, conditions: [] },
        { parentRef: { name: "old" }, controllerName: OURS, conditions: [] },
      ],
    };
    const ours = { parents: [{ parentRef: { name: "gw" }, controllerName: OURS, conditions: [] }] };
    const merged = mergeStatus(ours, current, OURS) as { parents: { parentRef: { name: string } }[] };
    assert.deepEqual(
      merged.parents.map((p) => p.parentRef.name),
      ["x", "gw"],
    );
    const removed = mergeStatus(undefined, current, OURS) as { parents: { parentRef: { name: string } }[] };
    assert.deepEqual(
      removed.parents.map((p) => p.parentRef.name),
      ["x"],
    );
    // A status Sluice owns alone, no longer reported: nothing to write.
    assert.equal(mergeStatus(undefined, { conditions: [] }, OURS), undefined);
  });

  test("jsonEqual ignores key order and undefined keys, not array order", () => {
    assert.ok(jsonEqual({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1, e: undefined }));
    assert.ok(!jsonEqual([1, 2], [2, 1]));
    assert.ok(!jsonEqual({ a: 1 }, { a: 1, b: null }));
  });

  test("rfc3339 drops the milliseconds, as metav1.Time serialises", () => {
    assert.equal(rfc3339(new Date("2026-11-26T10:11:12.345Z")), "2026-11-26T10:11:12Z");
  });

  test("sameSpec: a status-only change is one with the same generation, labels, annotations and deletion", () => {
    const meta = { name: "r", generation: 3, labels: { a: "1" }, resourceVersion: "10" };
    const a = { metadata: meta, status: { x: 1 } };
    assert.ok(sameSpec(a, { metadata: { ...meta, resourceVersion: "11" }, status: { x: 2 } }));
    assert.ok(!sameSpec(a, { metadata: { ...meta, generation: 4 } }));
    assert.ok(!sameSpec(a, { metadata: { ...meta, labels: { a: "2" } } }));
    assert.ok(!sameSpec(a, { metadata: { ...meta, deletionTimestamp: "2026-11-26T00:00:00Z" } }));
    // Kinds without a generation (core kinds) never count as status-only.
    assert.ok(!sameSpec({ metadata: { name: "s" } }, { metadata: { name: "s" } }));
    assert.ok(!sameSpec(undefined, a));
  });
});
