// The per-attempt pieces of backend.transformation and retry.condition (xds/backend-transformation.ts,
// src/extproc/transformation.ts withRetryCondition): which route retry.condition Sluice evaluates, the mark each
// response gets, and the upstream transformation spec of one backend. The e2e file
// (test/e2e/backend-transformation.test.ts) runs the same through Envoy.

import assert from "node:assert/strict";
import { test } from "node:test";
import { requestVariable } from "../../src/extproc/llm/cel.js";
import { RETRY_CONDITION_HEADER, withRetryCondition } from "../../src/extproc/transformation.js";
import type { EffectivePolicyIR, PolicySourceIR, RouteIR } from "../../src/translate/ir.js";
import { sluiceRetryCondition, upstreamTransformation } from "../../src/translate/xds/backend-transformation.js";

const from = (name: string): PolicySourceIR => ({
  kind: "GwPolicy",
  name: `default/${name}`,
  level: "route",
  target: "HTTPRoute default/r",
});

function route(pre?: Record<string, unknown>, traffic?: Record<string, unknown>): RouteIR {
  const field = (v: Record<string, unknown> | undefined, name: string): EffectivePolicyIR | undefined =>
    v === undefined ? undefined : { retry: { value: v, from: from(name) } };
  const preRouting = field(pre, "pre");
  const trafficPolicy = field(traffic, "post");
  return {
    name: "r",
    action: { kind: "forward", backends: [] },
    policy: {
      ...(preRouting !== undefined ? { preRouting } : {}),
      ...(trafficPolicy !== undefined ? { traffic: trafficPolicy } : {}),
    },
  } as unknown as RouteIR;
}

test("sluiceRetryCondition: only a condition that reads more than response.code; PostRouting's retry wins", () => {
  assert.equal(sluiceRetryCondition(route(undefined, { condition: "response.code == 503" })), undefined);
  const r = sluiceRetryCondition(route(undefined, { condition: "response.headers['x-state'] == 'busy'" }));
  assert.equal(r?.text, "response.headers['x-state'] == 'busy'");
  assert.equal(r?.from.name, "default/post");
  // A PostRouting retry without a condition replaces the PreRouting one, condition included.
  assert.equal(sluiceRetryCondition(route({ condition: "size(response.body) == 0" }, { attempts: 2 })), undefined);
  assert.equal(
    sluiceRetryCondition(route({ condition: "size(response.body) == 0" }, undefined))?.from.name,
    "default/pre",
  );
});

test("withRetryCondition: true marks the response; false, an error or a non-boolean removes the mark", () => {
  const logged: string[] = [];
  const vars = (h: Record<string, string>) => ({
    request: requestVariable({ ":method": "GET", ":path": "/", "x-idem": "yes" }),
    response: { code: 503n, headers: new Map(Object.entries(h)) },
  });
  const empty = { headers: { set: {} } };
  const yes = withRetryCondition(empty, "request.headers['x-idem'] == 'yes' && response.code == 503", vars({}), (m) =>
    logged.push(m),
  );
  assert.equal(yes.headers.set[RETRY_CONDITION_HEADER], "true");
  const no = withRetryCondition(empty, "response.code == 500", vars({ [RETRY_CONDITION_HEADER]: "true" }), (m) =>
    logged.push(m),
  );
  assert.equal(no.headers.set[RETRY_CONDITION_HEADER], undefined);
  assert.deepEqual(no.headers.remove, [RETRY_CONDITION_HEADER]);
  const failing = withRetryCondition(empty, "response.headers['missing'] == 'x'", vars({}), (m) => logged.push(m));
  assert.deepEqual(failing.headers.remove, [RETRY_CONDITION_HEADER]);
  const notBool = withRetryCondition(empty, "response.code", vars({}), (m) => logged.push(m));
  assert.deepEqual(notBool.headers.remove, [RETRY_CONDITION_HEADER]);
  assert.ok(logged.some((m) => /did not give a boolean/.test(m)));
});

test("upstreamTransformation: bodies only where read or written, identity and source noticed, condition carried", () => {
  const p: EffectivePolicyIR = {
    transformation: {
      value: {
        request: { set: [{ name: "x-sub", value: "jwt.sub" }] },
        response: { body: "string(response.code)" },
      },
      from: from("app"),
    },
  };
  const u = upstreamTransformation(route(undefined, { condition: "request.body.contains('retry')" }), p);
  assert.deepEqual(u.problems, []);
  assert.equal(u.ir?.identity, true);
  assert.equal(u.ir?.source, false);
  assert.equal(u.ir?.spec.requestBody, true, "the condition reads request.body");
  assert.equal(u.ir?.spec.responseBody, true, "the response body is written");
  assert.equal(u.ir?.spec.retryCondition, "request.body.contains('retry')");
  assert.equal(upstreamTransformation(route(), undefined).ir, undefined);
});

test("upstreamTransformation: response in a request-side expression is reported with its path and left out", () => {
  const p: EffectivePolicyIR = {
    transformation: {
      value: {
        request: {
          set: [
            { name: "x-a", value: "string(response.code)" },
            { name: "x-b", value: "'b'" },
          ],
        },
      },
      from: from("app"),
    },
  };
  const u = upstreamTransformation(route(), p);
  assert.equal(u.problems.length, 1);
  assert.match(u.problems[0]?.message ?? "", /^backend\.transformation\.request\.set\[0\]\.value: /);
  assert.deepEqual(u.ir?.spec.entries[0]?.request?.set, [{ name: "x-b", value: "'b'" }]);
});
