// Token accounting of a Realtime session Sluice's relay serves. OpenAI's Realtime API reports usage per response, in
// the server's `response.done` event (`response.usage`: input_tokens with input_token_details.cached_tokens,
// output_tokens, total_tokens); the session's context grows with each turn, so every response's input counts again.
// Each response.done is counted as a completed HTTP request is (service.ts #complete): the route's `tokens` buckets
// debited by its total tokens, the LLM metrics by type; the session keeps the sum. A response that leaves a bucket
// spent ends the session (relay.ts): the response that crossed the budget is served, as an HTTP request's is, and the
// upgrade of the next session is refused 429 by the LLM ext_proc until the bucket refills.
//
// Google's Live API reports `usageMetadata` on server messages; its documentation ("Usage metadata about model
// response(s)") does not say whether a message's counts are the turn's or the session's so far, nor how often they
// come. So they are counted the way that cannot overcharge: each field as its increase over the highest value the
// session has reported (a session total charged once whichever it is; per-turn counts charged at least the growth).

import { makeUsage, type TokenUsage } from "../../../llm/usage.js";
import { llmRealtimeUsage } from "../../../observability/llm.js";
import type { LlmRouteEntry } from "../../../translate/llm/table.js";
import type { TokenLimiter } from "../token-limits.js";

const RESPONSE_DONE = Buffer.from('"response.done"');
const USAGE_METADATA = Buffer.from('"usageMetadata"');

const isRec = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined);

/**
 * The usage a provider event reports: a `response.done` with `response.usage`; undefined for any other event. Only
 * events whose bytes name `"response.done"` are parsed (audio deltas, the bulk of a session, are not).
 */
export function realtimeUsage(payload: Buffer): TokenUsage | undefined {
  if (payload.indexOf(RESPONSE_DONE) < 0) return undefined;
  let e: unknown;
  try {
    e = JSON.parse(payload.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!isRec(e) || e.type !== "response.done" || !isRec(e.response) || !isRec(e.response.usage)) return undefined;
  const u = e.response.usage;
  const input = num(u.input_tokens) ?? 0;
  const output = num(u.output_tokens) ?? 0;
  const details = isRec(u.input_token_details) ? u.input_token_details : {};
  return makeUsage(input, output, num(u.total_tokens), num(details.cached_tokens));
}

/**
 * The counts a Live API server message reports in `usageMetadata` (as usageFromGemini reads an HTTP response's: tool
 * use prompts in the input, thoughts in the output; the Live API names the output `responseTokenCount`); undefined for
 * a message without them. Only messages whose bytes name `"usageMetadata"` are parsed.
 */
export function liveUsage(payload: Buffer): TokenUsage | undefined {
  if (payload.indexOf(USAGE_METADATA) < 0) return undefined;
  let m: unknown;
  try {
    m = JSON.parse(payload.toString("utf8"));
  } catch {
    return undefined;
  }
  if (!isRec(m) || !isRec(m.usageMetadata) || typeof m.type === "string") return undefined;
  const u = m.usageMetadata;
  const input = (num(u.promptTokenCount) ?? 0) + (num(u.toolUsePromptTokenCount) ?? 0);
  const output = (num(u.responseTokenCount) ?? num(u.candidatesTokenCount) ?? 0) + (num(u.thoughtsTokenCount) ?? 0);
  return makeUsage(input, output, num(u.totalTokenCount), num(u.cachedContentTokenCount));
}

/** What one session has counted: the sum of its responses' usage. */
export class SessionTokens {
  readonly total: TokenUsage = makeUsage(0, 0);
  responses = 0;
  /** The highest counts a Live API session has reported, field by field (see above). */
  readonly #live = { input: 0, output: 0, total: 0, cached: 0 };

  constructor(
    private readonly limiter: TokenLimiter,
    private readonly entry: LlmRouteEntry,
    /** The metrics' view of the session: its route entry, provider and model. */
    private readonly view: { readonly provider: string; readonly model: string | undefined },
  ) {}

  /**
   * Counts a provider event: for a response.done, its usage, and for a Live API message with `usageMetadata` what it
   * adds to the session's highest counts; and whether that left one of the route's `tokens` buckets spent (the session
   * is to end); undefined for any other event, or a Live API report that adds nothing.
   */
  count(payload: Buffer): { readonly usage: TokenUsage; readonly spent: boolean; readonly live: boolean } | undefined {
    const openai = realtimeUsage(payload);
    const usage = openai ?? this.#liveIncrease(payload);
    if (usage === undefined) return undefined;
    const live = openai === undefined;
    this.responses++;
    const t = this.total;
    t.inputTokens += usage.inputTokens;
    t.outputTokens += usage.outputTokens;
    t.totalTokens += usage.totalTokens;
    if (usage.cacheReadTokens !== undefined) t.cacheReadTokens = (t.cacheReadTokens ?? 0) + usage.cacheReadTokens;
    llmRealtimeUsage(
      {
        entry: this.entry,
        routeType: "Realtime",
        attempt: { provider: this.view.provider },
        ...(this.view.model !== undefined ? { body: { model: this.view.model } } : {}),
      },
      usage,
    );
    const limits = this.entry.tokenLimits;
    if (limits.length === 0) return { usage, spent: false, live };
    this.limiter.consume(limits, usage.totalTokens);
    return { usage, spent: !this.limiter.admit(limits), live };
  }

  #liveIncrease(payload: Buffer): TokenUsage | undefined {
    const u = liveUsage(payload);
    if (u === undefined) return undefined;
    const hw = this.#live;
    const up = (field: keyof typeof hw, v: number) => {
      const d = Math.max(0, v - hw[field]);
      hw[field] = Math.max(hw[field], v);
      return d;
    };
    const input = up("input", u.inputTokens);
    const output = up("output", u.outputTokens);
    const total = up("total", u.totalTokens);
    const cached = up("cached", u.cacheReadTokens ?? 0);
    if (input === 0 && output === 0 && total === 0) return undefined;
    return makeUsage(input, output, total, cached);
  }
}
