// The generateContent client's directions: to a generateContent provider (Gemini, Vertex AI) the body goes as the
// client wrote it; to every other provider it goes through the chat-completions form, whose translators (and field
// table) reach Messages, Converse and Responses. A field the second step refuses is named as the client wrote it.
import type { LlmError } from "./errors.js";
import { isObject, type JsonObject, num } from "./json.js";
import type { Direction } from "./registry-types.js";
import { awsEventStreamDecoder, chain, passthroughStream, pipeline, type StreamMapper, sseDecoder } from "./stream.js";
import { ConverseToChatStream, chatToConverseRequest, converseToChatResponse } from "./translate/chat-to-converse.js";
import {
  chatToMessagesRequest as chatToMessagesForCount,
  chatToMessagesRequest,
  MessagesToChatStream,
  messagesToChatResponse,
} from "./translate/chat-to-messages.js";
import {
  chatToResponsesRequest,
  ResponsesToChatStream,
  responsesToChatResponse,
} from "./translate/chat-to-responses.js";
import type { ChatStreamItem } from "./translate/common.js";
import type {
  RequestMeta,
  RequestResult,
  RequestTranslator,
  ResponseResult,
  ResponseTranslator,
  TranslateContext,
} from "./translate/context.js";
import { converseToCountTokensResponse, countTokensToConverseRequest } from "./translate/count-tokens.js";
import {
  embedToOpenAiRequest,
  embedToTitanRequest,
  embedToVertexRequest,
  openAiToEmbedResponse,
  titanToEmbedResponse,
  vertexToEmbedResponse,
} from "./translate/gemini-client-embed.js";
import { geminiClientToChatRequest, geminiPassthroughRequest } from "./translate/gemini-client-request.js";
import { ChatToGeminiStream, chatToGeminiClientResponse, geminiEncoder } from "./translate/gemini-client-response.js";
import { anthropicEvent, jsonOrError, responsesEvent } from "./upstream-events.js";
import { extractUsage, makeUsage, type TokenUsage, usageFromGemini } from "./usage.js";

/** The chat fields a generateContent client's request was read into, by the client's own name. */
const GEMINI_NAME_OF_CHAT: Readonly<Record<string, string>> = {
  max_completion_tokens: "generationConfig.maxOutputTokens",
  temperature: "generationConfig.temperature",
  top_p: "generationConfig.topP",
  top_k: "generationConfig.topK",
  stop: "generationConfig.stopSequences",
  n: "generationConfig.candidateCount",
  seed: "generationConfig.seed",
  presence_penalty: "generationConfig.presencePenalty",
  frequency_penalty: "generationConfig.frequencyPenalty",
  logprobs: "generationConfig.responseLogprobs",
  top_logprobs: "generationConfig.logprobs",
  reasoning_effort: "generationConfig.thinkingConfig",
  response_format: "generationConfig.responseJsonSchema",
  "response_format.json_schema.schema": "generationConfig.responseJsonSchema",
  web_search_options: "tools[].googleSearch",
  tool_choice: "toolConfig.functionCallingConfig",
};

/** A chat translator's refusal, naming the client's field (Google's error JSON has the message only). */
function inClientTerms(e: LlmError): LlmError {
  const name = e.param === undefined ? undefined : GEMINI_NAME_OF_CHAT[e.param];
  if (name === undefined) return e;
  return { ...e, param: name, message: `${name}: ${e.message}` };
}

type ChatTo = (body: JsonObject, model: string | undefined, ctx: TranslateContext) => RequestResult;

/** Two request steps (generateContent → chat → the provider's), then `fix` on the provider's body. */
function viaChat(next: ChatTo, fix?: (chat: JsonObject, out: JsonObject) => LlmError | undefined): RequestTranslator {
  return (body, model, ctx) => {
    const chat = geminiClientToChatRequest(body, model);
    if (!chat.ok) return chat;
    const r = next(chat.body, chat.meta.model, ctx);
    if (!r.ok) return { ok: false, error: inClientTerms(r.error) };
    const e = fix?.(chat.body, r.body);
    if (e !== undefined) return { ok: false, error: e };
    const meta: RequestMeta =
      r.meta.toolNames === undefined ? chat.meta : { ...chat.meta, toolNames: r.meta.toolNames };
    return { ok: true, body: r.body, meta };
  };
}

/** The provider's answer as chat completions, then as the client's. */
function answerViaChat(first: ResponseTranslator): ResponseTranslator {
  return (body, meta, ctx) => {
    const chat = first(body, meta, ctx);
    return chat.ok ? chatToGeminiClientResponse(chat.body, meta, ctx) : chat;
  };
}

/** A stream mapper into chat chunks, then chat chunks as Gemini events. */
function streamViaChat<I>(first: (meta: RequestMeta, ctx: TranslateContext) => StreamMapper<I, ChatStreamItem>) {
  return (meta: RequestMeta, ctx: TranslateContext) =>
    chain(first({ ...meta, includeUsage: true }, ctx), new ChatToGeminiStream(meta, ctx));
}

const geminiStreamUsage = (_ev: unknown, json: unknown): TokenUsage | undefined =>
  isObject(json) ? usageFromGemini(json.usageMetadata) : undefined;

/** Gemini's topK where the provider has it: Messages' `top_k`, Claude's on Converse; Responses has none. */
const topK =
  (where: "messages" | "converse" | "responses") =>
  (chat: JsonObject, out: JsonObject): LlmError | undefined => {
    const k = chat.top_k;
    if (typeof k !== "number") return undefined;
    if (where === "responses")
      return {
        status: 400,
        kind: "invalid_request",
        message: "generationConfig.topK: top-k sampling is not available from this provider",
        param: "generationConfig.topK",
      };
    if (where === "messages") out.top_k = k;
    else {
      const extra = isObject(out.additionalModelRequestFields) ? out.additionalModelRequestFields : {};
      out.additionalModelRequestFields = { ...extra, top_k: k };
    }
    return undefined;
  };

export const GEMINI_CLIENT_DIRECTIONS: readonly Direction[] = [
  {
    client: "generate-content",
    provider: "generate-content",
    request: (b, m) => geminiPassthroughRequest(b, m),
    response: (body) => {
      if (!isObject(body))
        return { ok: false, error: { status: 502, kind: "server", message: "malformed response from upstream" } };
      const usage = extractUsage("generate-content", body);
      return usage === undefined
        ? { ok: true, body: body as JsonObject }
        : { ok: true, body: body as JsonObject, usage };
    },
    stream: (_m, _c, onUsage) =>
      passthroughStream(geminiStreamUsage, (err) => geminiEncoder.encode({ error: err }), onUsage),
    framing: "sse",
  },
  {
    client: "generate-content",
    provider: "chat-completions",
    request: (b, m) => geminiClientToChatRequest(b, m),
    response: chatToGeminiClientResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(jsonOrError), new ChatToGeminiStream(meta, ctx), geminiEncoder, onUsage),
    framing: "sse",
  },
  {
    client: "generate-content",
    provider: "messages",
    request: viaChat((b, m) => chatToMessagesRequest(b, m), topK("messages")),
    response: answerViaChat(messagesToChatResponse),
    stream: (meta, ctx, onUsage) =>
      pipeline(
        sseDecoder(anthropicEvent),
        streamViaChat((m, c) => new MessagesToChatStream(m, c))(meta, ctx),
        geminiEncoder,
        onUsage,
      ),
    framing: "sse",
  },
  {
    client: "generate-content",
    provider: "converse",
    request: viaChat((b, m) => chatToConverseRequest(b, m), topK("converse")),
    response: answerViaChat(converseToChatResponse),
    stream: (meta, ctx, onUsage) =>
      pipeline(
        awsEventStreamDecoder(),
        streamViaChat((m, c) => new ConverseToChatStream(m, c))(meta, ctx),
        geminiEncoder,
        onUsage,
      ),
    framing: "aws-eventstream",
  },
  {
    client: "generate-content",
    provider: "responses",
    request: viaChat((b, m) => chatToResponsesRequest(b, m), topK("responses")),
    response: answerViaChat(responsesToChatResponse),
    stream: (meta, ctx, onUsage) =>
      pipeline(
        sseDecoder(responsesEvent),
        streamViaChat((m, c) => new ResponsesToChatStream(m, c))(meta, ctx),
        geminiEncoder,
        onUsage,
      ),
    framing: "sse",
  },
];

// ---- countTokens (`models/{model}:countTokens`) ----

/** The generateContent fields a countTokens request counts: `generateContentRequest`'s, else `contents` alone. */
function countedFields(body: unknown): JsonObject | undefined {
  if (!isObject(body)) return undefined;
  const g = isObject(body.generateContentRequest) ? body.generateContentRequest : undefined;
  const { model: _m, generationConfig: _g, ...fields } = g ?? { contents: body.contents };
  return fields as JsonObject;
}

const countMeta = (model: string): RequestMeta => ({ model, stream: false, includeUsage: false });

/** To Anthropic's count_tokens body (and from it Bedrock's CountTokens): through the chat and messages forms. */
function countAsMessages(body: unknown, model: string | undefined): RequestResult {
  const fields = countedFields(body);
  if (fields === undefined)
    return {
      ok: false,
      error: { status: 400, kind: "invalid_request", message: "request body must be a JSON object" },
    };
  const asked = model ?? (isObject(body) && typeof body.model === "string" ? body.model : undefined);
  const chat = geminiClientToChatRequest({ ...fields, ...(asked !== undefined ? { model: asked } : {}) }, model);
  if (!chat.ok) return chat;
  const m = chatToMessagesForCount(chat.body, chat.meta.model);
  if (!m.ok) return { ok: false, error: inClientTerms(m.error) };
  // count_tokens takes the messages body without the sampling settings.
  const { max_tokens: _x, temperature: _t, top_p: _p, stop_sequences: _s, stream: _st, ...counted } = m.body;
  return { ok: true, body: counted, meta: countMeta(chat.meta.model) };
}

const totalTokens = (n: number | undefined): ResponseResult =>
  n === undefined
    ? { ok: false, error: { status: 502, kind: "server", message: "malformed token count from upstream" } }
    : { ok: true, body: { totalTokens: n }, usage: makeUsage(n, 0) };

export const GEMINI_COUNT_DIRECTIONS: readonly Direction[] = [
  {
    client: "generate-content-count-tokens",
    provider: "gemini-count-tokens",
    request: (b, m) => {
      const r = geminiPassthroughRequest(b, m);
      return r.ok ? { ...r, meta: countMeta(r.meta.model) } : r;
    },
    response: (body) => totalTokens(isObject(body) ? num(body.totalTokens) : undefined),
  },
  {
    // Vertex AI's countTokens takes the generateContent fields themselves, not `generateContentRequest`.
    client: "generate-content-count-tokens",
    provider: "vertex-count-tokens",
    request: (b, m) => {
      const r = geminiPassthroughRequest(b, m);
      if (!r.ok) return r;
      return { ok: true, body: countedFields(b) ?? {}, meta: countMeta(r.meta.model) };
    },
    response: (body) => totalTokens(isObject(body) ? num(body.totalTokens) : undefined),
  },
  {
    client: "generate-content-count-tokens",
    provider: "count-tokens",
    request: (b, m) => countAsMessages(b, m),
    response: (body) => totalTokens(isObject(body) ? num(body.input_tokens) : undefined),
  },
  {
    client: "generate-content-count-tokens",
    provider: "converse-count-tokens",
    request: (b, m) => {
      const r = countAsMessages(b, m);
      return r.ok ? countTokensToConverseRequest(r.body, r.meta.model) : r;
    },
    response: (body, meta) => {
      const r = converseToCountTokensResponse(body, meta);
      return r.ok ? totalTokens(num(r.body.input_tokens)) : r;
    },
  },
];

// ---- embedContent / batchEmbedContents (`models/{model}:embedContent`, `:batchEmbedContents`) ----

/** Gemini's answer as it is (it reports no token usage for embeddings). */
const geminiAnswer: ResponseTranslator = (body) =>
  isObject(body)
    ? { ok: true, body: body as JsonObject }
    : { ok: false, error: { status: 502, kind: "server", message: "malformed response from upstream" } };

/** To Gemini as written; a batch's requests name the model asked for (Gemini refuses one naming another). */
function geminiEmbedRequest(batch: boolean): RequestTranslator {
  return (b, m) => {
    const r = geminiPassthroughRequest(b, m);
    if (!r.ok || !batch || !Array.isArray(r.body.requests)) return r;
    const model = `models/${r.meta.model.replace(/^models\//, "")}`;
    const requests = r.body.requests.map((q) => (isObject(q) ? { ...q, model } : q));
    return { ...r, meta: { ...r.meta, stream: false, includeUsage: false }, body: { ...r.body, requests } };
  };
}

function embedDirections(client: "embed-content" | "batch-embed-contents"): Direction[] {
  const batch = client === "batch-embed-contents";
  return [
    {
      client,
      provider: batch ? "gemini-embed" : "gemini-embed-content",
      request: geminiEmbedRequest(batch),
      response: geminiAnswer,
    },
    {
      client,
      provider: "embeddings",
      request: (b, m) => embedToOpenAiRequest(b, m, batch),
      response: (b) => openAiToEmbedResponse(b, batch),
    },
    {
      client,
      provider: "vertex-embed",
      request: (b, m) => embedToVertexRequest(b, m, batch),
      response: (b) => vertexToEmbedResponse(b, batch),
    },
    {
      client,
      provider: "titan-embed",
      request: (b, m) => embedToTitanRequest(b, m, batch),
      response: (b) => titanToEmbedResponse(b, batch),
    },
  ];
}

export const GEMINI_EMBED_DIRECTIONS: readonly Direction[] = [
  ...embedDirections("embed-content"),
  ...embedDirections("batch-embed-contents"),
];
