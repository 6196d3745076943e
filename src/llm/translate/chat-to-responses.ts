// Chat completions client → a provider that speaks only OpenAI's Responses API (a custom provider with a Responses
// format), and through it messages clients (messages → chat → responses). The request's fields follow the field table
// (chat-fields.ts, target `responses`); the answer's output items become a chat completion, its events chat chunks.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatMessage } from "../formats/chat-completions.js";
import { type ChatChunk, type ChatUsage, chatChunk, chatUsageChunk } from "../formats/chat-completions.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromResponses } from "../usage.js";
import { chatMaxTokens, readChatRequest } from "./chat-request.js";
import type { ChatStreamItem } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";

type Obj = Record<string, unknown>;

/** A user message's content parts as Responses input parts, or the 400 naming the part it cannot carry. */
function inputParts(content: unknown, where: string): Obj[] | string | LlmError {
  if (typeof content === "string") return content;
  const out: Obj[] = [];
  for (const [j, p] of arr(content).entries()) {
    if (!isObject(p)) continue;
    const at = `${where}.content[${j}]`;
    switch (p.type) {
      case "text":
        out.push({ type: "input_text", text: str(p.text) ?? "" });
        break;
      case "image_url": {
        const img = isObject(p.image_url) ? p.image_url : {};
        const url = str(img.url);
        if (url === undefined) return invalidRequest(`${at}: image_url.url is required`, at);
        out.push({ type: "input_image", image_url: url, detail: str(img.detail) ?? "auto" });
        break;
      }
      case "file": {
        const f = isObject(p.file) ? p.file : {};
        const part: Obj = { type: "input_file" };
        for (const k of ["file_id", "file_data", "filename"] as const) if (typeof f[k] === "string") part[k] = f[k];
        if (part.file_id === undefined && part.file_data === undefined)
          return invalidRequest(`${at}: a file part needs file.file_data or file.file_id`, at);
        out.push(part);
        break;
      }
      default:
        return invalidRequest(`${at}: ${String(p.type)} parts are not accepted by this provider`, at);
    }
  }
  return out;
}

const textOfParts = (content: unknown): string =>
  typeof content === "string"
    ? content
    : arr(content)
        .map((p) => (isObject(p) ? (str(p.text) ?? "") : ""))
        .join("");

/** The conversation as Responses input items, in order. */
function inputItems(messages: ChatMessage[]): Obj[] | LlmError {
  const items: Obj[] = [];
  for (const [i, m] of messages.entries()) {
    const where = `messages[${i}]`;
    switch (m.role) {
      case "system":
      case "developer":
        items.push({ role: m.role, content: textOfParts(m.content) });
        break;
      case "user": {
        const content = inputParts(m.content, where);
        if (typeof content === "object" && !Array.isArray(content)) return content;
        items.push({ role: "user", content });
        break;
      }
      case "assistant": {
        // Reasoning of earlier turns is not replayed: Responses' reasoning items are OpenAI's own (encrypted).
        const text = textOfParts(m.content) || (str((m as unknown as Obj).refusal) ?? "");
        if (text !== "") items.push({ role: "assistant", content: text });
        for (const tc of arr(m.tool_calls)) {
          if (!isObject(tc) || !isObject(tc.function)) continue;
          items.push({
            type: "function_call",
            call_id: str(tc.id) ?? "",
            name: str(tc.function.name) ?? "",
            arguments: str(tc.function.arguments) ?? "{}",
          });
        }
        break;
      }
      case "tool":
        items.push({
          type: "function_call_output",
          call_id: str(m.tool_call_id) ?? "",
          output: textOfParts(m.content),
        });
        break;
      default:
        return invalidRequest(`${where}.role ${String(m.role)} is not supported by this provider`, `${where}.role`);
    }
  }
  return items;
}

export function chatToResponsesRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readChatRequest(body, providerModel, { target: "responses" });
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const input = inputItems(req.messages);
  if (!Array.isArray(input)) return { ok: false, error: input };
  // Chat completions store nothing unless asked; Responses would keep the response by default.
  const out: JsonObject = { model: meta.model, input: input as JsonObject[], store: req.store === true };
  const max = chatMaxTokens(req);
  if (max !== undefined) out.max_output_tokens = max;
  const o = req as Obj;
  for (const k of [
    "temperature",
    "top_p",
    "user",
    "safety_identifier",
    "metadata",
    "prompt_cache_key",
    "parallel_tool_calls",
    "service_tier",
  ] as const)
    if (o[k] !== undefined && o[k] !== null) out[k] = o[k] as JsonObject[string];
  if (req.stream === true) out.stream = true;
  const tools: Obj[] = [];
  for (const t of arr(req.tools)) {
    if (!isObject(t) || !isObject(t.function)) continue;
    const f = t.function;
    const tool: Obj = { type: "function", name: str(f.name) ?? "" };
    if (typeof f.description === "string") tool.description = f.description;
    tool.parameters = isObject(f.parameters) ? f.parameters : { type: "object", properties: {} };
    // Chat functions are not strict unless asked; Responses' are strict by default.
    tool.strict = f.strict === true;
    tools.push(tool);
  }
  const ws = o.web_search_options;
  if (isObject(ws)) {
    const tool: Obj = { type: "web_search" };
    if (ws.search_context_size !== undefined) tool.search_context_size = ws.search_context_size;
    const loc = isObject(ws.user_location) ? ws.user_location.approximate : undefined;
    if (isObject(loc)) tool.user_location = { type: "approximate", ...loc };
    tools.push(tool);
  }
  if (tools.length > 0) out.tools = tools as JsonObject[];
  const tc = req.tool_choice;
  if (typeof tc === "string") out.tool_choice = tc;
  else if (isObject(tc) && isObject(tc.function))
    out.tool_choice = { type: "function", name: str(tc.function.name) ?? "" };
  const text: Obj = {};
  const rf = isObject(o.response_format) ? o.response_format : undefined;
  if (rf?.type === "json_object") text.format = { type: "json_object" };
  else if (rf?.type === "json_schema" && isObject(rf.json_schema)) {
    const js = rf.json_schema;
    const format: Obj = { type: "json_schema", name: str(js.name) ?? "response", schema: js.schema ?? {} };
    if (typeof js.description === "string") format.description = js.description;
    if (typeof js.strict === "boolean") format.strict = js.strict;
    text.format = format;
  }
  if (typeof o.verbosity === "string") text.verbosity = o.verbosity;
  if (Object.keys(text).length > 0) out.text = text as JsonObject;
  if (typeof o.reasoning_effort === "string") out.reasoning = { effort: o.reasoning_effort };
  return { ok: true, body: out, meta: { ...meta, includeUsage: meta.includeUsage } };
}

/** Responses usage (cached tokens inside input_tokens, as in chat completions) in chat's names. */
export function chatUsageFromResponses(u: unknown): ChatUsage {
  const o = isObject(u) ? u : {};
  const input = num(o.input_tokens) ?? 0;
  const output = num(o.output_tokens) ?? 0;
  const usage: ChatUsage = {
    prompt_tokens: input,
    completion_tokens: output,
    total_tokens: num(o.total_tokens) ?? input + output,
  };
  const cached = isObject(o.input_tokens_details) ? num(o.input_tokens_details.cached_tokens) : undefined;
  const reasoning = isObject(o.output_tokens_details) ? num(o.output_tokens_details.reasoning_tokens) : undefined;
  if (cached !== undefined && cached > 0) usage.prompt_tokens_details = { cached_tokens: cached };
  if (reasoning !== undefined && reasoning > 0) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  return usage;
}

function finishOf(body: Obj, calls: number): ChatChunk["choices"][number]["finish_reason"] {
  if (calls > 0) return "tool_calls";
  if (body.status === "incomplete") {
    const reason = isObject(body.incomplete_details) ? body.incomplete_details.reason : undefined;
    return reason === "content_filter" ? "content_filter" : "length";
  }
  return "stop";
}

function failure(body: Obj): LlmError {
  const e = isObject(body.error) ? body.error : {};
  return { status: 502, kind: "server", message: str(e.message) ?? "the provider's response failed" };
}

export function responsesToChatResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.output)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed Responses response" } };
  }
  if (body.status === "failed") return { ok: false, error: failure(body) };
  let content = "";
  let refusal = "";
  let reasoning = "";
  const toolCalls: Obj[] = [];
  for (const item of body.output) {
    if (!isObject(item)) continue;
    if (item.type === "message") {
      for (const p of arr(item.content)) {
        if (!isObject(p)) continue;
        if (p.type === "output_text") content += str(p.text) ?? "";
        else if (p.type === "refusal") refusal += str(p.refusal) ?? "";
      }
    } else if (item.type === "function_call") {
      toolCalls.push({
        id: str(item.call_id) ?? ctx.id("call_"),
        type: "function",
        function: { name: str(item.name) ?? "", arguments: str(item.arguments) ?? "" },
      });
    } else if (item.type === "reasoning") {
      for (const s of arr(item.summary)) if (isObject(s)) reasoning += str(s.text) ?? "";
    }
  }
  const message: Obj = { role: "assistant", content: content === "" && toolCalls.length > 0 ? null : content };
  if (refusal !== "") message.refusal = refusal;
  if (reasoning !== "") message.reasoning_content = reasoning;
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  const out: JsonObject = {
    id: str(body.id) ?? ctx.id("chatcmpl-"),
    object: "chat.completion",
    created: num(body.created_at) ?? ctx.now(),
    model: str(body.model) ?? meta.model,
    choices: [
      { index: 0, message: message as JsonObject, logprobs: null, finish_reason: finishOf(body, toolCalls.length) },
    ],
    usage: chatUsageFromResponses(body.usage) as unknown as JsonObject,
  };
  const usage = usageFromResponses(body.usage);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}

/**
 * Responses stream events → chat chunks: text, refusal and reasoning summary deltas, function calls by output index.
 * Failures (`response.failed`, `error`) are the event reader's: they end the stream as errors (registry.ts).
 */
export class ResponsesToChatStream implements StreamMapper<Obj, ChatStreamItem> {
  private id: string;
  private model: string;
  private readonly created: number;
  private started = false;
  private finished = false;
  /** Chat tool call index by the function call's output index. */
  private readonly tools = new Map<number, number>();
  private rawUsage: unknown;

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {
    this.id = ctx.id("chatcmpl-");
    this.model = meta.model;
    this.created = ctx.now();
  }

  private chunk(
    delta: ChatChunk["choices"][number]["delta"],
    finish: ChatChunk["choices"][number]["finish_reason"] = null,
  ) {
    return chatChunk({ id: this.id, created: this.created, model: this.model }, delta, finish);
  }

  private start(emit: (o: ChatStreamItem) => void, response?: unknown): void {
    if (this.started) return;
    if (isObject(response)) {
      this.id = str(response.id) ?? this.id;
      this.model = str(response.model) ?? this.model;
    }
    this.started = true;
    emit(this.chunk({ role: "assistant", content: "" }));
  }

  event(ev: Obj, emit: (o: ChatStreamItem) => void): void {
    if (this.finished) return;
    switch (ev.type) {
      case "response.created":
      case "response.in_progress":
        this.start(emit, ev.response);
        return;
      case "response.output_text.delta":
        this.start(emit);
        emit(this.chunk({ content: str(ev.delta) ?? "" }));
        return;
      case "response.refusal.delta":
        this.start(emit);
        emit(this.chunk({ refusal: str(ev.delta) ?? "" } as ChatChunk["choices"][number]["delta"]));
        return;
      case "response.reasoning_summary_text.delta":
        this.start(emit);
        emit(this.chunk({ reasoning_content: str(ev.delta) ?? "" }));
        return;
      case "response.output_item.added": {
        const item = isObject(ev.item) ? ev.item : {};
        if (item.type !== "function_call") return;
        this.start(emit);
        const index = this.tools.size;
        this.tools.set(num(ev.output_index) ?? index, index);
        const call = {
          index,
          id: str(item.call_id) ?? this.ctx.id("call_"),
          type: "function" as const,
          function: { name: str(item.name) ?? "", arguments: "" },
        };
        emit(this.chunk({ tool_calls: [call] }));
        return;
      }
      case "response.function_call_arguments.delta": {
        const index = this.tools.get(num(ev.output_index) ?? -1);
        if (index === undefined) return;
        emit(this.chunk({ tool_calls: [{ index, function: { arguments: str(ev.delta) ?? "" } }] }));
        return;
      }
      case "response.completed":
      case "response.incomplete": {
        const r = isObject(ev.response) ? ev.response : {};
        this.start(emit, r);
        this.rawUsage = r.usage;
        this.finished = true;
        emit(this.chunk({}, finishOf(r, this.tools.size)));
        if (this.meta.includeUsage) {
          emit(
            chatUsageChunk({ id: this.id, created: this.created, model: this.model }, chatUsageFromResponses(r.usage)),
          );
        }
        return;
      }
      default:
        return;
    }
  }

  error(err: LlmError, emit: (o: ChatStreamItem) => void): void {
    this.finished = true;
    emit({ error: err });
  }

  end(emit: (o: ChatStreamItem) => void): void {
    if (!this.finished) emit({ error: { status: 502, kind: "server", message: "upstream stream ended early" } });
  }

  usage(): TokenUsage | undefined {
    return usageFromResponses(this.rawUsage);
  }
}
