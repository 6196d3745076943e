// Anthropic Messages client → chat-completions provider.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatContentPart, ChatMessage, ChatRequest, ChatToolCall } from "../formats/chat-completions.js";
import type {
  MessagesBlock,
  MessagesResponse,
  MessagesStopReason,
  MessagesStreamEvent,
  MessagesUsage,
} from "../formats/messages.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromChat } from "../usage.js";
import { anthropicErrorEvent, chatToAnthropicStop, textOf } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { readMessagesRequest, systemBlocks } from "./messages-request.js";
import { chatEffortOfMessages, readMessagesReasoning, readThinkingBlocks } from "./reasoning.js";
import { chatResponseFormat, readMessagesOutputFormat } from "./structured-output.js";

export function messagesToChatRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readMessagesRequest(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const so = readMessagesOutputFormat(req);
  if (so !== undefined && "kind" in so) return { ok: false, error: so };
  const reasoning = readMessagesReasoning(req);
  if ("kind" in reasoning) return { ok: false, error: reasoning };
  const messages: ChatMessage[] = [];
  const sys = systemBlocks(req.system);
  if (sys.length > 0) messages.push({ role: "system", content: sys.map((s) => s.text).join("\n") });
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    if (typeof m.content === "string") {
      messages.push({ role: m.role, content: m.content });
      continue;
    }
    const parts: ChatContentPart[] = [];
    const calls: ChatToolCall[] = [];
    for (const b of m.content as unknown[]) {
      if (!isObject(b)) continue;
      switch (b.type) {
        case "text":
          parts.push({ type: "text", text: str(b.text) ?? "" });
          break;
        case "image": {
          const s = isObject(b.source) ? b.source : {};
          const url =
            s.type === "base64" ? `data:${str(s.media_type) ?? "image/png"};base64,${str(s.data) ?? ""}` : str(s.url);
          if (url === undefined) return { ok: false, error: invalidRequest(`messages.${i}: unsupported image source`) };
          parts.push({ type: "image_url", image_url: { url } });
          break;
        }
        case "tool_use":
          calls.push({
            id: str(b.id) ?? "",
            type: "function",
            function: { name: str(b.name) ?? "", arguments: JSON.stringify(isObject(b.input) ? b.input : {}) },
          });
          break;
        case "tool_result":
          // OpenAI wants each tool result as its own `tool` message right after the assistant turn, before user text.
          messages.push({ role: "tool", tool_call_id: str(b.tool_use_id) ?? "", content: textOf(b.content) });
          break;
        case "thinking":
        case "redacted_thinking":
          break; // reasoning from an Anthropic turn cannot be replayed to another provider
        default:
          return {
            ok: false,
            error: invalidRequest(
              `messages.${i}: content block type ${String(b.type)} is not supported by this provider`,
            ),
          };
      }
    }
    if (m.role === "assistant") {
      const text = parts.map((p) => (p.type === "text" ? (p as { text: string }).text : "")).join("");
      const msg: ChatMessage = { role: "assistant", content: text === "" && calls.length > 0 ? null : text };
      if (calls.length > 0) msg.tool_calls = calls;
      messages.push(msg);
    } else if (parts.length > 0) {
      const onlyText = parts.every((p) => p.type === "text");
      messages.push({
        role: "user",
        content: onlyText ? parts.map((p) => (p as { text: string }).text).join("\n") : parts,
      });
    }
  }
  const out: ChatRequest = { model: meta.model, messages, max_completion_tokens: req.max_tokens };
  const t = num(req.temperature);
  if (t !== undefined) out.temperature = t;
  const tp = num(req.top_p);
  if (tp !== undefined) out.top_p = tp;
  if (Array.isArray(req.stop_sequences) && req.stop_sequences.length > 0) out.stop = req.stop_sequences;
  if (meta.stream) {
    out.stream = true;
    // Anthropic streams always end with usage; a chat-completions upstream only sends it when asked.
    out.stream_options = { include_usage: true };
  }
  const tools = arr(req.tools).filter(isObject);
  // No top_k in OpenAI's API; OpenAI-compatible servers (vLLM ...) take it, OpenAI refuses it naming it.
  const tk = num(req.top_k);
  if (tk !== undefined) out.top_k = tk;
  if (tools.length > 0) {
    out.tools = tools.map((tool) => {
      const f: { name: string; description?: string; parameters?: Record<string, unknown> } = {
        name: str(tool.name) ?? "",
      };
      const d = str(tool.description);
      if (d !== undefined) f.description = d;
      if (isObject(tool.input_schema)) f.parameters = tool.input_schema;
      return { type: "function" as const, function: f };
    });
  }
  const tc: Record<string, unknown> | undefined = isObject(req.tool_choice) ? req.tool_choice : undefined;
  if (tc !== undefined) {
    if (tc.type === "auto") out.tool_choice = "auto";
    else if (tc.type === "any") out.tool_choice = "required";
    else if (tc.type === "none") out.tool_choice = "none";
    else if (tc.type === "tool") out.tool_choice = { type: "function", function: { name: str(tc.name) ?? "" } };
    if (tc.disable_parallel_tool_use === true && tools.length > 0) out.parallel_tool_calls = false;
  }
  const md = isObject(req.metadata) ? str(req.metadata.user_id) : undefined;
  if (md !== undefined) out.user = md;
  if (so !== undefined) out.response_format = chatResponseFormat(so) as NonNullable<ChatRequest["response_format"]>;
  const effort = chatEffortOfMessages(reasoning);
  if (effort !== undefined) out.reasoning_effort = effort;
  if (req.service_tier === "auto") out.service_tier = "auto";
  else if (req.service_tier === "standard_only") out.service_tier = "default";
  return { ok: true, body: out as unknown as JsonObject, meta };
}

export function messagesUsageFromChat(u: unknown): MessagesUsage {
  const x = isObject(u) ? u : {};
  const d = isObject(x.prompt_tokens_details) ? x.prompt_tokens_details : {};
  const cached = num(d.cached_tokens) ?? 0;
  // Cache writes are reported by chat-shaped answers that came from Anthropic or Bedrock (Sluice's own field).
  const written = num(d.cache_creation_tokens) ?? 0;
  const usage: MessagesUsage = {
    input_tokens: (num(x.prompt_tokens) ?? 0) - cached - written,
    output_tokens: num(x.completion_tokens) ?? 0,
  };
  if (cached > 0) usage.cache_read_input_tokens = cached;
  if (written > 0) usage.cache_creation_input_tokens = written;
  return usage;
}

export function chatToMessagesResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  const choice = isObject(body) ? arr(body.choices)[0] : undefined;
  if (!isObject(body) || !isObject(choice) || !isObject(choice.message)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed chat completion from upstream" } };
  }
  const content: MessagesBlock[] = [...thinkingOfChatMessage(choice.message)];
  const text = str(choice.message.content);
  if (text !== undefined && text !== "") content.push({ type: "text", text });
  // A structured-output refusal (OpenAI's `refusal`) is the answer's text, and the turn's stop reason.
  const refusal = str(choice.message.refusal);
  if (refusal !== undefined && refusal !== "") content.push({ type: "text", text: refusal });
  for (const tc of arr(choice.message.tool_calls)) {
    if (!isObject(tc) || !isObject(tc.function)) continue;
    content.push({
      type: "tool_use",
      id: str(tc.id) ?? ctx.id("toolu_"),
      name: str(tc.function.name) ?? "",
      input: parseArgs(tc.function.arguments),
    });
  }
  const out: MessagesResponse = {
    id: str(body.id) ?? ctx.id("msg_"),
    type: "message",
    role: "assistant",
    model: str(body.model) ?? meta.model,
    content,
    stop_reason:
      refusal !== undefined && refusal !== ""
        ? "refusal"
        : (chatToAnthropicStop[str(choice.finish_reason) ?? "stop"] ?? "end_turn"),
    stop_sequence: null,
    usage: messagesUsageFromChat(body.usage),
  };
  const usage = usageFromChat(body.usage);
  return usage === undefined
    ? { ok: true, body: out as unknown as JsonObject }
    : { ok: true, body: out as unknown as JsonObject, usage };
}

/** Reasoning a chat provider returned: Sluice's `thinking_blocks` as they are, else `reasoning_content` (DeepSeek,
 * vLLM ...) as a thinking block without a signature. */
function thinkingOfChatMessage(m: Record<string, unknown>): MessagesBlock[] {
  const blocks = readThinkingBlocks(m.thinking_blocks);
  if (blocks.length > 0) return blocks;
  const t = str(m.reasoning_content);
  return t === undefined || t === "" ? [] : [{ type: "thinking", thinking: t, signature: "" }];
}

function parseArgs(a: unknown): Record<string, unknown> {
  if (typeof a !== "string") return {};
  try {
    const v: unknown = JSON.parse(a);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

/** chat.completion.chunk objects → Anthropic stream events. Chat chunks carry no block structure, so blocks are opened
 * when the kind of delta changes (text ↔ a given tool call) and closed before the next opens, as Anthropic does. */
export class ChatToMessagesStream implements StreamMapper<Record<string, unknown>, MessagesStreamEvent> {
  private started = false;
  private done = false;
  /** Our block index that is open, and what it is: "text" or the OpenAI tool_calls index. */
  private open: { index: number; kind: "text" | "thinking" | number } | undefined;
  private nextBlock = 0;
  private readonly toolBlock = new Map<number, number>();
  private stop: MessagesStopReason | undefined;
  private rawUsage: unknown;
  /** The provider refused (a structured-output refusal): the stop reason says so. */
  private refused = false;

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {}

  private startMessage(id: string, model: string, emit: (o: MessagesStreamEvent) => void): void {
    this.started = true;
    emit({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  private close(emit: (o: MessagesStreamEvent) => void): void {
    if (this.open === undefined) return;
    emit({ type: "content_block_stop", index: this.open.index });
    this.open = undefined;
  }

  event(ev: Record<string, unknown>, emit: (o: MessagesStreamEvent) => void): void {
    if (this.done) return;
    if (!this.started) this.startMessage(str(ev.id) ?? this.ctx.id("msg_"), str(ev.model) ?? this.meta.model, emit);
    if (isObject(ev.usage)) this.rawUsage = ev.usage;
    const c = arr(ev.choices)[0];
    if (!isObject(c)) return;
    const d = isObject(c.delta) ? c.delta : {};
    const thinking = str(d.reasoning_content);
    if (thinking !== undefined && thinking !== "") {
      if (this.open?.kind !== "thinking") {
        this.close(emit);
        this.open = { index: this.nextBlock++, kind: "thinking" };
        emit({
          type: "content_block_start",
          index: this.open.index,
          content_block: { type: "thinking", thinking: "", signature: "" },
        });
      }
      emit({ type: "content_block_delta", index: this.open.index, delta: { type: "thinking_delta", thinking } });
    }
    // Whole blocks (a chat provider that is itself a translation, Sluice or alike): a thinking block's signature
    // ends the block its text opened; a redacted block is a block of its own.
    for (const b of readThinkingBlocks(d.thinking_blocks)) {
      if (b.type === "thinking") {
        if (this.open?.kind !== "thinking") {
          this.close(emit);
          this.open = { index: this.nextBlock++, kind: "thinking" };
          emit({
            type: "content_block_start",
            index: this.open.index,
            content_block: { type: "thinking", thinking: b.thinking, signature: "" },
          });
        }
        if (b.signature !== "")
          emit({
            type: "content_block_delta",
            index: this.open.index,
            delta: { type: "signature_delta", signature: b.signature },
          });
        this.close(emit);
      } else {
        this.close(emit);
        const index = this.nextBlock++;
        emit({ type: "content_block_start", index, content_block: { type: "redacted_thinking", data: b.data } });
        emit({ type: "content_block_stop", index });
      }
    }
    const refusal = str(d.refusal);
    if (refusal !== undefined && refusal !== "") this.refused = true;
    const text = str(d.content) ?? refusal;
    if (text !== undefined && text !== "") {
      if (this.open?.kind !== "text") {
        this.close(emit);
        this.open = { index: this.nextBlock++, kind: "text" };
        emit({ type: "content_block_start", index: this.open.index, content_block: { type: "text", text: "" } });
      }
      emit({ type: "content_block_delta", index: this.open.index, delta: { type: "text_delta", text } });
    }
    for (const tc of arr(d.tool_calls)) {
      if (!isObject(tc)) continue;
      const ti = num(tc.index) ?? 0;
      const f = isObject(tc.function) ? tc.function : {};
      let block = this.toolBlock.get(ti);
      if (block === undefined) {
        this.close(emit);
        block = this.nextBlock++;
        this.toolBlock.set(ti, block);
        this.open = { index: block, kind: ti };
        emit({
          type: "content_block_start",
          index: block,
          content_block: {
            type: "tool_use",
            id: str(tc.id) ?? this.ctx.id("toolu_"),
            name: str(f.name) ?? "",
            input: {},
          },
        });
      }
      const args = str(f.arguments);
      if (args !== undefined && args !== "") {
        emit({ type: "content_block_delta", index: block, delta: { type: "input_json_delta", partial_json: args } });
      }
    }
    const fr = str(c.finish_reason);
    if (fr !== undefined) {
      this.close(emit);
      this.stop = this.refused ? "refusal" : (chatToAnthropicStop[fr] ?? "end_turn");
    }
  }

  error(err: LlmError, emit: (o: MessagesStreamEvent) => void): void {
    emit(anthropicErrorEvent(err));
    this.done = true;
  }

  /** message_delta carries the final usage, which a chat-completions upstream sends after the finish chunk. */
  end(emit: (o: MessagesStreamEvent) => void): void {
    if (this.done) return;
    this.done = true;
    if (!this.started || this.stop === undefined) {
      emit(anthropicErrorEvent({ status: 502, kind: "server", message: "upstream stream ended early" }));
      return;
    }
    this.close(emit);
    const u = messagesUsageFromChat(this.rawUsage);
    emit({ type: "message_delta", delta: { stop_reason: this.stop, stop_sequence: null }, usage: u });
    emit({ type: "message_stop" });
  }

  usage(): TokenUsage | undefined {
    return usageFromChat(this.rawUsage);
  }
}
