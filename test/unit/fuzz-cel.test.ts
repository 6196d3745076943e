// Fuzzing the CEL environment (src/cel/env.ts) with hostile expressions and inputs: compileExpression and evaluate
// never throw (every outcome is a value or a reported error), deep nesting is an error rather than a stack overflow,
// and regexes are RE2 (linear time): catastrophic-backtracking patterns over huge strings finish in bounded time.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { type CelActivation, compileExpression, evaluate, matches } from "../../src/cel/env.js";
import { holds, within } from "./fuzz-support.js";

function activation(path: string, header = "v"): CelActivation {
  return {
    request: {
      method: "GET",
      path,
      host: "h",
      scheme: "https",
      headers: new Map([["x-a", header]]),
      query: new Map([["q", path]]),
    },
    source: { address: "10.0.0.1", port: 1234n },
  };
}

/** Compiles and, when it compiles, evaluates: neither may throw, and both finish within `ms`. */
function run(expr: string, act: CelActivation, ms = 2000): void {
  within(ms, `compile and evaluate ${expr.slice(0, 40)}…`, () => {
    const c = compileExpression(expr);
    if ("ok" in c) {
      evaluate(c.ok, act);
      matches(c.ok, act);
    } else assert.ok(c.errors.length > 0);
  });
}

test("CEL: nesting as deep as the length limit allows is an error or a value, never a stack overflow", () => {
  for (const n of [100, 1000, 5000, 8000]) {
    for (const expr of [
      `${"(".repeat(n)}true${")".repeat(n)}`,
      `${"[".repeat(n)}1${"]".repeat(n)}`,
      `${"!".repeat(2 * n)}true`,
      `${"-".repeat(2 * n)}1`,
      `1${" + 1".repeat(n / 2)} > 0`,
      `request.path${".size()".repeat(n / 8)}`,
      `${"true ? ".repeat(n / 4)}1${" : 2".repeat(n / 4)}`,
      `{${'"a": {'.repeat(n / 8)}1${"}".repeat(n / 8)}}`,
    ])
      run(expr.slice(0, 16384), activation("/"), 5000);
  }
});

// Found by the test above: compileExpression threw RangeError (its own type check recurses per operator) for a chain
// of 2500 additions, where it promises to report problems and never throw.
test("CEL: a chain of thousands of operators is reported as nested too deeply, not thrown", () => {
  const c = compileExpression(`1${" + 1".repeat(4000)} > 0`);
  assert.ok("errors" in c);
  assert.match(c.errors[0]?.message ?? "", /nested too deeply/);
});

test("CEL: catastrophic-backtracking regexes over huge strings run in linear time (RE2)", () => {
  const huge = `${"a".repeat(200_000)}!`;
  for (const pattern of ["(a+)+$", "(a|a)*$", "(a*)*b", "^(a|aa)+$", "(.*a){12}"]) {
    const c = compileExpression(`request.path.matches('${pattern}')`);
    assert.ok("ok" in c, `${pattern} compiles`);
    within(3000, `matches('${pattern}') over 200 KB`, () => evaluate(c.ok, activation(huge)));
  }
  // Backreferences and lookarounds are not RE2: an error, not a slow match.
  const back = compileExpression(`request.path.matches('(a+)\\\\1')`);
  if ("ok" in back) assert.ok("error" in evaluate(back.ok, activation("aa")));
});

test("CEL: string functions over huge inputs finish in bounded time", () => {
  const huge = "ab".repeat(500_000);
  for (const expr of [
    "request.path.contains('abc')",
    "request.path.startsWith('b')",
    "request.path.endsWith('c')",
    "request.path.size() > 0",
    "request.path + request.path == request.query['q'] + request.path",
    "request.headers['x-a'].lowerAscii() == 'v'",
    "request.path.split('a').size() > 0",
    // Sluice's own linear replace() (src/cel/strings.ts; the library's was quadratic: 1.4 s for a 64 KiB path).
    "request.path.replace('a', 'xy').size() > 0",
  ])
    run(expr, activation(huge, huge), 5000);
});

// A small grammar of expressions over the spec's variables, with literals, operators and functions mixed at random.
const leaf = fc.oneof(
  fc.constantFrom(
    "request.path",
    "request.method",
    "request.headers['x-a']",
    "request.query['q']",
    "request.host",
    "source.address",
    "source.port",
    "jwt.sub",
    "request",
    "1",
    "-1",
    "1u",
    "2.5",
    "true",
    "null",
    "b'x'",
    "[]",
    "{}",
    "'s'",
    "9223372036854775807",
  ),
  fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)),
  fc.string({ maxLength: 12 }),
);
const expression: fc.Arbitrary<string> = fc.letrec<{ e: string }>((tie) => ({
  e: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc
      .tuple(tie("e"), fc.constantFrom("+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", "in"), tie("e"))
      .map(([a, op, b]) => `(${a} ${op} ${b})`),
    fc.tuple(fc.constantFrom("!", "-"), tie("e")).map(([op, a]) => `${op}${a}`),
    fc.tuple(tie("e"), tie("e"), tie("e")).map(([a, b, c]) => `(${a} ? ${b} : ${c})`),
    fc
      .tuple(
        tie("e"),
        fc.constantFrom(
          "size",
          "contains",
          "startsWith",
          "endsWith",
          "matches",
          "lowerAscii",
          "split",
          "exists",
          "all",
          "map",
        ),
        fc.array(tie("e"), { maxLength: 2 }),
      )
      .map(([t, f, args]) =>
        ["exists", "all", "map"].includes(f) ? `${t}.${f}(x, ${args[0] ?? "x"})` : `${t}.${f}(${args.join(", ")})`,
      ),
    fc
      .tuple(fc.constantFrom("size", "int", "string", "double", "cidr", "ip", "has", "dyn", "type"), tie("e"))
      .map(([f, a]) => `${f}(${a})`),
    fc.array(tie("e"), { maxLength: 3 }).map((xs) => `[${xs.join(", ")}]`),
    fc.tuple(tie("e"), tie("e")).map(([k, v]) => `{${k}: ${v}}`),
    fc.tuple(tie("e"), tie("e")).map(([a, i]) => `${a}[${i}]`),
  ),
})).e;

test("CEL: random expressions over hostile inputs compile and evaluate without throwing", () =>
  holds(
    "cel random expressions",
    fc.property(expression, fc.string({ maxLength: 100 }), fc.string({ maxLength: 50 }), (expr, path, header) => {
      run(expr, activation(path, header));
    }),
  ));
