// OpenAI Chat Completions (POST /v1/chat/completions), the shapes Sluice reads and writes.

export interface ChatTextPart {
  type: "text";
  text: string;
}
export interface ChatImagePart {
  type: "image_url";
  image_url: { url: string; detail?: "auto" | "low" | "high" };
}
export type ChatContentPart = ChatTextPart | ChatImagePart | { type: string; [k: string]: unknown };

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
  /** Google's OpenAI-compatible form of a Gemini function call's thought signature, which must come back with it. */
  extra_content?: { google: { thought_signature: string } };
}

/** Reasoning as Sluice gives it to chat clients (no OpenAI field exists): Anthropic-shaped, signatures kept. */
export type ChatThinkingBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string };

export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content?: string | ChatContentPart[] | null;
  name?: string;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  refusal?: string | null;
  /** Replayed reasoning (what Sluice gave the client), read defensively. */
  reasoning_content?: unknown;
  thinking_blocks?: unknown;
}

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type ChatToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  max_completion_tokens?: number;
  temperature?: number;
  top_p?: number;
  n?: number;
  stop?: string | string[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  tools?: ChatTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: boolean;
  user?: string;
  response_format?: { type: "text" | "json_object" | "json_schema"; json_schema?: Record<string, unknown> };
  [k: string]: unknown;
}

export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
  top_logprobs: { token: string; logprob: number; bytes: number[] | null }[];
}
export interface ChatLogprobs {
  content: ChatTokenLogprob[] | null;
  refusal: null;
}

export type ChatFinishReason = "stop" | "length" | "tool_calls" | "content_filter" | "function_call";

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

export interface ChatResponse {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: "assistant";
      content: string | null;
      refusal: string | null;
      tool_calls?: ChatToolCall[];
      /** The reasoning text, as several OpenAI-compatible servers return it. */
      reasoning_content?: string;
      thinking_blocks?: ChatThinkingBlock[];
    };
    logprobs: ChatLogprobs | null;
    finish_reason: ChatFinishReason | null;
  }[];
  usage?: ChatUsage;
}

export interface ChatChunkToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function?: { name?: string; arguments?: string };
  extra_content?: { google: { thought_signature: string } };
}

export interface ChatChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: number;
    delta: {
      role?: "assistant";
      content?: string | null;
      refusal?: string | null;
      tool_calls?: ChatChunkToolCallDelta[];
      reasoning_content?: string;
      /** Whole blocks, each sent once its signature is known (after its reasoning_content deltas). */
      thinking_blocks?: ChatThinkingBlock[];
    };
    logprobs?: ChatLogprobs | null;
    finish_reason: ChatFinishReason | null;
  }[];
  usage?: ChatUsage | null;
}

/** What every chunk of one streamed completion repeats. */
export interface ChatChunkHead {
  readonly id: string;
  readonly created: number;
  readonly model: string;
}

/** One streamed chat-completions chunk for choice 0. */
export function chatChunk(
  head: ChatChunkHead,
  delta: ChatChunk["choices"][number]["delta"],
  finish: ChatChunk["choices"][number]["finish_reason"] = null,
  index = 0,
): ChatChunk {
  return {
    id: head.id,
    object: "chat.completion.chunk",
    created: head.created,
    model: head.model,
    choices: [{ index, delta, logprobs: null, finish_reason: finish }],
  };
}

/** The usage-only chunk sent last when the client asked for `stream_options.include_usage`. */
export function chatUsageChunk(head: ChatChunkHead, usage: ChatUsage): ChatChunk {
  return { id: head.id, object: "chat.completion.chunk", created: head.created, model: head.model, choices: [], usage };
}
