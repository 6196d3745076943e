// Token accounting: one neutral usage shape read from any response or stream, for rate limits and access logs.
import type { ProviderFormat } from "./formats/names.js";
import { isObject, num } from "./json.js";

export interface TokenUsage {
  /** All prompt tokens, cached ones included (what a token limit should count). */
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** Prompt tokens read from the provider's prompt cache. */
  cacheReadTokens?: number;
  /** Prompt tokens written to the provider's prompt cache. */
  cacheWriteTokens?: number;
  /** Output tokens the model spent reasoning (part of `outputTokens`), where the provider reports them apart. */
  reasoningTokens?: number;
}

export function makeUsage(
  input: number,
  output: number,
  total?: number,
  cacheRead?: number,
  cacheWrite?: number,
  reasoning?: number,
): TokenUsage {
  const u: TokenUsage = { inputTokens: input, outputTokens: output, totalTokens: total ?? input + output };
  if (cacheRead !== undefined && cacheRead > 0) u.cacheReadTokens = cacheRead;
  if (cacheWrite !== undefined && cacheWrite > 0) u.cacheWriteTokens = cacheWrite;
  if (reasoning !== undefined && reasoning > 0) u.reasoningTokens = reasoning;
  return u;
}

/** Usage of a chat-completions `usage` object (also the shape of embeddings usage). */
export function usageFromChat(u: unknown): TokenUsage | undefined {
  if (!isObject(u)) return undefined;
  const input = num(u.prompt_tokens) ?? 0;
  const output = num(u.completion_tokens) ?? 0;
  const d = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const c = isObject(u.completion_tokens_details) ? u.completion_tokens_details : {};
  return makeUsage(
    input,
    output,
    num(u.total_tokens),
    num(d.cached_tokens),
    num(d.cache_creation_tokens),
    num(c.reasoning_tokens),
  );
}

/** Anthropic counts cached prompt tokens apart from `input_tokens`; they are added back so limits see the whole prompt. */
export function usageFromMessages(u: unknown): TokenUsage | undefined {
  if (!isObject(u)) return undefined;
  const read = num(u.cache_read_input_tokens) ?? 0;
  const write = num(u.cache_creation_input_tokens) ?? 0;
  const input = (num(u.input_tokens) ?? 0) + read + write;
  return makeUsage(input, num(u.output_tokens) ?? 0, undefined, read, write);
}

export function usageFromResponses(u: unknown): TokenUsage | undefined {
  if (!isObject(u)) return undefined;
  const d = isObject(u.input_tokens_details) ? u.input_tokens_details : {};
  const input = num(u.input_tokens) ?? 0;
  const output = num(u.output_tokens) ?? 0;
  const o = isObject(u.output_tokens_details) ? u.output_tokens_details : {};
  return makeUsage(input, output, num(u.total_tokens), num(d.cached_tokens), undefined, num(o.reasoning_tokens));
}

/** Bedrock, like Anthropic, leaves cache reads and writes out of `inputTokens`; `totalTokens` has them all. */
export function usageFromConverse(u: unknown): TokenUsage | undefined {
  if (!isObject(u)) return undefined;
  const read = num(u.cacheReadInputTokens) ?? 0;
  const write = num(u.cacheWriteInputTokens) ?? 0;
  const input = (num(u.inputTokens) ?? 0) + read + write;
  const output = num(u.outputTokens) ?? 0;
  return makeUsage(input, output, num(u.totalTokens), read, write);
}

/** Gemini's candidate count leaves out thinking tokens, which are billed as output; its prompt count includes the
 * cached tokens but not the tool-use prompt (search results the model read). */
export function usageFromGemini(u: unknown): TokenUsage | undefined {
  if (!isObject(u)) return undefined;
  const input = (num(u.promptTokenCount) ?? 0) + (num(u.toolUsePromptTokenCount) ?? 0);
  const output = (num(u.candidatesTokenCount) ?? 0) + (num(u.thoughtsTokenCount) ?? 0);
  return makeUsage(
    input,
    output,
    num(u.totalTokenCount),
    num(u.cachedContentTokenCount),
    undefined,
    num(u.thoughtsTokenCount),
  );
}

/** Usage of a whole (non-streamed) response body in a provider's format. */
export function extractUsage(format: ProviderFormat, body: unknown): TokenUsage | undefined {
  if (!isObject(body)) return undefined;
  switch (format) {
    case "chat-completions":
    case "embeddings":
      return usageFromChat(body.usage);
    case "messages":
    case "vertex-messages":
      return usageFromMessages(body.usage);
    case "responses":
      return usageFromResponses(body.usage);
    case "converse":
      return usageFromConverse(body.usage);
    case "generate-content":
      return usageFromGemini(body.usageMetadata);
    case "count-tokens":
    case "vertex-messages-count-tokens": {
      const n = num(body.input_tokens);
      return n === undefined ? undefined : makeUsage(n, 0);
    }
    case "converse-count-tokens": {
      const n = num(body.inputTokens);
      return n === undefined ? undefined : makeUsage(n, 0);
    }
    case "gemini-count-tokens":
    case "vertex-count-tokens": {
      const n = num(body.totalTokens);
      return n === undefined ? undefined : makeUsage(n, 0);
    }
    case "titan-embed": {
      const n = num(body.inputTextTokenCount);
      return n === undefined ? undefined : makeUsage(n, 0);
    }
    case "gemini-embed":
    case "bedrock-rerank":
    case "vertex-rank":
      return undefined; // batchEmbedContents and the cloud rerank APIs report no token counts
    case "vertex-embed": {
      const predictions = Array.isArray(body.predictions) ? body.predictions : [];
      let n = 0;
      for (const p of predictions) {
        const e = isObject(p) && isObject(p.embeddings) ? p.embeddings : {};
        n += (isObject(e.statistics) ? num(e.statistics.token_count) : undefined) ?? 0;
      }
      return predictions.length === 0 ? undefined : makeUsage(n, 0);
    }
    case "rerank": {
      const meta = isObject(body.meta) ? body.meta : {};
      const t = isObject(meta.tokens) ? meta.tokens : isObject(meta.billed_units) ? meta.billed_units : {};
      const input = num(t.input_tokens);
      return input === undefined ? undefined : makeUsage(input, num(t.output_tokens) ?? 0);
    }
  }
}
