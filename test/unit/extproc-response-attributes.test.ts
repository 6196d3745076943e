// How `extProc.responseAttributes` are sent (src/translate/xds/filters/context.ts): Envoy's own response_attributes
// for attribute paths under their own text, else the MappedAttributeBuilder's response map, with values Envoy's
// default CEL evaluates at the response, or values Sluice computed on the request; the rest reported.
// test/e2e/traffic-context.test.ts shows what a processor receives through Envoy.

import assert from "node:assert/strict";
import { test } from "node:test";
import { CONTEXT_NAMESPACE, extProcAttributes } from "../../src/translate/xds/filters/context.js";

test("attribute paths under their own text stay Envoy's own response_attributes", () => {
  const plan = extProcAttributes({ responseAttributes: { "response.code": "response.code" } }, "traffic");
  assert.equal(plan.native, true);
  assert.equal(plan.responseMapped, false);
  assert.deepEqual(plan.response, { "response.code": "response.code" });
  assert.deepEqual(plan.unsent, []);
});

test("other names go through the mapper's response map: Envoy CEL, or a value Sluice computes on the request", () => {
  const plan = extProcAttributes(
    {
      responseAttributes: {
        "response.code": "response.code",
        status: "response.code",
        upstream: "response.headers['x-upstream']",
        peer: "source.address",
        page: "request.query['page']",
      },
    },
    "traffic",
    2,
  );
  assert.equal(plan.native, false);
  assert.equal(plan.responseMapped, true);
  assert.equal(plan.response.status, "response.code");
  assert.equal(plan.response["response.code"], "response.code");
  assert.match(plan.response.upstream ?? "", /^response\.headers/);
  // source.address as the spec's IP needs string functions Envoy's default CEL lacks: Sluice computes it.
  const key = "traffic.extproc.2.response.peer";
  assert.equal(plan.response.peer, `metadata.filter_metadata["${CONTEXT_NAMESPACE}"]["${key}"]`);
  assert.ok(plan.values.some((v) => v.key === key && v.expression === "source.address"));
  assert.ok(plan.values.some((v) => v.key === "traffic.extproc.2.response.page"));
  assert.deepEqual(plan.unsent, []);
});

test("what reads the response and Envoy cannot evaluate, or reads llm, is reported", () => {
  const plan = extProcAttributes(
    { responseAttributes: { text: "string(response.code)", tokens: "llm.outputTokens", bad: "response.(" } },
    "traffic",
  );
  assert.deepEqual(plan.unsent.map(([f]) => f).sort(), [
    "responseAttributes.bad",
    "responseAttributes.text",
    "responseAttributes.tokens",
  ]);
  assert.deepEqual(plan.response, {});
  assert.deepEqual(plan.values, []);
});
