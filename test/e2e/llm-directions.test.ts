// The other directions end to end through a real Envoy, each official SDK against a fake speaking the provider's real
// wire format: messages (and token counting) with `@anthropic-ai/sdk`, responses and embeddings with `openai`, Bedrock
// Converse with SigV4 verified by the fake, Gemini generateContent, and the Azure OpenAI URL form.

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

const ROUTES = `
      routes:
        /v1/messages: Messages
        /v1/messages/count_tokens: MessagesTokenCount
        /v1/chat/completions: Completions
        /v1/responses: Responses
        /v1/embeddings: Embeddings`;

function backend(name: string, provider: string, extraPolicies = ""): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
${provider}
  policies:
    ai:${ROUTES}
${extraPolicies}`;
}

function resources(f: Record<string, FakeProvider>): string {
  const rule = (prefix: string, name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${prefix} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { openai: sk-openai, anthropic: sk-ant, azure: az-key, gemini: g-key }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
${backend("openai", `      providerA: {}\n      host: 127.0.0.1\n      port: ${f.openai?.port}`, "    auth: { secretRef: { name: keys, key: openai } }")}
${backend("claude", `      providerD: {}\n      host: 127.0.0.1\n      port: ${f.claude?.port}`, "    auth: { secretRef: { name: keys, key: anthropic } }")}
${backend("bedrock", `      providerG: { region: ${AWS.region}, model: anthropic.claude-3-haiku-20240307-v1:0 }\n      host: 127.0.0.1\n      port: ${f.bedrock?.port}`, "    auth: { cloudA: { secretRef: { name: aws } } }")}
${backend("gemini", `      providerE: { model: gemini-2.0-flash }\n      host: 127.0.0.1\n      port: ${f.gemini?.port}`, "    auth: { secretRef: { name: keys, key: gemini } }")}
${backend("azure", `      providerB: { endpoint: https://myres.openai.azure.com/, deploymentName: gpt4o-dep, apiVersion: 2024-10-21 }\n      host: 127.0.0.1\n      port: ${f.azure?.port}`, "    auth: { secretRef: { name: keys, key: azure } }")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("openai", "openai")}${rule("claude", "claude")}${rule("bedrock", "bedrock")}${rule("gemini", "gemini")}${rule("azure", "azure")}
`;
}

describe("LLM directions end to end", { timeout: 60_000 }, () => {
  const fakes: Record<string, FakeProvider> = {};
  let env: LlmEnv;
  const openai = (prefix: string) =>
    new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });
  const anthropic = (prefix: string) =>
    new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/${prefix}`, maxRetries: 0 });

  before(async () => {
    fakes.openai = await startFakeProvider({ name: "openai", apiKey: "sk-openai" });
    fakes.claude = await startFakeProvider({ name: "claude", apiKey: "sk-ant" });
    fakes.bedrock = await startFakeProvider({ name: "bedrock", aws: AWS });
    fakes.gemini = await startFakeProvider({ name: "gemini", apiKey: "g-key" });
    fakes.azure = await startFakeProvider({ name: "azure", apiKey: "az-key" });
    env = await startLlmEnv(resources(fakes), "/openai/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f.close();
  });

  test("messages client → messages provider, and token counting", async () => {
    const c = anthropic("claude");
    const m = await c.messages.create({
      model: "claude-sonnet-4",
      max_tokens: 30,
      system: "Be brief.",
      messages: [{ role: "user", content: "hello" }],
    });
    assert.equal(m.type, "message");
    assert.deepEqual(m.content[0], { type: "text", text: "Hello from claude: hello" });
    assert.equal(m.usage.output_tokens, 7);
    assert.equal(fakes.claude?.requests.at(-1)?.headers["x-api-key"], "sk-ant");

    const count = await c.messages.countTokens({
      model: "claude-sonnet-4",
      messages: [{ role: "user", content: "hi" }],
    });
    assert.ok(count.input_tokens > 0);
    assert.equal(fakes.claude?.requests.at(-1)?.path, "/v1/messages/count_tokens");
  });

  test("messages client → chat-completions provider, streamed event by event", async () => {
    const c = anthropic("openai");
    const m = await c.messages.create({
      model: "gpt-4o",
      max_tokens: 30,
      messages: [{ role: "user", content: "hey" }],
    });
    assert.deepEqual(m.content[0], { type: "text", text: "Hello from openai: hey" });
    assert.equal(m.stop_reason, "end_turn");
    assert.equal(fakes.openai?.requests.at(-1)?.path, "/v1/chat/completions");
    assert.equal(fakes.openai?.requests.at(-1)?.headers.authorization, "Bearer sk-openai");

    const stream = c.messages.stream({
      model: "gpt-4o",
      max_tokens: 30,
      messages: [{ role: "user", content: "flow" }],
    });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    const final = await stream.finalMessage();
    assert.deepEqual(final.content[0], { type: "text", text: "Hello from openai: flow" });
    assert.equal(types[0], "message_start");
    assert.equal(types.at(-1), "message_stop");
    assert.ok(types.filter((t) => t === "content_block_delta").length > 2);
  });

  test("responses client → responses provider; embeddings", async () => {
    const c = openai("openai");
    const r = await c.responses.create({ model: "gpt-4o", input: "what's up" });
    assert.equal(r.output_text, "Hello from openai: what's up");
    assert.equal(fakes.openai?.requests.at(-1)?.path, "/v1/responses");

    const e = await c.embeddings.create({ model: "text-embedding-3-small", input: ["a", "b"] });
    assert.equal(e.data.length, 2);
    assert.equal(fakes.openai?.requests.at(-1)?.path, "/v1/embeddings");
  });

  test("responses client → messages provider is refused in the responses format", async () => {
    await assert.rejects(
      openai("claude").responses.create({ model: "m", input: "x" }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 501,
    );
  });

  test("chat completions → Bedrock Converse, SigV4 verified by the provider, buffered and streamed", async () => {
    const c = openai("bedrock");
    const r = await c.chat.completions.create({ model: "x", messages: [{ role: "user", content: "aws" }] });
    assert.equal(r.choices[0]?.message.content, "Hello from bedrock: aws");
    const seen = fakes.bedrock?.requests.at(-1);
    assert.equal(seen?.path, "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse");
    assert.match(
      String(seen?.headers.authorization),
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/bedrock/,
    );

    const stream = await c.chat.completions.create({
      model: "x",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let total: number | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) total = chunk.usage.total_tokens;
    }
    assert.equal(text, "Hello from bedrock: stream");
    assert.equal(total, 18);
    assert.equal(
      fakes.bedrock?.requests.at(-1)?.path,
      "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
    );
  });

  test("messages client → Bedrock Converse", async () => {
    const m = await anthropic("bedrock").messages.create({
      model: "x",
      max_tokens: 20,
      messages: [{ role: "user", content: "via converse" }],
    });
    assert.deepEqual(m.content[0], { type: "text", text: "Hello from bedrock: via converse" });
  });

  test("chat completions → Gemini generateContent, buffered and streamed", async () => {
    const c = openai("gemini");
    const r = await c.chat.completions.create({ model: "x", messages: [{ role: "user", content: "gem" }] });
    assert.equal(r.choices[0]?.message.content, "Hello from gemini: gem");
    assert.equal(fakes.gemini?.requests.at(-1)?.path, "/v1beta/models/gemini-2.0-flash:generateContent");
    assert.equal(fakes.gemini?.requests.at(-1)?.headers["x-goog-api-key"], "g-key");
    const stream = await c.chat.completions.create({
      model: "x",
      messages: [{ role: "user", content: "s" }],
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from gemini: s");
    assert.equal(fakes.gemini?.requests.at(-1)?.path, "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse");
  });

  test("Azure OpenAI: deployment URL form, api-version and api-key", async () => {
    const r = await openai("azure").chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "az" }],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from azure: az");
    const seen = fakes.azure?.requests.at(-1);
    assert.equal(seen?.path, "/openai/deployments/gpt4o-dep/chat/completions?api-version=2024-10-21");
    assert.equal(seen?.headers["api-key"], "az-key");
  });
});
