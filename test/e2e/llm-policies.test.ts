// AI request policies and token limits through a real Envoy: prompt enrichment (system prompts to the messages
// format's top-level field), defaults (the client wins), overrides, CEL transformations (win over overrides) and model
// aliases reach the provider; promptCaching puts Bedrock cache points in the Converse body before it is signed; a
// `tokens` local rate limit, counted from responses, answers 429 to later requests in the client's format.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const AWS = { accessKeyId: "AKIDCACHE", secretAccessKey: "cache-secret-key", region: "us-west-2" };

function resources(port: number, bedrockPort: number): string {
  return `
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: bedrock, namespace: default }
spec:
  ai:
    provider:
      providerG:
        region: ${AWS.region}
        model: us.anthropic.claude-sonnet-4-20250514-v1:0
        guardrail: { identifier: gr-abc123, version: "2" }
      host: 127.0.0.1
      port: ${bedrockPort}
  policies:
    auth: { cloudA: { secretRef: { name: aws } } }
    ai:
      promptCaching: { minTokens: 10 }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: cached, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /cached } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: bedrock }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: claude, namespace: default }
spec:
  ai:
    provider: { providerD: {}, host: 127.0.0.1, port: ${port} }
  policies:
    ai:
      prompt:
        prepend: [{ role: SYSTEM, content: "You are Sluice." }]
        append: [{ role: USER, content: "(answer briefly)" }]
      defaults:
        - { field: max_tokens, value: 64 }
        - { field: temperature, value: 0.2 }
      overrides:
        - { field: top_p, value: 0.5 }
        - { field: stop, value: ["END"] }
      transformations:
        - { field: stop, expression: "[request.headers['x-stop']]" }
      modelAliases: { fast: claude-haiku-4 }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude }]
---
apiVersion: v1
kind: Secret
metadata: { name: client-keys, namespace: default }
stringData:
  one: ${JSON.stringify(JSON.stringify({ key: "sk-client-1", metadata: { user: "u-42" } }))}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: claude-id, namespace: default }
spec:
  ai:
    provider: { providerD: {}, host: 127.0.0.1, port: ${port} }
  policies:
    ai:
      transformations:
        - { field: user, expression: "apiKey.user + '@' + request.headers['x-team']" }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ident, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: keyed
      matches: [{ path: { type: PathPrefix, value: /ident } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude-id }]
    - name: open
      matches: [{ path: { type: PathPrefix, value: /anon } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude-id }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keyed, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ident, sectionName: keyed }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: client-keys } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: limited, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /limited } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tokens, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: limited }]
  traffic:
    rateLimit:
      local: [{ tokens: 30, unit: Minutes }]
`;
}

describe("AI request policies and token limits", { timeout: 60_000 }, () => {
  let fake: FakeProvider;
  let bedrock: FakeProvider;
  let env: LlmEnv;

  before(async () => {
    fake = await startFakeProvider({ name: "claude" });
    bedrock = await startFakeProvider({ name: "bedrock", aws: AWS });
    env = await startLlmEnv(resources(fake.port, bedrock.port));
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
    await bedrock?.close();
  });

  test("prompt, defaults, overrides, transformations and aliases reach the provider", async () => {
    const client = new OpenAI({
      apiKey: "k",
      baseURL: `${env.baseUrl}/v1`,
      maxRetries: 0,
      defaultHeaders: { "x-stop": "STOP" },
    });
    const r = await client.chat.completions.create({
      model: "fast",
      messages: [{ role: "user", content: "hi" }],
      temperature: 0.9,
    });
    assert.ok(r.choices[0]?.message.content?.startsWith("Hello from claude"));
    const sent = fake.requests.at(-1)?.json ?? {};
    assert.equal(sent.model, "claude-haiku-4", "model alias");
    assert.deepEqual(sent.system, [{ type: "text", text: "You are Sluice." }], "SYSTEM prompt → top-level system");
    const messages = sent.messages as { role: string; content: unknown }[];
    // Consecutive user turns are merged for the messages format; the appended prompt comes last.
    assert.ok(messages.every((m) => m.role === "user"));
    assert.match(JSON.stringify(messages.at(-1)), /\(answer briefly\)"[^"]*$/);
    assert.equal(sent.max_tokens, 64, "default applied");
    assert.equal(sent.temperature, 0.9, "the client's value wins over a default");
    assert.equal(sent.top_p, 0.5, "override");
    assert.deepEqual(sent.stop_sequences, ["STOP"], "transformation wins over the override");
  });

  test("promptCaching and the guardrail: cache points on the system prompt and the second-to-last message, signed with the body", async () => {
    const client = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/cached/v1`, maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: "m",
      messages: [
        { role: "system", content: "You are a careful assistant who answers questions about the weather." },
        { role: "user", content: "What is the weather like in Paris in spring?" },
        { role: "assistant", content: "Mild, often rainy." },
        { role: "user", content: "and today" },
      ],
    });
    // The fake verified SigV4 over the body it got, cache points included, and reports cached prompt tokens.
    assert.equal(r.choices[0]?.message.content, "Hello from bedrock: and today");
    assert.equal(r.usage?.prompt_tokens_details?.cached_tokens, 5);
    const sent = bedrock.requests.at(-1)?.json ?? {};
    const cp = { cachePoint: { type: "default" } };
    assert.deepEqual((sent.system as unknown[]).at(-1), cp);
    const messages = sent.messages as { content: unknown[] }[];
    assert.deepEqual(messages[1]?.content.at(-1), cp);
    assert.equal(messages.filter((m) => m.content.some((b) => JSON.stringify(b) === JSON.stringify(cp))).length, 1);
    // providerG's guardrail rides along on every Converse request, inside the signed body.
    assert.deepEqual(sent.guardrailConfig, { guardrailIdentifier: "gr-abc123", guardrailVersion: "2" });
  });

  test("transformations read the request's identity: the API key's metadata becomes the provider's user id", async () => {
    const ask = (path: string, apiKey: string) =>
      new OpenAI({
        apiKey,
        baseURL: `${env.baseUrl}${path}/v1`,
        maxRetries: 0,
        defaultHeaders: { "x-team": "red" },
      }).chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    await ask("/ident", "sk-client-1");
    const sent = fake.requests.at(-1)?.json ?? {};
    assert.deepEqual(
      sent.metadata,
      { user_id: "u-42@red" },
      "chat `user` (from apiKey.user) → messages metadata.user_id",
    );
    await assert.rejects(ask("/ident", "sk-wrong"), (e: unknown) => e instanceof OpenAI.AuthenticationError);
    // No authentication on the route: `apiKey` is absent, the expression fails, and the field is left as it was.
    const before = fake.requests.length;
    await ask("/anon", "whatever");
    assert.equal(fake.requests.length, before + 1);
    assert.equal(fake.requests.at(-1)?.json?.metadata, undefined);
  });

  test("a tokens limit answers 429 once the tokens counted from responses are spent", async () => {
    const client = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/limited/v1`, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
    // 30 tokens a minute; each answer uses 18: the second request still starts, the third does not.
    await ask();
    await ask();
    await assert.rejects(ask(), (e: unknown) => e instanceof OpenAI.RateLimitError && e.status === 429);
    // Streams count too (usage arrives at the end): the unlimited route is unaffected.
    const free = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
    const ok = await free.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
    assert.ok(ok.choices[0]?.message.content);
  });
});
