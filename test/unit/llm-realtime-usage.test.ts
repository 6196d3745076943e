// A Realtime session's token accounting (extproc/llm/realtime/usage.ts): the usage of OpenAI's response.done (cached
// input tokens too), other events not counted (an audio delta quoting "response.done" in its text neither), each
// response debiting the route's `tokens` buckets, "spent" once one is, and a route without limits never spent; the
// global `Tokens` descriptors charged to a rate limit service (global-tokens.ts).

import assert from "node:assert/strict";
import { test } from "node:test";
import { requestVariable } from "../../src/extproc/llm/cel.js";
import { RealtimeGlobalTokens } from "../../src/extproc/llm/realtime/global-tokens.js";
import { liveUsage, realtimeUsage, SessionTokens } from "../../src/extproc/llm/realtime/usage.js";
import { TokenLimiter } from "../../src/extproc/llm/token-limits.js";
import type { RealtimeTokenLimit } from "../../src/translate/llm/realtime-tokens.js";
import type { LlmRouteEntry } from "../../src/translate/llm/table.js";
import { startRateLimitService } from "../helpers/grpc-services.js";

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
  assert.equal(s.count(r)?.spent, false);
  assert.equal(s.count(r)?.spent, false);
  assert.deepEqual(s.count(r), {
    usage: { inputTokens: 30, outputTokens: 10, totalTokens: 40 },
    spent: true,
    live: false,
  });
  assert.equal(s.responses, 3);
  assert.deepEqual(s.total, { inputTokens: 90, outputTokens: 30, totalTokens: 120 });
  // The LLM ext_proc, sharing the buckets, refuses the next request until they refill.
  assert.equal(limiter.admit([limit]), false);
  now += 3_600_000;
  assert.equal(limiter.admit([limit]), true);
});

test("a route without tokens limits is counted, never spent", () => {
  const s = new SessionTokens(new TokenLimiter(), entry([]), { provider: "default", model: undefined });
  for (let i = 0; i < 5; i++) assert.equal(s.count(done({ input_tokens: 1e9, output_tokens: 1e9 }))?.spent, false);
  assert.equal(s.total.totalTokens, 1e10);
});

const live = (usageMetadata: unknown, rest: Record<string, unknown> = { serverContent: { turnComplete: true } }) =>
  Buffer.from(JSON.stringify({ ...rest, usageMetadata }));

test("Live API usageMetadata is read as usageFromGemini reads it; messages without it are not", () => {
  assert.deepEqual(
    liveUsage(
      live({
        promptTokenCount: 9,
        toolUsePromptTokenCount: 1,
        responseTokenCount: 5,
        thoughtsTokenCount: 2,
        cachedContentTokenCount: 4,
        totalTokenCount: 17,
      }),
    ),
    { inputTokens: 10, outputTokens: 7, totalTokens: 17, cacheReadTokens: 4 },
  );
  assert.equal(liveUsage(live(undefined)), undefined);
  assert.equal(
    liveUsage(Buffer.from(JSON.stringify({ serverContent: { outputTranscription: { text: '"usageMetadata"' } } }))),
    undefined,
  );
  // An OpenAI event is never read as the Live API's.
  assert.equal(liveUsage(Buffer.from(JSON.stringify({ type: "x", usageMetadata: { totalTokenCount: 3 } }))), undefined);
});

test("Live API usage counts each field's increase over the session's highest: a session total is charged once", () => {
  const now = 0;
  const limiter = new TokenLimiter(() => now);
  const limit = { key: "k", tokens: 100, burst: 100, unitMs: 3_600_000 };
  const s = new SessionTokens(limiter, entry([limit]), { provider: "default", model: "gemini-live" });
  // Cumulative reports (16, then 36): 16 + 20, not 16 + 36.
  assert.deepEqual(s.count(live({ promptTokenCount: 9, responseTokenCount: 7, totalTokenCount: 16 })), {
    usage: { inputTokens: 9, outputTokens: 7, totalTokens: 16 },
    spent: false,
    live: true,
  });
  // The same counts again (a report repeated within the turn): nothing more.
  assert.equal(s.count(live({ promptTokenCount: 9, responseTokenCount: 7, totalTokenCount: 16 })), undefined);
  assert.deepEqual(s.count(live({ promptTokenCount: 25, responseTokenCount: 11, totalTokenCount: 36 }))?.usage, {
    inputTokens: 16,
    outputTokens: 4,
    totalTokens: 20,
  });
  // A smaller report (per-turn counts): nothing is charged above what the session has reported at its highest.
  assert.equal(s.count(live({ promptTokenCount: 5, responseTokenCount: 3, totalTokenCount: 8 })), undefined);
  assert.deepEqual(s.total, { inputTokens: 25, outputTokens: 11, totalTokens: 36 });
  assert.equal(s.responses, 2);
  // The bucket is debited by the increases: 100 - 36 left, then a report of 120 in all spends it.
  assert.equal(s.count(live({ promptTokenCount: 100, responseTokenCount: 20, totalTokenCount: 120 }))?.spent, true);
  assert.equal(limiter.admit([limit]), false);
});

test("global Tokens descriptors: entries from the upgrade, hits the total or the cost, OVER_LIMIT told, a failing entry left out", async () => {
  const rls = await startRateLimitService(100);
  const global = new RealtimeGlobalTokens(() => {});
  try {
    const limit: RealtimeTokenLimit = {
      domain: "llm",
      service: "Service rls",
      targets: [{ host: "127.0.0.1", port: rls.port }],
      descriptors: [
        { entries: [{ key: "user", expression: "request.headers['x-user']" }] },
        { entries: [{ key: "model", expression: "llm.requestModel" }], cost: "llm.inputTokens + 4 * llm.outputTokens" },
        { entries: [{ key: "team", expression: "request.headers['x-team']" }] },
      ],
    };
    const session = {
      activation: { request: requestVariable({ ":path": "/v1/realtime", "x-user": "alice" }) },
      provider: "default",
      model: "gpt-realtime",
    };
    const usage = { inputTokens: 30, outputTokens: 10, totalTokens: 40 };
    assert.equal(await global.charge([limit], usage, session), false);
    // No x-team header: that descriptor is left out, as Envoy's expression descriptor does on an error.
    assert.deepEqual(rls.calls, [
      { key: "llm|user=alice", hits: 40, over: false },
      { key: "llm|model=gpt-realtime", hits: 70, over: false },
    ]);
    // The second response takes the model's counter to 140 > 100.
    assert.equal(await global.charge([limit], usage, session), true);
    // A service that cannot be reached loses the charge, never throws.
    const gone = { ...limit, targets: [{ host: "127.0.0.1", port: 1 }] };
    assert.equal(await global.charge([gone], usage, session), false);
  } finally {
    global.close();
    await rls.close();
  }
});
