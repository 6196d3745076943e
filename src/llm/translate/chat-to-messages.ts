// chat-completions client → Anthropic Messages provider.
import { invalidRequest } from "../errors.js";
import {
  type ChatChunk,
  type ChatResponse,
  type ChatToolCall,
  type ChatUsage,
  chatChunk,
  chatUsageChunk,
} from "../formats/chat-completions.js";
import type { MessagesBlock, MessagesMessage, MessagesRequest, MessagesToolChoice } from "../formats/messages.js";
import { arr, isObject, type JsonObject, num, parseObject, str } from "../json.js";
import type { StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromMessages } from "../usage.js";
import { chatMaxTokens, chatStops, isSystem, readChatRequest } from "./chat-request.js";
import { type ChatStreamItem, chatFinish, parseDataUrl, textOf } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { messagesDocument, readChatFile } from "./documents.js";
import {
  messagesThinking,
  readChatEffort,
  readThinkingBlocks,
  type ThinkingBlock,
  thinkingOfMessagesBlock,
  toolTurnLacksThinking,
  withThinking,
} from "./reasoning.js";
import { JSON_OBJECT_INSTRUCTION, messagesOutputFormat, readChatResponseFormat } from "./structured-output.js";

/** Anthropic requires max_tokens; OpenAI does not. LiteLLM and Envoy AI Gateway use the same default. */
export const DEFAULT_MAX_TOKENS = 4096;

export function chatToMessagesRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readChatRequest(body, providerModel, { target: "messages" });
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const so = readChatResponseFormat(req.response_format);
  if (so !== undefined && "kind" in so) return { ok: false, error: so };
  const effort = readChatEffort(req.reasoning_effort);
  if (typeof effort === "object") return { ok: false, error: effort };
  const system: { type: "text"; text: string }[] = [];
  const messages: MessagesMessage[] = [];
  // Anthropic wants strictly alternating roles and tool results inside a user turn: consecutive same-role messages
  // (several tool results, or a tool result followed by user text) are merged into one turn.
  const push = (role: "user" | "assistant", blocks: MessagesBlock[]): void => {
    if (blocks.length === 0) return;
    const last = messages[messages.length - 1];
    if (last !== undefined && last.role === role && Array.isArray(last.content)) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  };
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    if (isSystem(m)) {
      const t = textOf(m.content);
      if (t !== "") system.push({ type: "text", text: t });
      continue;
    }
    if (m.role === "tool") {
      push("user", [{ type: "tool_result", tool_use_id: str(m.tool_call_id) ?? "", content: textOf(m.content) }]);
      continue;
    }
    const blocks: MessagesBlock[] = [];
    if (typeof m.content === "string") {
      if (m.content !== "") blocks.push({ type: "text", text: m.content });
    } else {
      for (const p of arr(m.content)) {
        if (!isObject(p)) continue;
        if (p.type === "text" && typeof p.text === "string") {
          if (p.text !== "") blocks.push({ type: "text", text: p.text });
        } else if (p.type === "file") {
          const file = readChatFile(p, `messages[${i}]`);
          if ("kind" in file) return { ok: false, error: file };
          const doc = messagesDocument(file, `messages[${i}]`);
          if ("kind" in doc) return { ok: false, error: doc };
          blocks.push(doc);
        } else if (p.type === "image_url") {
          const url = isObject(p.image_url) ? str(p.image_url.url) : str(p.image_url);
          if (url === undefined)
            return { ok: false, error: invalidRequest(`messages[${i}]: image_url.url is required`) };
          const d = parseDataUrl(url);
          blocks.push(
            d === undefined
              ? { type: "image", source: { type: "url", url } }
              : { type: "image", source: { type: "base64", media_type: d.mediaType, data: d.data } },
          );
        } else {
          return {
            ok: false,
            error: invalidRequest(
              `messages[${i}]: content part type ${String(p.type)} is not supported by this provider`,
            ),
          };
        }
      }
    }
    if (m.role === "assistant") {
      // Thinking a chat client replays (`thinking_blocks`, as Sluice gave them) goes first, signatures kept: with
      // thinking on, Anthropic wants the last assistant turn's tool use preceded by its thinking.
      blocks.unshift(...readThinkingBlocks(m.thinking_blocks));
      for (const tc of arr(m.tool_calls)) {
        if (!isObject(tc) || !isObject(tc.function)) continue;
        blocks.push({
          type: "tool_use",
          id: str(tc.id) ?? "",
          name: str(tc.function.name) ?? "",
          input: parseObject(str(tc.function.arguments)),
        });
      }
      push("assistant", blocks);
    } else {
      push("user", blocks);
    }
  }
  let maxTokens = chatMaxTokens(req);
  let thinking: Record<string, unknown> | undefined;
  const skipThinking = toolTurnLacksThinking<MessagesBlock>(messages, {
    toolUse: (b) => b.type === "tool_use",
    toolResult: (b) => b.type === "tool_result",
    thinking: (b) => b.type === "thinking" || b.type === "redacted_thinking",
  });
  if (effort !== undefined && !(skipThinking && effort !== "none")) {
    const t = messagesThinking(effort, maxTokens, DEFAULT_MAX_TOKENS, "max_completion_tokens");
    if ("kind" in t) return { ok: false, error: t };
    thinking = t.thinking;
    maxTokens = t.maxTokens;
  }
  if (so?.mode === "json_object") system.push({ type: "text", text: JSON_OBJECT_INSTRUCTION });
  const out: MessagesRequest = { model: meta.model, messages, max_tokens: maxTokens ?? DEFAULT_MAX_TOKENS };
  if (system.length > 0) out.system = system;
  if (thinking !== undefined) out.thinking = thinking;
  if (so?.mode === "json_schema") out.output_config = { format: messagesOutputFormat(so) };
  const tier = str(req.service_tier);
  if (tier === "auto" || tier === "priority") out.service_tier = "auto";
  else if (tier === "default") out.service_tier = "standard_only";
  const t = num(req.temperature);
  if (t !== undefined) out.temperature = t;
  const tp = num(req.top_p);
  if (tp !== undefined) out.top_p = tp;
  const stops = chatStops(req);
  if (stops !== undefined && stops.length > 0) out.stop_sequences = stops;
  if (meta.stream) out.stream = true;
  const tools = arr(req.tools).filter(isObject);
  if (tools.length > 0) {
    out.tools = tools.map((tool) => {
      const f = isObject(tool.function) ? tool.function : {};
      const o: MessagesRequest["tools"] extends (infer T)[] | undefined ? T : never = {
        name: str(f.name) ?? "",
        input_schema: isObject(f.parameters) ? f.parameters : { type: "object", properties: {} },
      };
      const d = str(f.description);
      if (d !== undefined) o.description = d;
      return o;
    });
    let choice: MessagesToolChoice | undefined;
    const tc = req.tool_choice;
    if (tc === "auto") choice = { type: "auto" };
    else if (tc === "required") choice = { type: "any" };
    else if (tc === "none") choice = { type: "none" };
    else if (isObject(tc) && isObject(tc.function)) choice = { type: "tool", name: str(tc.function.name) ?? "" };
    if (req.parallel_tool_calls === false) {
      choice ??= { type: "auto" };
      if (choice.type !== "none") choice.disable_parallel_tool_use = true;
    }
    if (choice !== undefined) out.tool_choice = choice;
  }
  const user = str(req.user) ?? str(req.safety_identifier);
  if (user !== undefined) out.metadata = { user_id: user };
  return { ok: true, body: out as unknown as JsonObject, meta };
}

export function chatUsageFromMessages(u: unknown): ChatUsage {
  const x = isObject(u) ? u : {};
  const read = num(x.cache_read_input_tokens) ?? 0;
  const write = num(x.cache_creation_input_tokens) ?? 0;
  const prompt = (num(x.input_tokens) ?? 0) + read + write;
  const completion = num(x.output_tokens) ?? 0;
  const usage: ChatUsage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (read > 0 || write > 0) {
    usage.prompt_tokens_details = { cached_tokens: read };
    if (write > 0) usage.prompt_tokens_details.cache_creation_tokens = write;
  }
  return usage;
}

export function messagesToChatResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.content)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed messages response from upstream" } };
  }
  let text = "";
  const calls: ChatToolCall[] = [];
  const thinking: ThinkingBlock[] = [];
  for (const b of body.content) {
    if (!isObject(b)) continue;
    const th = thinkingOfMessagesBlock(b);
    if (th !== undefined) thinking.push(th);
    else if (b.type === "text") text += str(b.text) ?? "";
    else if (b.type === "tool_use") {
      calls.push({
        id: str(b.id) ?? ctx.id("call_"),
        type: "function",
        function: { name: str(b.name) ?? "", arguments: JSON.stringify(isObject(b.input) ? b.input : {}) },
      });
    }
  }
  const message: ChatResponse["choices"][number]["message"] = {
    role: "assistant",
    content: text === "" && calls.length > 0 ? null : text,
    refusal: null,
  };
  if (calls.length > 0) message.tool_calls = calls;
  withThinking(message, thinking);
  const out: ChatResponse = {
    id: str(body.id) ?? ctx.id("chatcmpl-"),
    object: "chat.completion",
    created: ctx.now(),
    model: str(body.model) ?? meta.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: chatFinish(body.stop_reason) }],
    usage: chatUsageFromMessages(body.usage),
  };
  const usage = usageFromMessages(body.usage);
  return usage === undefined
    ? { ok: true, body: out as unknown as JsonObject }
    : { ok: true, body: out as unknown as JsonObject, usage };
}

/** Anthropic stream events → chat.completion.chunk objects. */
export class MessagesToChatStream implements StreamMapper<Record<string, unknown>, ChatStreamItem> {
  private id = "";
  private model: string;
  private created: number;
  private started = false;
  /** Anthropic content block index → OpenAI tool_calls index. */
  private readonly toolIndex = new Map<number, number>();
  private tools = 0;
  private rawUsage: Record<string, unknown> = {};
  private finished = false;
  /** Open thinking blocks by Anthropic index: their text so far and signature, sent whole when the block stops. */
  private readonly thinking = new Map<number, { thinking: string; signature: string }>();

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {
    this.model = meta.model;
    this.created = ctx.now();
  }

  private chunk(
    delta: ChatChunk["choices"][number]["delta"],
    finish: ChatChunk["choices"][number]["finish_reason"] = null,
  ): ChatChunk {
    return chatChunk({ id: this.id, created: this.created, model: this.model }, delta, finish);
  }

  event(ev: Record<string, unknown>, emit: (o: ChatStreamItem) => void): void {
    switch (ev.type) {
      case "message_start": {
        const m = isObject(ev.message) ? ev.message : {};
        this.id = str(m.id) ?? this.ctx.id("chatcmpl-");
        this.model = str(m.model) ?? this.model;
        if (isObject(m.usage)) this.rawUsage = { ...m.usage };
        this.started = true;
        emit(this.chunk({ role: "assistant", content: "" }));
        return;
      }
      case "content_block_start": {
        const b = isObject(ev.content_block) ? ev.content_block : {};
        const index = num(ev.index) ?? 0;
        if (b.type === "tool_use") {
          const ti = this.tools++;
          this.toolIndex.set(index, ti);
          emit(
            this.chunk({
              tool_calls: [
                {
                  index: ti,
                  id: str(b.id) ?? "",
                  type: "function",
                  function: { name: str(b.name) ?? "", arguments: "" },
                },
              ],
            }),
          );
        } else if (b.type === "text" && typeof b.text === "string" && b.text !== "") {
          emit(this.chunk({ content: b.text }));
        } else if (b.type === "thinking") {
          const t = str(b.thinking) ?? "";
          this.thinking.set(index, { thinking: t, signature: str(b.signature) ?? "" });
          if (t !== "") emit(this.chunk({ reasoning_content: t }));
        } else if (b.type === "redacted_thinking") {
          emit(this.chunk({ thinking_blocks: [{ type: "redacted_thinking", data: str(b.data) ?? "" }] }));
        }
        return;
      }
      case "content_block_delta": {
        const d = isObject(ev.delta) ? ev.delta : {};
        if (d.type === "text_delta") emit(this.chunk({ content: str(d.text) ?? "" }));
        else if (d.type === "input_json_delta") {
          const ti = this.toolIndex.get(num(ev.index) ?? -1);
          const partial = str(d.partial_json) ?? "";
          if (ti !== undefined && partial !== "")
            emit(this.chunk({ tool_calls: [{ index: ti, function: { arguments: partial } }] }));
        } else if (d.type === "thinking_delta") {
          const th = this.thinking.get(num(ev.index) ?? -1);
          const t = str(d.thinking) ?? "";
          if (th !== undefined) th.thinking += t;
          if (t !== "") emit(this.chunk({ reasoning_content: t }));
        } else if (d.type === "signature_delta") {
          const th = this.thinking.get(num(ev.index) ?? -1);
          if (th !== undefined) th.signature += str(d.signature) ?? "";
        }
        return;
      }
      case "content_block_stop": {
        const index = num(ev.index) ?? -1;
        const th = this.thinking.get(index);
        if (th !== undefined) {
          this.thinking.delete(index);
          emit(this.chunk({ thinking_blocks: [{ type: "thinking", ...th }] }));
        }
        return;
      }
      case "message_delta": {
        const d = isObject(ev.delta) ? ev.delta : {};
        if (isObject(ev.usage)) Object.assign(this.rawUsage, ev.usage);
        if (d.stop_reason !== undefined && d.stop_reason !== null) {
          emit(this.chunk({}, chatFinish(d.stop_reason)));
          this.finished = true;
        }
        return;
      }
      case "message_stop":
        if (this.meta.includeUsage) {
          emit(
            chatUsageChunk(
              { id: this.id, created: this.created, model: this.model },
              chatUsageFromMessages(this.rawUsage),
            ),
          );
        }
        return;
      default: // ping, and event types added later
    }
  }

  error(err: import("../errors.js").LlmError, emit: (o: ChatStreamItem) => void): void {
    emit({ error: err });
  }

  end(emit: (o: ChatStreamItem) => void): void {
    if (!this.started)
      emit({ error: { status: 502, kind: "server", message: "upstream closed the stream before any event" } });
    else if (!this.finished) emit({ error: { status: 502, kind: "server", message: "upstream stream ended early" } });
  }

  usage(): TokenUsage | undefined {
    return this.started ? usageFromMessages(this.rawUsage) : undefined;
  }
}
