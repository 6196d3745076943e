// The strings extension's `replace` in the spec environment (src/cel/strings.ts): linear on a megabyte of client input
// where @bufbuild/cel's own is quadratic, cel-go's semantics (checked against a plain reference with fast-check), and a
// bound on the size of what it builds.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { compileExpression, evaluate, MAX_REPLACE_RESULT, replaceLinear } from "../../src/cel/index.js";

function evalOn(expr: string, path: string) {
  const c = compileExpression(expr);
  if (!("ok" in c)) assert.fail(c.errors.map((e) => e.message).join("; "));
  return evaluate(c.ok, {
    request: { method: "GET", path, host: "h", scheme: "https", headers: new Map(), query: new Map() },
  });
}

/** Go's strings.Replace, written the obvious way (quadratic is fine on small inputs). */
function reference(s: string, old: string, repl: string, n: number): string {
  const points = [...s];
  if (old === "") {
    let out = "";
    let done = 0;
    for (let i = 0; i <= points.length; i++) {
      if (n < 0 || done < n) {
        out += repl;
        done++;
      }
      out += points[i] ?? "";
    }
    return out;
  }
  let out = "";
  let rest = s;
  let done = 0;
  while (n < 0 || done < n) {
    const at = rest.indexOf(old);
    if (at < 0) break;
    out += rest.slice(0, at) + repl;
    rest = rest.slice(at + old.length);
    done++;
  }
  return out + rest;
}

test("replace over a 1 MB path with 500,000 occurrences finishes fast and right", () => {
  const path = "ab".repeat(500_000);
  const t0 = performance.now();
  const r = evalOn("request.path.replace('a', 'xy')", path);
  const ms = performance.now() - t0;
  if (!("value" in r)) assert.fail(r.error);
  assert.equal(typeof r.value, "string");
  assert.equal((r.value as string).length, 1_500_000);
  assert.equal((r.value as string).slice(0, 6), "xybxyb");
  // The library's replace took 1.4 s for 64 KiB; a linear pass over 1 MB takes milliseconds even on a loaded host.
  assert.ok(ms < 1500, `${ms.toFixed(0)} ms`);
  const limited = evalOn("request.path.replace('a', 'x', 2)", path);
  assert.ok("value" in limited);
  assert.equal((limited.value as string).slice(0, 6), "xbxbab");
});

test("cel-go semantics: n < 0 replaces all, n = 0 none, an empty `old` matches before each code point and at the end", () => {
  const cases: [string, string][] = [
    ["'hello hello'.replace('he', 'we', -1)", "wello wello"],
    ["'hello hello'.replace('he', 'we', 0)", "hello hello"],
    ["'hello hello'.replace('he', 'we', 1)", "wello hello"],
    ["'ab'.replace('', 'x')", "xaxbx"],
    ["'ab'.replace('', 'x', 2)", "xaxb"],
    ["'😀a'.replace('', '-')", "-😀-a-"],
    ["'12 days 12 hours'.replace('{0}', '2')", "12 days 12 hours"],
  ];
  for (const [expr, want] of cases) {
    const r = evalOn(expr, "/");
    if (!("value" in r)) assert.fail(`${expr}: ${r.error}`);
    assert.equal(r.value, want, expr);
  }
});

test("property: replaceLinear agrees with the plain reference", () => {
  const small = fc.string({ unit: fc.constantFrom("a", "b", "é", "😀"), maxLength: 12 });
  fc.assert(
    fc.property(
      small,
      fc.string({ unit: fc.constantFrom("a", "b", "😀"), maxLength: 3 }),
      small,
      fc.integer({ min: -2, max: 6 }),
      (s, old, repl, n) => {
        assert.equal(replaceLinear(s, old, repl, n), reference(s, old, repl, n));
      },
    ),
    { numRuns: 2000 },
  );
});

test("a result past the bound is an evaluation error naming it, not gigabytes of memory", () => {
  const path = "a".repeat(1_000_000);
  const t0 = performance.now();
  const r = evalOn("request.path.replace('', 'xxxxxxxx')", path);
  assert.ok("error" in r, "an error");
  assert.match(r.error, new RegExp(`replace: the result would exceed ${MAX_REPLACE_RESULT} characters`));
  assert.ok(performance.now() - t0 < 1500);
  // Within the bound it is served.
  const ok = evalOn("request.path.replace('a', 'bb')", path);
  assert.ok("value" in ok && (ok.value as string).length === 2_000_000);
});
