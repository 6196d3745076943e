// Helpers shared by the translators: content parts, images, stop reasons, client stream encoders.
import { errorBody, type LlmError } from "../errors.js";
import type { ChatChunk, ChatFinishReason } from "../formats/chat-completions.js";
import type { MessagesStopReason, MessagesStreamEvent } from "../formats/messages.js";
import { isObject, str } from "../json.js";
import type { ClientEncoder } from "../stream.js";

/** `data:<mime>;base64,<data>` split into its parts; anything else is undefined. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  if (!url.startsWith("data:")) return undefined;
  const comma = url.indexOf(",");
  if (comma < 0) return undefined;
  const head = url.slice(5, comma);
  if (!head.endsWith(";base64")) return undefined;
  return { mediaType: head.slice(0, -7) || "application/octet-stream", data: url.slice(comma + 1) };
}

const extMime: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
};

export function mimeFromUrl(url: string): string | undefined {
  const m = /\.([a-z0-9]+)(?:[?#]|$)/i.exec(url);
  return m === null ? undefined : extMime[m[1]!.toLowerCase()];
}

/** Text of a content that may be a string or an array of parts with `text` (chat, messages, responses all allow it). */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let s = "";
  for (const p of content) {
    if (isObject(p)) {
      const t = str(p.text);
      if (t !== undefined) s += s === "" ? t : `\n${t}`;
    }
  }
  return s;
}

export const anthropicToChatFinish: Record<string, ChatFinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  pause_turn: "stop",
  max_tokens: "length",
  tool_use: "tool_calls",
  refusal: "content_filter",
  // converse stop reasons that are not Anthropic's
  guardrail_intervened: "content_filter",
  content_filtered: "content_filter",
};

export const chatToAnthropicStop: Record<string, MessagesStopReason> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
  function_call: "tool_use",
  content_filter: "refusal",
};

export function chatFinish(stop: unknown): ChatFinishReason {
  return anthropicToChatFinish[str(stop) ?? ""] ?? "stop";
}

// ---- client stream encoders ----

export type ChatStreamItem = ChatChunk | { error: LlmError };

export const chatEncoder: ClientEncoder<ChatStreamItem> = {
  encode(o) {
    // The OpenAI SDKs raise an APIError for a data event that holds `error`, which is how OpenAI reports it.
    if ("error" in o) return `data: ${JSON.stringify(errorBody("chat-completions", o.error))}\n\n`;
    return `data: ${JSON.stringify(o)}\n\n`;
  },
  trailer: (failed) => (failed ? "" : "data: [DONE]\n\n"),
};

export const messagesEncoder: ClientEncoder<MessagesStreamEvent> = {
  encode: (o) => `event: ${o.type}\ndata: ${JSON.stringify(o)}\n\n`,
  trailer: () => "",
};

export function anthropicErrorEvent(err: LlmError): MessagesStreamEvent {
  const b = errorBody("messages", err) as { error: { type: string; message: string } };
  return { type: "error", error: b.error };
}
