// What the router-level stage knows once a response is complete, as the spec's `llm` CEL variable and as Envoy
// dynamic metadata (namespace sluice.dev/llm) for access logs and for the rate limit filter: token counts, models,
// provider, and the value of each `cost` expression of the route's global `Tokens` descriptors.
//
// The `llm` field names are those of the reference implementation of this API: streaming, requestModel,
// responseModel, provider, inputTokens, outputTokens, totalTokens, cachedInputTokens, cacheCreationInputTokens and,
// for token counting requests, countTokens (which counts as no tokens used).

import type { JsonObject } from "@bufbuild/protobuf";
import type { TokenUsage } from "../../llm/index.js";
import { LLM_METADATA_KEYS, LLM_METADATA_NAMESPACE, type TokenCost } from "../../translate/llm/table.js";
import { evaluateText, requestVariable, toCel } from "./cel.js";

export interface Completion {
  readonly provider?: string;
  /** The model the client asked for. */
  readonly requestModel?: string;
  /** The model that answered (as reported, else the one asked of the provider). */
  readonly responseModel?: string;
  readonly streaming: boolean;
  /** Usage of the response; for a token counting request, the counted tokens are `countTokens` instead. */
  readonly usage?: TokenUsage;
  readonly countTokens?: number;
}

/** The `llm` variable: present fields only, counts as integers. */
export function llmVariable(c: Completion): Record<string, unknown> {
  const u = c.usage;
  return {
    streaming: c.streaming,
    ...(c.requestModel !== undefined ? { requestModel: c.requestModel } : {}),
    ...(c.responseModel !== undefined ? { responseModel: c.responseModel } : {}),
    ...(c.provider !== undefined ? { provider: c.provider } : {}),
    ...(u !== undefined
      ? {
          inputTokens: u.inputTokens,
          outputTokens: u.outputTokens,
          totalTokens: u.totalTokens,
          cachedInputTokens: u.cacheReadTokens ?? 0,
          cacheCreationInputTokens: u.cacheWriteTokens ?? 0,
        }
      : {}),
    ...(c.countTokens !== undefined ? { countTokens: c.countTokens } : {}),
  };
}

/**
 * The hits of a cost expression: a non-negative integer (fractions rounded up). An expression that fails, or gives no
 * number, falls back to the default cost of a Tokens descriptor, the total token count.
 */
export function costOf(
  expression: string,
  c: Completion,
  headers: Readonly<Record<string, string>>,
  identity: Readonly<Record<string, unknown>> = {},
): { value: number; failed: boolean } {
  const v = evaluateText(expression, { ...identity, request: requestVariable(headers), llm: toCel(llmVariable(c)) });
  if (typeof v === "number" && Number.isFinite(v)) return { value: Math.max(0, Math.ceil(v)), failed: false };
  return { value: c.usage?.totalTokens ?? 0, failed: true };
}

/** Dynamic metadata of a completed response (undefined when no usage is known: nothing to count). */
export function completionMetadata(
  c: Completion,
  costs: readonly TokenCost[],
  headers: Readonly<Record<string, string>>,
  onCostFailure: (expression: string) => void,
  identity: Readonly<Record<string, unknown>> = {},
): JsonObject | undefined {
  const u = c.usage;
  if (u === undefined && c.countTokens === undefined) return undefined;
  const costValues: Record<string, number> = {};
  for (const cost of costs) {
    const r = costOf(cost.expression, c, headers, identity);
    if (r.failed) onCostFailure(cost.expression);
    costValues[cost.key] = r.value;
  }
  return {
    [LLM_METADATA_NAMESPACE]: {
      input_tokens: u?.inputTokens ?? 0,
      output_tokens: u?.outputTokens ?? 0,
      [LLM_METADATA_KEYS.totalTokens]: u?.totalTokens ?? 0,
      ...(u?.cacheReadTokens !== undefined ? { cached_input_tokens: u.cacheReadTokens } : {}),
      ...(u?.cacheWriteTokens !== undefined ? { cache_creation_input_tokens: u.cacheWriteTokens } : {}),
      ...(c.countTokens !== undefined ? { count_tokens: c.countTokens } : {}),
      ...(c.provider !== undefined ? { provider: c.provider } : {}),
      ...(c.responseModel !== undefined ? { model: c.responseModel } : {}),
      ...(costs.length > 0 ? { [LLM_METADATA_KEYS.costs]: costValues } : {}),
    },
  };
}
