// Translation fidelity end to end: the official SDKs through a real Envoy and Sluice to fakes of Anthropic, Bedrock
// Converse (SigV4 verified) and Gemini. What the provider receives carries the client's structured output, reasoning
// setting, service tier and log probabilities under the provider's own names; what Sluice cannot carry is a 400 the
// SDK raises, naming the field, and the provider is not called.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const AWS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "eu-west-1",
};

function backend(name: string, provider: string, auth: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
${provider}
  policies:
    ai:
      routes:
        /v1/messages: Messages
        /v1/chat/completions: Completions
        /v1/responses: Responses
${auth}`;
}

function resources(f: Record<string, FakeProvider>): string {
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { anthropic: sk-ant, gemini: g-key, openai: sk-openai }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
${backend("claude", `      providerD: {}\n      host: 127.0.0.1\n      port: ${f.claude?.port}`, "    auth: { secretRef: { name: keys, key: anthropic } }")}
${backend("bedrock", `      providerG: { region: ${AWS.region}, model: anthropic.claude-sonnet-4-5-20250929-v1:0 }\n      host: 127.0.0.1\n      port: ${f.bedrock?.port}`, "    auth: { cloudA: { secretRef: { name: aws } } }")}
${backend("gemini", `      providerE: { model: gemini-2.5-flash }\n      host: 127.0.0.1\n      port: ${f.gemini?.port}`, "    auth: { secretRef: { name: keys, key: gemini } }")}
${backend("openai", `      providerA: {}\n      host: 127.0.0.1\n      port: ${f.openai?.port}`, "    auth: { secretRef: { name: keys, key: openai } }")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("claude")}${rule("bedrock")}${rule("gemini")}${rule("openai")}
`;
}

const schema = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
  additionalProperties: false,
};

describe("LLM translation fidelity end to end", { timeout: 60_000 }, () => {
  const fakes: Record<string, FakeProvider> = {};
  let env: LlmEnv;
  const openai = (prefix: string) =>
    new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });
  const seen = (name: string) => fakes[name]?.requests.at(-1)?.json ?? {};

  before(async () => {
    fakes.claude = await startFakeProvider({ name: "claude", apiKey: "sk-ant" });
    fakes.bedrock = await startFakeProvider({ name: "bedrock", aws: AWS });
    fakes.gemini = await startFakeProvider({ name: "gemini", apiKey: "g-key" });
    fakes.openai = await startFakeProvider({ name: "openai", apiKey: "sk-openai" });
    env = await startLlmEnv(resources(fakes), "/claude/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f.close();
  });

  test("chat client → Messages: json_schema, reasoning_effort and service_tier arrive as Anthropic's fields", async () => {
    const r = await openai("claude").chat.completions.create({
      model: "claude-sonnet-4-5",
      messages: [{ role: "user", content: "Paris?" }],
      response_format: { type: "json_schema", json_schema: { name: "city", schema, strict: true } },
      reasoning_effort: "low",
      service_tier: "default",
    });
    assert.match(r.choices[0]?.message.content ?? "", /Hello from claude/);
    const body = seen("claude");
    assert.deepEqual(body.output_config, { format: { type: "json_schema", schema } });
    assert.deepEqual(body.thinking, { type: "enabled", budget_tokens: 2048 });
    assert.equal(body.max_tokens, 2048 + 4096);
    assert.equal(body.service_tier, "standard_only");
  });

  test("chat client → Converse (streamed): the schema as JSON text in outputConfig, Claude's thinking", async () => {
    const stream = await openai("bedrock").chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "Paris?" }],
      response_format: { type: "json_schema", json_schema: { name: "city", schema } },
      reasoning_effort: "medium",
      service_tier: "flex",
      stream: true,
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.match(text, /Hello from bedrock/);
    const body = seen("bedrock");
    assert.deepEqual(body.outputConfig, {
      textFormat: { type: "json_schema", structure: { jsonSchema: { schema: JSON.stringify(schema), name: "city" } } },
    });
    assert.deepEqual(body.additionalModelRequestFields, { thinking: { type: "enabled", budget_tokens: 8192 } });
    assert.deepEqual(body.serviceTier, { type: "flex" });
    assert.match(fakes.bedrock?.requests.at(-1)?.path ?? "", /converse-stream$/);
  });

  test("chat client → generateContent: responseJsonSchema, thinkingConfig, seed, logprobs", async () => {
    const r = await openai("gemini").chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "Paris?" }],
      response_format: { type: "json_schema", json_schema: { name: "city", schema } },
      reasoning_effort: "high",
      seed: 7,
      logprobs: true,
      top_logprobs: 2,
    });
    assert.match(r.choices[0]?.message.content ?? "", /Hello from gemini/);
    const gc = seen("gemini").generationConfig as Record<string, unknown>;
    assert.deepEqual(gc, {
      seed: 7,
      responseLogprobs: true,
      logprobs: 2,
      responseMimeType: "application/json",
      responseJsonSchema: schema,
      thinkingConfig: { thinkingBudget: 16384, includeThoughts: true },
    });
  });

  test("what cannot be carried is a 400 naming the field, and the provider is not called", async () => {
    const before = fakes.claude?.requests.length;
    await assert.rejects(
      openai("claude").chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        frequency_penalty: 0.5,
      }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "frequency_penalty",
    );
    await assert.rejects(
      openai("bedrock").chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        logprobs: true,
      }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "logprobs",
    );
    assert.equal(fakes.claude?.requests.length, before);
  });

  test("messages client with a server tool → chat provider: refused naming the tool; thinking → reasoning_effort", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/openai`, maxRetries: 0 });
    await assert.rejects(
      c.messages.create({
        model: "gpt-5",
        max_tokens: 100,
        messages: [{ role: "user", content: "news?" }],
        tools: [{ type: "web_search_20250305", name: "web_search" }],
      }),
      (e: unknown) => e instanceof Anthropic.BadRequestError && /web_search_20250305/.test(e.message),
    );
    const m = await c.messages.create({
      model: "gpt-5",
      max_tokens: 20000,
      messages: [{ role: "user", content: "think" }],
      thinking: { type: "enabled", budget_tokens: 10000 },
    });
    assert.equal(m.type, "message");
    assert.equal(seen("openai").reasoning_effort, "medium");
  });
});
