// A Realtime session's token accounting (extproc/llm/realtime/usage.ts): the usage of OpenAI's response.done (cached
// input tokens too), other events not counted (an audio delta quoting "response.done" in its text neither), each
// response debiting the route's `tokens` buckets, "spent" once one is, and a route without limits never spent.

import assert from "node:assert/strict";
import { test } from "node:test";
import { realtimeUsage, SessionTokens } from "../../src/extproc/llm/realtime/usage.js";
import { TokenLimiter } from "../../src/extproc/llm/token-limits.js";
import type { LlmRouteEntry } from "../../src/translate/llm/table.js";

const done = (usage: unknown) =>
  Buffer.from(JSON.stringify({ type: "response.done", event_id: "e1", response: { id: "r", usage } }));

test("response.done's usage is read; other events are not", () => {
  assert.deepEqual(
    realtimeUsage(
      done({
        total_tokens: 40,
        input_tokens: 30,
        output_tokens: 10,
        input_token_details: { cached_tokens: 20, text_tokens: 10, audio_tokens: 20 },
        output_token_details: { text_tokens: 4, audio_tokens: 6 },
      }),
    ),
    { inputTokens: 30, outputTokens: 10, totalTokens: 40, cacheReadTokens: 20 },
  );
  // Without total_tokens: the sum.
  assert.deepEqual(realtimeUsage(done({ input_tokens: 3, output_tokens: 2 })), {
    inputTokens: 3,
    outputTokens: 2,
    totalTokens: 5,
  });
  assert.equal(realtimeUsage(done(undefined)), undefined);
  const delta = { type: "response.output_text.delta", delta: '"response.done"' };
  assert.equal(realtimeUsage(Buffer.from(JSON.stringify(delta))), undefined);
  assert.equal(realtimeUsage(Buffer.from('{"type":"response.done"')), undefined);
  assert.equal(realtimeUsage(Buffer.from(JSON.stringify({ type: "session.created" }))), undefined);
});

function entry(tokenLimits: LlmRouteEntry["tokenLimits"]): LlmRouteEntry {
  return { id: "e", tokenLimits, tokenCosts: [] } as unknown as LlmRouteEntry;
}

test("each response debits the buckets; the one that spends a bucket says so", () => {
  let now = 0;
  const limiter = new TokenLimiter(() => now);
  const limit = { key: "k", tokens: 100, burst: 100, unitMs: 3_600_000 };
  const s = new SessionTokens(limiter, entry([limit]), { provider: "default", model: "gpt-realtime" });
  const r = done({ input_tokens: 30, output_tokens: 10, total_tokens: 40 });
  assert.equal(s.count(Buffer.from('{"type":"session.created"}')), undefined);
  assert.equal(s.count(r), undefined);
  assert.equal(s.count(r), undefined);
  assert.equal(s.count(r), "spent");
  assert.equal(s.responses, 3);
  assert.deepEqual(s.total, { inputTokens: 90, outputTokens: 30, totalTokens: 120 });
  // The LLM ext_proc, sharing the buckets, refuses the next request until they refill.
  assert.equal(limiter.admit([limit]), false);
  now += 3_600_000;
  assert.equal(limiter.admit([limit]), true);
});

test("a route without tokens limits is counted, never spent", () => {
  const s = new SessionTokens(new TokenLimiter(), entry([]), { provider: "default", model: undefined });
  for (let i = 0; i < 5; i++) assert.equal(s.count(done({ input_tokens: 1e9, output_tokens: 1e9 })), undefined);
  assert.equal(s.total.totalTokens, 1e10);
});
