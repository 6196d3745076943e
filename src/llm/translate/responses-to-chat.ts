// OpenAI Responses client → chat-completions provider (and, chained with chat-completions → converse, to Bedrock).
// Stateless only: `previous_response_id` and built-in tools need OpenAI's own Responses service.
import { errorBody, invalidRequest, type LlmError } from "../errors.js";
import type { ChatContentPart, ChatMessage, ChatRequest, ChatToolCall } from "../formats/chat-completions.js";
import type { ResponsesOutputItem, ResponsesResponse, ResponsesUsage } from "../formats/responses.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromChat } from "../usage.js";
import type { ChatStreamItem } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { readChatEffort, readThinkingBlocks, type ThinkingBlock } from "./reasoning.js";

function contentParts(content: unknown): ChatContentPart[] | string {
  if (typeof content === "string") return content;
  const parts: ChatContentPart[] = [];
  for (const c of arr(content)) {
    if (!isObject(c)) continue;
    if (c.type === "input_text" || c.type === "output_text") parts.push({ type: "text", text: str(c.text) ?? "" });
    else if (c.type === "input_image") {
      const url = str(c.image_url);
      if (url !== undefined) {
        const detail = str(c.detail);
        parts.push({ type: "image_url", image_url: detail === "low" || detail === "high" ? { url, detail } : { url } });
      }
    } else if (c.type === "refusal") parts.push({ type: "text", text: str(c.refusal) ?? "" });
    else if (c.type === "input_file") {
      // The chat API's file part carries the same data URL or file id; a file URL has no chat form.
      const file: Record<string, string> = {};
      const data = str(c.file_data);
      const id = str(c.file_id);
      const name = str(c.filename);
      if (data !== undefined) file.file_data = data;
      else if (id !== undefined) file.file_id = id;
      if (name !== undefined) file.filename = name;
      parts.push({ type: "file", file });
    }
  }
  return parts.every((p) => p.type === "text") ? parts.map((p) => (p as { text: string }).text).join("") : parts;
}

export function responsesToChatRequest(body: unknown, providerModel: string | undefined): RequestResult {
  if (!isObject(body)) return { ok: false, error: invalidRequest("request body must be a JSON object") };
  const model = providerModel ?? str(body.model);
  if (model === undefined) return { ok: false, error: invalidRequest("Missing required parameter: 'model'.", "model") };
  const refused = refusedResponsesField(body);
  if (refused !== undefined) return { ok: false, error: refused };
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    return {
      ok: false,
      error: invalidRequest(
        "previous_response_id is not supported by this provider; send the whole conversation in input",
        "previous_response_id",
      ),
    };
  }
  // A file by URL has no chat-completions form (the chat file part takes data or a file id).
  for (const [i, item] of arr(body.input).entries()) {
    if (!isObject(item)) continue;
    for (const [j, c] of arr(item.content).entries()) {
      if (isObject(c) && c.type === "input_file" && c.file_data === undefined && c.file_id === undefined)
        return {
          ok: false,
          error: invalidRequest(
            "this provider takes input files as file_data or file_id, not file_url",
            `input[${i}].content[${j}]`,
          ),
        };
    }
  }
  const messages: ChatMessage[] = [];
  // Reasoning items Sluice gave (a reasoning text with a Claude signature in encrypted_content) go back as the
  // next assistant turn's thinking_blocks; OpenAI's own (summaries, its encrypted state) mean nothing elsewhere.
  let pendingThinking: ThinkingBlock[] = [];
  const takeThinking = (m: ChatMessage): ChatMessage => {
    if (pendingThinking.length > 0) {
      m.thinking_blocks = pendingThinking;
      pendingThinking = [];
    }
    return m;
  };
  const instructions = str(body.instructions);
  if (instructions !== undefined && instructions !== "") messages.push({ role: "system", content: instructions });
  if (typeof body.input === "string") messages.push({ role: "user", content: body.input });
  else if (Array.isArray(body.input)) {
    for (const [i, item] of body.input.entries()) {
      if (!isObject(item)) continue;
      const type = str(item.type) ?? "message";
      if (type === "message") {
        const role = str(item.role);
        if (role !== "user" && role !== "assistant" && role !== "system" && role !== "developer") {
          return { ok: false, error: invalidRequest(`input[${i}].role is invalid`, `input[${i}].role`) };
        }
        const content = contentParts(item.content);
        if (role === "assistant")
          messages.push(
            takeThinking({
              role,
              content:
                typeof content === "string"
                  ? content
                  : content.map((p) => (p as { text?: string }).text ?? "").join(""),
            }),
          );
        else messages.push({ role, content });
      } else if (type === "function_call") {
        const call: ChatToolCall = {
          id: str(item.call_id) ?? "",
          type: "function",
          function: { name: str(item.name) ?? "", arguments: str(item.arguments) ?? "{}" },
        };
        // Consecutive function calls (and the text before them) are one assistant turn in chat-completions.
        const last = messages[messages.length - 1];
        if (last?.role === "assistant" && pendingThinking.length === 0) {
          last.tool_calls = [...(last.tool_calls ?? []), call];
        } else messages.push(takeThinking({ role: "assistant", content: null, tool_calls: [call] }));
      } else if (type === "function_call_output") {
        const out = item.output;
        messages.push({
          role: "tool",
          tool_call_id: str(item.call_id) ?? "",
          content: typeof out === "string" ? out : JSON.stringify(out ?? ""),
        });
      } else if (type === "reasoning") {
        const text = arr(item.content)
          .map((c) => (isObject(c) && c.type === "reasoning_text" ? (str(c.text) ?? "") : ""))
          .join("");
        const sig = str(item.encrypted_content);
        if (text !== "" && sig !== undefined)
          pendingThinking.push(...readThinkingBlocks([{ type: "thinking", thinking: text, signature: sig }]));
      } else {
        return {
          ok: false,
          error: invalidRequest(`input[${i}]: item type ${type} is not supported by this provider`, `input[${i}].type`),
        };
      }
    }
  } else return { ok: false, error: invalidRequest("Missing required parameter: 'input'.", "input") };
  const stream = body.stream === true;
  const out: ChatRequest = { model, messages };
  const max = num(body.max_output_tokens);
  if (max !== undefined) out.max_completion_tokens = max;
  const t = num(body.temperature);
  if (t !== undefined) out.temperature = t;
  const tp = num(body.top_p);
  if (tp !== undefined) out.top_p = tp;
  if (stream) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  const tools = arr(body.tools).filter(isObject);
  if (tools.length > 0) {
    out.tools = [];
    for (const tool of tools) {
      if (tool.type !== "function") {
        return {
          ok: false,
          error: invalidRequest(
            `tools[${out.tools.length}]: the ${String(tool.type)} tool is only available from OpenAI's Responses API, not from this provider`,
            `tools[${out.tools.length}].type`,
          ),
        };
      }
      const f: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean } = {
        name: str(tool.name) ?? "",
      };
      const d = str(tool.description);
      if (d !== undefined) f.description = d;
      if (isObject(tool.parameters)) f.parameters = tool.parameters;
      if (typeof tool.strict === "boolean") f.strict = tool.strict;
      out.tools.push({ type: "function", function: f });
    }
  }
  const tc = body.tool_choice;
  if (tc === "auto" || tc === "none" || tc === "required") out.tool_choice = tc;
  else if (isObject(tc) && tc.type === "function")
    out.tool_choice = { type: "function", function: { name: str(tc.name) ?? "" } };
  else if (tc !== undefined && tc !== null)
    return {
      ok: false,
      error: invalidRequest(
        `tool_choice of type ${String(isObject(tc) ? tc.type : tc)} is only available from OpenAI's Responses API`,
        "tool_choice",
      ),
    };
  if (typeof body.parallel_tool_calls === "boolean" && tools.length > 0)
    out.parallel_tool_calls = body.parallel_tool_calls;
  const fmt = isObject(body.text) && isObject(body.text.format) ? body.text.format : undefined;
  if (fmt?.type === "json_object") out.response_format = { type: "json_object" };
  else if (fmt?.type === "json_schema") {
    const js: Record<string, unknown> = {
      name: str(fmt.name) ?? "response",
      schema: isObject(fmt.schema) ? fmt.schema : {},
    };
    if (typeof fmt.strict === "boolean") js.strict = fmt.strict;
    if (typeof fmt.description === "string") js.description = fmt.description;
    out.response_format = { type: "json_schema", json_schema: js };
  }
  const user = str(body.user);
  if (user !== undefined) out.user = user;
  // `reasoning.summary` has no chat form: the reasoning a provider returns comes back as reasoning items anyway.
  const effort = isObject(body.reasoning) ? readChatEffort(body.reasoning.effort, "reasoning.effort") : undefined;
  if (typeof effort === "object") return { ok: false, error: effort };
  if (effort !== undefined) out.reasoning_effort = effort;
  if (body.service_tier !== undefined) out.service_tier = body.service_tier;
  // Carried under the chat name; each provider's table then says what becomes of them.
  const verbosity = isObject(body.text) ? body.text.verbosity : undefined;
  if (verbosity !== undefined) out.verbosity = verbosity;
  for (const f of ["prompt_cache_key", "safety_identifier"] as const) if (body[f] !== undefined) out[f] = body[f];
  return { ok: true, body: out as unknown as JsonObject, meta: { model, stream, includeUsage: stream } };
}

/**
 * Responses fields with no chat-completions form whose loss would change the answer: refused, naming them. Ignored
 * (documented): `store`, `metadata`, `include`, `truncation` (it only matters when the context overflows, where the
 * provider then answers an error), `stream_options`.
 */
export function refusedResponsesField(body: Record<string, unknown>): LlmError | undefined {
  const set = (v: unknown): boolean => v !== undefined && v !== null && v !== false;
  if (set(body.conversation))
    return invalidRequest(
      "conversation is not supported by this provider; send the whole conversation in input",
      "conversation",
    );
  if (set(body.background))
    return invalidRequest("background responses are not supported by this provider", "background");
  if (set(body.prompt))
    return invalidRequest("prompt templates are only available from OpenAI's Responses API", "prompt");
  if (set(body.max_tool_calls))
    return invalidRequest("max_tool_calls is not supported by this provider", "max_tool_calls");
  if (set(body.top_logprobs) || arr(body.include).includes("message.output_text.logprobs"))
    return invalidRequest(
      "log probabilities are not returned by this provider",
      set(body.top_logprobs) ? "top_logprobs" : "include",
    );
  return undefined;
}

export function responsesUsageFromChat(u: unknown): ResponsesUsage {
  const x = isObject(u) ? u : {};
  const pd = isObject(x.prompt_tokens_details) ? x.prompt_tokens_details : {};
  const cd = isObject(x.completion_tokens_details) ? x.completion_tokens_details : {};
  const input = num(x.prompt_tokens) ?? 0;
  const output = num(x.completion_tokens) ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: num(pd.cached_tokens) ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: num(cd.reasoning_tokens) ?? 0 },
    total_tokens: num(x.total_tokens) ?? input + output,
  };
}

function responseShell(id: string, created: number, model: string): ResponsesResponse {
  return {
    id,
    object: "response",
    created_at: created,
    status: "in_progress",
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model,
    output: [],
    parallel_tool_calls: true,
    previous_response_id: null,
    temperature: null,
    tool_choice: "auto",
    tools: [],
    top_p: null,
    usage: null,
    metadata: {},
  };
}

function finalStatus(shell: ResponsesResponse, finish: string | undefined): void {
  if (finish === "length") {
    shell.status = "incomplete";
    shell.incomplete_details = { reason: "max_output_tokens" };
  } else if (finish === "content_filter") {
    shell.status = "incomplete";
    shell.incomplete_details = { reason: "content_filter" };
  } else shell.status = "completed";
}

/** A chat answer's reasoning: Sluice's thinking_blocks, else the plain reasoning_content (no signature). */
function thinkingOfChat(m: Record<string, unknown>): ThinkingBlock[] {
  const blocks = readThinkingBlocks(m.thinking_blocks);
  if (blocks.length > 0) return blocks;
  const t = str(m.reasoning_content);
  return t === undefined || t === "" ? [] : [{ type: "thinking", thinking: t, signature: "" }];
}

/** A thinking block as a Responses reasoning item: its text as reasoning_text, its signature as encrypted_content. */
function reasoningItem(id: string, b: ThinkingBlock): ResponsesOutputItem {
  if (b.type === "redacted_thinking") return { type: "reasoning", id, summary: [], encrypted_content: b.data };
  const item: ResponsesOutputItem = {
    type: "reasoning",
    id,
    summary: [],
    content: [{ type: "reasoning_text", text: b.thinking }],
  };
  if (b.signature !== "") item.encrypted_content = b.signature;
  return item;
}

export function chatToResponsesResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  const choice = isObject(body) ? arr(body.choices)[0] : undefined;
  if (!isObject(body) || !isObject(choice) || !isObject(choice.message)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed chat completion from upstream" } };
  }
  const r = responseShell(ctx.id("resp_"), ctx.now(), str(body.model) ?? meta.model);
  for (const b of thinkingOfChat(choice.message)) r.output.push(reasoningItem(ctx.id("rs_"), b));
  const text = str(choice.message.content);
  const refusal = str(choice.message.refusal);
  if ((text !== undefined && text !== "") || (refusal !== undefined && refusal !== "")) {
    r.output.push({
      type: "message",
      id: ctx.id("msg_"),
      status: "completed",
      role: "assistant",
      content: [
        ...(text !== undefined && text !== "" ? [{ type: "output_text" as const, text, annotations: [] }] : []),
        ...(refusal !== undefined && refusal !== "" ? [{ type: "refusal" as const, refusal }] : []),
      ],
    });
  }
  for (const tc of arr(choice.message.tool_calls)) {
    if (!isObject(tc) || !isObject(tc.function)) continue;
    const callId = str(tc.id) ?? ctx.id("call_");
    r.output.push({
      type: "function_call",
      id: ctx.id("fc_"),
      call_id: callId,
      name: str(tc.function.name) ?? "",
      arguments: str(tc.function.arguments) ?? "",
      status: "completed",
    });
  }
  finalStatus(r, str(choice.finish_reason));
  r.usage = responsesUsageFromChat(body.usage);
  const usage = usageFromChat(body.usage);
  return usage === undefined
    ? { ok: true, body: r as unknown as JsonObject }
    : { ok: true, body: r as unknown as JsonObject, usage };
}

export type ResponsesStreamEvent = { type: string; sequence_number: number; [k: string]: unknown };

/** chat.completion.chunk objects → Responses streaming events. The protocol's `*.done` events and
 * `response.completed` repeat the whole output, so text and arguments are accumulated as they go out: the client
 * format demands it, the upstream bytes are still not held back. */
export class ChatToResponsesStream
  implements StreamMapper<ChatStreamItem | Record<string, unknown>, ResponsesStreamEvent>
{
  private seq = 0;
  private shell: ResponsesResponse | undefined;
  /** The message being streamed: its text so far, or a refusal's (OpenAI refuses in a `refusal` content part). */
  private msg: { id: string; index: number; text: string; refusal: boolean } | undefined;
  private readonly calls = new Map<
    number,
    { item: ResponsesOutputItem & { type: "function_call" }; index: number; open: boolean }
  >();
  private finish: string | undefined;
  private rawUsage: unknown;
  private done = false;
  /** The reasoning item being streamed: its text so far (the protocol's done events repeat it). */
  private reasoning: { id: string; index: number; text: string } | undefined;

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {}

  private ev(type: string, fields: Record<string, unknown>, emit: (o: ResponsesStreamEvent) => void): void {
    emit({ type, sequence_number: this.seq++, ...fields });
  }

  private snapshot(): ResponsesResponse {
    return JSON.parse(JSON.stringify(this.shell)) as ResponsesResponse;
  }

  private closeMessage(emit: (o: ResponsesStreamEvent) => void): void {
    const m = this.msg;
    if (m === undefined) return;
    this.msg = undefined;
    const part = m.refusal
      ? { type: "refusal" as const, refusal: m.text }
      : { type: "output_text" as const, text: m.text, annotations: [] };
    if (m.refusal)
      this.ev(
        "response.refusal.done",
        { item_id: m.id, output_index: m.index, content_index: 0, refusal: m.text },
        emit,
      );
    else
      this.ev(
        "response.output_text.done",
        { item_id: m.id, output_index: m.index, content_index: 0, text: m.text, logprobs: [] },
        emit,
      );
    this.ev("response.content_part.done", { item_id: m.id, output_index: m.index, content_index: 0, part }, emit);
    const item: ResponsesOutputItem = {
      type: "message",
      id: m.id,
      status: "completed",
      role: "assistant",
      content: [
        m.refusal ? { type: "refusal", refusal: m.text } : { type: "output_text", text: m.text, annotations: [] },
      ],
    };
    this.shell!.output[m.index] = item;
    this.ev("response.output_item.done", { output_index: m.index, item }, emit);
  }

  private openReasoning(emit: (o: ResponsesStreamEvent) => void): { id: string; index: number; text: string } {
    if (this.reasoning !== undefined) return this.reasoning;
    this.closeMessage(emit);
    this.closeCalls(emit);
    const r = { id: this.ctx.id("rs_"), index: this.shell!.output.length, text: "" };
    this.reasoning = r;
    const item: ResponsesOutputItem = { type: "reasoning", id: r.id, summary: [], content: [] };
    this.shell!.output.push(item);
    this.ev("response.output_item.added", { output_index: r.index, item }, emit);
    this.ev(
      "response.content_part.added",
      { item_id: r.id, output_index: r.index, content_index: 0, part: { type: "reasoning_text", text: "" } },
      emit,
    );
    return r;
  }

  /** Closes the open reasoning item; a thinking block's signature (known at its end) goes in as it closes. */
  private closeReasoning(emit: (o: ResponsesStreamEvent) => void, block?: ThinkingBlock): void {
    const r = this.reasoning;
    if (r === undefined) return;
    this.reasoning = undefined;
    this.ev(
      "response.reasoning_text.done",
      { item_id: r.id, output_index: r.index, content_index: 0, text: r.text },
      emit,
    );
    this.ev(
      "response.content_part.done",
      { item_id: r.id, output_index: r.index, content_index: 0, part: { type: "reasoning_text", text: r.text } },
      emit,
    );
    const item = reasoningItem(r.id, {
      type: "thinking",
      thinking: r.text,
      signature: block?.type === "thinking" ? block.signature : "",
    });
    this.shell!.output[r.index] = item;
    this.ev("response.output_item.done", { output_index: r.index, item }, emit);
  }

  private closeCalls(emit: (o: ResponsesStreamEvent) => void): void {
    for (const c of this.calls.values()) {
      if (!c.open) continue;
      c.open = false;
      c.item.status = "completed";
      this.ev(
        "response.function_call_arguments.done",
        { item_id: c.item.id, output_index: c.index, arguments: c.item.arguments },
        emit,
      );
      this.shell!.output[c.index] = { ...c.item };
      this.ev("response.output_item.done", { output_index: c.index, item: { ...c.item } }, emit);
    }
  }

  event(ev: ChatStreamItem | Record<string, unknown>, emit: (o: ResponsesStreamEvent) => void): void {
    if (this.done) return;
    if ("error" in ev && isObject(ev.error) && typeof (ev.error as { kind?: unknown }).kind === "string") {
      this.error(ev.error as unknown as LlmError, emit);
      return;
    }
    const chunk = ev as Record<string, unknown>;
    if (this.shell === undefined) {
      this.shell = responseShell(this.ctx.id("resp_"), this.ctx.now(), str(chunk.model) ?? this.meta.model);
      this.ev("response.created", { response: this.snapshot() }, emit);
      this.ev("response.in_progress", { response: this.snapshot() }, emit);
    }
    if (isObject(chunk.usage)) this.rawUsage = chunk.usage;
    const c = arr(chunk.choices)[0];
    if (!isObject(c)) return;
    const d = isObject(c.delta) ? c.delta : {};
    const thought = str(d.reasoning_content);
    if (thought !== undefined && thought !== "") {
      const r = this.openReasoning(emit);
      r.text += thought;
      this.ev(
        "response.reasoning_text.delta",
        { item_id: r.id, output_index: r.index, content_index: 0, delta: thought },
        emit,
      );
    }
    for (const b of readThinkingBlocks(d.thinking_blocks)) {
      if (b.type === "thinking") {
        // The block's text came as reasoning_content deltas: the whole block only adds its signature.
        if (this.reasoning === undefined && b.thinking !== "") this.openReasoning(emit).text = b.thinking;
        this.closeReasoning(emit, b);
      } else {
        this.closeReasoning(emit);
        this.closeMessage(emit);
        this.closeCalls(emit);
        const item = reasoningItem(this.ctx.id("rs_"), b);
        const index = this.shell.output.length;
        this.shell.output.push(item);
        this.ev("response.output_item.added", { output_index: index, item }, emit);
        this.ev("response.output_item.done", { output_index: index, item }, emit);
      }
    }
    const refusal = str(d.refusal);
    const isRefusal = refusal !== undefined && refusal !== "";
    const text = isRefusal ? refusal : str(d.content);
    if (text !== undefined && text !== "") {
      if (this.msg !== undefined && this.msg.refusal !== isRefusal) this.closeMessage(emit);
      if (this.msg === undefined) {
        this.closeReasoning(emit);
        this.closeCalls(emit);
        const m = { id: this.ctx.id("msg_"), index: this.shell.output.length, text: "", refusal: isRefusal };
        this.msg = m;
        const item: ResponsesOutputItem = {
          type: "message",
          id: m.id,
          status: "in_progress",
          role: "assistant",
          content: [],
        };
        this.shell.output.push(item);
        this.ev("response.output_item.added", { output_index: m.index, item }, emit);
        this.ev(
          "response.content_part.added",
          {
            item_id: m.id,
            output_index: m.index,
            content_index: 0,
            part: isRefusal ? { type: "refusal", refusal: "" } : { type: "output_text", text: "", annotations: [] },
          },
          emit,
        );
      }
      this.msg.text += text;
      if (isRefusal)
        this.ev(
          "response.refusal.delta",
          { item_id: this.msg.id, output_index: this.msg.index, content_index: 0, delta: text },
          emit,
        );
      else
        this.ev(
          "response.output_text.delta",
          { item_id: this.msg.id, output_index: this.msg.index, content_index: 0, delta: text, logprobs: [] },
          emit,
        );
    }
    for (const tc of arr(d.tool_calls)) {
      if (!isObject(tc)) continue;
      const ti = num(tc.index) ?? 0;
      const f = isObject(tc.function) ? tc.function : {};
      let call = this.calls.get(ti);
      if (call === undefined) {
        // chat-completions streams tool calls one after the other: a new one means the previous ones are complete
        this.closeReasoning(emit);
        this.closeMessage(emit);
        this.closeCalls(emit);
        const item: ResponsesOutputItem & { type: "function_call" } = {
          type: "function_call",
          id: this.ctx.id("fc_"),
          call_id: str(tc.id) ?? this.ctx.id("call_"),
          name: str(f.name) ?? "",
          arguments: "",
          status: "in_progress",
        };
        call = { item, index: this.shell.output.length, open: true };
        this.calls.set(ti, call);
        this.shell.output.push({ ...item });
        this.ev("response.output_item.added", { output_index: call.index, item: { ...item } }, emit);
      }
      const args = str(f.arguments);
      if (args !== undefined && args !== "") {
        call.item.arguments += args;
        this.ev(
          "response.function_call_arguments.delta",
          { item_id: call.item.id, output_index: call.index, delta: args },
          emit,
        );
      }
    }
    const fr = str(c.finish_reason);
    if (fr !== undefined) this.finish = fr;
  }

  error(err: LlmError, emit: (o: ResponsesStreamEvent) => void): void {
    if (this.done) return;
    this.done = true;
    const e = errorBody("responses", err) as {
      error: { message: string; type: string; code: string | null; param: string | null };
    };
    this.ev("error", { code: e.error.code ?? e.error.type, message: e.error.message, param: e.error.param }, emit);
  }

  end(emit: (o: ResponsesStreamEvent) => void): void {
    if (this.done) return;
    if (this.shell === undefined || this.finish === undefined) {
      this.error({ status: 502, kind: "server", message: "upstream stream ended early" }, emit);
      return;
    }
    this.done = true;
    this.closeReasoning(emit);
    this.closeMessage(emit);
    this.closeCalls(emit);
    finalStatus(this.shell, this.finish);
    this.shell.usage = responsesUsageFromChat(this.rawUsage);
    this.ev(
      this.shell.status === "completed" ? "response.completed" : "response.incomplete",
      { response: this.snapshot() },
      emit,
    );
  }

  usage(): TokenUsage | undefined {
    return usageFromChat(this.rawUsage);
  }
}

export const responsesEncoder = {
  encode: (o: ResponsesStreamEvent): string => `event: ${o.type}\ndata: ${JSON.stringify(o)}\n\n`,
  trailer: (): string => "",
};
