// Prompt guards on the JSON events of OpenAI's Realtime API (a websocket session), for a relay between the client and
// the provider. Client events carrying user text go through the request guards as a whole: `conversation.item.create`
// (input_text parts), `session.update` (instructions) and `response.create` (instructions, input items); a Mask
// rewrites the text in the event, a Reject answers the client an `error` event and the event is not forwarded.
// Provider events carrying the model's text go through the response guards as a stream (stream.ts, reused): each
// text and audio-transcript delta of an item's content part is a channel, whose tail that may still begin a match is
// held back; `.done` events and finished items get the text that was released. Audio itself is not guarded.
// Google's Live API (BidiGenerateContent, Vertex AI's and the Gemini API's) is read too: the client's `setup`
// system instruction, `clientContent` turns and `realtimeInput.text`; the model turn's text parts and output
// transcription as streams of text, one per turn. Its protocol has no error event: a rejection closes the websocket
// (1008, the CustomResponse message as the reason), as the Live API closes a session it refuses.

import { SseParser, serializeSse } from "../../../llm/index.js";
import type { GuardSpec, PromptGuardEntry } from "../../../translate/llm/guards.js";
import { type GuardContext, runGuards } from "../guards/runner.js";
import { PASSING_EVENT, StreamGuard } from "../guards/stream.js";
import { Slots } from "../guards/text.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const te = new TextEncoder();

/** The text slots of a client event the request guards read; empty for events without user text (audio appends ...). */
export function clientEventSlots(event: Obj): Slots {
  const out = new Slots();
  const item = (it: unknown) => {
    if (!isObj(it) || !Array.isArray(it.content)) return;
    for (const p of it.content) if (isObj(p) && (p.type === "input_text" || p.type === "text")) out.add(p, "text");
  };
  if (typeof event.type !== "string") {
    geminiClientSlots(event, out);
    return out;
  }
  switch (event.type) {
    case "conversation.item.create":
      item(event.item);
      break;
    case "session.update":
      if (isObj(event.session)) out.add(event.session, "instructions");
      break;
    case "response.create":
      if (isObj(event.response)) {
        out.add(event.response, "instructions");
        if (Array.isArray(event.response.input)) for (const it of event.response.input) item(it);
      }
      break;
    default:
  }
  return out;
}

/** The text parts of a Live API `Content` (`{role, parts: [{text} ...]}`). */
function geminiContent(c: unknown, out: Slots): void {
  if (isObj(c) && Array.isArray(c.parts)) for (const p of c.parts) out.add(p, "text");
}

/** A Live API client message's text: the setup's system instruction, the turns of `clientContent`, typed input. */
function geminiClientSlots(event: Obj, out: Slots): void {
  if (isObj(event.setup)) {
    const si = event.setup.systemInstruction;
    if (typeof si === "string") out.add(event.setup, "systemInstruction");
    else geminiContent(si, out);
  }
  if (isObj(event.clientContent) && Array.isArray(event.clientContent.turns)) {
    for (const t of event.clientContent.turns) geminiContent(t, out);
  }
  if (isObj(event.realtimeInput)) out.add(event.realtimeInput, "text");
}

/** Realtime's error event, as the provider sends it for a client event it refuses. */
export function realtimeError(spec: GuardSpec, clientEventId: unknown): Obj {
  return {
    type: "error",
    event_id: `event_sluice_${Date.now().toString(36)}`,
    error: {
      type: "invalid_request_error",
      code: "prompt_guard_rejected",
      message: spec.response.message,
      param: null,
      event_id: typeof clientEventId === "string" ? clientEventId : null,
    },
  };
}

export type ClientEventOutcome =
  /** Forward `text` (the event as it came, or rewritten with masked text). */
  | { readonly forward: string }
  /** Do not forward; answer the client `reply` (an error event). */
  | { readonly reply: string }
  /** Do not forward; close the session with this reason (the Live API, which has no error event). */
  | { readonly close: string };

/**
 * A client event (the websocket message's text) through the request guards. Not JSON, or no text in it: forwarded as
 * it came (the provider answers what it cannot read).
 */
export function guardClientEvent(
  raw: string,
  specs: readonly GuardSpec[],
  ctx: GuardContext,
): ClientEventOutcome | Promise<ClientEventOutcome> {
  if (specs.length === 0) return { forward: raw };
  let event: unknown;
  try {
    event = JSON.parse(raw);
  } catch {
    return { forward: raw };
  }
  if (!isObj(event)) return { forward: raw };
  const slots = clientEventSlots(event);
  if (slots.list.length === 0) return { forward: raw };
  const decide = (o: Awaited<ReturnType<typeof runGuards>>): ClientEventOutcome => {
    if (o.action === "reject") {
      if (typeof event.type !== "string") return { close: o.guard.response.message };
      return { reply: JSON.stringify(realtimeError(o.guard, event.event_id)) };
    }
    if (o.action === "pass") return { forward: raw };
    slots.write(o.texts);
    return { forward: JSON.stringify(event) };
  };
  const o = runGuards("request", specs, slots.texts(), ctx);
  return o instanceof Promise ? o.then(decide) : decide(o);
}

/** Provider delta events of text, and the key of their text. */
const DELTAS: Readonly<Record<string, true>> = {
  "response.text.delta": true,
  "response.output_text.delta": true,
  "response.audio_transcript.delta": true,
  "response.output_audio_transcript.delta": true,
};
/** Provider events carrying a chunk of the answer's audio. */
const AUDIO_DELTAS = new Set(["response.audio.delta", "response.output_audio.delta"]);
/** Provider events that repeat a whole text, and the key of the text (top level). */
const DONES: Readonly<Record<string, "text" | "transcript">> = {
  "response.text.done": "text",
  "response.output_text.done": "text",
  "response.audio_transcript.done": "transcript",
  "response.output_audio_transcript.done": "transcript",
};
/** Provider events whose content parts (`part`, `item.content`, `response.output[].content`) repeat whole texts. */
const WHOLE = new Set([
  "response.content_part.added",
  "response.content_part.done",
  "response.output_item.added",
  "response.output_item.done",
  "conversation.item.created",
  "conversation.item.added",
  "conversation.item.done",
  "conversation.item.retrieved",
  "response.done",
]);

// The marker fields of the events handed to the stream guard (in the responses format's shapes), and taken out after.
const TYPE = "__sluice_realtime_type";
const RAW = "__sluice_realtime_raw";
const TRANSCRIPT = "__sluice_realtime_transcript";
/** A Live API text: `model` (a text part of the model turn, the part's other fields beside) or `transcript`. */
const GEMINI = "__sluice_realtime_gemini";
const GEMINI_PART = "__sluice_realtime_gemini_part";
const GEMINI_TURN = "__sluice_realtime_gemini_turn";

/** Whether `e` is a message of Google's Live API (no `type`, its own top-level keys) rather than a Realtime event. */
function isGemini(e: Obj): boolean {
  return typeof e.type !== "string" && ("serverContent" in e || "setupComplete" in e || "toolCall" in e);
}

/**
 * A Live API server message as stream guard events: each text part of the model turn and the output transcription as
 * a delta on the turn's channel (`g|x|<turn>`, `g|t|<turn>`), then the rest of the message (audio parts, turn
 * completion, usage ...) as one opaque event, which releases what the channels hold when it ends the turn.
 */
function geminiShadows(e: Obj, turn: number): string[] {
  const sc = e.serverContent;
  if (!isObj(sc)) return [opaque(e)];
  const out: string[] = [];
  const delta = (kind: "x" | "t", text: string, extra: Obj) =>
    out.push(
      JSON.stringify({
        type: "response.output_text.delta",
        output_index: `g|${kind}|${turn}`,
        content_index: 0,
        delta: text,
        ...extra,
      }),
    );
  const rest: Obj = { ...e };
  const content: Obj = { ...sc };
  const mt = sc.modelTurn;
  if (isObj(mt) && Array.isArray(mt.parts)) {
    const { parts, ...turnRest } = mt;
    const kept: unknown[] = [];
    for (const p of parts as unknown[]) {
      if (isObj(p) && typeof p.text === "string") {
        const { text, ...partRest } = p;
        delta("x", text, { [GEMINI]: "model", [GEMINI_PART]: partRest, [GEMINI_TURN]: turnRest });
      } else kept.push(p);
    }
    if (kept.length > 0) content.modelTurn = { ...turnRest, parts: kept };
    else delete content.modelTurn;
  }
  const ot = sc.outputTranscription;
  if (isObj(ot) && typeof ot.text === "string") {
    const { text, ...otRest } = ot;
    delta("t", text, { [GEMINI]: "transcript", [GEMINI_PART]: otRest });
    delete content.outputTranscription;
  }
  if (out.length === 0) return [opaque(e)];
  if (Object.keys(content).length > 0) rest.serverContent = content;
  else delete rest.serverContent;
  if (Object.keys(rest).length > 0) out.push(opaque(rest));
  return out;
}

/**
 * A Live API message without the model's text as the stream guard gets it: audio parts and the user's transcription
 * go out without releasing what the channels hold (a card number split across transcript deltas, an audio chunk
 * between them, is still caught); anything else (turn completion, tool calls, usage ...) releases it first.
 */
function opaque(e: Obj): string {
  const sc = e.serverContent;
  const passing =
    Object.keys(e).every((k) => k === "serverContent") &&
    isObj(sc) &&
    Object.keys(sc).every((k) => k === "modelTurn" || k === "inputTranscription");
  return JSON.stringify({ type: passing ? PASSING_EVENT : "sluice.raw", [RAW]: JSON.stringify(e) });
}

/** A released Live API delta back in the Live API's shape. */
function geminiOf(e: Obj): string {
  const part = isObj(e[GEMINI_PART]) ? e[GEMINI_PART] : {};
  const text = typeof e.delta === "string" ? e.delta : "";
  if (e[GEMINI] === "transcript") return JSON.stringify({ serverContent: { outputTranscription: { ...part, text } } });
  const turn = isObj(e[GEMINI_TURN]) ? e[GEMINI_TURN] : {};
  return JSON.stringify({ serverContent: { modelTurn: { ...turn, parts: [{ ...part, text }] } } });
}

/** Content parts of `e` carrying an audio transcript (not a text): their transcript is read as text for the guard. */
function contentParts(e: Obj): Obj[] {
  const out: Obj[] = [];
  const content = (item: unknown) => {
    if (isObj(item) && Array.isArray(item.content)) for (const p of item.content) if (isObj(p)) out.push(p);
  };
  if (isObj(e.part)) out.push(e.part);
  content(e.item);
  if (isObj(e.response) && Array.isArray(e.response.output)) for (const it of e.response.output) content(it);
  return out;
}

/**
 * A provider event in the shape the stream guard reads (the responses format): deltas as `response.output_text.delta`
 * on a channel per item, content part and kind (text or transcript), repeats of whole texts with `text` keys; any
 * other event opaque (its text, audio and tool arguments are not read).
 */
function shadowOfEvent(e: unknown, raw: string): string {
  if (!isObj(e) || typeof e.type !== "string") return JSON.stringify({ type: "sluice.raw", [RAW]: raw });
  const type = e.type;
  // Audio between the transcript's deltas ends no stream of text.
  if (AUDIO_DELTAS.has(type)) return JSON.stringify({ type: PASSING_EVENT, [RAW]: raw });
  if (DELTAS[type] === true && typeof e.delta === "string") {
    const kind = type.includes("transcript") ? "t" : "x";
    return JSON.stringify({
      ...e,
      type: "response.output_text.delta",
      output_index: `${kind}|${String(e.item_id)}|${String(e.output_index)}`,
      content_index: e.content_index ?? 0,
      [TYPE]: type,
    });
  }
  const key = DONES[type];
  if (key !== undefined && typeof e[key] === "string") {
    const { delta: _d, [key]: text, ...rest } = e;
    return JSON.stringify({ ...rest, type: "response.output_text.done", text, [TYPE]: type, [TRANSCRIPT]: key });
  }
  if (WHOLE.has(type)) {
    for (const p of contentParts(e)) {
      if (typeof p.text === "string" || typeof p.transcript !== "string") continue;
      p.text = p.transcript;
      delete p.transcript;
      p[TRANSCRIPT] = true;
    }
    return JSON.stringify({ ...e, type: "response.output_text.done.whole", [TYPE]: type });
  }
  return JSON.stringify({ type: "sluice.raw", [RAW]: raw });
}

/** An event the stream guard gave out, back in Realtime's shape; `error` is Sluice's own (a guard's rejection). */
function realtimeOf(data: string, gemini: boolean): { text: string; rejected: boolean; message?: string } {
  const e = JSON.parse(data) as Obj;
  if (typeof e[RAW] === "string") return { text: e[RAW], rejected: false };
  if (typeof e[GEMINI] === "string") return { text: geminiOf(e), rejected: false };
  const type = e[TYPE];
  if (typeof type !== "string") {
    // The stream guard's own error event (responses format): Realtime's error event instead; the Live API has none
    // (the session closes with the message).
    const message = typeof e.message === "string" ? e.message : "rejected by a prompt guard";
    if (gemini) return { text: "", rejected: true, message };
    const error = { type: "invalid_request_error", code: "prompt_guard_rejected", message, param: null };
    return {
      text: JSON.stringify({ type: "error", event_id: `event_sluice_${Date.now().toString(36)}`, error }),
      rejected: true,
    };
  }
  delete e[TYPE];
  e.type = type;
  if (DELTAS[type] === true) {
    // The channel's fields were rewritten: back to the provider's.
    const [, item, index] = String(e.output_index).split("|");
    e.item_id = item;
    e.output_index = Number(index);
    return { text: JSON.stringify(e), rejected: false };
  }
  const key = e[TRANSCRIPT];
  if (key === "text" || key === "transcript") {
    delete e[TRANSCRIPT];
    if (key === "transcript") {
      e.transcript = e.text;
      delete e.text;
    }
    return { text: JSON.stringify(e), rejected: false };
  }
  for (const p of contentParts(e)) {
    if (p[TRANSCRIPT] !== true) continue;
    delete p[TRANSCRIPT];
    p.transcript = p.text;
    delete p.text;
  }
  return { text: JSON.stringify(e), rejected: false };
}

/**
 * The response guards of one Realtime session, over the provider's events in order: each event in, the events to send
 * the client out (none while a delta's text is held back; more than one when held text is released before an event).
 * `closed` turns true once a guard has rejected: the client got an error event, and the session should end.
 */
export class RealtimeResponseGuard {
  readonly #stream: StreamGuard;
  readonly #parser = new SseParser();
  closed = false;
  /** Once `closed`, the reason the session closes with: the guard's message for the Live API, which gets no event. */
  closeReason: string | undefined;
  /** The provider speaks Google's Live API (seen on its first message). */
  #gemini = false;
  /** The Live API's turn: each has its own channels. */
  #turn = 0;

  constructor(specs: readonly GuardSpec[], ctx: GuardContext) {
    this.#stream = new StreamGuard("responses", specs, ctx);
  }

  /** Whether the provider entry's guards apply to Realtime responses (response guards, with `streaming: Enabled`). */
  static applies(g: PromptGuardEntry | undefined): boolean {
    return g?.streaming === true && g.response.length > 0;
  }

  push(raw: string): string[] | Promise<string[]> {
    if (this.closed) return [];
    let shadows: string[];
    let e: unknown;
    try {
      e = JSON.parse(raw);
    } catch {
      e = undefined;
    }
    if (isObj(e) && isGemini(e)) {
      this.#gemini = true;
      shadows = geminiShadows(e, this.#turn);
      const sc = e.serverContent;
      if (isObj(sc) && (sc.turnComplete === true || sc.interrupted === true)) this.#turn++;
    } else shadows = [shadowOfEvent(e, raw)];
    const out = this.#stream.push(te.encode(shadows.map((data) => serializeSse({ data })).join("")), false);
    return out instanceof Promise ? out.then((b) => this.#events(b)) : this.#events(out);
  }

  /**
   * Nothing came for a while: webhook and remote guards check what waits. (The stream guard lets events that come back
   * to back after a check join the next one, as Envoy's queued body chunks do; a session has no next chunk to wait
   * for, so the relay calls this when the provider goes quiet.)
   */
  idle(): string[] | Promise<string[]> {
    if (this.closed) return [];
    const out = this.#stream.push(new Uint8Array(0), false);
    return out instanceof Promise ? out.then((b) => this.#events(b)) : this.#events(out);
  }

  /** The session ends: what is still held, masked to the end. */
  end(): string[] | Promise<string[]> {
    if (this.closed) return [];
    const out = this.#stream.push(new Uint8Array(0), true);
    return out instanceof Promise ? out.then((b) => this.#events(b)) : this.#events(out);
  }

  #events(bytes: Uint8Array): string[] {
    const out: string[] = [];
    for (const ev of this.#parser.push(bytes)) {
      if (this.closed) break;
      const r = realtimeOf(ev.data, this.#gemini);
      if (r.text !== "") out.push(r.text);
      if (r.rejected) {
        this.closed = true;
        this.closeReason = r.message;
      }
    }
    return out;
  }
}
