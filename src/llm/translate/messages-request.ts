// Reading an Anthropic Messages client request.
import { invalidRequest, type LlmError } from "../errors.js";
import type { MessagesRequest } from "../formats/messages.js";
import { isObject, str } from "../json.js";
import type { RequestMeta } from "./context.js";

export function readMessagesRequest(
  body: unknown,
  providerModel: string | undefined,
  requireMaxTokens = true,
): { req: MessagesRequest; meta: RequestMeta } | LlmError {
  if (!isObject(body)) return invalidRequest("request body must be a JSON object");
  const model = providerModel ?? str(body.model);
  if (model === undefined || model === "") return invalidRequest("model: Field required");
  if (!Array.isArray(body.messages)) return invalidRequest("messages: Field required");
  for (let i = 0; i < body.messages.length; i++) {
    const m: unknown = body.messages[i];
    if (!isObject(m) || (m.role !== "user" && m.role !== "assistant")) {
      return invalidRequest(`messages.${i}.role: Input should be 'user' or 'assistant'`);
    }
    if (typeof m.content !== "string" && !Array.isArray(m.content)) {
      return invalidRequest(`messages.${i}.content: Input should be a valid string or list`);
    }
  }
  if (requireMaxTokens && typeof body.max_tokens !== "number") return invalidRequest("max_tokens: Field required");
  if (body.tools !== undefined && !Array.isArray(body.tools))
    return invalidRequest("tools: Input should be a valid list");
  // Anthropic's server tools (web search, code execution, web fetch ...) and client tools it defines (bash, text
  // editor, computer) have a `type`; only Anthropic runs or knows them, so another provider is never sent one as a
  // function without a schema.
  for (const [i, t] of (Array.isArray(body.tools) ? body.tools : []).entries()) {
    if (isObject(t) && t.type !== undefined && t.type !== null && t.type !== "custom")
      return invalidRequest(
        `tools.${i}: the ${String(t.type)} tool${typeof t.name === "string" ? ` (${t.name})` : ""} is only available from Anthropic; this provider takes custom tools with an input_schema`,
        `tools.${i}.type`,
      );
  }
  for (const f of ["mcp_servers", "container"] as const)
    if (body[f] !== undefined && body[f] !== null)
      return invalidRequest(`${f}: only available from Anthropic, not from this provider`, f);
  const stream = body.stream === true;
  return { req: body as MessagesRequest, meta: { model, stream, includeUsage: stream } };
}

/** System prompt as text blocks (it may be a string or blocks with cache_control). */
export function systemBlocks(system: unknown): { text: string; cached: boolean }[] {
  if (typeof system === "string") return system === "" ? [] : [{ text: system, cached: false }];
  if (!Array.isArray(system)) return [];
  const out: { text: string; cached: boolean }[] = [];
  for (const b of system) {
    if (isObject(b) && typeof b.text === "string") out.push({ text: b.text, cached: isObject(b.cache_control) });
  }
  return out;
}
