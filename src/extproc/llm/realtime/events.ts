// Prompt guards on the JSON events of OpenAI's Realtime API (a websocket session), for a relay between the client and
// the provider. Client events carrying user text go through the request guards as a whole: `conversation.item.create`
// (input_text parts), `session.update` (instructions) and `response.create` (instructions, input items); a Mask
// rewrites the text in the event, a Reject answers the client an `error` event and the event is not forwarded.
// Provider events carrying the model's text go through the response guards as a stream (stream.ts, reused): each
// text and audio-transcript delta of an item's content part is a channel, whose tail that may still begin a match is
// held back; `.done` events and finished items get the text that was released. Audio itself is not guarded.

import { SseParser, serializeSse } from "../../../llm/index.js";
import type { GuardSpec, PromptGuardEntry } from "../../../translate/llm/guards.js";
import { type GuardContext, runGuards } from "../guards/runner.js";
import { StreamGuard } from "../guards/stream.js";
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
  | { readonly reply: string };

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
    if (o.action === "reject") return { reply: JSON.stringify(realtimeError(o.guard, event.event_id)) };
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
function shadowOf(raw: string): string {
  let e: unknown;
  try {
    e = JSON.parse(raw);
  } catch {
    e = undefined;
  }
  if (!isObj(e) || typeof e.type !== "string") return JSON.stringify({ type: "sluice.raw", [RAW]: raw });
  const type = e.type;
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
function realtimeOf(data: string): { text: string; rejected: boolean } {
  const e = JSON.parse(data) as Obj;
  if (typeof e[RAW] === "string") return { text: e[RAW], rejected: false };
  const type = e[TYPE];
  if (typeof type !== "string") {
    // The stream guard's own error event (responses format): Realtime's error event instead.
    const message = typeof e.message === "string" ? e.message : "rejected by a prompt guard";
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

  constructor(specs: readonly GuardSpec[], ctx: GuardContext) {
    this.#stream = new StreamGuard("responses", specs, ctx);
  }

  /** Whether the provider entry's guards apply to Realtime responses (response guards, with `streaming: Enabled`). */
  static applies(g: PromptGuardEntry | undefined): boolean {
    return g?.streaming === true && g.response.length > 0;
  }

  push(raw: string): string[] | Promise<string[]> {
    if (this.closed) return [];
    const out = this.#stream.push(te.encode(serializeSse({ data: shadowOf(raw) })), false);
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
      const r = realtimeOf(ev.data);
      out.push(r.text);
      if (r.rejected) this.closed = true;
    }
    return out;
  }
}
