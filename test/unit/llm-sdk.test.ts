// The official SDKs parse Sluice's translated output: streams are accumulated by the SDKs' own stream helpers, which
// fail on a malformed event order, a bad tool-call delta or a missing terminal event.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { encodeJsonEvent } from "../../src/llm/codec/eventstream.js";
import type { ChatResponse } from "../../src/llm/formats/chat-completions.js";
import { findDirection, translateError } from "../../src/llm/registry.js";
import type { RequestMeta, TranslateContext } from "../../src/llm/translate/context.js";

const golden = resolve(import.meta.dirname, "../../../test/golden/llm");
let n = 0;
const ctx: TranslateContext = { id: (p) => `${p}${++n}`, now: () => 1700000000 };

/** Runs a provider stream through a direction's translator, in 5-byte pieces, and returns the client bytes. */
function translateStream(
  client: Parameters<typeof findDirection>[0],
  provider: Parameters<typeof findDirection>[1],
  meta: RequestMeta,
  input: Uint8Array,
): Uint8Array {
  const t = findDirection(client, provider)!.stream!(meta, ctx);
  const parts: Uint8Array[] = [];
  for (let i = 0; i < input.length; i += 5) parts.push(t.push(input.subarray(i, i + 5)));
  parts.push(t.end());
  return Buffer.concat(parts);
}

function sseFile(path: string): { meta: RequestMeta; bytes: Uint8Array } {
  const text = readFileSync(resolve(golden, path), "utf8");
  const nl = text.indexOf("\n");
  return { meta: JSON.parse(text.slice(6, nl)) as RequestMeta, bytes: Buffer.from(text.slice(nl + 1)) };
}

function fakeFetch(body: Uint8Array | string, status = 200, contentType = "text/event-stream"): typeof fetch {
  return (async () => new Response(body, { status, headers: { "content-type": contentType } })) as typeof fetch;
}

test("openai SDK accumulates a chat-completions stream translated from Anthropic events (text, tool call, usage)", async () => {
  const { meta, bytes } = sseFile("chat-completions--messages/stream-text-tool-use.in.txt");
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("chat-completions", "messages", meta, bytes)),
  });
  const stream = client.chat.completions.stream({
    model: "claude-sonnet-4-5",
    messages: [{ role: "user", content: "hi" }],
    stream_options: { include_usage: true },
  });
  const final = await stream.finalChatCompletion();
  const choice = final.choices[0]!;
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.content, "Okay, let's check the weather — ☀️ for San Francisco:");
  assert.equal(choice.message.tool_calls?.[0]?.type, "function");
  const call = choice.message.tool_calls![0]! as { function: { name: string; arguments: string } };
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { location: "San Francisco, CA" });
  assert.equal(final.usage?.prompt_tokens, 572);
});

test("openai SDK accumulates a chat-completions stream translated from ConverseStream (binary frames)", async () => {
  const frames = Buffer.concat([
    encodeJsonEvent("messageStart", { role: "assistant" }),
    encodeJsonEvent("contentBlockStart", { contentBlockIndex: 0, start: { toolUse: { toolUseId: "t1", name: "f" } } }),
    encodeJsonEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { toolUse: { input: '{"a":' } } }),
    encodeJsonEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { toolUse: { input: "1}" } } }),
    encodeJsonEvent("contentBlockStop", { contentBlockIndex: 0 }),
    encodeJsonEvent("messageStop", { stopReason: "tool_use" }),
    encodeJsonEvent("metadata", { usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 } }),
  ]);
  const meta = { model: "m", stream: true, includeUsage: true };
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("chat-completions", "converse", meta, frames)),
  });
  const final = await client.chat.completions
    .stream({ model: "m", messages: [{ role: "user", content: "hi" }] })
    .finalChatCompletion();
  const call = final.choices[0]!.message.tool_calls![0]! as { id: string; function: { arguments: string } };
  assert.equal(call.id, "t1");
  assert.deepEqual(JSON.parse(call.function.arguments), { a: 1 });
  assert.equal(final.usage?.total_tokens, 12);
});

test("anthropic SDK accumulates a Messages stream translated from chat-completions chunks", async () => {
  const { bytes } = sseFile("messages--chat-completions/stream-text-tool-calls.in.txt");
  const meta = { model: "gpt-4o", stream: true, includeUsage: true };
  const client = new Anthropic({
    apiKey: "k",
    baseURL: "http://sluice.test",
    fetch: fakeFetch(translateStream("messages", "chat-completions", meta, bytes)),
  });
  const msg = await client.messages
    .stream({ model: "gpt-4o", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    .finalMessage();
  assert.equal(msg.stop_reason, "tool_use");
  assert.deepEqual(
    msg.content.map((b) => (b.type === "text" ? b.text : b.type === "tool_use" ? b.input : b.type)),
    ["Checking both cities.", { location: "Paris" }, { location: "Tokyo" }],
  );
  assert.equal(msg.usage.output_tokens, 40);
});

test("anthropic SDK accumulates a Messages stream translated from ConverseStream (thinking, text, tool use)", async () => {
  const input = JSON.parse(
    readFileSync(resolve(golden, "messages--converse/stream-reasoning-text-tool.in.json"), "utf8"),
  ) as {
    meta: RequestMeta;
    events: { type: string; body: unknown }[];
  };
  const frames = Buffer.concat(input.events.map((e) => encodeJsonEvent(e.type, e.body)));
  const client = new Anthropic({
    apiKey: "k",
    baseURL: "http://sluice.test",
    fetch: fakeFetch(translateStream("messages", "converse", input.meta, frames)),
  });
  const msg = await client.messages
    .stream({ model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    .finalMessage();
  assert.equal(msg.stop_reason, "tool_use");
  assert.deepEqual(
    msg.content.map((b) => b.type),
    ["thinking", "text", "tool_use"],
  );
  const thinking = msg.content[0]! as { thinking: string; signature: string };
  assert.equal(thinking.thinking, "User wants weather.");
  assert.equal(thinking.signature, "EqoBCkgIARAB");
  assert.equal(msg.usage.cache_read_input_tokens, 1200);
});

test("openai SDK accumulates a Responses stream translated from chat-completions chunks", async () => {
  const { meta, bytes } = sseFile("responses--chat-completions/stream-text-tool-calls.in.txt");
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("responses", "chat-completions", meta, bytes)),
  });
  const stream = client.responses.stream({ model: "gpt-4.1", input: "hi" });
  const r = await stream.finalResponse();
  assert.equal(r.status, "completed");
  assert.equal(r.output_text, "Checking both cities.");
  const calls = r.output.filter((o) => o.type === "function_call");
  assert.deepEqual(
    calls.map((c) => JSON.parse(c.arguments) as unknown),
    [{ location: "Paris" }, { location: "Tokyo" }],
  );
  assert.equal(r.usage?.input_tokens, 82);
});

test("SDK error classes: a Bedrock throttle becomes openai RateLimitError, an OpenAI 401 becomes anthropic AuthenticationError", async () => {
  const e1 = translateError("chat-completions", 429, '{"message":"Too many requests"}', {
    "x-amzn-errortype": "ThrottlingException",
  });
  const openai = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    maxRetries: 0,
    fetch: fakeFetch(JSON.stringify(e1.body), e1.status, "application/json"),
  });
  await assert.rejects(
    openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
    (err: unknown) => {
      assert.ok(err instanceof OpenAI.RateLimitError);
      assert.match(err.message, /Too many requests/);
      return true;
    },
  );
  const e2 = translateError(
    "messages",
    401,
    '{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}',
  );
  const anthropic = new Anthropic({
    apiKey: "k",
    baseURL: "http://sluice.test",
    maxRetries: 0,
    fetch: fakeFetch(JSON.stringify(e2.body), e2.status, "application/json"),
  });
  await assert.rejects(
    anthropic.messages.create({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }] }),
    (err: unknown) => {
      assert.ok(err instanceof Anthropic.AuthenticationError);
      assert.equal((err.error as { error: { type: string } }).error.type, "authentication_error");
      return true;
    },
  );
});

test("openai SDK decodes embeddings translated from Gemini with its default base64 encoding", async () => {
  const d = findDirection("embeddings", "gemini-embed")!;
  let sent: unknown;
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: (async (_url: string, init: RequestInit) => {
      const req = d.request(JSON.parse(String(init.body)), undefined, ctx);
      assert.ok(req.ok);
      sent = req.body;
      const res = d.response({ embeddings: [{ values: [0.5, -1, 0.25] }, { values: [1, 2, 3] }] }, req.meta, ctx);
      assert.ok(res.ok);
      return new Response(JSON.stringify(res.body), { headers: { "content-type": "application/json" } });
    }) as typeof fetch,
  });
  const r = await client.embeddings.create({ model: "gemini-embedding-001", input: ["a", "b"] });
  assert.deepEqual(sent, {
    requests: [
      { model: "models/gemini-embedding-001", content: { parts: [{ text: "a" }] } },
      { model: "models/gemini-embedding-001", content: { parts: [{ text: "b" }] } },
    ],
  });
  assert.deepEqual(
    r.data.map((x) => x.embedding),
    [
      [0.5, -1, 0.25],
      [1, 2, 3],
    ],
  );
});

/** The buffered translation of the same answer, for comparing a stream reassembled by an SDK with it. */
function buffered(
  client: Parameters<typeof findDirection>[0],
  provider: Parameters<typeof findDirection>[1],
  file: string,
) {
  const input = JSON.parse(readFileSync(resolve(golden, file), "utf8")) as { meta: RequestMeta; body: unknown };
  const r = findDirection(client, provider)!.response(input.body, input.meta, ctx);
  assert.ok(r.ok);
  return r.body as Record<string, unknown>;
}

test("anthropic SDK: a chat provider's reasoning stream reassembles to the buffered translation (thinking, usage with cache)", async () => {
  const { meta, bytes } = sseFile("messages--chat-completions/stream-reasoning-content-cached.in.txt");
  const client = new Anthropic({
    apiKey: "k",
    baseURL: "http://sluice.test",
    fetch: fakeFetch(translateStream("messages", "chat-completions", meta, bytes)),
  });
  const msg = await client.messages
    .stream({ model: "deepseek-reasoner", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    .finalMessage();
  const want = buffered(
    "messages",
    "chat-completions",
    "messages--chat-completions/response-reasoning-content-cached.in.json",
  );
  assert.deepEqual(msg.content, want.content);
  assert.deepEqual({ ...msg.usage }, want.usage);
  assert.equal(msg.stop_reason, want.stop_reason);
});

test("openai SDK: Anthropic thinking streamed to a chat client carries the same reasoning and usage as buffered", async () => {
  const { meta, bytes } = sseFile("chat-completions--messages/stream-thinking-cache.in.txt");
  const out = Buffer.from(translateStream("chat-completions", "messages", meta, bytes)).toString("utf8");
  type Delta = { reasoning_content?: string; thinking_blocks?: { type: string }[] };
  const chunks = out
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)) as { choices: { delta: Delta }[] });
  // The SDK's accumulator keeps only OpenAI's fields; reasoning is read from the chunks as a client would.
  const reasoning = chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? "").join("");
  const blocks = chunks.flatMap((c) => c.choices[0]?.delta.thinking_blocks ?? []);
  const client = new OpenAI({ apiKey: "k", baseURL: "http://sluice.test/v1", fetch: fakeFetch(out) });
  const final = await client.chat.completions
    .stream({ model: "m", messages: [{ role: "user", content: "hi" }], stream_options: { include_usage: true } })
    .finalChatCompletion();
  const input = JSON.parse(
    readFileSync(resolve(golden, "chat-completions--messages/response-thinking-tool-use.in.json"), "utf8"),
  ) as { body: { content: Record<string, unknown>[]; usage: unknown } };
  // The buffered answer of the same thinking blocks (without the buffered case's text and tool call).
  const body = { ...input.body, content: input.body.content.slice(0, 2), stop_reason: "end_turn" };
  const want = findDirection("chat-completions", "messages")!.response(body, meta, ctx);
  assert.ok(want.ok);
  const wm = (want.body as unknown as ChatResponse).choices[0]!.message;
  assert.equal(reasoning, wm.reasoning_content);
  assert.deepEqual(
    blocks.map((b) => b.type),
    wm.thinking_blocks?.map((b) => b.type),
  );
  assert.equal(final.choices[0]!.message.content, "It is 18C.");
  // The stream's usage is the same convention as the buffered one, for the stream's own counts.
  assert.deepEqual(final.usage, {
    prompt_tokens: 1250,
    completion_tokens: 90,
    total_tokens: 1340,
    prompt_tokens_details: { cached_tokens: 1000, cache_creation_tokens: 200 },
  });
});

test("openai SDK: a Responses stream from a chat provider with reasoning reassembles to the buffered translation", async () => {
  const { meta, bytes } = sseFile("responses--chat-completions/stream-reasoning-blocks-cache.in.txt");
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("responses", "chat-completions", meta, bytes)),
  });
  const stream = client.responses.stream({ model: "m", input: "hi" });
  const final = await stream.finalResponse();
  const want = buffered(
    "responses",
    "chat-completions",
    "responses--chat-completions/response-reasoning-blocks.in.json",
  );
  const strip = (o: unknown) =>
    JSON.parse(JSON.stringify(o, (k, v) => (k === "id" || k === "created_at" || k === "parsed" ? undefined : v)));
  assert.deepEqual(strip(final.output), strip(want.output));
  assert.deepEqual(final.usage, want.usage);
});

test("anthropic SDK: thinking blocks with signatures from a chat provider come out whole (signature, redacted data)", async () => {
  const { meta, bytes } = sseFile("messages--chat-completions/stream-thinking-blocks-signature.in.txt");
  const client = new Anthropic({
    apiKey: "k",
    baseURL: "http://sluice.test",
    fetch: fakeFetch(translateStream("messages", "chat-completions", meta, bytes)),
  });
  const msg = await client.messages
    .stream({ model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] })
    .finalMessage();
  assert.deepEqual(msg.content.slice(0, 2), [
    { type: "thinking", thinking: "Mild spring.", signature: "EqQBsig" },
    { type: "redacted_thinking", data: "EmwKredacted" },
  ]);
  assert.equal(msg.usage.cache_creation_input_tokens, 200);
  assert.equal(msg.usage.input_tokens, 100);
});

test("openai SDK: a structured-output refusal streamed to a Responses client reassembles to the buffered refusal", async () => {
  const { meta, bytes } = sseFile("responses--chat-completions/stream-structured-refusal.in.txt");
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("responses", "chat-completions", meta, bytes)),
  });
  const final = await client.responses.stream({ model: "gpt-4o", input: "hi" }).finalResponse();
  const content = final.output[0]?.type === "message" ? final.output[0].content : [];
  assert.deepEqual(
    content.map((c) => (c.type === "refusal" ? { type: c.type, refusal: c.refusal } : c)),
    [{ type: "refusal", refusal: "I'm sorry, I cannot assist." }],
  );
  assert.equal(final.status, "completed");
});

test("openai SDK: Gemini log probabilities streamed reassemble to the buffered ones", async () => {
  const { meta, bytes } = sseFile("chat-completions--generate-content/stream-logprobs.in.txt");
  const client = new OpenAI({
    apiKey: "k",
    baseURL: "http://sluice.test/v1",
    fetch: fakeFetch(translateStream("chat-completions", "generate-content", meta, bytes)),
  });
  const final = await client.chat.completions
    .stream({ model: "m", messages: [{ role: "user", content: "hi" }], logprobs: true })
    .finalChatCompletion();
  const want = buffered(
    "chat-completions",
    "generate-content",
    "chat-completions--generate-content/response-logprobs.in.json",
  );
  const wantChoice = (want.choices as ChatResponse["choices"])[0]!;
  const got = final.choices[0]!.logprobs?.content ?? [];
  assert.deepEqual(
    got.map((t) => [t.token, t.logprob, t.bytes]),
    (wantChoice.logprobs?.content ?? []).map((t) => [t.token, t.logprob, t.bytes]),
  );
  assert.equal(final.choices[0]!.message.content, wantChoice.message.content);
});
