// Anthropic count_tokens client → Bedrock CountTokens and Gemini countTokens.
import { isObject, type JsonObject, num } from "../json.js";
import { makeUsage } from "../usage.js";
import { chatToGeminiRequest } from "./chat-to-generate-content.js";
import type { RequestMeta, RequestResult, ResponseResult } from "./context.js";
import { readMessagesRequest } from "./messages-request.js";
import { messagesToChatRequest } from "./messages-to-chat.js";
import { messagesToConverseParts } from "./messages-to-converse.js";

/**
 * A count leaves out what only Anthropic runs (server tools, `mcp_servers`, `container`): another provider cannot
 * count them, and refusing the count would fail a client that only estimates its context (approximate: their few
 * definition tokens are not counted). A request that uses them is refused when it is sent for an answer.
 */
function withoutAnthropicOnly(body: unknown): unknown {
  if (!isObject(body)) return body;
  const { mcp_servers: _m, container: _c, ...rest } = body;
  if (!Array.isArray(rest.tools)) return rest;
  return {
    ...rest,
    tools: rest.tools.filter((t) => !isObject(t) || t.type === undefined || t.type === null || t.type === "custom"),
  };
}

export function countTokensToConverseRequest(input: unknown, providerModel: string | undefined): RequestResult {
  const body = withoutAnthropicOnly(input);
  const r = readMessagesRequest(body, providerModel, false);
  if ("kind" in r) return { ok: false, error: r };
  const parts = messagesToConverseParts(r.req);
  if ("kind" in parts) return { ok: false, error: parts };
  const converse: JsonObject = { messages: parts.messages as unknown as JsonObject[] };
  if (parts.system.length > 0) converse.system = parts.system as unknown as JsonObject[];
  if (parts.toolConfig !== undefined) converse.toolConfig = parts.toolConfig as unknown as JsonObject;
  return { ok: true, body: { input: { converse } }, meta: { ...r.meta, stream: false, includeUsage: false } };
}

export function converseToCountTokensResponse(body: unknown, _meta: RequestMeta): ResponseResult {
  const n = isObject(body) ? num(body.inputTokens) : undefined;
  if (n === undefined)
    return { ok: false, error: { status: 502, kind: "server", message: "malformed CountTokens response" } };
  return { ok: true, body: { input_tokens: n }, usage: makeUsage(n, 0) };
}

/** Gemini counts a whole generateContent request, so the Messages request goes through the same path as a chat one. */
export function countTokensToGeminiRequest(input: unknown, providerModel: string | undefined): RequestResult {
  const body = withoutAnthropicOnly(input);
  const withMax = isObject(body) ? { ...body, max_tokens: 1, stream: false } : body;
  const chat = messagesToChatRequest(withMax, providerModel);
  if (!chat.ok) return chat;
  const g = chatToGeminiRequest(chat.body, chat.meta.model);
  if (!g.ok) return g;
  const req: JsonObject = { ...g.body, model: `models/${chat.meta.model}` };
  delete req.generationConfig;
  return {
    ok: true,
    body: { generateContentRequest: req },
    meta: { ...chat.meta, stream: false, includeUsage: false },
  };
}

/** Vertex AI's countTokens takes the generateContent fields themselves (contents, systemInstruction, tools). */
export function countTokensToVertexRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const g = countTokensToGeminiRequest(body, providerModel);
  if (!g.ok) return g;
  const req = isObject(g.body.generateContentRequest) ? { ...g.body.generateContentRequest } : {};
  delete req.model;
  return { ...g, body: req };
}

/** Gemini and Vertex AI answer `{totalTokens}` (Vertex adds `totalBillableCharacters`). */
export function geminiToCountTokensResponse(body: unknown, _meta: RequestMeta): ResponseResult {
  const n = isObject(body) ? num(body.totalTokens) : undefined;
  if (n === undefined)
    return { ok: false, error: { status: 502, kind: "server", message: "malformed countTokens response" } };
  return { ok: true, body: { input_tokens: n }, usage: makeUsage(n, 0) };
}
