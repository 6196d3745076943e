// Clients of other formats to a provider that speaks only OpenAI's Responses API (a custom provider with a Responses
// format), through a real Envoy: `@anthropic-ai/sdk` (messages → chat → Responses) and `openai` chat completions,
// buffered and streamed, a tool loop included, against a fake that checks what the Responses API checks (input item
// roles, function call outputs answering earlier calls, flat function tools). A streamed answer reassembled by the SDK
// equals the buffered one.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

function resources(port: number): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: resp, namespace: default }
spec:
  ai:
    provider:
      custom: { formats: [{ type: Responses, path: /v1/responses }] }
      host: 127.0.0.1
      port: ${port}
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/messages: Messages, /v1/chat/completions: Completions }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /resp } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: resp }]
`;
}

const tools = [
  {
    name: "get_weather",
    description: "Weather of a city",
    input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] },
  },
];

describe("a Responses-only provider serves messages and chat completions clients", { timeout: 60_000 }, () => {
  let fake: FakeProvider;
  let env: LlmEnv;
  const anthropic = () => new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/resp`, maxRetries: 0 });

  before(async () => {
    fake = await startFakeProvider({ name: "resp" });
    env = await startLlmEnv(resources(fake.port), "/resp/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
  });

  test("messages with tools: the call comes back as tool_use; its result, sent back, answers it", async () => {
    const first = await anthropic().messages.create({
      model: "gpt-5",
      max_tokens: 512,
      system: "Be brief.",
      tools,
      messages: [{ role: "user", content: "Weather in Paris?" }],
    });
    assert.equal(first.stop_reason, "tool_use");
    const use = first.content.find((b) => b.type === "tool_use");
    assert.deepEqual(use?.input, { city: "Paris" });
    assert.equal(first.usage.input_tokens, 11);
    const sent = fake.requests.at(-1);
    assert.equal(sent?.path, "/v1/responses");
    assert.equal(sent?.headers.authorization, "Bearer sk-provider");
    assert.deepEqual(sent?.json?.input, [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Weather in Paris?" },
    ]);
    assert.equal(sent?.json?.store, false);
    assert.equal((sent?.json?.tools as { name: string }[] | undefined)?.[0]?.name, "get_weather");
    const second = await anthropic().messages.create({
      model: "gpt-5",
      max_tokens: 512,
      tools,
      messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: use?.type === "tool_use" ? use.id : "", content: "18C" }],
        },
      ],
    });
    assert.equal(second.stop_reason, "end_turn");
    const items = fake.requests.at(-1)?.json?.input as { type?: string; call_id?: string }[];
    assert.deepEqual(
      items.filter((i) => i.type !== undefined).map((i) => [i.type, i.call_id]),
      [
        ["function_call", "call_fake01"],
        ["function_call_output", "call_fake01"],
      ],
    );
  });

  test("messages streamed: the SDK's reassembled message equals the buffered one", async () => {
    const params = {
      model: "gpt-5",
      max_tokens: 256,
      tools,
      messages: [{ role: "user" as const, content: "stream to me" }],
    };
    const buffered = await anthropic().messages.create(params);
    const streamed = await anthropic().messages.stream(params).finalMessage();
    assert.equal(fake.requests.at(-1)?.json?.stream, true);
    assert.deepEqual(streamed.content, buffered.content);
    assert.equal(streamed.stop_reason, buffered.stop_reason);
    assert.equal(streamed.usage.output_tokens, buffered.usage.output_tokens);
    assert.equal((streamed.content[0] as { text?: string }).text, "Hello from resp: stream to me");
  });

  test("chat completions streamed and buffered agree; stop sequences are refused naming the field", async () => {
    const client = new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/resp/v1`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "hi there" }];
    const buffered = await client.chat.completions.create({ model: "gpt-5", messages });
    const stream = await client.chat.completions.create({
      model: "gpt-5",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let total: number | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      if (c.usage) total = c.usage.total_tokens;
    }
    assert.equal(text, buffered.choices[0]?.message.content);
    assert.equal(total, buffered.usage?.total_tokens);
    const before = fake.requests.length;
    await assert.rejects(
      client.chat.completions.create({ model: "gpt-5", messages, stop: ["END"] }),
      (e: unknown) => e instanceof OpenAI.BadRequestError && /stop sequences/.test(e.message) && e.param === "stop",
    );
    assert.equal(fake.requests.length, before);
  });
});
