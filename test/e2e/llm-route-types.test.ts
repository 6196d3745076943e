// The LLM route types that are not translated, end to end through a real Envoy: Models goes to the provider's own
// model list (`/v1/models` of an OpenAI or Anthropic provider, whatever the route's prefix) and Passthrough as it is
// (path included), both with the provider's credentials instead of the client's (the OpenAI client lists models);
// Detect forwards whatever format and still counts the tokens of the answer (a `tokens` limit fills up from them);
// Rerank (the Cohere v2 shape) reaches a custom provider at its rerank path, and its usage counts too.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";

function resources(f: FakeProvider): string {
  const backend = (name: string, provider: string, routes: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
${provider}
      host: 127.0.0.1
      port: ${f.port}
  policies:
    auth: { key: sk-provider }
    ai:
      routes: ${routes}
`;
  const rule = (prefix: string, name: string) => `
    - name: ${prefix}
      matches: [{ path: { type: PathPrefix, value: /${prefix} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  const limit = (section: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${section}-tokens, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: ${section} }]
  traffic:
    rateLimit:
      local: [{ tokens: 30, unit: Minutes }]
`;
  return `${backend("openai", "      providerA: {}", `{ /v1/chat/completions: Completions, /v1/models: Models, /v1/files: Passthrough }`)}${backend("detect", "      providerA: {}", `{ "*": Detect }`)}${backend("claude", "      providerD: {}", `{ /v1/models: Models }`)}${backend("reranker", "      custom: { formats: [{ type: Rerank }] }", `{ /v2/rerank: Rerank }`)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("openai", "openai")}${rule("detect", "detect")}${rule("rerank", "reranker")}${rule("claude", "claude")}
${limit("detect")}${limit("rerank")}`;
}

describe("LLM route types forwarded as they are", { timeout: 60_000 }, () => {
  let fake: FakeProvider;
  let env: LlmEnv;
  const client = (prefix: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });

  before(async () => {
    fake = await startFakeProvider({ name: "prov", apiKey: "sk-provider" });
    env = await startLlmEnv(resources(fake), "/openai/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
  });

  test("Models: the OpenAI client lists the provider's models, which sees its own key", async () => {
    const ids: string[] = [];
    for await (const m of client("openai").models.list()) ids.push(m.id);
    assert.deepEqual(ids, ["prov-large", "prov-small"]);
    const seen = fake.requests.at(-1);
    assert.equal(seen?.method, "GET");
    // The provider's own list at its path, whatever the route's prefix (spec: Models is /v1/models).
    assert.equal(seen?.path, "/v1/models");
    assert.equal(seen?.headers.authorization, "Bearer sk-provider");
  });

  test("Models on an Anthropic provider: its /v1/models with its own key header and API version", async () => {
    // An Anthropic client (anthropic-version): the same family, so its own query and the provider's answer as they are.
    const r = await request(env.port, "/claude/v1/models?limit=5", {
      headers: { "x-api-key": "client", "anthropic-version": "2023-06-01" },
    });
    assert.equal(r.status, 200, r.body);
    const seen = fake.requests.at(-1);
    assert.equal(seen?.path, "/v1/models?limit=5", "the client's query goes along");
    assert.equal(seen?.headers["x-api-key"], "sk-provider");
    assert.ok(typeof seen?.headers["anthropic-version"] === "string");
  });

  test("Passthrough: any other path goes as it is, with the provider's credentials", async () => {
    const r = await request(env.port, "/openai/v1/files?purpose=batch", {
      headers: { authorization: "Bearer client" },
    });
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.body) as { data: { filename: string }[] }).data[0]?.filename, "prov.jsonl");
    const seen = fake.requests.at(-1);
    assert.equal(seen?.path, "/openai/v1/files?purpose=batch");
    assert.equal(seen?.headers.authorization, "Bearer sk-provider");
  });

  test("Detect: forwarded untranslated, and the answer's tokens count against the route's limit", async () => {
    const ask = () =>
      client("detect").chat.completions.create({ model: "m", messages: [{ role: "user", content: "count me" }] });
    // 18 tokens per answer (11 + 7), 30 per minute: two answers spend it.
    assert.equal((await ask()).choices[0]?.message.content, "Hello from prov: count me");
    assert.equal(fake.requests.at(-1)?.path, "/detect/v1/chat/completions");
    await ask();
    await assert.rejects(ask(), (e: unknown) => e instanceof OpenAI.RateLimitError && e.status === 429);
  });

  test("Rerank: the Cohere v2 request reaches the custom provider; its usage counts too", async () => {
    const rerank = () =>
      request(env.port, "/rerank/v2/rerank", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer client" },
        body: JSON.stringify({
          model: "rerank-v3.5",
          query: "envoy gateway",
          documents: ["a cooking recipe", "Envoy is a gateway proxy", { text: "gateway api" }],
          top_n: 2,
        }),
      });
    const r = await rerank();
    assert.equal(r.status, 200, r.body);
    const body = JSON.parse(r.body) as { results: { index: number }[] };
    assert.deepEqual(
      body.results.map((x) => x.index),
      [1, 2],
    );
    const seen = fake.requests.at(-1);
    assert.equal(seen?.path, "/v2/rerank");
    assert.equal(seen?.headers.authorization, "Bearer sk-provider");
    assert.equal(seen?.json?.["top_n"], 2);
    // 23 input tokens per answer, 30 per minute: the third request is refused.
    assert.equal((await rerank()).status, 200);
    assert.equal((await rerank()).status, 429);
  });
});
