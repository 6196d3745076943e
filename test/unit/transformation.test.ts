// applyTransform (src/extproc/transformation.ts): what one direction's transformation computes from the CEL variables.
// The end-to-end file (test/e2e/traffic-transformation.test.ts) runs the same code through Envoy.

import assert from "node:assert/strict";
import { test } from "node:test";
import { evaluateText, requestVariable } from "../../src/extproc/llm/cel.js";
import {
  applyTransform,
  decodeTransformation,
  directReply,
  encodeTransformation,
  RESPONSE_ENVIRONMENT,
  sourceVariable,
  withDelay,
} from "../../src/extproc/transformation.js";

const vars = () => ({
  request: { ...requestVariable({ ":method": "POST", ":path": "/p?a=1", "x-name": "ada" }), body: '{"n":2}' },
});

test("headers set, added and removed; values that are not strings are JSON; a failing one is left out", () => {
  const logged: string[] = [];
  const a = applyTransform(
    {
      set: [
        { name: "X-Who", value: "request.headers['x-name'] + '@' + request.query['a']" },
        { name: "x-list", value: "[1, 'two']" },
        { name: "x-fails", value: "request.headers['nope']" },
      ],
      add: [{ name: "x-add", value: "'one'" }],
      remove: ["X-Secret", "x-who"],
    },
    vars(),
    (m) => logged.push(m),
  );
  assert.deepEqual(a.headers, {
    set: { "x-who": "ada@1", "x-list": '[1,"two"]' },
    add: [["x-add", "one"]],
    remove: ["x-secret"],
  });
  assert.equal(a.body, undefined);
  assert.deepEqual(logged, ["transformation: set x-fails failed to evaluate; left out"]);
});

test("a new body with its length, from the old one; metadata as JSON under the transformation namespace", () => {
  const a = applyTransform(
    { body: "'{\"wrapped\":' + request.body + ',\"é\":true}'", metadata: { size: "size(request.body)", bad: "x.y" } },
    vars(),
  );
  assert.equal(a.body, '{"wrapped":{"n":2},"é":true}');
  assert.equal(a.headers.set["content-length"], String(Buffer.byteLength(a.body ?? "")));
  assert.deepEqual(a.metadata, { "sluice.transformation": { size: 7 } });
});

test("response expressions see `response`, in the response environment only", () => {
  const response = { code: 503n, headers: new Map([["x-up", "a"]]), body: "down" };
  const a = applyTransform(
    { set: [{ name: "x-s", value: "string(response.code) + response.headers['x-up'] + response.body" }] },
    { ...vars(), response },
    undefined,
    RESPONSE_ENVIRONMENT,
  );
  assert.equal(a.headers.set["x-s"], "503adown");
  const spec = applyTransform({ set: [{ name: "x-s", value: "string(response.code)" }] }, { ...vars(), response });
  assert.deepEqual(spec.headers.set, {}, "the spec environment has no `response`");
});

test("the spec travels in the stream metadata and back; garbage decodes to nothing", () => {
  const spec = { entries: [{ condition: "true", request: { remove: ["x"] } }], requestBody: false, responseBody: true };
  assert.deepEqual(decodeTransformation(encodeTransformation(spec)), spec);
  assert.equal(decodeTransformation("not base64 json"), undefined);
});

test("a direct response: status, CEL headers (a failing one left out), a CEL body as written or as JSON", () => {
  const d = {
    status: 418,
    headers: [
      { name: "X-M", value: "request.method" },
      { name: "x-bad", value: "request.headers['none']" },
    ],
    bodyExpression: "{'n': size(request.body), 'q': request.query['a']}",
  };
  assert.deepEqual(directReply(d, vars()), {
    phase: "immediate",
    status: 418,
    headers: { set: { "x-m": "POST" } },
    body: '{"n":7,"q":"1"}',
    details: "sluice_direct_response",
  });
  const failing = directReply({ status: 200, headers: [], bodyExpression: "request.nope" }, vars());
  assert.equal(failing.phase === "immediate" ? failing.body : undefined, "");
});

test("delay.duration as CEL: a duration or a duration string sets the fault delay header; anything else removes it", () => {
  const none = { headers: { set: {} } };
  const log: string[] = [];
  const at = (expr: string) =>
    withDelay(none, expr, { ...vars(), request: { ...vars().request, headers: new Map([["x-wait", "250ms"]]) } }, (m) =>
      log.push(m),
    );
  assert.equal(at("duration('1500ms')").headers.set["x-envoy-fault-delay-request"], "1500");
  assert.equal(at("request.headers['x-wait']").headers.set["x-envoy-fault-delay-request"], "250");
  for (const e of ["request.headers['missing']", "'0s'", "42"]) {
    const r = at(e);
    assert.equal(r.headers.set["x-envoy-fault-delay-request"], undefined, e);
    assert.deepEqual(r.headers.remove, ["x-envoy-fault-delay-request"], e);
  }
});

test("source.address is the spec's IP typed value (as in authorization), from Envoy's `ip:port` attribute", () => {
  const attributes = (address: string) => ({
    "envoy.filters.http.ext_proc": { "source.address": address, "source.port": 41000 },
  });
  const inside = "cidr('127.0.0.0/8').containsIP(source.address) && source.port == 41000";
  for (const [address, want] of [
    ["127.0.0.1:41000", true],
    ["[::ffff:127.0.0.1]:41000", true],
    ["10.1.2.3:41000", false],
    ["[2001:db8::1]:41000", false],
  ] as const) {
    const source = sourceVariable({ attributes: attributes(address) });
    assert.equal(evaluateText(inside, { source }), want, address);
  }
  assert.equal(sourceVariable({ attributes: attributes("not-an-ip") }), undefined);
  assert.equal(sourceVariable({ attributes: {} }), undefined);
});
