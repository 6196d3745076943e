// Anthropic Messages client → Bedrock Converse provider. Both are content-block formats, so this is direct (no
// chat-completions in between) and keeps what a detour would lose: cache points, thinking, stop_sequence.
import { invalidRequest, type LlmError } from "../errors.js";
import type {
  ConverseBlock,
  ConverseMessage,
  ConverseRequest,
  ConverseSystemBlock,
  ConverseToolChoice,
  ConverseToolResultContent,
} from "../formats/converse.js";
import type {
  MessagesBlock,
  MessagesResponse,
  MessagesStopReason,
  MessagesStreamEvent,
  MessagesUsage,
} from "../formats/messages.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { AwsEvent, StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromConverse } from "../usage.js";
import { converseImage, historyToolSpecs, pushConverse } from "./chat-to-converse.js";
import { anthropicErrorEvent } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { ConverseToolNames, clientToolName } from "./converse-names.js";
import { converseDocument } from "./documents.js";
import { readMessagesRequest, systemBlocks } from "./messages-request.js";
import { readMessagesReasoning } from "./reasoning.js";
import { converseOutputConfig, readMessagesOutputFormat } from "./structured-output.js";

const CACHE_POINT = { cachePoint: { type: "default" as const } };

export function messagesToConverseParts(
  req: import("../formats/messages.js").MessagesRequest,
  toolNames: ConverseToolNames = new ConverseToolNames(),
):
  | { messages: ConverseMessage[]; system: ConverseSystemBlock[]; toolConfig?: ConverseRequest["toolConfig"] }
  | LlmError {
  const system: ConverseSystemBlock[] = [];
  for (const s of systemBlocks(req.system)) {
    system.push({ text: s.text });
    if (s.cached) system.push(CACHE_POINT);
  }
  const messages: ConverseMessage[] = [];
  const documentNames = new Set<string>();
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    if (typeof m.content === "string") {
      pushConverse(messages, m.role, m.content === "" ? [] : [{ text: m.content }]);
      continue;
    }
    const blocks: ConverseBlock[] = [];
    for (const b of m.content as unknown[]) {
      if (!isObject(b)) continue;
      switch (b.type) {
        case "text":
          blocks.push({ text: str(b.text) ?? "" });
          break;
        case "image": {
          const img = imageBlock(b.source, i);
          if ("kind" in img) return img;
          blocks.push(img);
          break;
        }
        case "document": {
          // Messages documents: base64 PDF or plain text (its text is the document's bytes).
          const src = isObject(b.source) ? b.source : {};
          const title = str(b.title);
          const file =
            src.type === "base64"
              ? { data: str(src.data) ?? "", mediaType: str(src.media_type) ?? "", filename: title }
              : src.type === "text"
                ? {
                    data: Buffer.from(str(src.data) ?? "", "utf8").toString("base64"),
                    mediaType: "text/plain",
                    filename: title,
                  }
                : undefined;
          if (file === undefined)
            return invalidRequest(
              `messages.${i}: this provider takes documents as base64 or text sources, not ${String(src.type)}`,
            );
          const doc = converseDocument(file, `messages.${i}`, documentNames.size, documentNames);
          if ("kind" in doc) return doc;
          blocks.push(doc);
          break;
        }
        case "tool_use":
          blocks.push({
            toolUse: {
              toolUseId: str(b.id) ?? "",
              name: toolNames.name(str(b.name) ?? ""),
              input: isObject(b.input) ? b.input : {},
            },
          });
          break;
        case "tool_result": {
          const content: ConverseToolResultContent[] = [];
          if (typeof b.content === "string") content.push({ text: b.content });
          for (const c of arr(b.content)) {
            if (!isObject(c)) continue;
            if (c.type === "text") content.push({ text: str(c.text) ?? "" });
            else if (c.type === "image") {
              const img = imageBlock(c.source, i);
              if ("kind" in img) return img;
              if ("image" in img) content.push({ image: img.image });
            }
          }
          if (content.length === 0) content.push({ text: "" });
          blocks.push({
            toolResult: {
              toolUseId: str(b.tool_use_id) ?? "",
              content,
              status: b.is_error === true ? "error" : "success",
            },
          });
          break;
        }
        case "thinking": {
          const rt: { text: string; signature?: string } = { text: str(b.thinking) ?? "" };
          const sig = str(b.signature);
          if (sig !== undefined) rt.signature = sig;
          blocks.push({ reasoningContent: { reasoningText: rt } });
          break;
        }
        case "redacted_thinking":
          blocks.push({ reasoningContent: { redactedContent: str(b.data) ?? "" } });
          break;
        default:
          return invalidRequest(
            `messages.${i}: content block type ${String(b.type)} is not supported by this provider`,
          );
      }
      if (isObject(b.cache_control)) blocks.push(CACHE_POINT);
    }
    pushConverse(messages, m.role, blocks);
  }
  const tools = arr(req.tools).filter(isObject);
  const tc = isObject(req.tool_choice) ? req.tool_choice : undefined;
  const hasToolBlocks = messages.some((m) => m.content.some((b) => "toolUse" in b || "toolResult" in b));
  if (tools.length === 0 && hasToolBlocks) {
    const specs = historyToolSpecs(messages);
    return specs.length > 0 ? { messages, system, toolConfig: { tools: specs } } : { messages, system };
  }
  if (tools.length === 0 || (tc?.type === "none" && !hasToolBlocks)) return { messages, system };
  const specs: NonNullable<ConverseRequest["toolConfig"]>["tools"] = [];
  for (const t of tools) {
    const spec: { name: string; description?: string; inputSchema: { json: unknown } } = {
      name: toolNames.name(str(t.name) ?? ""),
      inputSchema: { json: isObject(t.input_schema) ? t.input_schema : { type: "object", properties: {} } },
    };
    const d = str(t.description);
    if (d !== undefined) spec.description = d;
    specs.push({ toolSpec: spec });
    if (isObject(t.cache_control)) specs.push(CACHE_POINT);
  }
  let choice: ConverseToolChoice | undefined;
  if (tc?.type === "auto") choice = { auto: {} };
  else if (tc?.type === "any") choice = { any: {} };
  else if (tc?.type === "tool") choice = { tool: { name: toolNames.name(str(tc.name) ?? "") } };
  return {
    messages,
    system,
    toolConfig: choice === undefined ? { tools: specs } : { tools: specs, toolChoice: choice },
  };
}

function imageBlock(source: unknown, i: number): ConverseBlock | LlmError {
  const s = isObject(source) ? source : {};
  if (s.type !== "base64") return invalidRequest(`messages.${i}: this provider takes images as base64 only`);
  return converseImage(str(s.media_type) ?? "", str(s.data) ?? "");
}

export function messagesToConverseRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readMessagesRequest(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const so = readMessagesOutputFormat(req);
  if (so !== undefined && "kind" in so) return { ok: false, error: so };
  const reasoning = readMessagesReasoning(req);
  if ("kind" in reasoning) return { ok: false, error: reasoning };
  const toolNames = new ConverseToolNames(arr(req.tools).map((t) => (isObject(t) ? (str(t.name) ?? "") : "")));
  const parts = messagesToConverseParts(req, toolNames);
  if ("kind" in parts) return { ok: false, error: parts };
  const out: ConverseRequest = { messages: parts.messages };
  if (parts.system.length > 0) out.system = parts.system;
  const inf: NonNullable<ConverseRequest["inferenceConfig"]> = { maxTokens: req.max_tokens };
  const t = num(req.temperature);
  if (t !== undefined) inf.temperature = t;
  const tp = num(req.top_p);
  if (tp !== undefined) inf.topP = tp;
  if (Array.isArray(req.stop_sequences) && req.stop_sequences.length > 0) inf.stopSequences = req.stop_sequences;
  out.inferenceConfig = inf;
  if (parts.toolConfig !== undefined) out.toolConfig = parts.toolConfig;
  // Model-specific fields Converse has no slot for go where Bedrock forwards them to the model as is.
  const extra: Record<string, unknown> = {};
  const tk = num(req.top_k);
  if (tk !== undefined) extra.top_k = tk;
  if (isObject(req.thinking)) extra.thinking = req.thinking;
  // Effort is Claude's own setting: Bedrock passes it to the model in Anthropic's shape.
  if (reasoning.effort !== undefined) extra.output_config = { effort: reasoning.effort };
  if (Object.keys(extra).length > 0) out.additionalModelRequestFields = extra;
  if (so?.mode === "json_schema") out.outputConfig = converseOutputConfig(so);
  if (req.service_tier === "standard_only") out.serviceTier = { type: "default" };
  return { ok: true, body: out as unknown as JsonObject, meta: toolNames.withMeta(meta) };
}

const converseStop: Record<string, MessagesStopReason> = {
  end_turn: "end_turn",
  tool_use: "tool_use",
  max_tokens: "max_tokens",
  stop_sequence: "stop_sequence",
  guardrail_intervened: "refusal",
  content_filtered: "refusal",
};

export function messagesUsageFromConverse(u: unknown): MessagesUsage {
  const x = isObject(u) ? u : {};
  const usage: MessagesUsage = { input_tokens: num(x.inputTokens) ?? 0, output_tokens: num(x.outputTokens) ?? 0 };
  const r = num(x.cacheReadInputTokens);
  const w = num(x.cacheWriteInputTokens);
  if (r !== undefined) usage.cache_read_input_tokens = r;
  if (w !== undefined) usage.cache_creation_input_tokens = w;
  return usage;
}

export function converseToMessagesResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  const msg =
    isObject(body) && isObject(body.output) && isObject(body.output.message) ? body.output.message : undefined;
  if (msg === undefined || !isObject(body) || !Array.isArray(msg.content)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed converse response from upstream" } };
  }
  const content: MessagesBlock[] = [];
  for (const b of msg.content) {
    if (!isObject(b)) continue;
    if (typeof b.text === "string") content.push({ type: "text", text: b.text });
    else if (isObject(b.toolUse)) {
      const tu = b.toolUse;
      content.push({
        type: "tool_use",
        id: str(tu.toolUseId) ?? ctx.id("toolu_"),
        name: clientToolName(meta, str(tu.name) ?? ""),
        input: isObject(tu.input) ? tu.input : {},
      });
    } else if (isObject(b.reasoningContent)) {
      const rc = b.reasoningContent;
      if (isObject(rc.reasoningText)) {
        content.push({
          type: "thinking",
          thinking: str(rc.reasoningText.text) ?? "",
          signature: str(rc.reasoningText.signature) ?? "",
        });
      } else if (typeof rc.redactedContent === "string")
        content.push({ type: "redacted_thinking", data: rc.redactedContent });
    }
  }
  const out: MessagesResponse = {
    id: ctx.id("msg_"),
    type: "message",
    role: "assistant",
    model: meta.model,
    content,
    stop_reason: converseStop[str(body.stopReason) ?? ""] ?? "end_turn",
    stop_sequence: null,
    usage: messagesUsageFromConverse(body.usage),
  };
  const usage = usageFromConverse(body.usage);
  return usage === undefined
    ? { ok: true, body: out as unknown as JsonObject }
    : { ok: true, body: out as unknown as JsonObject, usage };
}

/** ConverseStream events → Anthropic stream events: nearly one to one. Bedrock may send text deltas without a
 * contentBlockStart, so blocks are opened on first sight. Usage arrives in `metadata`, after `messageStop`, and goes
 * out in message_delta. */
export class ConverseToMessagesStream implements StreamMapper<AwsEvent, MessagesStreamEvent> {
  private started = false;
  private done = false;
  private readonly blocks = new Map<number, { index: number; kind: "text" | "tool_use" | "thinking" }>();
  private nextBlock = 0;
  private stop: MessagesStopReason | undefined;
  private rawUsage: unknown;

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {}

  private start(emit: (o: MessagesStreamEvent) => void): void {
    if (this.started) return;
    this.started = true;
    emit({
      type: "message_start",
      message: {
        id: this.ctx.id("msg_"),
        type: "message",
        role: "assistant",
        model: this.meta.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    });
  }

  private block(
    cbi: number,
    kind: "text" | "tool_use" | "thinking",
    emit: (o: MessagesStreamEvent) => void,
    tool?: { id: string; name: string },
  ): number {
    const b = this.blocks.get(cbi);
    if (b !== undefined) return b.index;
    const index = this.nextBlock++;
    this.blocks.set(cbi, { index, kind });
    const content_block: MessagesBlock =
      kind === "tool_use"
        ? { type: "tool_use", id: tool?.id ?? "", name: tool?.name ?? "", input: {} }
        : kind === "thinking"
          ? { type: "thinking", thinking: "", signature: "" }
          : { type: "text", text: "" };
    emit({ type: "content_block_start", index, content_block });
    return index;
  }

  event(ev: AwsEvent, emit: (o: MessagesStreamEvent) => void): void {
    if (this.done) return;
    const b = ev.body;
    const cbi = num(b.contentBlockIndex) ?? 0;
    switch (ev.type) {
      case "messageStart":
        this.start(emit);
        return;
      case "contentBlockStart": {
        this.start(emit);
        const tu = isObject(b.start) && isObject(b.start.toolUse) ? b.start.toolUse : undefined;
        if (tu !== undefined)
          this.block(cbi, "tool_use", emit, {
            id: str(tu.toolUseId) ?? "",
            name: clientToolName(this.meta, str(tu.name) ?? ""),
          });
        return;
      }
      case "contentBlockDelta": {
        this.start(emit);
        const d = isObject(b.delta) ? b.delta : {};
        if (typeof d.text === "string") {
          const index = this.block(cbi, "text", emit);
          emit({ type: "content_block_delta", index, delta: { type: "text_delta", text: d.text } });
        } else if (isObject(d.toolUse)) {
          const index = this.block(cbi, "tool_use", emit);
          emit({
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: str(d.toolUse.input) ?? "" },
          });
        } else if (isObject(d.reasoningContent)) {
          const index = this.block(cbi, "thinking", emit);
          const rc = d.reasoningContent;
          if (typeof rc.text === "string")
            emit({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: rc.text } });
          if (typeof rc.signature === "string") {
            emit({ type: "content_block_delta", index, delta: { type: "signature_delta", signature: rc.signature } });
          }
        }
        return;
      }
      case "contentBlockStop": {
        const blk = this.blocks.get(cbi);
        if (blk !== undefined) emit({ type: "content_block_stop", index: blk.index });
        return;
      }
      case "messageStop":
        this.start(emit);
        this.stop = converseStop[str(b.stopReason) ?? ""] ?? "end_turn";
        return;
      case "metadata":
        this.rawUsage = b.usage;
        this.finish(emit);
        return;
      default:
    }
  }

  private finish(emit: (o: MessagesStreamEvent) => void): void {
    if (this.done || this.stop === undefined) return;
    this.done = true;
    emit({
      type: "message_delta",
      delta: { stop_reason: this.stop, stop_sequence: null },
      usage: messagesUsageFromConverse(this.rawUsage),
    });
    emit({ type: "message_stop" });
  }

  error(err: LlmError, emit: (o: MessagesStreamEvent) => void): void {
    if (this.done) return;
    this.done = true;
    emit(anthropicErrorEvent(err));
  }

  end(emit: (o: MessagesStreamEvent) => void): void {
    if (this.done) return;
    if (this.stop === undefined) {
      this.error({ status: 502, kind: "server", message: "upstream stream ended early" }, emit);
      return;
    }
    this.finish(emit); // messageStop without metadata: usage unknown, still a complete message
  }

  usage(): TokenUsage | undefined {
    return usageFromConverse(this.rawUsage);
  }
}
