// `promptCaching` of an AI policy (Document 2) for Bedrock Converse: cache points (`{"cachePoint": {"type":
// "default"}}` blocks) at the end of the tool list, of the system prompt and of one message, so Bedrock reuses the
// prompt prefix up to them. Bedrock reads a prompt in the order tools, system, messages, and caches a prefix only from
// a minimum size on, so a cache point is placed only where the prefix before it is estimated at `minTokens` or more
// (words × 1.3, the spec's estimate). A request holds at most 4 cache points; those the client wrote (messages
// `cache_control`) count and are never removed.

import { isObject, type JsonObject } from "../json.js";

export interface PromptCaching {
  /** Default true. */
  readonly cacheSystem?: boolean;
  /** Default true. */
  readonly cacheMessages?: boolean;
  /** Default false. */
  readonly cacheTools?: boolean;
  /** Default 1024. */
  readonly minTokens?: number;
  /** Default 0: the second-to-last message; n moves the cache point n messages earlier. */
  readonly cacheMessageOffset?: number;
}

/** Bedrock's limit of cache points per request. */
const MAX_CACHE_POINTS = 4;
const CACHE_POINT = { cachePoint: { type: "default" } };

/**
 * Whether Bedrock caches prompts for a model id: Claude 3 and later and Nova do; Claude 2 / Instant and other families
 * reject cache points. An opaque ARN (an application inference profile) does not say, and is given the benefit.
 */
export function supportsPromptCaching(model: string): boolean {
  const m = model.toLowerCase();
  if (/anthropic\.claude-(v2|instant)/.test(m)) return false;
  if (m.includes("anthropic.claude") || m.includes("amazon.nova")) return true;
  return m.startsWith("arn:") && !/foundation-model\//.test(m);
}

/** The spec's estimate of a value's tokens: its words (in every string it holds) times 1.3. */
export function estimateTokens(value: unknown): number {
  let words = 0;
  const walk = (v: unknown): void => {
    if (typeof v === "string") words += v.split(/\s+/).filter((w) => w !== "").length;
    else if (Array.isArray(v)) v.forEach(walk);
    else if (isObject(v)) Object.values(v).forEach(walk);
  };
  walk(value);
  return words * 1.3;
}

const isCachePoint = (b: unknown): boolean => isObject(b) && b.cachePoint !== undefined;

function countCachePoints(body: JsonObject): number {
  let n = 0;
  const count = (list: unknown) => {
    if (Array.isArray(list)) for (const b of list) if (isCachePoint(b)) n++;
  };
  count(body.system);
  if (isObject(body.toolConfig)) count(body.toolConfig.tools);
  if (Array.isArray(body.messages)) for (const m of body.messages) if (isObject(m)) count(m.content);
  return n;
}

/** Appends a cache point to `list` unless it already ends with one; whether it did. */
function appendCachePoint(list: unknown[]): boolean {
  if (list.length === 0 || isCachePoint(list[list.length - 1])) return false;
  list.push({ ...CACHE_POINT });
  return true;
}

/** A Converse request body with the cache points of `caching` added (the input is not modified). */
export function addConverseCachePoints(input: JsonObject, model: string, caching: PromptCaching): JsonObject {
  if (!supportsPromptCaching(model)) return input;
  const body = structuredClone(input);
  const minTokens = caching.minTokens ?? 1024;
  let budget = MAX_CACHE_POINTS - countCachePoints(body);
  const tools = isObject(body.toolConfig) && Array.isArray(body.toolConfig.tools) ? body.toolConfig.tools : [];
  const system = Array.isArray(body.system) ? body.system : [];
  const messages = Array.isArray(body.messages) ? body.messages : [];
  // Running estimate of the prefix, in Bedrock's order.
  let prefix = estimateTokens(tools);
  if (budget > 0 && caching.cacheTools === true && prefix >= minTokens && appendCachePoint(tools)) budget--;
  prefix += estimateTokens(system);
  if (budget > 0 && caching.cacheSystem !== false && prefix >= minTokens && appendCachePoint(system)) budget--;
  const at = messages.length - 2 - (caching.cacheMessageOffset ?? 0);
  if (budget > 0 && caching.cacheMessages !== false && at >= 0) {
    prefix += estimateTokens(messages.slice(0, at + 1));
    const m = messages[at];
    if (prefix >= minTokens && isObject(m) && Array.isArray(m.content)) appendCachePoint(m.content);
  }
  return body;
}
