// Fuzz-style: random and mutated documents never crash or hang the validator, and every result is either valid
// (a resource, no errors) or invalid with path-anchored errors that point into the document.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { splitPath } from "../../src/api/problems.js";
import { validateResource } from "../../src/api/validate.js";
import { parseYamlFile } from "../../src/sources/yaml.js";

// A small deterministic PRNG (mulberry32) so failures reproduce.
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = [
  "spec",
  "targetRefs",
  "traffic",
  "backend",
  "frontend",
  "ai",
  "mcp",
  "groups",
  "providers",
  "name",
  "port",
  "jwks",
  "inline",
  "remote",
  "conditional",
  "condition",
  "policy",
  "matchExpressions",
  "kind",
  "__proto__",
  "constructor",
  "toString",
  "",
  "a.b",
  "[0]",
  "😀",
];

function randomValue(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 4 ? 6 : 9));
  switch (k) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return Math.floor(r() * 200000) - 100000;
    case 3:
      return r() * 1e20;
    case 4:
      return ["", "x", "Gateway", "1.2", "5m", "2Mi", "jwt.sub == 'a'", "((((", "\u0000", "a".repeat(70000)][
        Math.floor(r() * 10)
      ];
    case 5:
      return Number.NaN;
    case 6:
      return Array.from({ length: Math.floor(r() * 5) }, () => randomValue(r, depth + 1));
    default: {
      const o: Record<string, unknown> = {};
      for (let i = Math.floor(r() * 5); i > 0; i--) o[KEYS[Math.floor(r() * KEYS.length)]!] = randomValue(r, depth + 1);
      return o;
    }
  }
}

/** Replaces, deletes or duplicates a random node of `doc` (a deep copy). */
function mutate(doc: unknown, r: () => number): unknown {
  const copy = structuredClone(doc);
  let node: unknown = copy;
  for (let depth = 0; depth < 12; depth++) {
    if (typeof node !== "object" || node === null) break;
    const keys = Object.keys(node);
    if (keys.length === 0) break;
    const key = keys[Math.floor(r() * keys.length)]!;
    const child = (node as Record<string, unknown>)[key];
    if (r() < 0.25 || typeof child !== "object" || child === null) {
      const choice = r();
      if (choice < 0.3) delete (node as Record<string, unknown>)[key];
      else if (choice < 0.5 && Array.isArray(child)) (node as Record<string, unknown>)[key] = [...child, ...child];
      else (node as Record<string, unknown>)[key] = randomValue(r, 3);
      break;
    }
    node = child;
  }
  return copy;
}

function assertWellFormed(doc: unknown): void {
  const result = validateResource(doc);
  const errors = result.problems.filter((p) => p.severity === "error");
  if (result.resource !== undefined) {
    assert.equal(errors.length, 0);
    return;
  }
  assert.ok(errors.length > 0, "an invalid document has at least one error");
  for (const p of result.problems) {
    assert.equal(typeof p.path, "string");
    assert.ok(p.message.length > 0);
    // The path names fields of the document (the deepest existing prefix is found by lineOf).
    const segs = splitPath(p.path);
    if (segs.length > 0)
      assert.ok(
        ["spec", "apiVersion", "kind", "metadata", "items", ""].includes(String(segs[0])) || typeof doc === "object",
        p.path,
      );
  }
}

test("thousands of random and mutated documents: no crash, no hang, valid or path-anchored errors", async () => {
  const r = prng(42);
  const seeds: unknown[] = [];
  for (const f of ["gwpolicy", "gwbackend", "gwmodel", "gwparameters"]) {
    const text = await readFile(join(import.meta.dirname, `../../../examples/api/${f}.yaml`), "utf8");
    for (const d of parseYamlFile(f, text).documents) seeds.push(d.value);
  }
  const started = performance.now();
  let n = 0;
  let valid = 0;
  for (let i = 0; i < 3000; i++) {
    const kind = ["GwPolicy", "GwBackend", "GwModel", "GwParameters", "GwModelList", "HTTPRoute"][i % 6];
    const doc = {
      apiVersion: "sluice.dev/v1alpha1",
      kind,
      metadata: { name: "x" },
      spec: randomValue(r, 0),
      items: randomValue(r, 1),
    };
    assertWellFormed(doc);
    assertWellFormed(randomValue(r, 0));
    n += 2;
  }
  for (let i = 0; i < 12000; i++) {
    let doc = seeds[i % seeds.length];
    for (let m = 1 + Math.floor(r() * 3); m > 0; m--) doc = mutate(doc, r);
    assertWellFormed(doc);
    if (validateResource(doc).resource !== undefined) valid++;
    n++;
  }
  const ms = performance.now() - started;
  assert.ok(valid > 0 && valid < 12000, `mutations should yield both outcomes (valid: ${valid})`);
  assert.ok(ms < 60000, `${n} documents took ${ms.toFixed(0)} ms`);
});
