// The file source keeps the validated object of a document whose content did not change (the translator's memo relies
// on that identity) and gives a changed one a new object; content keys tell apart what JSON prints alike.

import assert from "node:assert/strict";
import { test } from "node:test";
import { contentKey, FileSource } from "../../src/sources/file-source.js";
import { tempConfigDir } from "../helpers/processes.js";

function route(name: string, weight: string): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: svc, port: 80, weight: ${weight} }] }]
`;
}

test("an unchanged document keeps its object; a changed one gets a new one", async () => {
  const cfg = tempConfigDir();
  try {
    const source = new FileSource([cfg.dir]);
    const byName = async () => new Map((await source.load()).resources.map((r) => [r.metadata.name, r]));
    cfg.write("routes.yaml", `${route("a", "1")}---\n${route("b", "1")}`);
    const first = await byName();
    cfg.write("routes.yaml", `${route("a", "2")}---\n${route("b", "1")}`);
    const second = await byName();
    assert.equal(second.get("b"), first.get("b"), "the unchanged document keeps its object");
    assert.notEqual(second.get("a"), first.get("a"), "the changed document is a new object");
    cfg.write("routes.yaml", `${route("a", "2")}---\n${route("b", "1")}\n# a comment`);
    const third = await byName();
    assert.equal(third.get("a"), second.get("a"), "the same content keeps its object");
  } finally {
    cfg.cleanup();
  }
});

test("content keys: equal for equal content, different where JSON would print the same", () => {
  assert.equal(contentKey({ a: [1, "x", { b: true }] }), contentKey({ a: [1, "x", { b: true }] }));
  const distinct = [
    { a: null },
    { a: Number.NaN },
    { a: Number.POSITIVE_INFINITY },
    { a: -Infinity },
    { a: 0 },
    { a: -0 },
  ];
  assert.equal(new Set(distinct.map(contentKey)).size, distinct.length);
  assert.notEqual(contentKey({ a: [0] }), contentKey({ a: [-0] }));
  assert.notEqual(contentKey({ a: { b: 1 } }), contentKey({ a: { b: 2 } }));
});
