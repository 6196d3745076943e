// Spec CEL → Envoy RBAC conditions (src/cel/envoy-condition.ts): which expressions are translated, what they become,
// and which are refused because the two runtimes would disagree. The answers Envoy gives for translated conditions
// are checked end to end, against Sluice's, in test/e2e/authz-suite.ts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { toJsonString } from "@bufbuild/protobuf";
import { allOf, toEnvoyCondition } from "../../src/cel/envoy-condition.js";
import { compileExpression } from "../../src/cel/index.js";
import { ExprSchema } from "../../src/gen/google/api/expr/v1alpha1/syntax_pb.js";

function condition(text: string) {
  const c = compileExpression(text);
  if (!("ok" in c)) throw new Error(`${text}: ${JSON.stringify(c.errors)}`);
  return toEnvoyCondition(c.ok.ast.expr);
}

const json = (text: string) => {
  const c = condition(text);
  assert.ok(c, `translated: ${text}`);
  return toJsonString(ExprSchema, c.expr);
};

describe("Envoy CEL conditions", () => {
  for (const text of [
    "request.headers['x-a'].lowerAscii() == 'yes'",
    "request.headers.x_a.upperAscii() != 'NO'",
    "request.path.endsWith('.json') || request.path.contains('/v2/')",
    "request.method in ['GET', 'HEAD']",
    "size(request.headers['x-n']) > 2 && request.headers['x-n'].size() <= 10",
    "has(request.headers.xblock)",
    "!(request.scheme == 'http')",
    "(request.headers['x-t'] == 'a' ? source.port : 0) > 1024",
    "request.host + request.path == 'api.test/x'",
    "request.headers[':authority'].startsWith('api.')",
    "source.port in [80, 443]",
    "true",
  ]) {
    it(`translated: ${text}`, () => assert.ok(condition(text)));
  }

  for (const [text, why] of [
    ["request.query['a'] == 'b'", "a map here, the raw query in Envoy"],
    ["request.headers['X-A'] == 'b'", "the spec's map has lowercase keys only"],
    ["has(request.headers.X)", "the same, under has()"],
    ["cidr('10.0.0.0/8').containsIP(source.address)", "no cidr() in Envoy (a principal does it)"],
    ["source.address == '127.0.0.1'", "an IP here, `ip:port` in Envoy"],
    ["jwt.sub == 'alice'", "claims: JSON numbers convert differently"],
    ["request.headers['x'] == 1", "mixed types: false here, an error in Envoy"],
    ["request.path.matches('^/a')", "RE2 in Envoy"],
    ["request.headers.exists(k, k == 'x')", "macros over maps"],
    ["size(request.headers) > 3", "the header map as a whole"],
    ["request.method in ['GET', 1]", "a list of mixed types"],
    ["request.method in [request.host]", "a list of non-literals"],
    ["request.headers['x-a']", "not a boolean"],
    ["request.headers['x-a'].replace('a', 'b') == 'b'", "outside the string functions used"],
    ["1 + 1 == 2", "int arithmetic is not in the subset"],
    ["request.host < 'm'", "string order: UTF-8 bytes in Envoy"],
  ] as const) {
    it(`not translated: ${text} (${why})`, () => assert.equal(condition(text), undefined));
  }

  it("the spec's request.path is Envoy's url_path (the path without the query)", () => {
    const out = json("request.path == '/a'");
    assert.match(out, /"field":"url_path"/);
    assert.doesNotMatch(out, /"field":"path"/);
  });

  it("names the features a condition needs", () => {
    assert.deepEqual(pick(condition("request.host.lowerAscii() == 'a'")), {
      stringFunctions: true,
      stringConcat: false,
    });
    assert.deepEqual(pick(condition("request.host + 'x' == 'ax'")), { stringFunctions: false, stringConcat: true });
    assert.deepEqual(pick(condition("request.host == 'a'")), { stringFunctions: false, stringConcat: false });
  });

  it("allOf joins conditions with && under fresh, unique node ids, and merges the features", () => {
    const a = condition("request.host.lowerAscii() == 'a'");
    const b = condition("request.host + 'x' == 'ax'");
    assert.ok(a && b);
    const both = allOf([a, b]);
    assert.deepEqual(pick(both), { stringFunctions: true, stringConcat: true });
    const ids: bigint[] = [];
    const text = toJsonString(ExprSchema, both.expr);
    for (const m of text.matchAll(/"id":"(\d+)"/g)) ids.push(BigInt(m[1] ?? "0"));
    assert.equal(new Set(ids).size, ids.length);
    assert.match(text, /^\{"id":"1","callExpr":\{"function":"_&&_"/);
    // The parts are left as they were.
    assert.equal(toJsonString(ExprSchema, a.expr), json("request.host.lowerAscii() == 'a'"));
  });
});

function pick(c: ReturnType<typeof condition>) {
  assert.ok(c);
  return { stringFunctions: c.stringFunctions, stringConcat: c.stringConcat };
}
