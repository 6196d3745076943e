// Global token limits through a rate limit service (Envoy's RLS protocol), end to end through a real Envoy with the
// official `openai` client: a `Tokens` descriptor is checked with 0 hits before the request and debited with the
// request's total tokens when the response (or the stream) is done; a `cost` CEL expression over `llm.*` replaces the
// total, and a descriptor entry may read `llm.requestModel`. Once the budget is spent the client gets 429 in its own
// format.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService, rulePolicy } from "../helpers/gateway.js";
import { type GrpcTestServer, startRateLimitService } from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";

type Rls = GrpcTestServer & { hits: Map<string, number>; calls: { key: string; hits: number; over: boolean }[] };

function resources(fake: FakeProvider, rls: Rls): string {
  return `${localService("rls", rls.port, "kubernetes.io/h2c")}---
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

describe("global token limits through the rate limit service", { timeout: 60_000 }, () => {
  let fake: FakeProvider;
  let rls: Rls;
  let env: LlmEnv;
  const client = (prefix: string, user: string) =>
    new OpenAI({
      apiKey: "k",
      baseURL: `${env.baseUrl}/${prefix}/v1`,
      maxRetries: 0,
      defaultHeaders: { "x-user": user },
    });
  const ask = (prefix: string, user: string, model = "gpt-4o") =>
    client(prefix, user).chat.completions.create({ model, messages: [{ role: "user", content: "x" }] });
  /** Waits until the RLS has `total` hits for `key` (the debit after completion is sent without waiting). */
  const debited = (key: string, total: number) =>
    waitFor(`${key} at ${total} hits`, async () => (rls.hits.get(key) === total ? true : undefined), 10_000);

  before(async () => {
    fake = await startFakeProvider({ name: "openai" });
    // 30 tokens per descriptor value; each answer of the fake uses 11 + 7 = 18.
    rls = await startRateLimitService(30);
    env = await startLlmEnv(resources(fake, rls), "/tokens/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
    await rls?.close();
  });

  test("checked with 0 hits, debited with the total tokens when done; 429 in the client's format once spent", async () => {
    await ask("tokens", "alice");
    await debited("llm|user=alice", 18);
    const first = rls.calls.filter((c) => c.key === "llm|user=alice").map((c) => c.hits);
    assert.deepEqual(first, [0, 18], "a check before the request, the debit after it");
    await ask("tokens", "alice");
    await debited("llm|user=alice", 36);
    await assert.rejects(ask("tokens", "alice"), (e: unknown) => {
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
    // Refused requests cost nothing, and another user has their own budget.
    assert.equal(rls.hits.get("llm|user=alice"), 36);
    const r = await ask("tokens", "bob");
    assert.ok(r.choices[0]?.message.content);
  });

  test("a stream is debited when it ends", async () => {
    const stream = await client("tokens", "carol").chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from openai: stream");
    await debited("llm|user=carol", 18);
  });

  test("a cost expression over llm.* and a descriptor entry from llm.requestModel", async () => {
    await ask("costly", "dave", "gpt-4o-mini");
    // 11 input tokens + 7 output tokens × 4
    await debited("llm|model=gpt-4o-mini", 39);
    assert.deepEqual(
      rls.calls.filter((c) => c.key === "llm|model=gpt-4o-mini").map((c) => c.hits),
      [0, 39],
    );
  });
});
