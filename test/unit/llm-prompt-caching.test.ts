// promptCaching (Document 2) on Bedrock Converse bodies: where cache points go with the defaults and each field, the
// minTokens estimate over the prefix Bedrock caches (tools, system, messages), the model families that support it,
// and the limit of four cache points per request.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { JsonObject } from "../../src/llm/json.js";
import {
  addConverseCachePoints,
  estimateTokens,
  supportsPromptCaching,
} from "../../src/llm/translate/converse-cache.js";

const CP = { cachePoint: { type: "default" } };
const CLAUDE = "anthropic.claude-3-5-sonnet-20240620-v1:0";
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");

function body(systemWords: number, turns: number): JsonObject {
  return {
    system: [{ text: words(systemWords) }],
    messages: Array.from({ length: turns }, (_, i) => ({
      role: i % 2 === 0 ? "user" : "assistant",
      content: [{ text: `turn ${i}` }],
    })),
    toolConfig: {
      tools: [{ toolSpec: { name: "get_weather", description: "weather", inputSchema: { json: { type: "object" } } } }],
    },
  };
}

test("defaults: the system prompt and the second-to-last message, not the tools", () => {
  const input = body(1000, 3);
  const out = addConverseCachePoints(input, CLAUDE, {});
  assert.deepEqual((out.system as unknown[]).at(-1), CP);
  const messages = out.messages as { content: unknown[] }[];
  assert.deepEqual(messages[1]?.content, [{ text: "turn 1" }, CP]);
  assert.deepEqual(messages[2]?.content, [{ text: "turn 2" }]);
  assert.deepEqual(messages[0]?.content, [{ text: "turn 0" }]);
  assert.equal(((out.toolConfig as { tools: unknown[] }).tools as unknown[]).length, 1);
  // the input is left as it was
  assert.equal((input.system as unknown[]).length, 1);
});

test("nothing below minTokens: the estimate is words × 1.3 over the prefix before the cache point", () => {
  assert.equal(estimateTokens({ a: "one two", b: ["three"] }), 3 * 1.3);
  const short = body(700, 3); // 700 × 1.3 = 910 < 1024 for the system prompt
  const out = addConverseCachePoints(short, CLAUDE, {});
  assert.equal((out.system as unknown[]).length, 1);
  // …but the prefix up to the second-to-last message (tools + system + two turns) still is below, so no cache point
  assert.deepEqual((out.messages as { content: unknown[] }[])[1]?.content, [{ text: "turn 1" }]);
  const enough = addConverseCachePoints(body(790, 3), CLAUDE, {}); // 790 words + tools + turns ≥ 1024 / 1.3
  assert.equal((enough.system as unknown[]).length, 2);
});

test("cacheTools, cacheMessageOffset, and switching parts off", () => {
  const out = addConverseCachePoints(body(10, 5), CLAUDE, {
    minTokens: 0,
    cacheTools: true,
    cacheSystem: false,
    cacheMessageOffset: 2,
  });
  assert.deepEqual((out.toolConfig as { tools: unknown[] }).tools.at(-1), CP);
  assert.equal((out.system as unknown[]).length, 1);
  const m = out.messages as { content: unknown[] }[];
  assert.deepEqual(
    m.map((x) => x.content.length),
    [1, 2, 1, 1, 1],
  );
  const past = addConverseCachePoints(body(10, 2), CLAUDE, { minTokens: 0, cacheMessageOffset: 1 });
  assert.ok((past.messages as { content: unknown[] }[]).every((x) => x.content.length === 1));
  const off = addConverseCachePoints(body(10, 3), CLAUDE, { minTokens: 0, cacheMessages: false });
  assert.ok((off.messages as { content: unknown[] }[]).every((x) => x.content.length === 1));
});

test("at most four cache points, the client's own included, and none doubled", () => {
  const b = body(10, 4);
  (b.system as unknown[]).push(CP);
  const msgs = b.messages as { content: unknown[] }[];
  msgs[0]?.content.push(CP);
  msgs[1]?.content.push(CP);
  (b.toolConfig as { tools: unknown[] }).tools.push(CP);
  const out = addConverseCachePoints(b, CLAUDE, { minTokens: 0, cacheTools: true });
  assert.deepEqual(out, b);
  const three = body(10, 4);
  (three.system as unknown[]).push(CP);
  const r = addConverseCachePoints(three, CLAUDE, { minTokens: 0 });
  assert.equal((r.system as unknown[]).length, 2, "the client's system cache point is kept, not doubled");
  assert.deepEqual((r.messages as { content: unknown[] }[])[2]?.content.at(-1), CP);
});

test("model families: Claude 3+ and Nova (and opaque inference-profile ARNs), not Claude 2 or other families", () => {
  for (const m of [
    CLAUDE,
    "us.anthropic.claude-sonnet-4-20250514-v1:0",
    "amazon.nova-pro-v1:0",
    "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
  ]) {
    assert.ok(supportsPromptCaching(m), m);
  }
  for (const m of [
    "anthropic.claude-v2:1",
    "anthropic.claude-instant-v1",
    "meta.llama3-70b-instruct-v1:0",
    "arn:aws:bedrock:us-east-1::foundation-model/mistral.mistral-large-2402-v1:0",
  ]) {
    assert.ok(!supportsPromptCaching(m), m);
    const b = body(2000, 3);
    assert.deepEqual(addConverseCachePoints(b, m, {}), b);
  }
});
