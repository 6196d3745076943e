// Reading a chat-completions client request: the checks every chat-completions → X translator needs before it can
// trust the shape. Problems become a 400 in the client's format, never an exception.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatMessage, ChatRequest } from "../formats/chat-completions.js";
import { isObject, num, str } from "../json.js";
import { type ChatTarget, refusedChatField } from "./chat-fields.js";
import type { RequestMeta } from "./context.js";

const roles = new Set(["system", "developer", "user", "assistant", "tool", "function"]);

export function readChatRequest(
  body: unknown,
  providerModel: string | undefined,
  /** The provider can answer several choices (`n`); else n other than 1 is refused. */
  opts: { readonly choices?: boolean; readonly target?: ChatTarget } = {},
): { req: ChatRequest; meta: RequestMeta } | LlmError {
  if (!isObject(body)) return invalidRequest("request body must be a JSON object");
  const model = providerModel ?? str(body.model);
  if (model === undefined || model === "") return invalidRequest("you must provide a model parameter", "model");
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return invalidRequest("messages must be a non-empty array", "messages");
  }
  for (let i = 0; i < body.messages.length; i++) {
    const m: unknown = body.messages[i];
    if (!isObject(m) || !roles.has(str(m.role) ?? "")) {
      return invalidRequest(
        `messages[${i}].role must be one of system, developer, user, assistant, tool`,
        `messages[${i}]`,
      );
    }
    if (m.tool_calls !== undefined && !Array.isArray(m.tool_calls)) {
      return invalidRequest(`messages[${i}].tool_calls must be an array`, `messages[${i}].tool_calls`);
    }
  }
  if (body.tools !== undefined && !Array.isArray(body.tools)) return invalidRequest("tools must be an array", "tools");
  const n = num(body.n);
  if (n !== undefined && (!Number.isInteger(n) || n < 1)) return invalidRequest("n must be a positive integer", "n");
  if (n !== undefined && n !== 1 && opts.choices !== true)
    return invalidRequest("n other than 1 is not supported by this provider", "n");
  if (opts.target !== undefined) {
    const refused = refusedChatField(body as ChatRequest, opts.target);
    if (refused !== undefined) return refused;
  }
  const stream = body.stream === true;
  const so = isObject(body.stream_options) ? body.stream_options : {};
  return {
    req: body as ChatRequest,
    meta: {
      model,
      stream,
      includeUsage: stream && so.include_usage === true,
      ...(n !== undefined && n > 1 ? { choices: n } : {}),
    },
  };
}

/** `max_completion_tokens` replaced `max_tokens` in the chat API; either may come from a client. */
export function chatMaxTokens(req: ChatRequest): number | undefined {
  return num(req.max_completion_tokens) ?? num(req.max_tokens);
}

export function chatStops(req: ChatRequest): string[] | undefined {
  if (typeof req.stop === "string") return [req.stop];
  if (Array.isArray(req.stop)) return req.stop.filter((s): s is string => typeof s === "string");
  return undefined;
}

export function isSystem(m: ChatMessage): boolean {
  return m.role === "system" || m.role === "developer";
}

/** Tool call name by id, for providers whose tool results name the function (Gemini) rather than the call. */
export function toolNamesById(messages: ChatMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of messages) {
    if (m.role !== "assistant" || !Array.isArray(m.tool_calls)) continue;
    for (const tc of m.tool_calls) {
      if (isObject(tc) && isObject(tc.function)) {
        const id = str(tc.id);
        const name = str(tc.function.name);
        if (id !== undefined && name !== undefined) names.set(id, name);
      }
    }
  }
  return names;
}
