// A chat-completions answer (a provider's, or one the chat translators made from Messages, Converse or Responses) →
// the generateContent answer a Google SDK reads, buffered and streamed. Gemini's conventions: a function call is one
// whole part (streamed arguments are gathered until the call is complete), `promptTokenCount` includes cached tokens,
// `candidatesTokenCount` leaves out the thinking tokens (`thoughtsTokenCount`), a call ends with `STOP`.
import { errorBody, type LlmError } from "../errors.js";
import type { ChatFinishReason } from "../formats/chat-completions.js";
import type { GeminiFinishReason } from "../formats/generate-content.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { ClientEncoder, StreamMapper } from "../stream.js";
import { type TokenUsage, usageFromChat } from "../usage.js";
import type { ChatStreamItem } from "./common.js";
import type { RequestMeta, ResponseResult, TranslateContext } from "./context.js";

type Obj = Record<string, unknown>;

/** Chat finish reasons as Gemini's (docs/llm.md shows this map). A refusal is `SAFETY` too. */
export const GEMINI_FINISH: Readonly<Record<ChatFinishReason, GeminiFinishReason>> = {
  stop: "STOP",
  tool_calls: "STOP",
  function_call: "STOP",
  length: "MAX_TOKENS",
  content_filter: "SAFETY",
};

/** What the answer's parts and counts become, as docs/llm.md shows it (the finish rows are GEMINI_FINISH's). */
export function geminiMappingMarkdown(): string {
  const rows: [string, string][] = [
    ["`message.content`", "a text part"],
    ["`message.reasoning_content`", "a text part with `thought: true`, before the text"],
    ["`message.refusal`", "a text part, `finishReason: SAFETY`"],
    [
      "`message.tool_calls[]`",
      "`functionCall` parts (`args` parsed, `id` kept, `extra_content.google.thought_signature` → `thoughtSignature`); streamed, each whole once its choice finishes",
    ],
    ...Object.entries(GEMINI_FINISH).map(([chat, g]): [string, string] => [`\`finish_reason: ${chat}\``, `\`${g}\``]),
    ["`logprobs.content`", "`logprobsResult` (`chosenCandidates`, `topCandidates`)"],
    [
      "`usage`",
      "`usageMetadata`: `promptTokenCount` = `prompt_tokens` (cached included, as Gemini counts), `cachedContentTokenCount`, `candidatesTokenCount` = `completion_tokens` − reasoning, `thoughtsTokenCount` = reasoning, `totalTokenCount`; streamed, on the last event",
    ],
    ["`model`, `id`", "`modelVersion`, `responseId`"],
  ];
  const lines = [
    "| chat completions answer | generateContent answer |",
    "|---|---|",
    ...rows.map(([a, b]) => `| ${a} | ${b} |`),
  ];
  return `${lines.join("\n")}\n`;
}

/** Chat usage as Gemini's `usageMetadata` (docs/llm.md "Usage"). */
export function geminiUsageOfChat(u: unknown): Obj | undefined {
  if (!isObject(u)) return undefined;
  const d = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const c = isObject(u.completion_tokens_details) ? u.completion_tokens_details : {};
  const prompt = num(u.prompt_tokens) ?? 0;
  const completion = num(u.completion_tokens) ?? 0;
  const thoughts = num(c.reasoning_tokens) ?? 0;
  const cached = num(d.cached_tokens) ?? 0;
  const out: Obj = {
    promptTokenCount: prompt,
    candidatesTokenCount: completion - thoughts,
    totalTokenCount: num(u.total_tokens) ?? prompt + completion,
  };
  if (cached > 0) out.cachedContentTokenCount = cached;
  if (thoughts > 0) out.thoughtsTokenCount = thoughts;
  return out;
}

function parseArgs(a: unknown): Obj {
  if (typeof a !== "string") return isObject(a) ? a : {};
  try {
    const v: unknown = JSON.parse(a);
    return isObject(v) ? v : {};
  } catch {
    return {};
  }
}

/** A chat tool call as a Gemini `functionCall` part (a thought signature goes back on its part). */
function callPart(tc: Obj): Obj {
  const f = isObject(tc.function) ? tc.function : {};
  const part: Obj = { functionCall: { name: str(f.name) ?? "", args: parseArgs(f.arguments), ...idOf(tc) } };
  const g = isObject(tc.extra_content) && isObject(tc.extra_content.google) ? tc.extra_content.google : undefined;
  const sig = g === undefined ? undefined : str(g.thought_signature);
  if (sig !== undefined) part.thoughtSignature = sig;
  return part;
}
const idOf = (tc: Obj): Obj => (typeof tc.id === "string" && tc.id !== "" ? { id: tc.id } : {});

/** Chat `logprobs.content` as Gemini's `logprobsResult`. */
function logprobsResult(lp: unknown): Obj | undefined {
  if (!isObject(lp) || !Array.isArray(lp.content)) return undefined;
  const entry = (x: unknown) => {
    const o = isObject(x) ? x : {};
    return { token: str(o.token) ?? "", logProbability: num(o.logprob) ?? 0 };
  };
  return {
    chosenCandidates: lp.content.map(entry),
    topCandidates: lp.content.map((t) => ({ candidates: arr(isObject(t) ? t.top_logprobs : undefined).map(entry) })),
  };
}

function finishOf(reason: unknown, refused: boolean): GeminiFinishReason {
  return refused ? "SAFETY" : (GEMINI_FINISH[(str(reason) ?? "stop") as ChatFinishReason] ?? "STOP");
}

export function chatToGeminiClientResponse(body: unknown, meta: RequestMeta, _ctx: TranslateContext): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.choices))
    return { ok: false, error: { status: 502, kind: "server", message: "malformed chat completion from upstream" } };
  const candidates: Obj[] = [];
  for (const [i, c] of body.choices.entries()) {
    if (!isObject(c)) continue;
    const m = isObject(c.message) ? c.message : {};
    const parts: Obj[] = [];
    const thoughts = str(m.reasoning_content);
    if (thoughts !== undefined && thoughts !== "") parts.push({ text: thoughts, thought: true });
    const text = str(m.content);
    if (text !== undefined && text !== "") parts.push({ text });
    const refusal = str(m.refusal);
    const refused = refusal !== undefined && refusal !== "";
    if (refused) parts.push({ text: refusal });
    for (const tc of arr(m.tool_calls)) if (isObject(tc)) parts.push(callPart(tc));
    const cand: Obj = {
      content: { role: "model", parts },
      finishReason: finishOf(c.finish_reason, refused),
      index: num(c.index) ?? i,
    };
    const lr = logprobsResult(c.logprobs);
    if (lr !== undefined) cand.logprobsResult = lr;
    candidates.push(cand);
  }
  const out: Obj = { candidates };
  const um = geminiUsageOfChat(body.usage);
  if (um !== undefined) out.usageMetadata = um;
  out.modelVersion = str(body.model) ?? meta.model;
  const id = str(body.id);
  if (id !== undefined) out.responseId = id;
  const usage = usageFromChat(body.usage);
  return usage === undefined ? { ok: true, body: out as JsonObject } : { ok: true, body: out as JsonObject, usage };
}

export type GeminiStreamItem = Obj | { error: LlmError };

/** `data: <GenerateContentResponse>` events, as Google's SSE (`alt=sse`) frames them; an error is `{"error": ...}`. */
export const geminiEncoder: ClientEncoder<GeminiStreamItem> = {
  encode(o) {
    const body = "error" in o && isError(o.error) ? errorBody("generate-content", o.error) : o;
    return `data: ${JSON.stringify(body)}\r\n\r\n`;
  },
  trailer: () => "",
};
const isError = (v: unknown): v is LlmError =>
  isObject(v) && typeof v.status === "number" && typeof v.kind === "string";

interface PendingCall {
  id?: string;
  name: string;
  args: string;
  signature?: string;
}

/**
 * chat.completion.chunk objects → GenerateContentResponse events. Text and reasoning go out as they come; a tool
 * call's argument deltas are gathered and the call goes out whole when its choice finishes. The last finishing event
 * waits for the usage chunk (chat sends it after the finish), so usage arrives on the final event, as Gemini's does.
 */
export class ChatToGeminiStream implements StreamMapper<ChatStreamItem | Obj, GeminiStreamItem> {
  private model: string;
  private id: string | undefined;
  private readonly calls = new Map<number, Map<number, PendingCall>>();
  private held: Obj[] = [];
  private rawUsage: unknown;
  private finished = 0;
  private done = false;

  constructor(
    private readonly meta: RequestMeta,
    _ctx: TranslateContext,
  ) {
    this.model = meta.model;
  }

  private event0(candidates: Obj[]): Obj {
    const ev: Obj = { candidates, modelVersion: this.model };
    if (this.id !== undefined) ev.responseId = this.id;
    return ev;
  }

  private flush(emit: (o: GeminiStreamItem) => void): void {
    for (const h of this.held) emit(h);
    this.held = [];
  }

  event(item: ChatStreamItem | Obj, emit: (o: GeminiStreamItem) => void): void {
    if (this.done) return;
    if ("error" in item && isError(item.error)) {
      this.error(item.error, emit);
      return;
    }
    const ev = item as Obj;
    this.model = str(ev.model) ?? this.model;
    this.id ??= str(ev.id);
    if (isObject(ev.usage)) {
      this.rawUsage = ev.usage;
      const last = this.held.at(-1) ?? this.event0([]);
      if (this.held.length === 0) this.held.push(last);
      last.usageMetadata = geminiUsageOfChat(ev.usage);
      this.flush(emit);
    }
    for (const c of arr(ev.choices)) {
      if (!isObject(c)) continue;
      const index = num(c.index) ?? 0;
      const d = isObject(c.delta) ? c.delta : {};
      const parts: Obj[] = [];
      const thought = str(d.reasoning_content);
      if (thought !== undefined && thought !== "") parts.push({ text: thought, thought: true });
      const text = str(d.content) ?? str(d.refusal);
      if (text !== undefined && text !== "") parts.push({ text });
      if (str(d.refusal) !== undefined) this.refused.add(index);
      for (const tc of arr(d.tool_calls)) {
        if (!isObject(tc)) continue;
        const mine = this.calls.get(index) ?? new Map<number, PendingCall>();
        this.calls.set(index, mine);
        const k = num(tc.index) ?? 0;
        const f = isObject(tc.function) ? tc.function : {};
        const call = mine.get(k) ?? { name: "", args: "" };
        mine.set(k, call);
        if (typeof tc.id === "string" && tc.id !== "") call.id = tc.id;
        call.name += str(f.name) ?? "";
        call.args += str(f.arguments) ?? "";
        const g = isObject(tc.extra_content) && isObject(tc.extra_content.google) ? tc.extra_content.google : undefined;
        const sig = g === undefined ? undefined : str(g.thought_signature);
        if (sig !== undefined) call.signature = sig;
      }
      const finish = c.finish_reason;
      if (finish !== null && finish !== undefined) {
        for (const call of [...(this.calls.get(index)?.values() ?? [])]) {
          parts.push(
            callPart({
              ...(call.id !== undefined ? { id: call.id } : {}),
              function: { name: call.name, arguments: call.args },
              ...(call.signature !== undefined
                ? { extra_content: { google: { thought_signature: call.signature } } }
                : {}),
            }),
          );
        }
        this.calls.delete(index);
        const cand: Obj = {
          content: { role: "model", parts },
          finishReason: finishOf(finish, this.refused.has(index)),
          index,
        };
        this.flush(emit);
        this.held.push(this.event0([cand]));
        this.finished++;
        continue;
      }
      if (parts.length === 0) continue;
      this.flush(emit);
      emit(this.event0([{ content: { role: "model", parts }, index }]));
    }
  }

  private readonly refused = new Set<number>();

  error(err: LlmError, emit: (o: GeminiStreamItem) => void): void {
    this.flush(emit);
    emit({ error: err });
    this.done = true;
  }

  end(emit: (o: GeminiStreamItem) => void): void {
    if (this.done) return;
    this.done = true;
    if (this.finished < (this.meta.choices ?? 1)) {
      this.flush(emit);
      emit({ error: { status: 502, kind: "server", message: "upstream stream ended early" } });
      return;
    }
    this.flush(emit);
  }

  usage(): TokenUsage | undefined {
    return usageFromChat(this.rawUsage);
  }
}
