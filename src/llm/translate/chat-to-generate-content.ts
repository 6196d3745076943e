// chat-completions client → Gemini generateContent / streamGenerateContent provider.
import { invalidRequest, type LlmError } from "../errors.js";
import {
  type ChatChunk,
  type ChatFinishReason,
  type ChatLogprobs,
  type ChatResponse,
  type ChatToolCall,
  type ChatUsage,
  chatChunk,
  chatUsageChunk,
} from "../formats/chat-completions.js";
import type { GeminiContent, GeminiPart, GeminiRequest } from "../formats/generate-content.js";
import { arr, isObject, type JsonObject, num, parseJson, parseObject, str } from "../json.js";
import type { StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromGemini } from "../usage.js";
import { chatMaxTokens, chatStops, isSystem, readChatRequest, toolNamesById } from "./chat-request.js";
import { type ChatStreamItem, mimeFromUrl, parseDataUrl, textOf } from "./common.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";
import { readChatFile } from "./documents.js";
import { geminiThinkingConfig, readChatEffort } from "./reasoning.js";
import { geminiStructuredOutput, readChatResponseFormat } from "./structured-output.js";

const filtered = new Set(["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"]);

export function geminiFinish(reason: unknown, hasCalls: boolean): ChatFinishReason {
  if (hasCalls) return "tool_calls";
  const r = str(reason) ?? "";
  if (r === "MAX_TOKENS") return "length";
  if (filtered.has(r)) return "content_filter";
  return "stop";
}

function push(contents: GeminiContent[], role: "user" | "model", parts: GeminiPart[]): void {
  if (parts.length === 0) return;
  const last = contents[contents.length - 1];
  if (last !== undefined && last.role === role) last.parts.push(...parts);
  else contents.push({ role, parts });
}

export function chatToGeminiRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readChatRequest(body, providerModel, { choices: true, target: "generate-content" });
  if ("kind" in r) return { ok: false, error: r };
  const { req, meta } = r;
  const so = readChatResponseFormat(req.response_format);
  if (so !== undefined && "kind" in so) return { ok: false, error: so };
  const effort = readChatEffort(req.reasoning_effort);
  if (typeof effort === "object") return { ok: false, error: effort };
  const system: { text: string }[] = [];
  const contents: GeminiContent[] = [];
  // Gemini's function responses name the function, not the call: the name comes from the assistant turn that called it.
  const names = toolNamesById(req.messages);
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    if (isSystem(m)) {
      const t = textOf(m.content);
      if (t !== "") system.push({ text: t });
      continue;
    }
    if (m.role === "tool") {
      const id = str(m.tool_call_id) ?? "";
      const text = textOf(m.content);
      const parsed = parseJson(text);
      // response must be an object: a JSON object result goes as is, anything else is wrapped
      const response = parsed.ok && isObject(parsed.value) ? parsed.value : { content: text };
      const fr: { name: string; response: Record<string, unknown>; id?: string } = {
        name: names.get(id) ?? str(m.name) ?? "",
        response,
      };
      if (id !== "") fr.id = id;
      push(contents, "user", [{ functionResponse: fr }]);
      continue;
    }
    const parts: GeminiPart[] = [];
    if (typeof m.content === "string") {
      if (m.content !== "") parts.push({ text: m.content });
    } else {
      for (const p of arr(m.content)) {
        if (!isObject(p)) continue;
        if (p.type === "text" && typeof p.text === "string") {
          if (p.text !== "") parts.push({ text: p.text });
        } else if (p.type === "file") {
          const file = readChatFile(p, `messages[${i}]`);
          if ("kind" in file) return { ok: false, error: file };
          if ("fileId" in file)
            return {
              ok: false,
              error: invalidRequest(
                `messages[${i}]: this provider takes files as base64 data (file.file_data), not file ids`,
              ),
            };
          parts.push({ inlineData: { mimeType: file.mediaType, data: file.data } });
        } else if (p.type === "image_url") {
          const url = isObject(p.image_url) ? str(p.image_url.url) : undefined;
          if (url === undefined)
            return { ok: false, error: invalidRequest(`messages[${i}]: image_url.url is required`) };
          const d = parseDataUrl(url);
          if (d !== undefined) parts.push({ inlineData: { mimeType: d.mediaType, data: d.data } });
          else {
            const mime = mimeFromUrl(url);
            parts.push({ fileData: mime === undefined ? { fileUri: url } : { mimeType: mime, fileUri: url } });
          }
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
      for (const tc of arr(m.tool_calls)) {
        if (!isObject(tc) || !isObject(tc.function)) continue;
        const fc: { name: string; args: Record<string, unknown>; id?: string } = {
          name: str(tc.function.name) ?? "",
          args: parseObject(str(tc.function.arguments)),
        };
        const id = str(tc.id);
        if (id !== undefined) fc.id = id;
        // Gemini 3 refuses a replayed function call without the thought signature it came with.
        const sig = thoughtSignatureOf(tc);
        parts.push(sig === undefined ? { functionCall: fc } : { functionCall: fc, thoughtSignature: sig });
      }
      push(contents, "model", parts);
    } else {
      push(contents, "user", parts);
    }
  }
  const out: GeminiRequest = { contents };
  if (system.length > 0) out.systemInstruction = { parts: system };
  const gc: NonNullable<GeminiRequest["generationConfig"]> = {};
  const t = num(req.temperature);
  if (t !== undefined) gc.temperature = t;
  const tp = num(req.top_p);
  if (tp !== undefined) gc.topP = tp;
  const max = chatMaxTokens(req);
  if (max !== undefined) gc.maxOutputTokens = max;
  const stops = chatStops(req);
  if (stops !== undefined && stops.length > 0) gc.stopSequences = stops;
  // Same meaning, same ranges (penalties -2..2), other names; `n` is the number of candidates.
  const n = num(req.n);
  if (n !== undefined && n !== 1) gc.candidateCount = n;
  const seed = num(req.seed);
  if (seed !== undefined) gc.seed = seed;
  const pp = num(req.presence_penalty);
  if (pp !== undefined) gc.presencePenalty = pp;
  const fp = num(req.frequency_penalty);
  if (fp !== undefined) gc.frequencyPenalty = fp;
  if (req.logprobs === true) gc.responseLogprobs = true;
  const topLogprobs = num(req.top_logprobs);
  if (topLogprobs !== undefined) gc.logprobs = topLogprobs;
  if (so !== undefined) Object.assign(gc, geminiStructuredOutput(so));
  if (effort !== undefined) gc.thinkingConfig = geminiThinkingConfig(effort, meta.model);
  if (Object.keys(gc).length > 0) out.generationConfig = gc;
  const tools = arr(req.tools).filter(isObject);
  // Chat's web search (search-preview models) is Gemini's Google Search grounding tool.
  if (req.web_search_options !== undefined && req.web_search_options !== null) out.tools = [{ google_search: {} }];
  if (tools.length > 0) {
    // parametersJsonSchema takes full JSON Schema; `parameters` only an OpenAPI subset that rejects common keywords.
    out.tools = [
      ...(out.tools ?? []),
      {
        functionDeclarations: tools.map((tool) => {
          const f = isObject(tool.function) ? tool.function : {};
          const decl: { name: string; description?: string; parametersJsonSchema?: Record<string, unknown> } = {
            name: str(f.name) ?? "",
          };
          const d = str(f.description);
          if (d !== undefined) decl.description = d;
          if (isObject(f.parameters)) decl.parametersJsonSchema = f.parameters;
          return decl;
        }),
      },
    ];
    const tc = req.tool_choice;
    if (tc === "auto") out.toolConfig = { functionCallingConfig: { mode: "AUTO" } };
    else if (tc === "required") out.toolConfig = { functionCallingConfig: { mode: "ANY" } };
    else if (tc === "none") out.toolConfig = { functionCallingConfig: { mode: "NONE" } };
    else if (isObject(tc) && isObject(tc.function)) {
      out.toolConfig = { functionCallingConfig: { mode: "ANY", allowedFunctionNames: [str(tc.function.name) ?? ""] } };
    }
  }
  return { ok: true, body: out as unknown as JsonObject, meta };
}

export function chatUsageFromGemini(u: unknown): ChatUsage {
  const x = isObject(u) ? u : {};
  // promptTokenCount includes the cached tokens (as prompt_tokens does) but not the tool-use prompt (grounding
  // results the model read), which OpenAI would count in the prompt.
  const prompt = (num(x.promptTokenCount) ?? 0) + (num(x.toolUsePromptTokenCount) ?? 0);
  const reasoning = num(x.thoughtsTokenCount) ?? 0;
  const completion = (num(x.candidatesTokenCount) ?? 0) + reasoning;
  const usage: ChatUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: num(x.totalTokenCount) ?? prompt + completion,
  };
  const cached = num(x.cachedContentTokenCount);
  if (cached !== undefined && cached > 0) usage.prompt_tokens_details = { cached_tokens: cached };
  if (reasoning > 0) usage.completion_tokens_details = { reasoning_tokens: reasoning };
  return usage;
}

/** The thought signature a chat tool call carries back (Google's OpenAI-compatible `extra_content.google`). */
function thoughtSignatureOf(tc: Record<string, unknown>): string | undefined {
  const g = isObject(tc.extra_content) && isObject(tc.extra_content.google) ? tc.extra_content.google : undefined;
  return g === undefined ? undefined : str(g.thought_signature);
}

interface GeminiCall {
  id: string;
  name: string;
  args: string;
  signature: string | undefined;
}

/** Text, thoughts and calls of one candidate's parts: thought parts are the model's reasoning (its summaries), which
 * chat clients get as `reasoning_content`; a call's thought signature goes with the call. */
function readParts(content: unknown, ctx: TranslateContext): { text: string; thoughts: string; calls: GeminiCall[] } {
  let text = "";
  let thoughts = "";
  const calls: GeminiCall[] = [];
  const parts = isObject(content) ? arr(content.parts) : [];
  for (const p of parts) {
    if (!isObject(p)) continue;
    if (typeof p.text === "string") {
      if (p.thought === true) thoughts += p.text;
      else text += p.text;
    } else if (isObject(p.functionCall)) {
      calls.push({
        id: str(p.functionCall.id) ?? ctx.id("call_"),
        name: str(p.functionCall.name) ?? "",
        args: JSON.stringify(isObject(p.functionCall.args) ? p.functionCall.args : {}),
        signature: str(p.thoughtSignature),
      });
    }
  }
  return { text, thoughts, calls };
}

/** A candidate's `logprobsResult` (chosen token and top candidates per step) as chat `logprobs`. */
function chatLogprobs(c: Record<string, unknown>): ChatLogprobs | null {
  const lr = isObject(c.logprobsResult) ? c.logprobsResult : undefined;
  if (lr === undefined) return null;
  const top = arr(lr.topCandidates);
  const entry = (x: unknown): { token: string; logprob: number; bytes: number[] | null } => {
    const o = isObject(x) ? x : {};
    const token = str(o.token) ?? "";
    return { token, logprob: num(o.logProbability) ?? 0, bytes: [...Buffer.from(token, "utf8")] };
  };
  return {
    content: arr(lr.chosenCandidates).map((chosen, i) => {
      const t = top[i];
      return { ...entry(chosen), top_logprobs: isObject(t) ? arr(t.candidates).map(entry) : [] };
    }),
    refusal: null,
  };
}

function chatCall(k: GeminiCall): ChatToolCall {
  const call: ChatToolCall = { id: k.id, type: "function", function: { name: k.name, arguments: k.args } };
  if (k.signature !== undefined) call.extra_content = { google: { thought_signature: k.signature } };
  return call;
}

function blocked(body: Record<string, unknown>): LlmError | undefined {
  const pf = isObject(body.promptFeedback) ? body.promptFeedback : undefined;
  const reason = pf === undefined ? undefined : str(pf.blockReason);
  if (reason === undefined || arr(body.candidates).length > 0) return undefined;
  return {
    status: 400,
    kind: "invalid_request",
    message: `the prompt was blocked by the provider (${reason})`,
    code: "content_filter",
  };
}

export function geminiToChatResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  if (!isObject(body))
    return { ok: false, error: { status: 502, kind: "server", message: "malformed generateContent response" } };
  const b = blocked(body);
  if (b !== undefined) return { ok: false, error: b };
  const choices: ChatResponse["choices"] = [];
  for (const [i, c] of arr(body.candidates).entries()) {
    if (!isObject(c)) continue;
    const { text, thoughts, calls } = readParts(c.content, ctx);
    const message: ChatResponse["choices"][number]["message"] = {
      role: "assistant",
      content: text === "" && calls.length > 0 ? null : text,
      refusal: null,
    };
    if (calls.length > 0) message.tool_calls = calls.map(chatCall);
    if (thoughts !== "") message.reasoning_content = thoughts;
    choices.push({
      index: num(c.index) ?? i,
      message,
      logprobs: chatLogprobs(c),
      finish_reason: geminiFinish(c.finishReason, calls.length > 0),
    });
  }
  const out: ChatResponse = {
    id: str(body.responseId) ?? ctx.id("chatcmpl-"),
    object: "chat.completion",
    created: ctx.now(),
    model: str(body.modelVersion) ?? meta.model,
    choices,
    usage: chatUsageFromGemini(body.usageMetadata),
  };
  const usage = usageFromGemini(body.usageMetadata);
  return usage === undefined
    ? { ok: true, body: out as unknown as JsonObject }
    : { ok: true, body: out as unknown as JsonObject, usage };
}

/** Gemini SSE events (each a partial GenerateContentResponse) → chat.completion.chunk objects. Function calls arrive
 * whole in one event, so each becomes one tool_calls delta with its full arguments. */
export class GeminiToChatStream implements StreamMapper<Record<string, unknown>, ChatStreamItem> {
  private id: string;
  private model: string;
  private readonly created: number;
  private started = false;
  /** Per candidate (choice index): finished, and tool calls so far. */
  private readonly finishedChoices = new Set<number>();
  private readonly tools = new Map<number, number>();
  /** Candidates asked for (`n`): the stream ends when each has finished. */
  private readonly choices: number;
  private rawUsage: unknown;

  constructor(
    private readonly meta: RequestMeta,
    private readonly ctx: TranslateContext,
  ) {
    this.id = ctx.id("chatcmpl-");
    this.model = meta.model;
    this.created = ctx.now();
    this.choices = meta.choices ?? 1;
  }

  private get finished(): boolean {
    return this.finishedChoices.size >= this.choices;
  }

  private chunk(
    delta: ChatChunk["choices"][number]["delta"],
    finish: ChatChunk["choices"][number]["finish_reason"] = null,
    index = 0,
  ): ChatChunk {
    return chatChunk({ id: this.id, created: this.created, model: this.model }, delta, finish, index);
  }

  event(ev: Record<string, unknown>, emit: (o: ChatStreamItem) => void): void {
    if (!this.started) {
      const b = blocked(ev);
      if (b !== undefined) {
        emit({ error: b });
        for (let i = 0; i < this.choices; i++) this.finishedChoices.add(i);
        return;
      }
      this.id = str(ev.responseId) ?? this.id;
      this.model = str(ev.modelVersion) ?? this.model;
      this.started = true;
      for (let i = 0; i < this.choices; i++) emit(this.chunk({ role: "assistant", content: "" }, null, i));
    }
    if (ev.usageMetadata !== undefined) this.rawUsage = ev.usageMetadata;
    // With several candidates (`n`), each event carries the ones that advanced, each with its index.
    for (const [position, c] of arr(ev.candidates).entries()) {
      if (!isObject(c)) continue;
      const index = num(c.index) ?? position;
      const { text, thoughts, calls } = readParts(c.content, this.ctx);
      if (thoughts !== "") emit(this.chunk({ reasoning_content: thoughts }, null, index));
      if (text !== "") {
        const chunk = this.chunk({ content: text }, null, index);
        const lp = chatLogprobs(c);
        if (lp !== null && chunk.choices[0] !== undefined) chunk.choices[0].logprobs = lp;
        emit(chunk);
      }
      for (const k of calls) {
        const n = this.tools.get(index) ?? 0;
        this.tools.set(index, n + 1);
        emit(this.chunk({ tool_calls: [{ index: n, ...chatCall(k) }] }, null, index));
      }
      if (c.finishReason !== undefined && !this.finishedChoices.has(index)) {
        this.finishedChoices.add(index);
        emit(this.chunk({}, geminiFinish(c.finishReason, (this.tools.get(index) ?? 0) > 0), index));
      }
    }
  }

  error(err: LlmError, emit: (o: ChatStreamItem) => void): void {
    emit({ error: err });
  }

  end(emit: (o: ChatStreamItem) => void): void {
    if (!this.finished) {
      emit({ error: { status: 502, kind: "server", message: "upstream stream ended early" } });
      return;
    }
    // Gemini repeats usageMetadata in every event; the last one is final, so the usage chunk waits for the end.
    if (this.meta.includeUsage && this.started) {
      emit(
        chatUsageChunk({ id: this.id, created: this.created, model: this.model }, chatUsageFromGemini(this.rawUsage)),
      );
    }
  }

  usage(): TokenUsage | undefined {
    return usageFromGemini(this.rawUsage);
  }
}
