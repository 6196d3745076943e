// The registry of supported translation directions, keyed `client→provider`. Each direction names its request and
// response translators and how to build its stream translator. Adding a format is adding entries here, not branches.
import { errorBody, invalidRequest, type LlmError, parseProviderError } from "./errors.js";
import type { MessagesStreamEvent } from "./formats/messages.js";
import type { ClientFormat, ProviderFormat } from "./formats/names.js";
import {
  GEMINI_CLIENT_DIRECTIONS,
  GEMINI_COUNT_DIRECTIONS,
  GEMINI_EMBED_DIRECTIONS,
} from "./gemini-client-directions.js";
import { isObject, type JsonObject, str } from "./json.js";
import type { Direction } from "./registry-types.js";
import {
  awsEventStreamDecoder,
  chain,
  type PassthroughErrorEvent,
  passthroughStream,
  pipeline,
  type StreamMapper,
  sseDecoder,
} from "./stream.js";
import { ConverseToChatStream, chatToConverseRequest, converseToChatResponse } from "./translate/chat-to-converse.js";
import { chatToGeminiRequest, GeminiToChatStream, geminiToChatResponse } from "./translate/chat-to-generate-content.js";
import { chatToMessagesRequest, MessagesToChatStream, messagesToChatResponse } from "./translate/chat-to-messages.js";
import {
  chatToResponsesRequest,
  ResponsesToChatStream,
  responsesToChatResponse,
} from "./translate/chat-to-responses.js";
import { anthropicErrorEvent, type ChatStreamItem, chatEncoder, messagesEncoder } from "./translate/common.js";
import type {
  RequestMeta,
  RequestResult,
  RequestTranslator,
  ResponseResult,
  ResponseTranslator,
  TranslateContext,
} from "./translate/context.js";
import {
  converseToCountTokensResponse,
  countTokensToConverseRequest,
  countTokensToGeminiRequest,
  countTokensToVertexRequest,
  geminiToCountTokensResponse,
} from "./translate/count-tokens.js";
import {
  embeddingsToGeminiRequest,
  embeddingsToTitanRequest,
  embeddingsToVertexRequest,
  geminiToEmbeddingsResponse,
  titanToEmbeddingsResponse,
  vertexToEmbeddingsResponse,
} from "./translate/embeddings.js";
import { ChatToMessagesStream, chatToMessagesResponse, messagesToChatRequest } from "./translate/messages-to-chat.js";
import {
  ConverseToMessagesStream,
  converseToMessagesResponse,
  messagesToConverseRequest,
} from "./translate/messages-to-converse.js";
import {
  bedrockToRerankResponse,
  rerankToBedrockRequest,
  rerankToVertexRequest,
  vertexToRerankResponse,
} from "./translate/rerank.js";
import {
  ChatToResponsesStream,
  chatToResponsesResponse,
  responsesEncoder,
  responsesToChatRequest,
} from "./translate/responses-to-chat.js";
import { anthropicEvent, jsonOrError, responsesEvent } from "./upstream-events.js";
import { extractUsage, type TokenUsage, usageFromChat, usageFromMessages, usageFromResponses } from "./usage.js";

export type { Direction, StreamFactory } from "./registry-types.js";

// ---- passthrough (same format both sides; only the model may change) ----

function passthroughRequest(client: ClientFormat): RequestTranslator {
  return (body, providerModel) => {
    if (!isObject(body))
      return {
        ok: false,
        error: { status: 400, kind: "invalid_request", message: "request body must be a JSON object" },
      };
    const model = providerModel ?? str(body.model);
    if (model === undefined)
      return { ok: false, error: { status: 400, kind: "invalid_request", message: "model is required" } };
    const out = { ...(body as JsonObject) };
    if (providerModel !== undefined) out.model = providerModel;
    const stream = out.stream === true;
    const so = isObject(out.stream_options) ? out.stream_options : {};
    return {
      ok: true,
      body: out,
      meta: { model, stream, includeUsage: client === "chat-completions" ? so.include_usage === true : stream },
    };
  };
}

function passthroughResponse(provider: ProviderFormat): ResponseTranslator {
  return (body) => {
    if (!isObject(body))
      return { ok: false, error: { status: 502, kind: "server", message: "malformed response from upstream" } };
    const usage = extractUsage(provider, body);
    return usage === undefined ? { ok: true, body: body as JsonObject } : { ok: true, body: body as JsonObject, usage };
  };
}

const chatStreamUsage = (_ev: unknown, json: unknown): TokenUsage | undefined =>
  isObject(json) ? usageFromChat(json.usage) : undefined;
/** Anthropic puts input tokens in message_start and the final counts in message_delta; merging both gives the total. */
function messagesStreamUsage(): (ev: unknown, json: unknown) => TokenUsage | undefined {
  const raw: Record<string, unknown> = {};
  return (_ev, json) => {
    if (!isObject(json)) return undefined;
    const u = json.type === "message_start" && isObject(json.message) ? json.message.usage : json.usage;
    if (!isObject(u)) return undefined;
    for (const [k, v] of Object.entries(u)) if (v !== null && v !== undefined) raw[k] = v;
    return usageFromMessages(raw);
  };
}
const responsesStreamUsage = (_ev: unknown, json: unknown): TokenUsage | undefined =>
  isObject(json) && isObject(json.response) ? usageFromResponses(json.response.usage) : undefined;

/** How a passthrough stream that breaks ends: the error event a translated stream to the same client ends with. */
const chatStreamError: PassthroughErrorEvent = (err) => chatEncoder.encode({ error: err });
const messagesStreamError: PassthroughErrorEvent = (err) => messagesEncoder.encode(anthropicErrorEvent(err));
/** Responses events are numbered: the error follows the last event the client had. */
const responsesStreamError: PassthroughErrorEvent = (err, last) => {
  const e = errorBody("responses", err) as { error: { type: string; code: string | null; param: string | null } };
  const seq = isObject(last) && typeof last.sequence_number === "number" ? last.sequence_number + 1 : 0;
  return responsesEncoder.encode({
    type: "error",
    sequence_number: seq,
    code: e.error.code ?? e.error.type,
    message: err.message,
    param: e.error.param,
  });
};

// ---- the directions ----

const list: Direction[] = [
  {
    client: "chat-completions",
    provider: "chat-completions",
    request: passthroughRequest("chat-completions"),
    response: passthroughResponse("chat-completions"),
    stream: (_m, _c, onUsage) => passthroughStream(chatStreamUsage, chatStreamError, onUsage),
    framing: "sse",
  },
  {
    client: "chat-completions",
    provider: "messages",
    request: (b, m) => chatToMessagesRequest(b, m),
    response: messagesToChatResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(anthropicEvent), new MessagesToChatStream(meta, ctx), chatEncoder, onUsage),
    framing: "sse",
  },
  {
    client: "chat-completions",
    provider: "converse",
    request: (b, m) => chatToConverseRequest(b, m),
    response: converseToChatResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(awsEventStreamDecoder(), new ConverseToChatStream(meta, ctx), chatEncoder, onUsage),
    framing: "aws-eventstream",
  },
  {
    client: "chat-completions",
    provider: "generate-content",
    request: (b, m) => chatToGeminiRequest(b, m),
    response: geminiToChatResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(jsonOrError), new GeminiToChatStream(meta, ctx), chatEncoder, onUsage),
    framing: "sse",
  },
  {
    client: "chat-completions",
    provider: "responses",
    request: (b, m) => chatToResponsesRequest(b, m),
    response: responsesToChatResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(responsesEvent), new ResponsesToChatStream(meta, ctx), chatEncoder, onUsage),
    framing: "sse",
  },
  {
    client: "messages",
    provider: "messages",
    request: passthroughRequest("messages"),
    response: passthroughResponse("messages"),
    stream: (_m, _c, onUsage) => passthroughStream(messagesStreamUsage(), messagesStreamError, onUsage),
    framing: "sse",
  },
  {
    client: "messages",
    provider: "chat-completions",
    request: (b, m) => messagesToChatRequest(b, m),
    response: chatToMessagesResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(jsonOrError), new ChatToMessagesStream(meta, ctx), messagesEncoder, onUsage),
    framing: "sse",
  },
  {
    client: "messages",
    provider: "converse",
    request: (b, m) => messagesToConverseRequest(b, m),
    response: converseToMessagesResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(awsEventStreamDecoder(), new ConverseToMessagesStream(meta, ctx), messagesEncoder, onUsage),
    framing: "aws-eventstream",
  },
  {
    // Messages → a Responses-only provider goes through chat completions, as Responses → Converse does.
    client: "messages",
    provider: "responses",
    request: (b, m) => {
      const chat = messagesToChatRequest(b, m);
      if (!chat.ok) return chat;
      // Responses has no top-k sampling: dropping it would change how the answer is sampled.
      if (typeof chat.body.top_k === "number")
        return { ok: false, error: invalidRequest("top_k is not supported by this provider", "top_k") };
      return withMeta(inClientTerms("messages", chatToResponsesRequest(chat.body, chat.meta.model)), chat.meta);
    },
    response: (b, meta, ctx) => {
      const chat = responsesToChatResponse(b, meta, ctx);
      return chat.ok ? chatToMessagesResponse(chat.body, meta, ctx) : chat;
    },
    stream: (meta, ctx, onUsage) =>
      pipeline(
        sseDecoder(responsesEvent),
        chain(new ResponsesToChatStream({ ...meta, includeUsage: true }, ctx), chatItemsToMessages(meta, ctx)),
        messagesEncoder,
        onUsage,
      ),
    framing: "sse",
  },
  {
    client: "responses",
    provider: "responses",
    request: passthroughRequest("responses"),
    response: passthroughResponse("responses"),
    stream: (_m, _c, onUsage) => passthroughStream(responsesStreamUsage, responsesStreamError, onUsage),
    framing: "sse",
  },
  {
    client: "responses",
    provider: "chat-completions",
    request: (b, m) => responsesToChatRequest(b, m),
    response: chatToResponsesResponse,
    stream: (meta, ctx, onUsage) =>
      pipeline(sseDecoder(jsonOrError), new ChatToResponsesStream(meta, ctx), responsesEncoder, onUsage),
    framing: "sse",
  },
  {
    // Responses → Bedrock goes through chat-completions: Converse has no notion the detour loses for this client.
    client: "responses",
    provider: "converse",
    request: (b, m) => {
      const chat = responsesToChatRequest(b, m);
      return chat.ok
        ? withMeta(inClientTerms("responses", chatToConverseRequest(chat.body, chat.meta.model)), chat.meta)
        : chat;
    },
    response: (b, meta, ctx) => {
      const chat = converseToChatResponse(b, meta, ctx);
      return chat.ok ? chatToResponsesResponse(chat.body, meta, ctx) : chat;
    },
    stream: (meta, ctx, onUsage) =>
      pipeline(
        awsEventStreamDecoder(),
        chain(new ConverseToChatStream({ ...meta, includeUsage: true }, ctx), new ChatToResponsesStream(meta, ctx)),
        responsesEncoder,
        onUsage,
      ),
    framing: "aws-eventstream",
  },
  {
    client: "embeddings",
    provider: "embeddings",
    request: passthroughRequest("embeddings"),
    response: passthroughResponse("embeddings"),
  },
  {
    client: "embeddings",
    provider: "gemini-embed",
    request: (b, m) => embeddingsToGeminiRequest(b, m),
    response: geminiToEmbeddingsResponse,
  },
  {
    client: "embeddings",
    provider: "titan-embed",
    request: (b, m) => embeddingsToTitanRequest(b, m),
    response: titanToEmbeddingsResponse,
  },
  {
    client: "embeddings",
    provider: "vertex-embed",
    request: (b, m) => embeddingsToVertexRequest(b, m),
    response: vertexToEmbeddingsResponse,
  },
  {
    client: "count-tokens",
    provider: "count-tokens",
    request: passthroughRequest("count-tokens"),
    response: passthroughResponse("count-tokens"),
  },
  {
    client: "count-tokens",
    provider: "converse-count-tokens",
    request: (b, m) => countTokensToConverseRequest(b, m),
    response: converseToCountTokensResponse,
  },
  {
    client: "count-tokens",
    provider: "gemini-count-tokens",
    request: (b, m) => countTokensToGeminiRequest(b, m),
    response: geminiToCountTokensResponse,
  },
  {
    client: "count-tokens",
    provider: "vertex-count-tokens",
    request: (b, m) => countTokensToVertexRequest(b, m),
    response: geminiToCountTokensResponse,
  },
  {
    client: "rerank",
    provider: "rerank",
    request: passthroughRequest("rerank"),
    response: passthroughResponse("rerank"),
  },
  {
    client: "rerank",
    provider: "bedrock-rerank",
    request: (b, m) => rerankToBedrockRequest(b, m),
    response: bedrockToRerankResponse,
  },
  {
    client: "rerank",
    provider: "vertex-rank",
    request: (b, m) => rerankToVertexRequest(b, m),
    response: vertexToRerankResponse,
  },
  ...GEMINI_CLIENT_DIRECTIONS,
  ...GEMINI_COUNT_DIRECTIONS,
  ...GEMINI_EMBED_DIRECTIONS,
];

/**
 * Claude on Vertex AI (`vertex-messages`): the messages format, with the model in the URL instead of the body and the
 * API version in the body (`anthropic_version`); responses and streams are the messages format's. Each direction to
 * `messages` has a twin here.
 */
export const VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16";
for (const d of [...list]) {
  if (d.provider !== "messages") continue;
  list.push({
    ...d,
    provider: "vertex-messages",
    request: (body, model, ctx) => {
      const r = d.request(body, model, ctx);
      if (!r.ok) return r;
      const { model: _inUrl, ...rest } = r.body;
      return { ...r, body: { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...rest } };
    },
  });
}
/** Claude's token count on Vertex AI: Anthropic's body with the version, the model kept in it (one URL for all). */
const countTokens = findDirectionIn(list, "count-tokens", "count-tokens");
list.push({
  ...countTokens,
  provider: "vertex-messages-count-tokens",
  request: (body, model, ctx) => {
    const r = countTokens.request(body, model, ctx);
    return r.ok ? { ...r, body: { anthropic_version: VERTEX_ANTHROPIC_VERSION, ...r.body } } : r;
  },
});

function findDirectionIn(ds: readonly Direction[], client: ClientFormat, provider: ProviderFormat): Direction {
  const d = ds.find((x) => x.client === client && x.provider === provider);
  if (d === undefined) throw new Error(`no direction ${client}→${provider}`);
  return d;
}

/** ChatToMessagesStream after a translator into chat items: an item holding an error ends the messages stream. */
function chatItemsToMessages(
  meta: RequestMeta,
  ctx: TranslateContext,
): StreamMapper<ChatStreamItem, MessagesStreamEvent> {
  const m = new ChatToMessagesStream(meta, ctx);
  return {
    event: (ev, emit) => ("error" in ev ? m.error(ev.error, emit) : m.event(ev as unknown as JsonObject, emit)),
    error: (err, emit) => m.error(err, emit),
    end: (emit) => m.end(emit),
    usage: () => m.usage(),
  };
}

/** The client's meta on a chained translation's result, keeping what the last step learnt (renamed tools). */
/** The client's name of a chat field its request was read into, for a refusal of the second step of a chain. */
const CLIENT_NAME_OF_CHAT: Readonly<Partial<Record<ClientFormat, Readonly<Record<string, string>>>>> = {
  messages: {
    stop: "stop_sequences",
    max_completion_tokens: "max_tokens",
    reasoning_effort: "thinking",
    response_format: "output_config.format",
    user: "metadata.user_id",
  },
  responses: {
    verbosity: "text.verbosity",
    response_format: "text.format",
    reasoning_effort: "reasoning.effort",
    max_completion_tokens: "max_output_tokens",
  },
};

function inClientTerms(client: ClientFormat, r: RequestResult): RequestResult {
  if (r.ok || r.error.param === undefined) return r;
  const name = CLIENT_NAME_OF_CHAT[client]?.[r.error.param];
  return name === undefined
    ? r
    : { ok: false, error: { ...r.error, param: name, message: `${name}: ${r.error.message}` } };
}

function withMeta(r: RequestResult, meta: RequestMeta): RequestResult {
  if (!r.ok) return r;
  return { ...r, meta: r.meta.toolNames === undefined ? meta : { ...meta, toolNames: r.meta.toolNames } };
}

const directions = new Map<string, Direction>(list.map((d) => [`${d.client}→${d.provider}`, d]));

export function findDirection(client: ClientFormat, provider: ProviderFormat): Direction | undefined {
  return directions.get(`${client}→${provider}`);
}

export function allDirections(): readonly Direction[] {
  return list;
}

/** A provider's error (any status ≥ 400, any format) in the client's format, with the provider's status kept. */
export function translateError(
  client: ClientFormat,
  status: number,
  body: string,
  headers?: Readonly<Record<string, string>>,
): { status: number; body: JsonObject; error: LlmError } {
  const error = parseProviderError(status, body, headers);
  return { status: error.status, body: errorBody(client, error), error };
}

/** An error Sluice itself produces (a rejected client request) in the client's format. */
export function clientError(client: ClientFormat, error: LlmError): { status: number; body: JsonObject } {
  return { status: error.status, body: errorBody(client, error) };
}

export type { RequestResult, ResponseResult };
