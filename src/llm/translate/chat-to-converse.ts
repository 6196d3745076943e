// chat-completions client → Bedrock Converse / ConverseStream provider.
import { invalidRequest, type LlmError } from "../errors.js";
import {
  type ChatChunk,
  type ChatResponse,
  type ChatToolCall,
  type ChatUsage,
  chatChunk,
  chatUsageChunk,
} from "../formats/chat-completions.js";
import type {
  ConverseBlock,
  ConverseImageFormat,
  ConverseMessage,
  ConverseRequest,
  ConverseToolChoice,
} from "../formats/converse.js";
import { arr, isObject, type JsonObject, num, parseObject, str } from "../json.js";
import type { AwsEvent, StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromConverse } from "../usage.js";
import { chatMaxTokens, chatStops, isSystem, readChatRequest } from "./chat-request.js";
import { DEFAULT_MAX_TOKENS } from "./chat-to-messages.js";
import { type ChatStreamItem, chatFinish, parseDataUrl, textOf } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { ConverseToolNames, clientToolName } from "./converse-names.js";
import { converseDocument, readChatFile } from "./documents.js";
import {
  converseOfThinking,
  converseReasoning,
  isClaudeOnBedrock,
  readChatEffort,
  readThinkingBlocks,
  type ThinkingBlock,
  thinkingOfConverse,
  toolTurnLacksThinking,
  withThinking,
} from "./reasoning.js";
import { converseOutputConfig, JSON_OBJECT_INSTRUCTION, readChatResponseFormat } from "./structured-output.js";

const imageFormats: Record<string, ConverseImageFormat> = {
  "image/png": "png",
  "image/jpeg": "jpeg",
  "image/jpg": "jpeg",
  "image/gif": "gif",
  "image/webp": "webp",
};

/** Converse takes image bytes only (or S3): a data URL converts, an http(s) URL cannot be fetched here. */
export function converseImage(mediaType: string, data: string): ConverseBlock | LlmError {
  const format = imageFormats[mediaType.toLowerCase()];
  if (format === undefined)
    return invalidRequest(`image type ${mediaType} is not supported by this provider (png, jpeg, gif, webp)`);
  return { image: { format, source: { bytes: data } } };
}

export function pushConverse(messages: ConverseMessage[], role: "user" | "assistant", blocks: ConverseBlock[]): void {
  if (blocks.length === 0) return;
  const last = messages[messages.length - 1];
  // Converse, like Messages, needs alternating roles with tool results inside the user turn.
  if (last !== undefined && last.role === role) last.content.push(...blocks);
  else messages.push({ role, content: blocks });
}

function hasToolBlocks(messages: ConverseMessage[]): boolean {
  return messages.some((m) => m.content.some((b) => "toolUse" in b || "toolResult" in b));
}

/**
 * Converse refuses a conversation holding toolUse or toolResult blocks without a toolConfig ("The toolConfig field
 * must be defined when using toolUse and toolResult content blocks"), which a client legitimately sends when it no
 * longer offers tools (a final summarising turn). The tools named in the history are declared, with an open input
 * schema, so the conversation is accepted as it is; the model may call them again, as it could before.
 */
export function historyToolSpecs(
  messages: readonly ConverseMessage[],
): { toolSpec: { name: string; description: string; inputSchema: { json: unknown } } }[] {
  const names = new Set<string>();
  for (const m of messages)
    for (const b of m.content) if ("toolUse" in b && b.toolUse.name !== "") names.add(b.toolUse.name);
  return [...names].sort().map((name) => ({
    toolSpec: {
      name,
      description: `${name} (declared because the conversation used it)`,
      inputSchema: { json: { type: "object" } },
    },
  }));
}

export function chatToConverseRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readChatRequest(body, providerModel, { target: "converse" });
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const so = readChatResponseFormat(req.response_format);
  if (so !== undefined && "kind" in so) return { ok: false, error: so };
  const effort = readChatEffort(req.reasoning_effort);
  if (typeof effort === "object") return { ok: false, error: effort };
  const system: { text: string }[] = [];
  const messages: ConverseMessage[] = [];
  const documentNames = new Set<string>();
  const toolNames = new ConverseToolNames(
    arr(req.tools).map((t) => (isObject(t) && isObject(t.function) ? (str(t.function.name) ?? "") : "")),
  );
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    if (isSystem(m)) {
      const t = textOf(m.content);
      if (t !== "") system.push({ text: t });
      continue;
    }
    if (m.role === "tool") {
      pushConverse(messages, "user", [
        { toolResult: { toolUseId: str(m.tool_call_id) ?? "", content: [{ text: textOf(m.content) }] } },
      ]);
      continue;
    }
    const blocks: ConverseBlock[] = [];
    if (typeof m.content === "string") {
      if (m.content !== "") blocks.push({ text: m.content });
    } else {
      for (const p of arr(m.content)) {
        if (!isObject(p)) continue;
        if (p.type === "text" && typeof p.text === "string") {
          if (p.text !== "") blocks.push({ text: p.text });
        } else if (p.type === "file") {
          const file = readChatFile(p, `messages[${i}]`);
          if ("kind" in file) return { ok: false, error: file };
          const doc = converseDocument(file, `messages[${i}]`, documentNames.size, documentNames);
          if ("kind" in doc) return { ok: false, error: doc };
          blocks.push(doc);
        } else if (p.type === "image_url") {
          const url = isObject(p.image_url) ? str(p.image_url.url) : undefined;
          const d = url === undefined ? undefined : parseDataUrl(url);
          if (d === undefined) {
            return {
              ok: false,
              error: invalidRequest(`messages[${i}]: this provider takes images as base64 data URLs only`),
            };
          }
          const img = converseImage(d.mediaType, d.data);
          if ("kind" in img) return { ok: false, error: img };
          blocks.push(img);
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
      // Replayed thinking (`thinking_blocks`) goes first, with its signature, as Claude on Bedrock wants it.
      blocks.unshift(...readThinkingBlocks(m.thinking_blocks).map(converseOfThinking));
      for (const tc of arr(m.tool_calls)) {
        if (!isObject(tc) || !isObject(tc.function)) continue;
        blocks.push({
          toolUse: {
            toolUseId: str(tc.id) ?? "",
            name: toolNames.name(str(tc.function.name) ?? ""),
            input: parseObject(str(tc.function.arguments)),
          },
        });
      }
      pushConverse(messages, "assistant", blocks);
    } else {
      pushConverse(messages, "user", blocks);
    }
  }
  let max = chatMaxTokens(req);
  let extra: Record<string, unknown> | undefined;
  const skipThinking =
    effort !== "none" &&
    isClaudeOnBedrock(meta.model) &&
    toolTurnLacksThinking<ConverseBlock>(messages, {
      toolUse: (b) => "toolUse" in b,
      toolResult: (b) => "toolResult" in b,
      thinking: (b) => "reasoningContent" in b,
    });
  if (effort !== undefined && !skipThinking) {
    const rr = converseReasoning(
      effort,
      meta.model,
      max,
      DEFAULT_MAX_TOKENS,
      "max_completion_tokens",
      "reasoning_effort",
    );
    if ("kind" in rr) return { ok: false, error: rr };
    extra = rr.fields;
    max = rr.maxTokens;
  }
  if (so?.mode === "json_object") system.push({ text: JSON_OBJECT_INSTRUCTION });
  const out: ConverseRequest = { messages };
  if (system.length > 0) out.system = system;
  if (extra !== undefined) out.additionalModelRequestFields = extra;
  if (so?.mode === "json_schema") out.outputConfig = converseOutputConfig(so);
  const tier = str(req.service_tier);
  if (tier === "default" || tier === "priority" || tier === "flex") out.serviceTier = { type: tier };
  const inf: NonNullable<ConverseRequest["inferenceConfig"]> = {};
  if (max !== undefined) inf.maxTokens = max;
  const t = num(req.temperature);
  if (t !== undefined) inf.temperature = t;
  const tp = num(req.top_p);
  if (tp !== undefined) inf.topP = tp;
  const stops = chatStops(req);
  if (stops !== undefined && stops.length > 0) inf.stopSequences = stops;
  if (Object.keys(inf).length > 0) out.inferenceConfig = inf;
  const tools = arr(req.tools).filter(isObject);
  // Converse has no "none" tool choice; tools are dropped instead, unless the history holds tool blocks (Bedrock then
  // requires toolConfig), where "auto" is the closest.
  const dropTools = req.tool_choice === "none" && !hasToolBlocks(messages);
  if (tools.length > 0 && !dropTools) {
    const specs = tools.map((tool) => {
      const f = isObject(tool.function) ? tool.function : {};
      const spec: { name: string; description?: string; inputSchema: { json: unknown } } = {
        name: toolNames.name(str(f.name) ?? ""),
        inputSchema: { json: isObject(f.parameters) ? f.parameters : { type: "object", properties: {} } },
      };
      const d = str(f.description);
      if (d !== undefined) spec.description = d;
      return { toolSpec: spec };
    });
    let choice: ConverseToolChoice | undefined;
    const tc = req.tool_choice;
    if (tc === "auto") choice = { auto: {} };
    else if (tc === "required") choice = { any: {} };
    else if (isObject(tc) && isObject(tc.function))
      choice = { tool: { name: toolNames.name(str(tc.function.name) ?? "") } };
    out.toolConfig = choice === undefined ? { tools: specs } : { tools: specs, toolChoice: choice };
  } else if (tools.length === 0 && hasToolBlocks(messages)) {
    const specs = historyToolSpecs(messages);
    if (specs.length > 0) out.toolConfig = { tools: specs };
  }
  return { ok: true, body: out as unknown as JsonObject, meta: toolNames.withMeta(meta) };
}

export function chatUsageFromConverse(u: unknown): ChatUsage {
  const x = isObject(u) ? u : {};
  const read = num(x.cacheReadInputTokens) ?? 0;
  const write = num(x.cacheWriteInputTokens) ?? 0;
  const prompt = (num(x.inputTokens) ?? 0) + read + write;
  const completion = num(x.outputTokens) ?? 0;
  const usage: ChatUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: num(x.totalTokens) ?? prompt + completion,
  };
  if (read > 0 || write > 0) {
    usage.prompt_tokens_details = { cached_tokens: read };
    if (write > 0) usage.prompt_tokens_details.cache_creation_tokens = write;
  }
  return usage;
}

export function converseToChatResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  const msg =
    isObject(body) && isObject(body.output) && isObject(body.output.message) ? body.output.message : undefined;
  if (msg === undefined || !isObject(body) || !Array.isArray(msg.content)) {
    return { ok: false, error: { status: 502, kind: "server", message: "malformed converse response from upstream" } };
  }
  let text = "";
  const calls: ChatToolCall[] = [];
  const thinking: ThinkingBlock[] = [];
  for (const b of msg.content) {
    if (!isObject(b)) continue;
    const th = isObject(b.reasoningContent) ? thinkingOfConverse(b.reasoningContent) : undefined;
    if (th !== undefined) thinking.push(th);
    else if (typeof b.text === "string") text += b.text;
    else if (isObject(b.toolUse)) {
      calls.push({
        id: str(b.toolUse.toolUseId) ?? ctx.id("call_"),
        type: "function",
        function: {
          name: clientToolName(meta, str(b.toolUse.name) ?? ""),
          arguments: JSON.stringify(b.toolUse.input ?? {}),
        },
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
    id: ctx.id("chatcmpl-"),
    object: "chat.completion",
    created: ctx.now(),
    model: meta.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: chatFinish(body.stopReason) }],
    usage: chatUsageFromConverse(body.usage),
  };
  const usage = usageFromConverse(body.usage);
  return usage === undefined
    ? { ok: true, body: out as unknown as JsonObject }
    : { ok: true, body: out as unknown as JsonObject, usage };
}

/** ConverseStream events → chat.completion.chunk objects. Bedrock sends `metadata` (usage) after `messageStop`,
 * which is where OpenAI puts its usage chunk too. */
export class ConverseToChatStream implements StreamMapper<AwsEvent, ChatStreamItem> {
  private readonly id: string;
  private readonly created: number;
  private readonly toolIndex = new Map<number, number>();
  private tools = 0;
  private started = false;
  private finished = false;
  private rawUsage: unknown;
  /** Reasoning blocks by content block index: text so far and signature, sent whole when the block stops. */
  private readonly thinking = new Map<number, { thinking: string; signature: string }>();

  constructor(
    private readonly meta: RequestMeta,
    ctx: TranslateContext,
  ) {
    this.id = ctx.id("chatcmpl-");
    this.created = ctx.now();
  }

  private chunk(
    delta: ChatChunk["choices"][number]["delta"],
    finish: ChatChunk["choices"][number]["finish_reason"] = null,
  ): ChatChunk {
    return chatChunk({ id: this.id, created: this.created, model: this.meta.model }, delta, finish);
  }

  private start(emit: (o: ChatStreamItem) => void): void {
    if (this.started) return;
    this.started = true;
    emit(this.chunk({ role: "assistant", content: "" }));
  }

  event(ev: AwsEvent, emit: (o: ChatStreamItem) => void): void {
    const b = ev.body;
    switch (ev.type) {
      case "messageStart":
        this.start(emit);
        return;
      case "contentBlockStart": {
        this.start(emit);
        const tu = isObject(b.start) && isObject(b.start.toolUse) ? b.start.toolUse : undefined;
        if (tu === undefined) return;
        const ti = this.tools++;
        this.toolIndex.set(num(b.contentBlockIndex) ?? 0, ti);
        emit(
          this.chunk({
            tool_calls: [
              {
                index: ti,
                id: str(tu.toolUseId) ?? "",
                type: "function",
                function: { name: clientToolName(this.meta, str(tu.name) ?? ""), arguments: "" },
              },
            ],
          }),
        );
        return;
      }
      case "contentBlockDelta": {
        this.start(emit);
        const d = isObject(b.delta) ? b.delta : {};
        if (typeof d.text === "string") emit(this.chunk({ content: d.text }));
        else if (isObject(d.toolUse)) {
          const ti = this.toolIndex.get(num(b.contentBlockIndex) ?? -1);
          const input = str(d.toolUse.input) ?? "";
          if (ti !== undefined && input !== "")
            emit(this.chunk({ tool_calls: [{ index: ti, function: { arguments: input } }] }));
        } else if (isObject(d.reasoningContent)) {
          const rc = d.reasoningContent;
          const cbi = num(b.contentBlockIndex) ?? 0;
          if (typeof rc.redactedContent === "string") {
            emit(this.chunk({ thinking_blocks: [{ type: "redacted_thinking", data: rc.redactedContent }] }));
            return;
          }
          let th = this.thinking.get(cbi);
          if (th === undefined) {
            th = { thinking: "", signature: "" };
            this.thinking.set(cbi, th);
          }
          if (typeof rc.text === "string" && rc.text !== "") {
            th.thinking += rc.text;
            emit(this.chunk({ reasoning_content: rc.text }));
          }
          if (typeof rc.signature === "string") th.signature += rc.signature;
        }
        return;
      }
      case "contentBlockStop": {
        const cbi = num(b.contentBlockIndex) ?? 0;
        const th = this.thinking.get(cbi);
        if (th !== undefined) {
          this.thinking.delete(cbi);
          emit(this.chunk({ thinking_blocks: [{ type: "thinking", ...th }] }));
        }
        return;
      }
      case "messageStop":
        this.start(emit);
        this.finished = true;
        emit(this.chunk({}, chatFinish(b.stopReason)));
        return;
      case "metadata":
        this.rawUsage = b.usage;
        if (this.meta.includeUsage) {
          emit(
            chatUsageChunk(
              { id: this.id, created: this.created, model: this.meta.model },
              chatUsageFromConverse(b.usage),
            ),
          );
        }
        return;
      default:
    }
  }

  error(err: LlmError, emit: (o: ChatStreamItem) => void): void {
    emit({ error: err });
  }

  end(emit: (o: ChatStreamItem) => void): void {
    if (!this.finished) emit({ error: { status: 502, kind: "server", message: "upstream stream ended early" } });
  }

  usage(): TokenUsage | undefined {
    return usageFromConverse(this.rawUsage);
  }
}
