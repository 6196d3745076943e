// Anthropic Messages (POST /v1/messages, /v1/messages/count_tokens), the shapes Sluice reads and writes.

export interface CacheControl {
  type: "ephemeral";
  ttl?: string;
}

export type MessagesImageSource = { type: "base64"; media_type: string; data: string } | { type: "url"; url: string };

export type MessagesBlock =
  | { type: "text"; text: string; cache_control?: CacheControl }
  | { type: "image"; source: MessagesImageSource; cache_control?: CacheControl }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown>; cache_control?: CacheControl }
  | {
      type: "tool_result";
      tool_use_id: string;
      content?: string | MessagesBlock[];
      is_error?: boolean;
      cache_control?: CacheControl;
    }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string }
  | {
      type: "document";
      source:
        | { type: "base64"; media_type: "application/pdf"; data: string }
        | { type: "text"; media_type: "text/plain"; data: string };
      title?: string;
      cache_control?: CacheControl;
    };

export interface MessagesMessage {
  role: "user" | "assistant";
  content: string | MessagesBlock[];
}

export interface MessagesTool {
  name: string;
  description?: string;
  input_schema: Record<string, unknown>;
  cache_control?: CacheControl;
}

export type MessagesToolChoice =
  | { type: "auto"; disable_parallel_tool_use?: boolean }
  | { type: "any"; disable_parallel_tool_use?: boolean }
  | { type: "tool"; name: string; disable_parallel_tool_use?: boolean }
  | { type: "none" };

export interface MessagesRequest {
  model: string;
  messages: MessagesMessage[];
  max_tokens: number;
  system?: string | { type: "text"; text: string; cache_control?: CacheControl }[];
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  stream?: boolean;
  tools?: MessagesTool[];
  tool_choice?: MessagesToolChoice;
  metadata?: { user_id?: string };
  [k: string]: unknown;
}

export type MessagesStopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "pause_turn" | "refusal";

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
}

export interface MessagesResponse {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: MessagesBlock[];
  stop_reason: MessagesStopReason | null;
  stop_sequence: string | null;
  usage: MessagesUsage;
}

export type MessagesStreamEvent =
  | { type: "message_start"; message: MessagesResponse }
  | { type: "content_block_start"; index: number; content_block: MessagesBlock }
  | {
      type: "content_block_delta";
      index: number;
      delta:
        | { type: "text_delta"; text: string }
        | { type: "input_json_delta"; partial_json: string }
        | { type: "thinking_delta"; thinking: string }
        | { type: "signature_delta"; signature: string };
    }
  | { type: "content_block_stop"; index: number }
  | {
      type: "message_delta";
      delta: { stop_reason: MessagesStopReason | null; stop_sequence: string | null };
      usage: Partial<MessagesUsage> & { output_tokens: number };
    }
  | { type: "message_stop" }
  | { type: "ping" }
  | { type: "error"; error: { type: string; message: string } };

export interface CountTokensRequest {
  model: string;
  messages: MessagesMessage[];
  system?: MessagesRequest["system"];
  tools?: MessagesTool[];
}

export interface CountTokensResponse {
  input_tokens: number;
}
