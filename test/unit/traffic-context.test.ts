// Sluice's context ext_proc (src/extproc/context.ts) as a pure function: the header for a JWT expression (removed
// when it fails), rate limit values as text (an IP in its usual form), costs as non-negative integers with the
// fallback, metadataContext values as JSON, and a conditional list's choice with only the chosen entry's values.

import assert from "node:assert/strict";
import { test } from "node:test";
import { peerIpValue } from "../../src/cel/index.js";
import { type ContextSpec, computeContext, decodeContext, encodeContext } from "../../src/extproc/context.js";
import { requestVariable } from "../../src/extproc/llm/cel.js";

const vars = (headers: Record<string, string>, path = "/p?page=2") => ({
  request: requestVariable({ ":path": path, ":method": "GET", ":authority": "h", ...headers }),
  source: { address: peerIpValue("10.1.2.3"), port: BigInt(5000) },
});

test("headers are set from their expression, and removed when it fails or is empty", () => {
  const spec: ContextSpec = { headers: [{ name: "X-Tok", expression: "request.headers['x-a']" }], requestBody: false };
  const logs: string[] = [];
  const ok = computeContext(spec, vars({ "x-a": "abc" }), (m) => logs.push(m));
  assert.deepEqual(ok.phase === "requestHeaders" && ok.headers, { set: { "x-tok": "abc" } });
  const missing = computeContext(spec, vars({}), (m) => logs.push(m));
  assert.deepEqual(missing.phase === "requestHeaders" && missing.headers, { set: {}, remove: ["x-tok"] });
  const empty = computeContext(spec, vars({ "x-a": "" }), (m) => logs.push(m));
  assert.deepEqual(empty.phase === "requestHeaders" && empty.headers, { set: {}, remove: ["x-tok"] });
  assert.equal(logs.length, 2);
});

test("values: text, count with fallback and clamping, JSON", () => {
  const spec: ContextSpec = {
    values: [
      { namespace: "n", key: "ip", expression: "source.address", as: "text" },
      { namespace: "n", key: "page", expression: "request.query['page']", as: "text" },
      { namespace: "n", key: "num", expression: "1 + 2", as: "text" },
      { namespace: "n", key: "cost", expression: "int(request.headers['x-cost'])", as: "count", fallback: 1 },
      { namespace: "n", key: "neg", expression: "-4", as: "count", fallback: 1 },
      { namespace: "m", key: "list", expression: "['a', 1]", as: "json" },
      { namespace: "m", key: "ipjson", expression: "source.address", as: "json" },
      { namespace: "m", key: "gone", expression: "request.headers['nope']", as: "json" },
    ],
    requestBody: false,
  };
  const r = computeContext(spec, vars({}), () => undefined);
  assert.equal(r.phase, "requestHeaders");
  assert.deepEqual(r.phase === "requestHeaders" && r.metadata, {
    n: { ip: "10.1.2.3", page: "2", num: "3", cost: 1, neg: 0 },
    m: { list: ["a", 1], ipjson: "10.1.2.3" },
  });
  const costed = computeContext(spec, vars({ "x-cost": "7" }), () => undefined);
  assert.equal(costed.phase === "requestHeaders" && (costed.metadata?.["n"] as { cost: number } | undefined)?.cost, 7);
});

test("a conditional choice: the first true condition (or the fallback), and only that entry's values", () => {
  const spec: ContextSpec = {
    choose: [
      {
        header: "x-entry",
        conditions: ["request.headers['x-t'] == 'gold'", "request.headers['x-oops'].size() > 0", null],
      },
    ],
    values: [
      { namespace: "c", key: "lane", expression: "'gold'", as: "json", onlyFor: { choice: 0, entry: 0 } },
      { namespace: "c", key: "lane", expression: "'rest'", as: "json", onlyFor: { choice: 0, entry: 2 } },
    ],
    requestBody: false,
  };
  const gold = computeContext(spec, vars({ "x-t": "gold" }), () => undefined);
  assert.deepEqual(gold.phase === "requestHeaders" && [gold.headers, gold.metadata], [
    { set: { "x-entry": "0" } },
    { c: { lane: "gold" } },
  ]);
  // The second condition fails (no such header): false, so the fallback.
  const rest = computeContext(spec, vars({}), () => undefined);
  assert.deepEqual(rest.phase === "requestHeaders" && [rest.headers, rest.metadata], [
    { set: { "x-entry": "2" } },
    { c: { lane: "rest" } },
  ]);
  const none = computeContext({ ...spec, choose: [{ header: "x-entry", conditions: ["false"] }] }, vars({}), () => {});
  assert.deepEqual(none.phase === "requestHeaders" && none.headers, { set: {}, remove: ["x-entry"] });
});

test("the spec travels as base64url JSON; a malformed one decodes to undefined", () => {
  const spec: ContextSpec = { values: [{ namespace: "a", key: "b", expression: "1", as: "json" }], requestBody: true };
  assert.deepEqual(decodeContext(encodeContext(spec)), spec);
  assert.equal(decodeContext("not base64 json"), undefined);
  assert.equal(decodeContext(Buffer.from('{"values":[]}').toString("base64url")), undefined);
});

test("at the response: values read the response, maps and lists as JSON text, the entry from the request header", () => {
  const spec: ContextSpec = {
    choose: [{ header: "x-entry", conditions: ["false", null] }],
    values: [
      { namespace: "n", key: "text", expression: "string(response.code)", as: "attribute" },
      { namespace: "n", key: "code", expression: "response.code", as: "attribute" },
      {
        namespace: "n",
        key: "joined",
        expression: "response.headers['x-up'] + '/' + request.query['page']",
        as: "attribute",
      },
      { namespace: "n", key: "query", expression: "request.query", as: "attribute" },
      { namespace: "n", key: "e0", expression: "'first'", as: "attribute", onlyFor: { choice: 0, entry: 0 } },
      { namespace: "n", key: "e1", expression: "'fallback'", as: "attribute", onlyFor: { choice: 0, entry: 1 } },
    ],
    requestBody: false,
    atResponse: true,
  };
  const v = {
    ...vars({ "x-entry": "1" }),
    response: { code: BigInt(201), headers: new Map([["x-up", "app"]]) },
  };
  const r = computeContext(spec, v, () => undefined);
  assert.equal(r.phase, "responseHeaders");
  assert.deepEqual(r.phase === "responseHeaders" && r.headers, { set: {} }, "no header is set or removed");
  assert.deepEqual(r.phase === "responseHeaders" && r.metadata, {
    n: { text: "201", code: 201, joined: "app/2", query: '{"page":"2"}', e1: "fallback" },
  });
});
