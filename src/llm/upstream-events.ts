// How each provider's SSE events are read before a stream translator maps them: an event object, an error (the
// provider reporting a failure inside the stream), or nothing.
import type { LlmError } from "./errors.js";
import { isObject, str } from "./json.js";
import { streamError } from "./stream.js";

/** Chat-completions, Gemini and Responses report stream errors as `{"error": {...}}` events. */
export const jsonOrError = (_ev: unknown, json: unknown): Record<string, unknown> | LlmError | undefined => {
  if (!isObject(json)) return undefined;
  return streamError(json) ?? json;
};
/** Responses streams end in failure with a `response.failed` (its `response.error`) or an `error` event. */
export const responsesEvent = (ev: unknown, json: unknown): Record<string, unknown> | LlmError | undefined => {
  if (!isObject(json)) return undefined;
  if (json.type === "response.failed") {
    const r = isObject(json.response) ? json.response : {};
    const e = isObject(r.error) ? r.error : {};
    return { status: 502, kind: "server", message: str(e.message) ?? "the provider's response failed" };
  }
  if (json.type === "error")
    return (
      streamError({ error: { type: json.code, message: json.message } }) ?? {
        status: 502,
        kind: "server",
        message: "upstream error",
      }
    );
  return jsonOrError(ev, json);
};
export const anthropicEvent = (_ev: unknown, json: unknown): Record<string, unknown> | LlmError | undefined => {
  if (!isObject(json)) return undefined;
  return json.type === "error"
    ? (streamError(json) ?? { status: 500, kind: "server", message: "upstream error" })
    : json;
};
