// A local fake LLM provider speaking the real wire formats, written from the providers' public API documentation:
// OpenAI chat completions / responses / embeddings (Bearer key), Anthropic messages + count_tokens (x-api-key,
// anthropic-version), Bedrock Converse / ConverseStream (SigV4 verified, binary event stream) and Gemini
// generateContent / streamGenerateContent (x-goog-api-key), and Vertex AI's URL form of the latter
// (/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:..., OAuth Bearer token). Its answers
// name the provider, so tests see who served.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { encodeJsonEvent } from "../../src/llm/codec/eventstream.js";
import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { verifySigV4 } from "./sigv4-verify.js";

export interface FakeRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  readonly json: Record<string, unknown> | undefined;
}

export interface FakeProviderOptions {
  /** Name put in answers ("Hello from <name>"). */
  readonly name: string;
  /** Expected credentials: OpenAI/Azure/Anthropic/Gemini key, or AWS keys for SigV4. */
  readonly apiKey?: string;
  /** SigV4: the one key accepted, or the keys an issuer (the fake STS) gave out, session tokens included. */
  readonly aws?:
    | (AwsCredentials & { readonly region: string })
    | { readonly region: string; readonly lookup: (accessKeyId: string) => AwsCredentials | undefined };
  /** Vertex AI: whether a Bearer token is valid (Google's token endpoint issued it). */
  readonly bearer?: (token: string) => boolean;
  /**
   * A path prefix the provider is mounted under (`/google`), as behind a proxy or an AI gateway: it answers there only
   * (404 elsewhere), its own API after it. SigV4 is checked over the whole path received.
   */
  readonly mount?: string;
}

export interface FakeProvider {
  readonly name: string;
  readonly port: number;
  readonly requests: FakeRequest[];
  /** When set, every request gets this status with a provider-style error body. */
  failWith: number | undefined;
  close(): Promise<void>;
}

type Obj = Record<string, unknown>;

function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return "";
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as Obj;
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) {
      const t = (m.content as Obj[]).find((c) => c.type === "text" || typeof c.text === "string");
      if (t !== undefined) return String(t.text ?? "");
    }
  }
  return "";
}

function sse(res: ServerResponse, events: { event?: string; data: unknown }[]): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const e of events) {
    res.write(
      `${e.event !== undefined ? `event: ${e.event}\n` : ""}data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`,
    );
  }
  res.end();
}

/** Answers `body` as JSON (undefined, so a handler may `return json(...)`). */
function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): undefined {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
  return undefined;
}

/** Words of a reply, streamed one delta each. */
function words(text: string): string[] {
  return text.split(/(?<= )/);
}

// ---- Anthropic Messages ----

function anthropic(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  if (o.apiKey !== undefined && req.headers["x-api-key"] !== o.apiKey) {
    json(res, 401, { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } });
    return;
  }
  if (req.headers["anthropic-version"] === undefined) {
    json(res, 400, { type: "error", error: { type: "invalid_request_error", message: "anthropic-version required" } });
    return;
  }
  const b = req.json ?? {};
  if (req.path.endsWith("/count_tokens")) {
    json(res, 200, { input_tokens: JSON.stringify(b.messages ?? []).length });
    return;
  }
  if (typeof b.max_tokens !== "number") {
    json(res, 400, { type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } });
    return;
  }
  const tools = Array.isArray(b.tools) ? (b.tools as Obj[]) : [];
  const text = `Hello from ${o.name}: ${lastUserText(b.messages)}`;
  const usage = { input_tokens: 11, output_tokens: 7 };
  const id = "msg_fake01";
  const toolUse =
    tools.length > 0
      ? { type: "tool_use", id: "toolu_fake01", name: String(tools[0]?.name), input: { city: "Paris" } }
      : undefined;
  if (b.stream !== true) {
    json(res, 200, {
      id,
      type: "message",
      role: "assistant",
      model: b.model,
      content: [{ type: "text", text }, ...(toolUse !== undefined ? [toolUse] : [])],
      stop_reason: toolUse !== undefined ? "tool_use" : "end_turn",
      stop_sequence: null,
      usage,
    });
    return;
  }
  const events: { event: string; data: unknown }[] = [
    {
      event: "message_start",
      data: {
        type: "message_start",
        message: {
          id,
          type: "message",
          role: "assistant",
          model: b.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 11, output_tokens: 1 },
        },
      },
    },
    {
      event: "content_block_start",
      data: { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    },
    { event: "ping", data: { type: "ping" } },
    ...words(text).map((w) => ({
      event: "content_block_delta",
      data: { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } },
    })),
    { event: "content_block_stop", data: { type: "content_block_stop", index: 0 } },
  ];
  if (toolUse !== undefined) {
    events.push(
      {
        event: "content_block_start",
        data: { type: "content_block_start", index: 1, content_block: { ...toolUse, input: {} } },
      },
      {
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"city": ' } },
      },
      {
        event: "content_block_delta",
        data: { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"Paris"}' } },
      },
      { event: "content_block_stop", data: { type: "content_block_stop", index: 1 } },
    );
  }
  events.push(
    {
      event: "message_delta",
      data: {
        type: "message_delta",
        delta: { stop_reason: toolUse !== undefined ? "tool_use" : "end_turn", stop_sequence: null },
        usage: { output_tokens: 7 },
      },
    },
    { event: "message_stop", data: { type: "message_stop" } },
  );
  sse(res, events);
}

// ---- OpenAI ----

function openai(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  const auth = req.headers.authorization ?? req.headers["api-key"];
  const ok = o.apiKey === undefined || auth === `Bearer ${o.apiKey}` || auth === o.apiKey;
  if (!ok) {
    json(res, 401, {
      error: {
        message: "Incorrect API key provided",
        type: "invalid_request_error",
        param: null,
        code: "invalid_api_key",
      },
    });
    return;
  }
  const b = req.json ?? {};
  const model = String(b.model ?? "unknown");
  if (req.path.includes("/embeddings")) {
    const inputs = Array.isArray(b.input) ? b.input : [b.input];
    // `dimensions` shortens the vectors (text-embedding-3 models).
    const n = typeof b.dimensions === "number" ? b.dimensions : 3;
    json(res, 200, {
      object: "list",
      data: inputs.map((_, index) => ({
        object: "embedding",
        index,
        embedding: Array.from({ length: n }, (_, i) => (i + 1) / 10),
      })),
      model,
      usage: { prompt_tokens: 4, total_tokens: 4 },
    });
    return;
  }
  if (req.path.includes("/responses")) {
    responses(o, b, model, res);
    return;
  }
  const text = `Hello from ${o.name}: ${lastUserText(b.messages)}`;
  const tools = Array.isArray(b.tools) ? (b.tools as Obj[]) : [];
  const toolName = tools.length > 0 ? String((tools[0]?.function as Obj | undefined)?.name) : undefined;
  // A reasoning request is answered as OpenAI answers one: the reasoning tokens inside completion_tokens, reported
  // apart in completion_tokens_details, and (a repeated prompt) part of the prompt read from the cache.
  const usage = {
    prompt_tokens: 11,
    completion_tokens: 7,
    total_tokens: 18,
    ...(b.reasoning_effort !== undefined
      ? { prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 3 } }
      : {}),
  };
  const base = { id: "chatcmpl-fake01", created: 1700000000, model };
  if (b.stream !== true) {
    json(res, 200, {
      ...base,
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: text,
            ...(toolName !== undefined
              ? {
                  tool_calls: [
                    {
                      id: "call_fake01",
                      type: "function",
                      function: { name: toolName, arguments: '{"city":"Paris"}' },
                    },
                  ],
                }
              : {}),
          },
          finish_reason: toolName !== undefined ? "tool_calls" : "stop",
        },
      ],
      usage,
    });
    return;
  }
  const chunk = (delta: Obj, finish: string | null = null) => ({
    ...base,
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  const events: { data: unknown }[] = [
    { data: chunk({ role: "assistant", content: "" }) },
    ...words(text).map((w) => ({ data: chunk({ content: w }) })),
  ];
  if (toolName !== undefined) {
    events.push(
      {
        data: chunk({
          tool_calls: [{ index: 0, id: "call_fake01", type: "function", function: { name: toolName, arguments: "" } }],
        }),
      },
      { data: chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] }) },
    );
  }
  events.push({ data: chunk({}, toolName !== undefined ? "tool_calls" : "stop") });
  const so = b.stream_options as Obj | undefined;
  if (so?.include_usage === true)
    events.push({ data: { ...base, object: "chat.completion.chunk", choices: [], usage } });
  events.push({ data: "[DONE]" });
  sse(res, events);
}

// ---- OpenAI Responses ----

/**
 * What the Responses API checks of `input` and `tools`: message items of its roles, function call outputs answering a
 * call made earlier in the input, function tools flat (`name` at the top level, not chat's nested `function`).
 */
function responsesProblem(b: Obj): string | undefined {
  const calls = new Set<string>();
  for (const [i, it] of (Array.isArray(b.input) ? (b.input as Obj[]) : []).entries()) {
    if (it.type === "function_call") {
      if (typeof it.call_id !== "string" || typeof it.name !== "string")
        return `input[${i}]: call_id and name are required`;
      calls.add(it.call_id);
    } else if (it.type === "function_call_output") {
      if (!calls.has(String(it.call_id)))
        return `No tool call found for function call output with call_id ${String(it.call_id)}.`;
    } else if (!["user", "assistant", "system", "developer"].includes(String(it.role))) {
      return `Invalid value: '${String(it.role)}'. Supported values are: 'assistant', 'system', 'developer', and 'user'.`;
    }
  }
  for (const [i, t] of (Array.isArray(b.tools) ? (b.tools as Obj[]) : []).entries()) {
    if (t.type === "function" && typeof t.name !== "string") return `Missing required parameter: 'tools[${i}].name'.`;
  }
  return undefined;
}

function responses(o: FakeProviderOptions, b: Obj, model: string, res: ServerResponse): void {
  const problem = responsesProblem(b);
  if (problem !== undefined) {
    json(res, 400, { error: { message: problem, type: "invalid_request_error", param: "input", code: null } });
    return;
  }
  const items = Array.isArray(b.input) ? (b.input as Obj[]) : [];
  const input = typeof b.input === "string" ? b.input : lastUserText(items);
  const text = `Hello from ${o.name}: ${input}`;
  // A tool is called once: after its output comes back, the answer is text.
  const tool = (Array.isArray(b.tools) ? (b.tools as Obj[]) : []).find((t) => t.type === "function");
  const call = tool !== undefined && items.at(-1)?.type !== "function_call_output" ? String(tool.name) : undefined;
  const message = {
    type: "message",
    id: "msg_fake01",
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [] }],
  };
  const fc = {
    type: "function_call",
    id: "fc_fake01",
    call_id: "call_fake01",
    name: call,
    arguments: '{"city":"Paris"}',
    status: "completed",
  };
  const usage = { input_tokens: 11, input_tokens_details: { cached_tokens: 0 }, output_tokens: 7, total_tokens: 18 };
  const done = {
    id: "resp_fake01",
    object: "response",
    created_at: 1700000000,
    status: "completed",
    model,
    output: call !== undefined ? [message, fc] : [message],
    usage,
  };
  if (b.stream !== true) {
    json(res, 200, done);
    return;
  }
  const events: Obj[] = [
    { type: "response.created", response: { ...done, status: "in_progress", output: [], usage: null } },
  ];
  events.push({ type: "response.output_item.added", output_index: 0, item: { ...message, content: [] } });
  for (const piece of text.match(/.{1,6}/gs) ?? [])
    events.push({
      type: "response.output_text.delta",
      item_id: "msg_fake01",
      output_index: 0,
      content_index: 0,
      delta: piece,
    });
  events.push({ type: "response.output_item.done", output_index: 0, item: message });
  if (call !== undefined) {
    events.push({ type: "response.output_item.added", output_index: 1, item: { ...fc, arguments: "" } });
    events.push({
      type: "response.function_call_arguments.delta",
      item_id: "fc_fake01",
      output_index: 1,
      delta: '{"city":',
    });
    events.push({
      type: "response.function_call_arguments.delta",
      item_id: "fc_fake01",
      output_index: 1,
      delta: '"Paris"}',
    });
    events.push({ type: "response.output_item.done", output_index: 1, item: fc });
  }
  events.push({ type: "response.completed", response: done });
  sse(
    res,
    events.map((e, n) => ({ event: String(e.type), data: { ...e, sequence_number: n } })),
  );
}

// ---- Bedrock Converse ----

function checkSigV4(o: FakeProviderOptions, req: FakeRequest): string | undefined {
  const aws = o.aws;
  if (aws === undefined) return undefined;
  const lookup = "lookup" in aws ? aws.lookup : (id: string) => (id === aws.accessKeyId ? aws : undefined);
  const received = { ...req, path: `${o.mount ?? ""}${req.path}` };
  const r = verifySigV4(received, { region: aws.region, service: "bedrock" }, lookup);
  return "error" in r ? r.error : undefined;
}

/**
 * Bedrock's own APIs, reached by route types forwarded as they are: InvokeModel (`/model/{id}/invoke`, the model's
 * native body, here Anthropic's) and ListFoundationModels (`GET /foundation-models`, the control plane's). Signed
 * like every Bedrock request, the body's hash included.
 */
function bedrockNative(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  const bad = checkSigV4(o, req);
  if (bad !== undefined) {
    json(res, 403, { message: bad }, { "x-amzn-errortype": "UnrecognizedClientException" });
    return;
  }
  if (req.path.startsWith("/foundation-models")) {
    if (req.method !== "GET") {
      json(res, 405, { message: "method not allowed" });
      return;
    }
    const byProvider = new URL(req.path, "http://x").searchParams.get("byProvider");
    const all = [
      { modelId: "anthropic.claude-3-haiku-20240307-v1:0", providerName: "Anthropic" },
      { modelId: "amazon.titan-embed-text-v2:0", providerName: "Amazon" },
    ];
    json(res, 200, {
      modelSummaries: all.filter((m) => byProvider === null || m.providerName.toLowerCase() === byProvider),
    });
    return;
  }
  const b = req.json ?? {};
  if (typeof b.anthropic_version !== "string") {
    json(res, 400, { message: "Malformed input request: anthropic_version is required" });
    return;
  }
  const msgs = (Array.isArray(b.messages) ? b.messages : []) as Obj[];
  const text = `Hello from ${o.name}: ${String(msgs.at(-1)?.content ?? "")}`;
  json(res, 200, {
    id: "msg_bdrk_01",
    type: "message",
    role: "assistant",
    content: [{ type: "text", text }],
    stop_reason: "end_turn",
    usage: { input_tokens: 9, output_tokens: 5 },
  });
}

function converse(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  const bad = checkSigV4(o, req);
  if (bad !== undefined) {
    json(res, 403, { message: bad }, { "x-amzn-errortype": "UnrecognizedClientException" });
    return;
  }
  if (req.path.endsWith("/count-tokens")) {
    // CountTokens: the Converse body inside `input.converse`, checked as Converse checks it.
    const c = (req.json?.input as Obj | undefined)?.converse as Obj | undefined;
    const cm = (Array.isArray(c?.messages) ? c.messages : []) as Obj[];
    const bad = c === undefined ? "input.converse is required" : converseProblem(c, cm);
    if (bad !== undefined) {
      json(res, 400, { message: bad }, { "x-amzn-errortype": "ValidationException" });
      return;
    }
    json(res, 200, { inputTokens: JSON.stringify(cm).length });
    return;
  }
  const b = req.json ?? {};
  const msgs = (Array.isArray(b.messages) ? b.messages : []) as Obj[];
  const problem = converseProblem(b, msgs);
  if (problem !== undefined) {
    json(res, 400, { message: problem }, { "x-amzn-errortype": "ValidationException" });
    return;
  }
  const last = msgs[msgs.length - 1];
  const lastBlocks = (Array.isArray(last?.content) ? last.content : []) as Obj[];
  const userText = String(lastBlocks.find((c) => typeof c.text === "string")?.text ?? "");
  const text = `Hello from ${o.name}: ${userText}`;
  // A declared tool is called once: after its result comes back, the answer is text.
  const spec = (((b.toolConfig as Obj | undefined)?.tools ?? []) as Obj[]).find((t) => t.toolSpec !== undefined)
    ?.toolSpec as Obj | undefined;
  const toolUse =
    spec !== undefined && !lastBlocks.some((c) => c.toolResult !== undefined)
      ? { toolUseId: "tooluse_fake01", name: String(spec.name), input: { city: "Paris" } }
      : undefined;
  // A prompt with cache points is answered as if its prefix had been cached (Bedrock reports it apart from inputTokens).
  const cached = req.body.includes('"cachePoint"') ? { cacheReadInputTokens: 5 } : {};
  const usage = { inputTokens: 11, outputTokens: 7, totalTokens: 18, ...cached };
  const stopReason = toolUse !== undefined ? "tool_use" : "end_turn";
  if (!req.path.endsWith("/converse-stream")) {
    json(res, 200, {
      output: { message: { role: "assistant", content: [{ text }, ...(toolUse !== undefined ? [{ toolUse }] : [])] } },
      stopReason,
      usage,
      metrics: { latencyMs: 5 },
    });
    return;
  }
  res.writeHead(200, { "content-type": "application/vnd.amazon.eventstream" });
  res.write(encodeJsonEvent("messageStart", { role: "assistant" }));
  for (const w of words(text))
    res.write(encodeJsonEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { text: w } }));
  res.write(encodeJsonEvent("contentBlockStop", { contentBlockIndex: 0 }));
  if (toolUse !== undefined) {
    const { input, ...start } = toolUse;
    res.write(encodeJsonEvent("contentBlockStart", { contentBlockIndex: 1, start: { toolUse: start } }));
    res.write(
      encodeJsonEvent("contentBlockDelta", {
        contentBlockIndex: 1,
        delta: { toolUse: { input: JSON.stringify(input) } },
      }),
    );
    res.write(encodeJsonEvent("contentBlockStop", { contentBlockIndex: 1 }));
  }
  res.write(encodeJsonEvent("messageStop", { stopReason }));
  res.write(encodeJsonEvent("metadata", { usage, metrics: { latencyMs: 5 } }));
  res.end();
}

/**
 * What Converse checks of a conversation: roles `user` and `assistant`, the first turn the user's, and a `toolConfig`
 * whenever a toolUse or toolResult block is present.
 */
function converseProblem(b: Obj, msgs: Obj[]): string | undefined {
  if (msgs.length === 0) return "The messages field is required";
  if (msgs[0]?.role !== "user") return "A conversation must start with a user message.";
  let tools = false;
  for (const m of msgs) {
    if (m.role !== "user" && m.role !== "assistant") return `Invalid role ${String(m.role)}`;
    for (const c of (Array.isArray(m.content) ? m.content : []) as Obj[])
      if (c.toolUse !== undefined || c.toolResult !== undefined) tools = true;
  }
  if (tools && b.toolConfig === undefined)
    return "The toolConfig field must be defined when using toolUse and toolResult content blocks.";
  return undefined;
}

// ---- Gemini ----

function gemini(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse, extra: Obj = {}): void {
  if (o.apiKey !== undefined && req.headers["x-goog-api-key"] !== o.apiKey) {
    json(res, 400, { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT" } });
    return;
  }
  const b = req.json ?? {};
  const problem = geminiProblem(b);
  if (problem !== undefined) {
    json(res, 400, { error: { code: 400, message: problem, status: "INVALID_ARGUMENT" } });
    return;
  }
  const contents = (Array.isArray(b.contents) ? b.contents : []) as Obj[];
  const last = contents[contents.length - 1];
  const lastParts = (Array.isArray(last?.parts) ? last.parts : []) as Obj[];
  const userText = String(lastParts.find((p) => typeof p.text === "string")?.text ?? "");
  const text = `Hello from ${o.name}: ${userText}`;
  // A declared function is called once: after its response comes back, the answer is text.
  const decl = ((Array.isArray(b.tools) ? b.tools : []) as Obj[]).flatMap((t) =>
    Array.isArray(t.functionDeclarations) ? (t.functionDeclarations as Obj[]) : [],
  )[0];
  const answered = lastParts.some((p) => p.functionResponse !== undefined);
  const call =
    decl !== undefined && !answered
      ? { functionCall: { name: String(decl.name), args: { city: "Paris" } } }
      : undefined;
  const usageMetadata = { promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18 };
  const candidate = (parts: Obj[], finish?: string) => ({
    content: { role: "model", parts },
    index: 0,
    ...(finish !== undefined ? { finishReason: finish } : {}),
  });
  if (!req.path.includes(":streamGenerateContent")) {
    const parts = call !== undefined ? [{ text }, call] : [{ text }];
    json(res, 200, { candidates: [candidate(parts, "STOP")], usageMetadata, modelVersion: "gemini-fake", ...extra });
    return;
  }
  const ws = words(text);
  const events = ws.map((w) => ({
    data: { candidates: [candidate([{ text: w }])], modelVersion: "gemini-fake", ...extra },
  }));
  events.push({
    data: {
      candidates: [candidate(call !== undefined ? [call] : [{ text: "" }], "STOP")],
      usageMetadata,
      modelVersion: "gemini-fake",
      ...extra,
    },
  } as (typeof events)[number]);
  sse(res, events);
}

const GEMINI_FIELDS = new Set([
  "contents",
  "systemInstruction",
  "tools",
  "toolConfig",
  "generationConfig",
  "safetySettings",
  "cachedContent",
  "labels",
]);

/**
 * What generateContent checks: no field it does not know (Google refuses "Unknown name"), contents of the roles
 * `user` and `model`, and a turn of function responses right after the model's turn of as many function calls.
 */
function geminiProblem(b: Obj): string | undefined {
  for (const k of Object.keys(b))
    if (!GEMINI_FIELDS.has(k)) return `Invalid JSON payload received. Unknown name "${k}": Cannot find field.`;
  const contents = (Array.isArray(b.contents) ? b.contents : []) as Obj[];
  if (contents.length === 0) return "* GenerateContentRequest.contents: contents is not specified";
  for (const [i, c] of contents.entries()) {
    if (c.role !== undefined && c.role !== "user" && c.role !== "model") return "Please use a valid role: user, model.";
    const parts = (Array.isArray(c.parts) ? c.parts : []) as Obj[];
    if (parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`;
    const responses = parts.filter((p) => p.functionResponse !== undefined).length;
    if (responses === 0) continue;
    const prev = contents[i - 1];
    const calls = ((Array.isArray(prev?.parts) ? prev.parts : []) as Obj[]).filter(
      (p) => p.functionCall !== undefined,
    ).length;
    if (prev?.role !== "model" || calls !== responses)
      return "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.";
  }
  return undefined;
}

/** Gemini API countTokens: `contents` or a whole `generateContentRequest`, not both; the count of the contents. */
function geminiCount(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  if (o.apiKey !== undefined && req.headers["x-goog-api-key"] !== o.apiKey) {
    json(res, 400, { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT" } });
    return;
  }
  const b = req.json ?? {};
  const unknown = Object.keys(b).find((k) => k !== "contents" && k !== "generateContentRequest");
  const g = b.generateContentRequest as Obj | undefined;
  const problem =
    unknown !== undefined
      ? `Invalid JSON payload received. Unknown name "${unknown}": Cannot find field.`
      : (b.contents === undefined) === (g === undefined)
        ? "contents and generateContentRequest are mutually exclusive; one is required"
        : g !== undefined
          ? geminiProblem(Object.fromEntries(Object.entries(g).filter(([k]) => k !== "model")))
          : undefined;
  if (problem !== undefined) {
    json(res, 400, { error: { code: 400, message: problem, status: "INVALID_ARGUMENT" } });
    return;
  }
  json(res, 200, { totalTokens: JSON.stringify(g?.contents ?? b.contents).length });
}

// ---- Vertex AI ----

const VERTEX_PATH =
  /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/(google|anthropic)\/models\/([^/:]+):(\w+)/;

function vertex(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  const token = /^Bearer (.+)$/.exec(String(req.headers.authorization ?? ""))?.[1];
  if (o.bearer !== undefined && (token === undefined || !o.bearer(token))) {
    json(res, 401, {
      error: {
        code: 401,
        message:
          "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        status: "UNAUTHENTICATED",
      },
    });
    return;
  }
  if (/^\/v1\/projects\/[^/]+\/locations\/[^/]+\/rankingConfigs\/[^/:]+:rank$/.test(req.path)) {
    googleRank(req, res);
    return;
  }
  const m = VERTEX_PATH.exec(req.path);
  if (m === null) {
    json(res, 404, { error: { code: 404, message: `no route ${req.path}`, status: "NOT_FOUND" } });
    return;
  }
  if (m[3] === "anthropic" && m[4] === "count-tokens") {
    // Claude's token count: one URL for every model, which stays in the body (with the Vertex version).
    const b = req.json ?? {};
    const problem =
      m[5] !== "rawPredict"
        ? `count-tokens has no method ${m[5]}`
        : b.anthropic_version !== "vertex-2023-10-16"
          ? "anthropic_version: Input should be 'vertex-2023-10-16'"
          : typeof b.model !== "string"
            ? "model: Field required"
            : !Array.isArray(b.messages)
              ? "messages: Field required"
              : undefined;
    if (problem !== undefined) {
      json(res, 400, { type: "error", error: { type: "invalid_request_error", message: problem } });
      return;
    }
    json(res, 200, { input_tokens: JSON.stringify(b.messages).length + (typeof b.system === "string" ? 3 : 0) });
    return;
  }
  if (m[5] === "predict") {
    // Text embeddings: `instances[].content`, an optional `parameters.outputDimensionality`.
    const b = req.json ?? {};
    const instances = Array.isArray(b.instances) ? (b.instances as Obj[]) : [];
    if (instances.length === 0 || instances.some((i) => typeof i.content !== "string" || i.content === "")) {
      json(res, 400, { error: { code: 400, message: "instances[].content is required", status: "INVALID_ARGUMENT" } });
      return;
    }
    const dim = Number((b.parameters as Obj | undefined)?.outputDimensionality ?? 4);
    json(res, 200, {
      predictions: instances.map((i) => {
        const text = String(i.content);
        return {
          embeddings: {
            values: Array.from({ length: dim }, (_, k) => (text.length + k) / 8),
            statistics: { token_count: text.split(/\s+/).length, truncated: false },
          },
        };
      }),
      metadata: { billableCharacterCount: instances.reduce((n, i) => n + String(i.content).length, 0) },
    });
    return;
  }
  if (m[3] === "anthropic") {
    // Claude on Vertex AI: the messages body with the version in it and the model in the URL only.
    const b = req.json ?? {};
    const problem =
      b.anthropic_version !== "vertex-2023-10-16"
        ? "anthropic_version: Input should be 'vertex-2023-10-16'"
        : b.model !== undefined
          ? "model: Extra inputs are not permitted"
          : (m[5] === "streamRawPredict") !== (b.stream === true)
            ? "stream must be true exactly with streamRawPredict"
            : undefined;
    if (problem !== undefined) {
      json(res, 400, { type: "error", error: { type: "invalid_request_error", message: problem } });
      return;
    }
    const { apiKey: _key, ...noKey } = o;
    anthropic(
      noKey,
      { ...req, headers: { ...req.headers, "anthropic-version": "vertex" }, json: { ...b, model: m[4] } },
      res,
    );
    return;
  }
  if (m[5] === "countTokens") {
    const b = req.json ?? {};
    if (b.generateContentRequest !== undefined) {
      json(res, 400, {
        error: {
          code: 400,
          message: 'Invalid JSON payload received. Unknown name "generateContentRequest"',
          status: "INVALID_ARGUMENT",
        },
      });
      return;
    }
    json(res, 200, { totalTokens: JSON.stringify(b.contents ?? []).length, totalBillableCharacters: 10 });
    return;
  }
  const { apiKey: _key, ...noKey } = o;
  gemini(noKey, req, res, { createTime: "2025-01-15T10:00:00.123456Z", responseId: "vtx-1" });
}

function providerError(path: string, status: number, res: ServerResponse): void {
  if (path.includes("/messages")) {
    json(res, status, {
      type: "error",
      error: { type: status === 529 ? "overloaded_error" : "api_error", message: "fake failure" },
    });
  } else if (path.startsWith("/model/")) {
    json(res, status, { message: "fake failure" }, { "x-amzn-errortype": "InternalServerException" });
  } else if (path.includes("generateContent")) {
    json(res, status, { error: { code: status, message: "fake failure", status: "INTERNAL" } });
  } else {
    json(res, status, { error: { message: "fake failure", type: "server_error", param: null, code: null } });
  }
}

/** The provider's key, from either header form; false (after answering 401) when it is wrong. */
function authorized(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): boolean {
  if (o.apiKey === undefined) return true;
  const header = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const given = header("authorization")?.replace(/^Bearer /, "") ?? header("x-api-key");
  if (given === o.apiKey) return true;
  json(res, 401, { error: { message: "invalid api key", type: "invalid_request_error" } });
  return false;
}

// ---- Model lists: OpenAI's and Anthropic's GET /v1/models[/{id}] (Anthropic's known by its anthropic-version),
// Gemini's GET /v1beta/models[/{name}], each with its own paging; file list (a path no route type translates) ----

function models(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): undefined {
  const url = new URL(req.path, "http://fake");
  const id = /\/models\/([^/]+)$/.exec(url.pathname)?.[1];
  // Anthropic's API is called with its key header and version (a client's own anthropic-version may reach others).
  if (req.headers["anthropic-version"] !== undefined && req.headers["x-api-key"] !== undefined) {
    return anthropicModels(o, req, url, id, res);
  }
  if (!authorized(o, req, res)) return;
  const all = [`${o.name}-large`, `${o.name}-small`].map((m) => ({
    id: m,
    object: "model",
    created: 1700000000,
    owned_by: o.name,
  }));
  if (id === undefined) return json(res, 200, { object: "list", data: all });
  const one = all.find((m) => m.id === decodeURIComponent(id));
  if (one === undefined) {
    return json(res, 404, {
      error: { message: `The model '${id}' does not exist`, type: "invalid_request_error", param: null, code: null },
    });
  }
  return json(res, 200, one);
}

/** Anthropic's list: most recent first, `limit` (1..1000, default 20), `after_id` / `before_id`. */
function anthropicModels(
  o: FakeProviderOptions,
  req: FakeRequest,
  url: URL,
  id: string | undefined,
  res: ServerResponse,
) {
  if (o.apiKey !== undefined && req.headers["x-api-key"] !== o.apiKey) {
    return json(res, 401, { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } });
  }
  const all = [
    ["opus", "2025-09-01T00:00:00Z"],
    ["sonnet", "2025-06-01T00:00:00Z"],
    ["haiku", "2024-10-01T00:00:00Z"],
  ].map(([n, at]) => ({
    type: "model",
    id: `${o.name}-${n}`,
    display_name: `${o.name} ${n}`,
    created_at: at,
  }));
  if (id !== undefined) {
    const one = all.find((m) => m.id === decodeURIComponent(id));
    if (one === undefined) {
      return json(res, 404, { type: "error", error: { type: "not_found_error", message: `model: ${id}` } });
    }
    return json(res, 200, one);
  }
  const limit = Number(url.searchParams.get("limit") ?? "20");
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    return json(res, 400, {
      type: "error",
      error: { type: "invalid_request_error", message: "limit: Input should be less than or equal to 1000" },
    });
  }
  const after = url.searchParams.get("after_id");
  const before = url.searchParams.get("before_id");
  let window = all;
  if (after !== null) window = window.slice(window.findIndex((m) => m.id === after) + 1);
  if (before !== null)
    window = window.slice(
      0,
      Math.max(
        0,
        window.findIndex((m) => m.id === before),
      ),
    );
  const data = before !== null && after === null ? window.slice(-limit) : window.slice(0, limit);
  json(res, 200, {
    data,
    has_more: data.length < window.length,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
  });
}

/** Gemini's list: `pageSize` (default 50, at most 1000), `pageToken` (here, the index to start at). */
function geminiModels(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): undefined {
  if (o.apiKey !== undefined && req.headers["x-goog-api-key"] !== o.apiKey) {
    return json(res, 400, { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT" } });
  }
  const url = new URL(req.path, "http://fake");
  const all = [
    { n: "pro", methods: ["generateContent", "countTokens"], input: 1048576 },
    { n: "flash", methods: ["generateContent", "countTokens"], input: 1048576 },
    { n: "embedding", methods: ["embedContent", "countTokens"], input: 2048 },
  ].map((m) => ({
    name: `models/${o.name}-${m.n}`,
    version: "001",
    displayName: `${o.name} ${m.n}`,
    inputTokenLimit: m.input,
    outputTokenLimit: 8192,
    supportedGenerationMethods: m.methods,
  }));
  const name = /\/v1beta\/(models\/[^/]+)$/.exec(url.pathname)?.[1];
  if (name !== undefined) {
    const one = all.find((m) => m.name === decodeURIComponent(name));
    if (one === undefined) {
      return json(res, 404, { error: { code: 404, message: `${name} is not found`, status: "NOT_FOUND" } });
    }
    return json(res, 200, one);
  }
  const size = Math.min(Number(url.searchParams.get("pageSize") ?? "50") || 50, 1000);
  const from = Number(url.searchParams.get("pageToken") ?? "0");
  const page = all.slice(from, from + size);
  return json(res, 200, {
    models: page,
    ...(from + size < all.length ? { nextPageToken: String(from + size) } : {}),
  });
}

/** Gemini's embeddings: `:embedContent` (one content) and `:batchEmbedContents` (`requests`, each naming the model). */
function geminiEmbed(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): undefined {
  if (o.apiKey !== undefined && req.headers["x-goog-api-key"] !== o.apiKey) {
    return json(res, 400, { error: { code: 400, message: "API key not valid.", status: "INVALID_ARGUMENT" } });
  }
  const model = /\/v1beta\/(models\/[^/:]+):/.exec(req.path)?.[1];
  const b = req.json ?? {};
  const vector = (r: Obj) => {
    const n = typeof r.outputDimensionality === "number" ? r.outputDimensionality : 3;
    return { values: Array.from({ length: n }, (_, i) => (i + 1) / 10) };
  };
  const bad = (message: string) => json(res, 400, { error: { code: 400, message, status: "INVALID_ARGUMENT" } });
  if (req.path.includes(":embedContent")) {
    if (!Array.isArray((b.content as Obj | undefined)?.parts)) return bad("content: parts are required");
    return json(res, 200, { embedding: vector(b) });
  }
  const requests = (Array.isArray(b.requests) ? b.requests : []) as Obj[];
  if (requests.length === 0) return bad("requests: at least one request is required");
  const wrong = requests.findIndex((r) => r.model !== model);
  if (wrong >= 0) return bad(`requests[${wrong}].model: Model names should match ${model}`);
  return json(res, 200, { embeddings: requests.map(vector) });
}

function files(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  if (!authorized(o, req, res)) return;
  json(res, 200, { object: "list", data: [{ id: "file-1", object: "file", filename: `${o.name}.jsonl` }] });
}

// ---- Rerank, the Cohere v2 shape (POST /v2/rerank) ----

function rerank(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  if (!authorized(o, req, res)) return;
  const b = req.json ?? {};
  const docs = Array.isArray(b.documents) ? b.documents : [];
  const query = String(b.query ?? "");
  // Documents sharing more words with the query rank higher.
  const words = new Set(
    query
      .toLowerCase()
      .split(/\W+/)
      .filter((w) => w !== ""),
  );
  const scored = docs.map((d, index) => {
    const text = String(typeof d === "string" ? d : ((d as { text?: unknown }).text ?? ""));
    const hits = text
      .toLowerCase()
      .split(/\W+/)
      .filter((w) => words.has(w)).length;
    return { index, relevance_score: hits / Math.max(1, words.size) };
  });
  scored.sort((x, y) => y.relevance_score - x.relevance_score || x.index - y.index);
  const top = typeof b.top_n === "number" ? scored.slice(0, b.top_n) : scored;
  json(res, 200, {
    id: "rerank-fake01",
    results: top,
    meta: { billed_units: { search_units: 1 }, tokens: { input_tokens: 23, output_tokens: 0 } },
  });
}

/** Score of each text against a query: the share of the query's words it holds. */
function overlap(query: string, texts: string[]): number[] {
  const q = new Set(
    query
      .toLowerCase()
      .split(/\W+/)
      .filter((w) => w !== ""),
  );
  return texts.map(
    (t) =>
      t
        .toLowerCase()
        .split(/\W+/)
        .filter((w) => q.has(w)).length / Math.max(1, q.size),
  );
}

/**
 * Bedrock's agent runtime Rerank (POST /rerank), signed like every Bedrock request. What the service checks: exactly
 * one TEXT query, 1 to 1000 INLINE sources of type TEXT or JSON, a BEDROCK_RERANKING_MODEL configuration naming a
 * foundation model ARN, numberOfResults from 1 to the number of sources.
 */
function bedrockRerank(o: FakeProviderOptions, req: FakeRequest, res: ServerResponse): void {
  const bad = checkSigV4(o, req);
  if (bad !== undefined) {
    json(res, 403, { message: bad }, { "x-amzn-errortype": "UnrecognizedClientException" });
    return;
  }
  const b = req.json ?? {};
  const queries = (Array.isArray(b.queries) ? b.queries : []) as Obj[];
  const sources = (Array.isArray(b.sources) ? b.sources : []) as Obj[];
  const rc = (b.rerankingConfiguration ?? {}) as Obj;
  const brc = (rc.bedrockRerankingConfiguration ?? {}) as Obj;
  const arn = String(((brc.modelConfiguration ?? {}) as Obj).modelArn ?? "");
  const n = brc.numberOfResults;
  const texts = sources.map((x) => {
    const d = (x.inlineDocumentSource ?? {}) as Obj;
    return d.type === "TEXT"
      ? ((d.textDocument as Obj | undefined)?.text as string | undefined)
      : d.type === "JSON"
        ? JSON.stringify(d.jsonDocument)
        : undefined;
  });
  const problem =
    queries.length !== 1 ||
    queries[0]?.type !== "TEXT" ||
    typeof (queries[0]?.textQuery as Obj | undefined)?.text !== "string"
      ? "queries: exactly one TEXT query is required"
      : sources.length < 1 || sources.length > 1000 || sources.some((x) => x.type !== "INLINE")
        ? "sources: 1 to 1000 INLINE sources are required"
        : texts.some((t) => typeof t !== "string")
          ? "sources: each inline document needs a textDocument (TEXT) or jsonDocument (JSON)"
          : rc.type !== "BEDROCK_RERANKING_MODEL" ||
              !/^arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}::foundation-model\/.+$/.test(arn)
            ? "rerankingConfiguration: a BEDROCK_RERANKING_MODEL with a foundation model ARN is required"
            : n !== undefined && (typeof n !== "number" || n < 1 || n > sources.length)
              ? "numberOfResults must be between 1 and the number of sources"
              : undefined;
  if (problem !== undefined) {
    json(res, 400, { message: problem }, { "x-amzn-errortype": "ValidationException" });
    return;
  }
  const query = String(((queries[0]?.textQuery ?? {}) as Obj).text);
  const scores = overlap(query, texts as string[]);
  const ranked = scores.map((relevanceScore, index) => ({ index, relevanceScore }));
  ranked.sort((x, y) => y.relevanceScore - x.relevanceScore || x.index - y.index);
  json(res, 200, { results: typeof n === "number" ? ranked.slice(0, n) : ranked });
}

/**
 * Google's ranking API (Discovery Engine rankingConfigs.rank). What it checks: a query, 1 to 200 records each with a
 * unique id and a title or content; the answer is the records by score, best first (only id and score when
 * ignoreRecordDetailsInResponse).
 */
function googleRank(req: FakeRequest, res: ServerResponse): void {
  const b = req.json ?? {};
  const records = (Array.isArray(b.records) ? b.records : []) as Obj[];
  const ids = new Set(records.map((r) => r.id));
  const problem =
    typeof b.query !== "string" || b.query === ""
      ? "query is required"
      : records.length < 1 || records.length > 200
        ? "records: 1 to 200 records are required"
        : ids.size !== records.length || records.some((r) => typeof r.id !== "string")
          ? "records: each record needs a unique id"
          : records.some((r) => typeof r.content !== "string" && typeof r.title !== "string")
            ? "records: each record needs a title or content"
            : undefined;
  if (problem !== undefined) {
    json(res, 400, { error: { code: 400, message: problem, status: "INVALID_ARGUMENT" } });
    return;
  }
  const scores = overlap(
    b.query as string,
    records.map((r) => `${String(r.title ?? "")} ${String(r.content ?? "")}`),
  );
  const ranked = records.map((r, i) => ({
    id: String(r.id),
    score: scores[i] ?? 0,
    ...(b.ignoreRecordDetailsInResponse === true ? {} : { content: r.content }),
  }));
  ranked.sort((x, y) => y.score - x.score);
  json(res, 200, { records: typeof b.topN === "number" && b.topN > 0 ? ranked.slice(0, b.topN) : ranked });
}

/** `host`: another loopback address (127.0.0.2 ...) makes it a Pod of its own at a port several share. */
export async function startFakeProvider(o: FakeProviderOptions, port = 0, host = "127.0.0.1"): Promise<FakeProvider> {
  const requests: FakeRequest[] = [];
  const state = { failWith: undefined as number | undefined };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let parsed: Record<string, unknown> | undefined;
      try {
        parsed = JSON.parse(body) as Record<string, unknown>;
      } catch {
        parsed = undefined;
      }
      const received: FakeRequest = {
        method: req.method ?? "",
        path: req.url ?? "",
        headers: req.headers,
        body,
        json: parsed,
      };
      requests.push(received);
      const mount = o.mount ?? "";
      if (!received.path.startsWith(`${mount}/`)) {
        return json(res, 404, { error: { message: `no route ${received.path}`, type: "invalid_request_error" } });
      }
      // Its handlers see its own API's path (the mount off); `requests` keeps what was received.
      const fr: FakeRequest = { ...received, path: received.path.slice(mount.length) };
      const path = fr.path;
      if (state.failWith !== undefined) return providerError(path, state.failWith, res);
      if (path.startsWith("/v1/messages")) return anthropic(o, fr, res);
      if (/^\/model\/[^/]+\/invoke(\?|$)/.test(path) || path.startsWith("/foundation-models")) {
        return bedrockNative(o, fr, res);
      }
      if (path.startsWith("/model/")) return converse(o, fr, res);
      if (path === "/rerank") return bedrockRerank(o, fr, res);
      if (path.startsWith("/v1/projects/")) return vertex(o, fr, res);
      if (path.includes(":generateContent") || path.includes(":streamGenerateContent")) return gemini(o, fr, res);
      if (path.includes(":countTokens")) return geminiCount(o, fr, res);
      if (path.includes(":embedContent") || path.includes(":batchEmbedContents")) return geminiEmbed(o, fr, res);
      if (/^\/v1beta\/models(\/[^/:?]+)?(\?|$)/.test(path)) return geminiModels(o, fr, res);
      if (/\/(chat\/completions|responses|embeddings)(\?|$)/.test(path)) return openai(o, fr, res);
      if (/\/v1\/models(\/[^/?]+)?(\?|$)/.test(path)) return models(o, fr, res);
      if (/\/v2\/rerank(\?|$)/.test(path)) return rerank(o, fr, res);
      if (/\/v1\/files(\?|$)/.test(path)) return files(o, fr, res);
      json(res, 404, { error: { message: `no route ${path}`, type: "invalid_request_error" } });
    });
  });
  // Real providers keep idle connections open for a minute or more (Envoy closes its side after 30 s).
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(port, host, r));
  return {
    name: o.name,
    port: (server.address() as AddressInfo).port,
    requests,
    get failWith() {
      return state.failWith;
    },
    set failWith(v) {
      state.failWith = v;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
