// Global token limits on the real rate limit service: envoyproxy/ratelimit counting in redis-server (both started by
// the test; scripts/setup.d/ratelimit.sh, redis.sh), its configuration written by `sluice ratelimit-config` from the
// same GwPolicies, two gateways (each its own `sluice serve` and Envoy) sharing it, driven by the official `openai`
// client. A `Tokens` descriptor is checked with 0 hits before the request and charged with the usage the provider
// reported when the response (or the stream) is done; a `cost` CEL expression over `llm.*` replaces the total, and a
// descriptor entry may read `llm.requestModel`. Once the budget is spent the client gets 429 in its own format.
// (test/helpers/grpc-services.ts keeps a rate limit server written for the tests, for tests of the RLS wire alone.)

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService, rulePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { type SharedRateLimit, startSharedRateLimit } from "../helpers/ratelimit-redis.js";

function resources(fake: FakeProvider, rlsPort: number): string {
  return `${localService("rls", rlsPort, "kubernetes.io/h2c")}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: openai, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${fake.port} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: tokens
      matches: [{ path: { type: PathPrefix, value: /tokens } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
    - name: costly
      matches: [{ path: { type: PathPrefix, value: /costly } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
${rulePolicy(
  "tokens",
  `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: llm
    descriptors:
      - entries: [{ name: user, expression: "request.headers['x-user']" }]
        unit: Tokens`,
)}${rulePolicy(
  "costly",
  `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: llm
    descriptors:
      - entries: [{ name: model, expression: llm.requestModel }]
        unit: Tokens
        cost: "llm.inputTokens + llm.outputTokens * 4"`,
)}`;
}

describe("global token limits on envoyproxy/ratelimit and Redis, shared by two Envoys", { timeout: 120_000 }, () => {
  let fake: FakeProvider;
  let store: SharedRateLimit;
  let a: LlmEnv;
  let b: LlmEnv;
  const client = (env: LlmEnv, prefix: string, user: string) =>
    new OpenAI({
      apiKey: "k",
      baseURL: `${env.baseUrl}/${prefix}/v1`,
      maxRetries: 0,
      defaultHeaders: { "x-user": user },
    });
  const ask = (env: LlmEnv, prefix: string, user: string, model = "gpt-4o") =>
    client(env, prefix, user).chat.completions.create({ model, messages: [{ role: "user", content: "x" }] });

  before(async () => {
    fake = await startFakeProvider({ name: "openai" });
    // 30 tokens per user and per model for a day (no window boundary within the test); each answer of the fake uses
    // 11 + 7 = 18.
    store = await startSharedRateLimit((rlsPort) => resources(fake, rlsPort), ["llm/user=30/day", "llm/model=100/day"]);
    [a, b] = await Promise.all([
      startLlmEnv(store.yaml, "/tokens/v1/chat/completions"),
      startLlmEnv(store.yaml, "/tokens/v1/chat/completions"),
    ]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await store?.stop();
    await fake?.close();
  });

  test("checked with 0 hits, charged with the reported usage when done, on either Envoy; 429 in the client's format once spent", async () => {
    await ask(a, "tokens", "alice");
    await store.charged("llm_user_alice", 18);
    // 18 ≤ 30: the other Envoy's check (0 hits) passes and charges nothing by itself; the answer charges 18 more.
    await ask(b, "tokens", "alice");
    await store.charged("llm_user_alice", 36);
    for (const env of [a, b]) {
      await assert.rejects(ask(env, "tokens", "alice"), (e: unknown) => {
        assert.ok(e instanceof OpenAI.RateLimitError, String(e));
        assert.equal(e.status, 429);
        // Translated by the LLM ext_proc: an OpenAI error object, not Envoy's empty local reply.
        assert.equal(
          (e.error as { message?: unknown } | undefined)?.message,
          "rate limit exceeded",
          JSON.stringify(e.error),
        );
        return true;
      });
    }
    // Refused requests cost nothing, and another user has their own budget.
    assert.equal(await store.counter("llm_user_alice"), 36);
    const r = await ask(b, "tokens", "bob");
    assert.ok(r.choices[0]?.message.content);
    await store.charged("llm_user_bob", 18);
  });

  test("a stream is charged with the usage of its last chunk when it ends", async () => {
    const stream = await client(a, "tokens", "carol").chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: number | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      if (c.usage != null) usage = c.usage.total_tokens;
    }
    assert.equal(text, "Hello from openai: stream");
    assert.equal(usage, 18, "the provider reported 18 tokens");
    await store.charged("llm_user_carol", 18);
    // A second stream through the other Envoy spends the rest (36 > 30); the third is refused there and here.
    const again = await client(b, "tokens", "carol").chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _ of again);
    await store.charged("llm_user_carol", 36);
    for (const env of [a, b]) {
      await assert.rejects(
        client(env, "tokens", "carol").chat.completions.create({
          model: "gpt-4o",
          messages: [{ role: "user", content: "stream" }],
          stream: true,
        }),
        (e: unknown) => e instanceof OpenAI.RateLimitError,
      );
    }
  });

  test("a cost expression over llm.* and a descriptor entry from llm.requestModel", async () => {
    await ask(a, "costly", "dave", "gpt-4o-mini");
    // 11 input tokens + 7 output tokens × 4
    await store.charged("llm_model_gpt-4o-mini", 39);
    await ask(b, "costly", "erin", "gpt-4o-mini");
    await store.charged("llm_model_gpt-4o-mini", 78);
    // 78 ≤ 100: one more passes its check and brings the model to 117; the next is refused on both Envoys.
    await ask(a, "costly", "frank", "gpt-4o-mini");
    await store.charged("llm_model_gpt-4o-mini", 117);
    for (const env of [a, b]) {
      await assert.rejects(ask(env, "costly", "gina", "gpt-4o-mini"), (e: unknown) => {
        return e instanceof OpenAI.RateLimitError;
      });
    }
    // Another model has its own budget.
    await ask(b, "costly", "dave", "gpt-4o");
    await store.charged("llm_model_gpt-4o", 39);
  });
});
