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

test("what reads the response and Envoy cannot evaluate is computed by the response stage; what fails to compile is reported", () => {
  const plan = extProcAttributes(
    {
      responseAttributes: {
        text: "string(response.code)",
        joined: "response.headers['x-upstream'] + '/' + string(response.code)",
        bad: "response.(",
      },
    },
    "traffic",
  );
  assert.deepEqual(
    plan.unsent.map(([f]) => f),
    ["responseAttributes.bad"],
  );
  assert.deepEqual(plan.values, []);
  assert.deepEqual(
    plan.responseValues.map((v) => [v.key, v.expression, v.as]),
    [
      ["traffic.extproc.response.text", "string(response.code)", "attribute"],
      ["traffic.extproc.response.joined", "response.headers['x-upstream'] + '/' + string(response.code)", "attribute"],
    ],
  );
  assert.equal(plan.response.text, `metadata.filter_metadata["${CONTEXT_NAMESPACE}"]["traffic.extproc.response.text"]`);
});

test("llm: Envoy reads what the LLM ext_proc left in metadata; anything else reading llm is the response stage's", () => {
  const plan = extProcAttributes(
    {
      requestAttributes: { model: "llm.requestModel", upper: "llm.requestModel.upperAscii()" },
      responseAttributes: {
        tokens: "llm.outputTokens",
        provider: "llm.provider",
        summary: "llm.requestModel + ':' + string(llm.totalTokens)",
        // Of the request alone otherwise, but llm is known only once the LLM ext_proc has run: at the response.
        streamed: "string(llm.streaming)",
      },
    },
    "traffic",
  );
  assert.deepEqual(plan.unsent, []);
  const md = (key: string) => `metadata.filter_metadata['sluice.dev/llm']['${key}']`;
  // Sent with the response headers: the end of the answer only for a non-streamed one; counts as integers.
  const unlessStreamed = (e: string) => `(${md("streaming")} == false ? (${e}) : {}['streamed'])`;
  assert.equal(plan.response.tokens, unlessStreamed(`int(${md("output_tokens")})`));
  // The provider is written with a streamed answer's headers too.
  assert.equal(plan.response.provider, md("provider"));
  assert.deepEqual(
    plan.responseValues.map((v) => [v.key, v.unlessStreamed]),
    [
      ["traffic.extproc.response.summary", true],
      ["traffic.extproc.response.streamed", undefined],
    ],
  );
  // Before the LLM ext_proc on the request: Sluice computes them (from the request body, src/extproc/context.ts).
  assert.deepEqual(
    plan.values.map((v) => [v.key, v.expression]),
    [
      ["traffic.extproc.request.model", "llm.requestModel"],
      ["traffic.extproc.request.upper", "llm.requestModel.upperAscii()"],
    ],
  );
  assert.equal(plan.request.model, `metadata.filter_metadata["${CONTEXT_NAMESPACE}"]["traffic.extproc.request.model"]`);
});

test("a whole map (request.headers, request.query, response.headers) is computed by Sluice, sent as JSON text", () => {
  const plan = extProcAttributes(
    {
      requestAttributes: { headers: "request.headers", query: "request.query" },
      responseAttributes: { out: "response.headers", q: "request.query" },
    },
    "traffic",
  );
  assert.deepEqual(
    plan.values.map((v) => [v.key, v.as]),
    [
      ["traffic.extproc.response.q", "attribute"],
      ["traffic.extproc.request.headers", "attribute"],
      ["traffic.extproc.request.query", "attribute"],
    ],
  );
  assert.deepEqual(
    plan.responseValues.map((v) => v.key),
    ["traffic.extproc.response.out"],
  );
  assert.deepEqual(plan.unsent, []);
});

test("llm with the headers skipped and the body buffered: sent with the complete answer, streamed or not", () => {
  const plan = extProcAttributes(
    {
      processingOptions: { responseHeaderMode: "Skip", responseBodyMode: "Buffered" },
      responseAttributes: { tokens: "llm.totalTokens", summary: "string(llm.totalTokens)" },
    },
    "traffic",
  );
  assert.equal(plan.response.tokens, "int(metadata.filter_metadata['sluice.dev/llm']['total_tokens'])");
  assert.deepEqual(
    plan.responseValues.map((v) => [v.key, v.unlessStreamed]),
    [["traffic.extproc.response.summary", undefined]],
  );
});
