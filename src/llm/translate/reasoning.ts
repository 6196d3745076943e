// Reasoning across formats: how much to think (chat `reasoning_effort`, Responses `reasoning.effort`, Messages
// `thinking` / `output_config.effort`, generateContent `thinkingConfig`, Converse model fields), and the thinking a
// provider returns, carried to clients that replay it (Anthropic signatures, Gemini thought signatures).
//
// Efforts and token budgets meet in one table (docs/llm.md "Reasoning"): an effort becomes the budget below; a budget
// becomes the effort whose band it falls in.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatResponse, ChatThinkingBlock } from "../formats/chat-completions.js";
import { arr, isObject, num, str } from "../json.js";

export type Effort = "none" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";

const CHAT_EFFORTS = new Set(["none", "minimal", "low", "medium", "high", "xhigh"]);
const ANTHROPIC_EFFORTS = new Set(["low", "medium", "high", "xhigh", "max"]);

/** Thinking budget (tokens) of each effort, for providers that take a budget (Anthropic, Claude on Bedrock, Gemini 2.x). */
export const EFFORT_BUDGET: Readonly<Record<Exclude<Effort, "none">, number>> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 16384,
  xhigh: 32768,
  max: 32768,
};

/** Anthropic's smallest thinking budget. */
export const MIN_BUDGET = 1024;

/** The effort a budget stands for, for providers that take an effort: below 4096 low, below 16384 medium, else high. */
export function effortOfBudget(budget: number): "low" | "medium" | "high" {
  if (budget < 4096) return "low";
  if (budget < 16384) return "medium";
  return "high";
}

/** chat `reasoning_effort` (or Responses `reasoning.effort`, read into it): undefined when absent. */
export function readChatEffort(v: unknown, path = "reasoning_effort"): Effort | undefined | LlmError {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || !CHAT_EFFORTS.has(v))
    return invalidRequest(`${path} must be one of none, minimal, low, medium, high, xhigh`, path);
  return v as Effort;
}

/** What a Messages request asks: `thinking` (enabled with a budget, adaptive, disabled) and `output_config.effort`. */
export interface MessagesReasoning {
  readonly thinking: { type: "enabled"; budget: number } | { type: "adaptive" } | { type: "disabled" } | undefined;
  readonly effort: Effort | undefined;
}

export function readMessagesReasoning(req: Record<string, unknown>): MessagesReasoning | LlmError {
  let thinking: MessagesReasoning["thinking"];
  const t = req.thinking;
  if (t !== undefined && t !== null) {
    if (!isObject(t)) return invalidRequest("thinking: Input should be an object", "thinking");
    if (t.type === "enabled") {
      const b = num(t.budget_tokens);
      if (b === undefined || !Number.isInteger(b) || b < MIN_BUDGET)
        return invalidRequest(
          `thinking.budget_tokens: Input should be an integer of at least ${MIN_BUDGET}`,
          "thinking.budget_tokens",
        );
      thinking = { type: "enabled", budget: b };
    } else if (t.type === "adaptive" || t.type === "disabled") thinking = { type: t.type };
    else return invalidRequest("thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'", "thinking.type");
  }
  const oc = isObject(req.output_config) ? req.output_config : {};
  const e = oc.effort;
  if (e !== undefined && e !== null && (typeof e !== "string" || !ANTHROPIC_EFFORTS.has(e)))
    return invalidRequest(
      "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
      "output_config.effort",
    );
  return { thinking, effort: e as Effort | undefined };
}

/** A Messages request's reasoning as chat `reasoning_effort`: the effort if given, else the budget's band. Disabled
 * thinking sends nothing (the chat provider's default), since `none` exists on few OpenAI models. */
export function chatEffortOfMessages(r: MessagesReasoning): string | undefined {
  if (r.thinking?.type === "disabled") return undefined;
  if (r.effort !== undefined) return r.effort === "max" ? "xhigh" : r.effort;
  if (r.thinking?.type === "enabled") return effortOfBudget(r.thinking.budget);
  return undefined;
}

/**
 * A thinking budget that fits the request's max tokens, which it counts in (Anthropic and Bedrock refuse a budget not
 * below max_tokens). Without max tokens, the answer gets `defaultMax` on top of the budget; when max tokens is too
 * small for the effort's budget, half of it goes to thinking; below twice the minimum budget there is no room: a 400.
 */
export function fitBudget(
  budget: number,
  maxTokens: number | undefined,
  defaultMax: number,
  maxPath: string,
): { budget: number; maxTokens: number } | LlmError {
  if (maxTokens === undefined) return { budget, maxTokens: budget + defaultMax };
  if (maxTokens > budget) return { budget, maxTokens };
  const half = Math.floor(maxTokens / 2);
  if (half < MIN_BUDGET)
    return invalidRequest(
      `${maxPath} must be at least ${2 * MIN_BUDGET} to reason with this provider (its thinking budget is at least ${MIN_BUDGET} tokens and counts in the maximum)`,
      maxPath,
    );
  return { budget: half, maxTokens };
}

/** Anthropic `thinking` for an effort (with the max_tokens it needs). `none` disables thinking. */
export function messagesThinking(
  effort: Effort,
  maxTokens: number | undefined,
  defaultMax: number,
  maxPath: string,
): { thinking: Record<string, unknown>; maxTokens: number | undefined } | LlmError {
  if (effort === "none") return { thinking: { type: "disabled" }, maxTokens };
  const fit = fitBudget(EFFORT_BUDGET[effort], maxTokens, defaultMax, maxPath);
  if ("kind" in fit) return fit;
  return { thinking: { type: "enabled", budget_tokens: fit.budget }, maxTokens: fit.maxTokens };
}

/** Gemini's major version from a model name (`gemini-3-pro-preview` → 3); undefined for other names. */
function geminiMajor(model: string): number | undefined {
  const m = /gemini-(\d+)/.exec(model.toLowerCase());
  return m === null ? undefined : Number(m[1]);
}

const GEMINI_LEVEL: Readonly<Record<Effort, string>> = {
  none: "minimal",
  minimal: "minimal",
  low: "low",
  medium: "medium",
  high: "high",
  xhigh: "high",
  max: "high",
};

/**
 * generateContent `thinkingConfig`: Gemini 3 and later take a level (they cannot turn thinking off: `none` is
 * `minimal`), earlier and unnamed models a budget (`none` is 0). Thought summaries are asked for so the reasoning
 * reaches the client; a request may not carry both a level and a budget.
 */
export function geminiThinkingConfig(effort: Effort, model: string): Record<string, unknown> {
  const major = geminiMajor(model);
  if (major !== undefined && major >= 3)
    return { thinkingLevel: GEMINI_LEVEL[effort], includeThoughts: effort !== "none" };
  if (effort === "none") return { thinkingBudget: 0 };
  return { thinkingBudget: EFFORT_BUDGET[effort], includeThoughts: true };
}

/**
 * Converse has no reasoning field: each model family takes its own in `additionalModelRequestFields`. Claude (model
 * ids naming `anthropic.` or `claude`, and inference-profile ARNs, which do not say) takes Anthropic's `thinking`
 * with a budget; Nova `reasoningConfig` with `maxReasoningEffort`; OpenAI's open-weight models `reasoning_effort`.
 * Other families: a 400 naming the field, rather than a setting the model would not read.
 */
export function converseReasoning(
  effort: Effort,
  model: string,
  maxTokens: number | undefined,
  defaultMax: number,
  maxPath: string,
  effortPath: string,
): { fields: Record<string, unknown>; maxTokens: number | undefined } | LlmError {
  const m = model.toLowerCase();
  const band = effort === "none" ? undefined : effort === "minimal" ? "low" : effortOfBand(effort);
  if (m.includes("amazon.nova"))
    return {
      fields: {
        reasoningConfig: band === undefined ? { type: "disabled" } : { type: "enabled", maxReasoningEffort: band },
      },
      maxTokens,
    };
  if (m.includes("openai.")) return { fields: { reasoning_effort: band ?? "low" }, maxTokens };
  if (isClaudeOnBedrock(model)) {
    const t = messagesThinking(effort, maxTokens, defaultMax, maxPath);
    if ("kind" in t) return t;
    return { fields: { thinking: t.thinking }, maxTokens: t.maxTokens };
  }
  return invalidRequest(
    `${effortPath}: Sluice knows no reasoning setting for the model ${model} on this provider (Claude, Nova and OpenAI models take one)`,
    effortPath,
  );
}

/** Claude on Bedrock: model ids naming `anthropic.` or `claude`, and inference-profile ARNs (which do not say). */
export function isClaudeOnBedrock(model: string): boolean {
  const m = model.toLowerCase();
  return m.includes("anthropic.") || m.includes("claude") || m.startsWith("arn:");
}

function effortOfBand(e: Exclude<Effort, "none" | "minimal">): "low" | "medium" | "high" {
  return e === "low" ? "low" : e === "medium" ? "medium" : "high";
}

/**
 * Whether the conversation is inside a tool loop whose last assistant turn (the calls the last user turn answers)
 * does not begin with its thinking. Claude refuses thinking then ("Expected thinking or redacted_thinking, but found
 * tool_use"), which happens when a client does not send the thinking it was given back: thinking is left off for
 * that request rather than failing it (approximate: the model does not think for that one turn).
 */
export function toolTurnLacksThinking<B>(
  messages: readonly { role: string; content: string | readonly B[] }[],
  is: { toolUse(b: B): boolean; toolResult(b: B): boolean; thinking(b: B): boolean },
): boolean {
  const last = messages[messages.length - 1];
  const prev = messages[messages.length - 2];
  if (last?.role !== "user" || prev?.role !== "assistant") return false;
  if (typeof last.content === "string" || typeof prev.content === "string") return false;
  if (!last.content.some((b) => is.toolResult(b)) || !prev.content.some((b) => is.toolUse(b))) return false;
  const first = prev.content[0];
  return first === undefined || !is.thinking(first);
}

// ---- reasoning content ----

/**
 * Anthropic-shaped thinking, as chat clients get it in `thinking_blocks` (next to the text in `reasoning_content`, the
 * field several OpenAI-compatible servers use). A chat client that sends an assistant message back with its
 * `thinking_blocks` has them replayed, signatures and all, to Messages and Converse.
 */
export type ThinkingBlock = ChatThinkingBlock;

/** `thinking_blocks` of a chat assistant message (anything malformed is left out). */
export function readThinkingBlocks(v: unknown): ThinkingBlock[] {
  const out: ThinkingBlock[] = [];
  for (const b of arr(v)) {
    if (!isObject(b)) continue;
    if (b.type === "thinking" && typeof b.thinking === "string")
      out.push({ type: "thinking", thinking: b.thinking, signature: str(b.signature) ?? "" });
    else if (b.type === "redacted_thinking" && typeof b.data === "string")
      out.push({ type: "redacted_thinking", data: b.data });
  }
  return out;
}

/** A Messages content block or Converse `reasoningContent` as a thinking block; undefined for anything else. */
export function thinkingOfMessagesBlock(b: Record<string, unknown>): ThinkingBlock | undefined {
  if (b.type === "thinking")
    return { type: "thinking", thinking: str(b.thinking) ?? "", signature: str(b.signature) ?? "" };
  if (b.type === "redacted_thinking") return { type: "redacted_thinking", data: str(b.data) ?? "" };
  return undefined;
}

export function thinkingOfConverse(rc: Record<string, unknown>): ThinkingBlock | undefined {
  if (isObject(rc.reasoningText))
    return {
      type: "thinking",
      thinking: str(rc.reasoningText.text) ?? "",
      signature: str(rc.reasoningText.signature) ?? "",
    };
  if (typeof rc.redactedContent === "string") return { type: "redacted_thinking", data: rc.redactedContent };
  return undefined;
}

/** A thinking block as a Converse `reasoningContent` block (a signature only when there is one). */
export function converseOfThinking(b: ThinkingBlock): {
  reasoningContent: { reasoningText?: { text: string; signature?: string }; redactedContent?: string };
} {
  if (b.type === "redacted_thinking") return { reasoningContent: { redactedContent: b.data } };
  return {
    reasoningContent: {
      reasoningText: b.signature === "" ? { text: b.thinking } : { text: b.thinking, signature: b.signature },
    },
  };
}

/** The text of thinking blocks, as chat `reasoning_content`. */
export function reasoningText(blocks: readonly ThinkingBlock[]): string {
  return blocks.map((b) => (b.type === "thinking" ? b.thinking : "")).join("");
}

/** A chat message's reasoning: its text in `reasoning_content`, the blocks (with signatures) in `thinking_blocks`. */
export function withThinking(message: ChatResponse["choices"][number]["message"], blocks: ThinkingBlock[]): void {
  if (blocks.length === 0) return;
  message.reasoning_content = reasoningText(blocks);
  message.thinking_blocks = blocks;
}
