// OpenAI embeddings client → Gemini batchEmbedContents, Vertex AI predict and Bedrock Titan text embeddings.
import { invalidRequest, type LlmError } from "../errors.js";
import type { EmbeddingsResponse } from "../formats/embeddings.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import { usageFromChat } from "../usage.js";
import type { RequestMeta, RequestResult, ResponseResult } from "./context.js";

interface EmbeddingsIn {
  model: string;
  texts: string[];
  dimensions?: number;
  base64: boolean;
}

function readEmbeddings(body: unknown, providerModel: string | undefined): EmbeddingsIn | LlmError {
  if (!isObject(body)) return invalidRequest("request body must be a JSON object");
  const model = providerModel ?? str(body.model);
  if (model === undefined) return invalidRequest("you must provide a model parameter", "model");
  const input = body.input;
  let texts: string[];
  if (typeof input === "string") texts = [input];
  else if (Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === "string"))
    texts = input as string[];
  else
    return invalidRequest(
      "input must be a string or an array of strings for this provider (token arrays are OpenAI-only)",
      "input",
    );
  const r: EmbeddingsIn = { model, texts, base64: body.encoding_format === "base64" };
  const dim = num(body.dimensions);
  if (dim !== undefined) r.dimensions = dim;
  return r;
}

/** The openai SDKs ask for base64 by default: little-endian float32, as OpenAI encodes it. */
export function floatsToBase64(values: number[]): string {
  const f = new Float32Array(values);
  return Buffer.from(f.buffer, f.byteOffset, f.byteLength).toString("base64");
}

function response(vectors: number[][], meta: RequestMeta & { base64: boolean }, promptTokens: number): JsonObject {
  const out: EmbeddingsResponse = {
    object: "list",
    data: vectors.map((v, index) => ({ object: "embedding", index, embedding: meta.base64 ? floatsToBase64(v) : v })),
    model: meta.model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
  return out as unknown as JsonObject;
}

export function embeddingsToGeminiRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readEmbeddings(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  const model = r.model.startsWith("models/") ? r.model : `models/${r.model}`;
  const requests = r.texts.map((text) => {
    const q: JsonObject = { model, content: { parts: [{ text }] } };
    if (r.dimensions !== undefined) q.outputDimensionality = r.dimensions;
    return q;
  });
  // encoding_format travels in meta: the provider never sees it, the response side applies it
  return { ok: true, body: { requests }, meta: { model: r.model, stream: false, includeUsage: r.base64 } };
}

export function geminiToEmbeddingsResponse(body: unknown, meta: RequestMeta): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.embeddings)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed batchEmbedContents response" } };
  }
  const vectors = body.embeddings.map((e) =>
    isObject(e) ? arr(e.values).filter((x): x is number => typeof x === "number") : [],
  );
  // batchEmbedContents reports no token usage
  return { ok: true, body: response(vectors, { ...meta, base64: meta.includeUsage }, 0) };
}

export function embeddingsToTitanRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readEmbeddings(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  if (r.texts.length !== 1)
    return { ok: false, error: invalidRequest("this provider embeds one input per request", "input") };
  const out: JsonObject = { inputText: r.texts[0]! };
  if (r.dimensions !== undefined) out.dimensions = r.dimensions;
  return { ok: true, body: out, meta: { model: r.model, stream: false, includeUsage: r.base64 } };
}

export function titanToEmbeddingsResponse(body: unknown, meta: RequestMeta): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.embedding)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed Titan embeddings response" } };
  }
  const tokens = num(body.inputTextTokenCount) ?? 0;
  const out = response(
    [body.embedding.filter((x): x is number => typeof x === "number")],
    { ...meta, base64: meta.includeUsage },
    tokens,
  );
  const usage = usageFromChat(out.usage);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}

/**
 * Vertex AI's text embedding models (`text-embedding-005`, `gemini-embedding-001` ...) through `:predict`: one instance
 * per text, `dimensions` as `parameters.outputDimensionality`. (How many instances a call may hold depends on the
 * model: Vertex AI answers a clear 400 past it.)
 */
export function embeddingsToVertexRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readEmbeddings(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  const out: JsonObject = { instances: r.texts.map((content) => ({ content })) };
  if (r.dimensions !== undefined) out.parameters = { outputDimensionality: r.dimensions };
  return { ok: true, body: out, meta: { model: r.model, stream: false, includeUsage: r.base64 } };
}

/** `predictions[i].embeddings.values`; each prediction's `statistics.token_count` adds up to the prompt tokens. */
export function vertexToEmbeddingsResponse(body: unknown, meta: RequestMeta): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.predictions)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed Vertex AI predict response" } };
  }
  let tokens = 0;
  const vectors = body.predictions.map((p) => {
    const e = isObject(p) && isObject(p.embeddings) ? p.embeddings : {};
    tokens += (isObject(e.statistics) ? num(e.statistics.token_count) : undefined) ?? 0;
    return arr(e.values).filter((x): x is number => typeof x === "number");
  });
  const out = response(vectors, { ...meta, base64: meta.includeUsage }, tokens);
  const usage = usageFromChat(out.usage);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}
