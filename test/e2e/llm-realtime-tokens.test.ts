// Token accounting of Realtime sessions through a real Envoy: Node's WebSocket client → Envoy → Sluice's Realtime
// relay (a route with a `tokens` limit goes through it, no prompt guard needed) → a fake Realtime provider whose
// response.done reports usage in OpenAI's shape (input_tokens with input_token_details.cached_tokens, output_tokens,
// total_tokens). Each response.done:
// - adds its tokens to Sluice's LLM metrics by type (sluice_llm_tokens_total input, output, cached_input);
// - debits the route's `tokens` bucket (100 an hour): the third response (40 each) crosses it, reaches the client,
//   then Realtime's error event (code token_rate_limit_exceeded) and a 1008 close end the session; the next upgrade
//   is refused 429 by the LLM ext_proc.
// A route to the same GwBackend without a limit stays a websocket Envoy passes straight through: not counted.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, realtimeTokensLimitYaml, startFakeRealtime } from "../helpers/fake-realtime.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { type Family, sampleSum, scrape } from "../helpers/prom-text.js";
import { closeOf, openRealtime, refusedUpgrade, untilEvent } from "../helpers/realtime-client.js";

const USAGE = {
  total_tokens: 40,
  input_tokens: 30,
  output_tokens: 10,
  input_token_details: { cached_tokens: 20, text_tokens: 30, audio_tokens: 0 },
  output_token_details: { text_tokens: 10, audio_tokens: 0 },
};

const tokens = (m: Map<string, Family>, type: string) =>
  sampleSum(m, "sluice_llm_tokens_total", { gateway: "default/gw", provider: "default", type });

describe("Realtime token accounting through the relay", { timeout: 90_000 }, () => {
  let rt: FakeRealtime;
  let env: LlmEnv;

  before(async () => {
    rt = await startFakeRealtime({ name: "rt", apiKey: "sk-provider", usage: USAGE });
    env = await startLlmEnv(realtimeTokensLimitYaml(rt, 100), "/limited/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await rt?.close();
  });

  test("a session passed straight through by Envoy is not counted", async () => {
    const before = await scrape(env.sluice.adminPort);
    const { ws, next } = await openRealtime(env.port, "/direct/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    ws.close();
    const after = await scrape(env.sluice.adminPort);
    assert.equal(tokens(after, "input") - tokens(before, "input"), 0);
  });

  test("each response.done is counted and debited; the response that spends the budget ends the session", async () => {
    const before = await scrape(env.sluice.adminPort);
    const { ws, next } = await openRealtime(env.port, "/limited/v1/realtime", "client-key");
    const closed = closeOf(ws);
    assert.equal((await next()).type, "session.created");
    for (let i = 0; i < 2; i++) {
      ws.send(JSON.stringify({ type: "response.create" }));
      const done = (await untilEvent(next, "response.done")).at(-1);
      assert.deepEqual((done?.response as { usage?: unknown } | undefined)?.usage, USAGE);
    }
    const after = await scrape(env.sluice.adminPort);
    assert.equal(tokens(after, "input") - tokens(before, "input"), 60);
    assert.equal(tokens(after, "output") - tokens(before, "output"), 20);
    assert.equal(tokens(after, "cached_input") - tokens(before, "cached_input"), 40);
    // 100 - 40 - 40 = 20 left: the third response is served, and spends it.
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    const error = await next();
    assert.equal(error.type, "error");
    assert.deepEqual(
      { ...(error.error as Record<string, unknown>), event_id: undefined },
      {
        type: "rate_limit_error",
        code: "token_rate_limit_exceeded",
        message: "token rate limit exceeded",
        param: null,
        event_id: undefined,
      },
    );
    assert.deepEqual(await closed, { code: 1008, reason: "token rate limit exceeded" });
    const spent = await scrape(env.sluice.adminPort);
    assert.equal(tokens(spent, "input") - tokens(before, "input"), 90);
  });

  test("while the bucket is spent, the next session's upgrade is refused 429", async () => {
    const handshakes = rt.handshakes.length;
    const r = await refusedUpgrade(env.port, "/limited/v1/realtime?model=gpt-realtime");
    assert.equal(r.status, 429);
    assert.match(r.body, /token rate limit exceeded/);
    assert.equal(rt.handshakes.length, handshakes, "the provider is not called");
  });
});
