// The `llm` CEL variable after a response and the cost of global `Tokens` descriptors (Document 1: "token cost
// evaluated after completion"): field names, rounding, the total-tokens fallback, and the dynamic metadata Envoy reads.

import assert from "node:assert/strict";
import { test } from "node:test";
import { type Completion, completionMetadata, costOf, llmVariable } from "../../src/extproc/llm/completion.js";
import { tokenCostFormat, tokenCostKey } from "../../src/translate/llm/table.js";

const done: Completion = {
  provider: "claude",
  requestModel: "fast",
  responseModel: "claude-haiku-4-5",
  streaming: true,
  usage: { inputTokens: 120, outputTokens: 30, totalTokens: 150, cacheReadTokens: 100 },
};

test("llm carries the reference implementation's field names", () => {
  assert.deepEqual(llmVariable(done), {
    streaming: true,
    requestModel: "fast",
    responseModel: "claude-haiku-4-5",
    provider: "claude",
    inputTokens: 120,
    outputTokens: 30,
    totalTokens: 150,
    cachedInputTokens: 100,
    cacheCreationInputTokens: 0,
  });
  assert.deepEqual(llmVariable({ streaming: false, countTokens: 42 }), { streaming: false, countTokens: 42 });
});

test("a cost is a non-negative integer; one that fails or is not a number counts the total tokens", () => {
  const h = { ":path": "/v1/chat/completions", "x-tier": "gold" };
  assert.deepEqual(costOf("llm.inputTokens - llm.cachedInputTokens + 4 * llm.outputTokens", done, h), {
    value: 140,
    failed: false,
  });
  assert.deepEqual(costOf("double(llm.totalTokens) / 7.0", done, h), { value: 22, failed: false });
  assert.deepEqual(costOf("request.headers['x-tier'] == 'gold' ? 0 : llm.totalTokens", done, h), {
    value: 0,
    failed: false,
  });
  assert.deepEqual(costOf("llm.outputTokens - llm.inputTokens", done, h), { value: 0, failed: false });
  assert.deepEqual(costOf("llm.nope", done, h), { value: 150, failed: true });
  assert.deepEqual(costOf("'many'", done, h), { value: 150, failed: true });
});

test("dynamic metadata: counts, provider, model and each cost under its key", () => {
  const failed: string[] = [];
  const expr = "llm.outputTokens * 2";
  const md = completionMetadata(done, [{ key: tokenCostKey(expr), expression: expr }], {}, (e) => failed.push(e));
  assert.deepEqual(md, {
    "sluice.dev/llm": {
      input_tokens: 120,
      output_tokens: 30,
      total_tokens: 150,
      cached_input_tokens: 100,
      provider: "claude",
      model: "claude-haiku-4-5",
      costs: { [tokenCostKey(expr)]: 60 },
    },
  });
  assert.deepEqual(failed, []);
  assert.equal(tokenCostFormat(expr), `%DYNAMIC_METADATA(sluice.dev/llm:costs:${tokenCostKey(expr)})%`);
  assert.equal(tokenCostFormat(undefined), "%DYNAMIC_METADATA(sluice.dev/llm:total_tokens)%");
  // Nothing is known of a failed response: no metadata, so Envoy's stream-done descriptor adds nothing.
  assert.equal(
    completionMetadata({ streaming: false }, [], {}, () => {}),
    undefined,
  );
});
