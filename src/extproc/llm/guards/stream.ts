// Response guards on a streamed response, in the client's format (after translation), so every format Sluice serves
// is guarded the same way. Each stream of text (a choice, a content block, an output part: its channel) goes through
// two stages.
//
// Regex guards: text arrives in deltas, and a card number may come as "4111 1111 " then "1111 1111": a channel keeps
// back the tail that may still be the beginning of a match (regex.ts holdBack: from the first character a builtin
// match may start with in the trailing run of characters it may contain, within its longest match; the pattern
// window for user patterns) and releases the rest, masked, in the delta that brought it. A delta that releases all
// of itself unchanged goes out as it came (no re-serialization); one that releases nothing is held whole. Any other
// event (a finish reason, a block's end, usage, an error, the end of the stream) first releases every channel's held
// text, masked to the end, in a copy of that channel's last delta.
//
// Webhook and remote guards (when the response has any): what the regex stage releases is gathered into segments (a
// sentence, at most SEGMENT_MAX_CHARS, or up to the next event that is not text) and nothing after a segment goes out
// before the guards have answered for it. The segments a body chunk completes are checked in one call (one text per
// segment); a mask answer replaces a segment, which goes out as one delta; a reject ends the stream with an error
// event in the client's format (after the segments that passed). A check gets STREAM_CHECK_BUDGET_MS; a guard that
// does not answer in time follows its failure mode (runner.ts).
//
// Events that repeat the whole text (the responses format's `done` events, `response.completed`) get the text that
// was released for that channel; a text that is no channel's is masked (and checked) as it is.

import { kindForStatus } from "../../../llm/errors.js";
import { type ClientFormat, errorBody, type SseEvent, SseParser, serializeSse } from "../../../llm/index.js";
import type { GuardSpec } from "../../../translate/llm/guards.js";
import { RegexScanner, type Span, scannerFor } from "./regex.js";
import { GUARDS_BUDGET_MS, type GuardContext, type GuardOutcome, runGuards } from "./runner.js";
import { eventSlots, type Slots, textDelta } from "./text.js";

type Obj = Record<string, unknown>;
const te = new TextEncoder();

/** The longest segment a webhook or remote guard is asked about when no sentence ends sooner. */
export const SEGMENT_MAX_CHARS = 1000;
/**
 * One check of a stream's segments (all its guards), under half of Envoy's 5 s ext_proc message timeout: a body
 * chunk that waited behind a check and then completes the last segment is still answered in time.
 */
export const STREAM_CHECK_BUDGET_MS = 2000;
/** Released text kept as the context of the next scan: more than the longest builtin match (an e-mail, 254). */
const TAIL_CHARS = 512;
/** A body chunk handled this soon (ms) after the previous one was answered waited in Envoy's queue meanwhile. */
const QUEUED_MS = 0.5;

interface Template {
  readonly ev: SseEvent;
  readonly json: Obj;
  readonly holder: Obj;
  readonly key: string;
}

interface Channel {
  /** Text received and not yet released by the regex stage. */
  held: string;
  /** The last characters the regex stage released (unmasked): what a scan of `held` may need before it. */
  tail: string;
  /** The channel's last delta, reused to release what is held when something else comes. */
  tpl: Template;
  /** Webhook and remote guards: all the text received, and all the text sent to the client. */
  received: string;
  sent: string;
}

/** What waits for the webhook and remote guards, in stream order. */
type Item =
  | { readonly kind: "raw"; readonly text: string }
  | { readonly kind: "seg"; readonly ch: Channel; text: string; tpl: Template; closed: boolean }
  | {
      readonly kind: "whole";
      readonly ev: SseEvent;
      readonly json: Obj;
      readonly slots: Slots;
      readonly texts: string[];
      /** Per text, the channel whose whole text it repeats (it gets the text sent for that channel). */
      readonly from: readonly (Channel | undefined)[];
    };

/** The spans of several scanners over one text: the first scanner to claim a span wins. */
function scanAll(scanners: readonly RegexScanner[], text: string, seen?: { start: number; end: number }[]): Span[] {
  if (scanners.length === 1) return (scanners[0] as RegexScanner).scan(text, seen);
  const out: Span[] = [];
  for (const s of scanners) {
    for (const span of s.scan(text, seen)) {
      if (!out.some((o) => span.start < o.end && o.start < span.end)) out.push(span);
    }
  }
  return out.sort((a, b) => a.start - b.start);
}

/** The texts of `item` the guards have not seen (empty ones need no check). */
function pending(item: Item): number {
  if (item.kind === "seg") return item.text === "" ? 0 : 1;
  if (item.kind === "whole") return item.texts.filter((t, i) => t !== "" && item.from[i] === undefined).length;
  return 0;
}

/**
 * A delta of one stream of text (text.ts textDelta), and chat-completions chunks that name the role with their text,
 * as servers that repeat the role on every chunk send (Ollama's OpenAI API): the role does not end the text, else
 * each chunk would be scanned alone and a match split across chunks missed.
 */
function deltaOf(
  client: ClientFormat,
  json: Obj,
): { channel: string; holder: Obj; key: string; role?: boolean } | undefined {
  const d = textDelta(client, json);
  if (d !== undefined || client !== "chat-completions") return d;
  const choices = json.choices;
  if (!Array.isArray(choices) || choices.length !== 1 || (json.usage !== undefined && json.usage !== null)) return;
  const c = choices[0] as Obj | undefined;
  const delta = c?.delta as Obj | undefined;
  if (c === undefined || (c.finish_reason !== undefined && c.finish_reason !== null)) return undefined;
  if (typeof delta !== "object" || delta === null || typeof delta.content !== "string" || delta.content === "") return;
  for (const k of Object.keys(delta)) if (k !== "content" && k !== "role" && delta[k] !== null) return undefined;
  return { channel: String(c.index ?? 0), holder: delta, key: "content", role: true };
}

/** Whether `bytes` end an SSE event (a blank line), given whether the bytes before them did. */
function endsEvent(bytes: Uint8Array, before: boolean): boolean {
  const n = bytes.length;
  if (n === 0) return before;
  if (bytes[n - 1] !== 10) return false;
  // LF LF, or CR LF CR LF
  return (
    n >= 2 && (bytes[n - 2] === 10 || (n >= 4 && bytes[n - 2] === 13 && bytes[n - 3] === 10 && bytes[n - 4] === 13))
  );
}

/** Where an open segment may be cut: after its last sentence end or line break, or at SEGMENT_MAX_CHARS. */
export function segmentEnd(text: string): number {
  for (let i = text.length - 1; i > 0; i--) {
    const c = text.charCodeAt(i);
    if (c === 10) return i + 1;
    if (c === 32 || c === 9) {
      const p = text.charCodeAt(i - 1);
      // . ! ? followed by a space
      if (p === 46 || p === 33 || p === 63) return i + 1;
    }
  }
  if (text.length < SEGMENT_MAX_CHARS) return 0;
  const space = text.lastIndexOf(" ");
  return space > 0 ? space + 1 : text.length;
}

export class StreamGuard {
  readonly #parser = new SseParser();
  readonly #channels = new Map<string, Channel>();
  readonly #scanners: readonly RegexScanner[];
  /** Webhook and remote guards, in their order; empty when only regex guards apply. */
  readonly #remote: readonly GuardSpec[];
  readonly #ctx: GuardContext | undefined;
  readonly #queue: Item[] = [];
  /** The bytes so far ended with a whole event (a blank line). */
  #aligned = true;
  /** Rejected: the error event went out, nothing more does. */
  #over = false;
  /** The last `sequence_number` of a responses stream (the error event takes the next). */
  #seq = 0;
  #lastDone = performance.now();
  /** The previous chunk waited for a check, and chunks have come back to back since. */
  #afterCheck = false;

  constructor(
    readonly client: ClientFormat,
    specs: readonly GuardSpec[],
    ctx?: GuardContext,
  ) {
    this.#scanners = specs.flatMap((s) => (s.kind === "regex" ? [scannerFor(s)] : []));
    this.#ctx = ctx;
    this.#remote =
      ctx === undefined
        ? []
        : specs.filter((s) => s.kind === "webhook" || (s.kind !== "regex" && ctx.remote?.(s) !== undefined));
  }

  /** Whether `specs` give a stream guard anything to do. */
  static applies(specs: readonly GuardSpec[]): boolean {
    return specs.length > 0;
  }

  /**
   * Client-format bytes in, the same events out with text masked and tails held back; a promise when webhook or
   * remote guards must answer first.
   */
  push(bytes: Uint8Array, end: boolean): Uint8Array | Promise<Uint8Array> {
    const t0 = performance.now();
    if (t0 - this.#lastDone >= QUEUED_MS) this.#afterCheck = false;
    if (this.#over) return this.#done(new Uint8Array(0));
    const events = this.#parser.push(bytes);
    if (end) events.push(...this.#parser.end());
    // The chunk may go out as it came when it holds whole events only and each of them goes out unchanged.
    const aligned = this.#aligned;
    this.#aligned = endsEvent(bytes, aligned);
    let same = aligned && this.#aligned;
    let out = "";
    for (const ev of events) {
      const o = this.#event(ev);
      if (o === undefined) out += serializeSse(ev);
      else {
        out += o;
        same = false;
      }
    }
    if (end) {
      const rest = this.#flush();
      if (rest !== "") same = false;
      out += rest;
    }
    if (this.#remote.length === 0) {
      return this.#done(same ? bytes : out === "" ? new Uint8Array(0) : te.encode(out));
    }
    const drained = this.#drain(end, this.#afterCheck);
    if (typeof drained === "string") return this.#done(te.encode(out + drained));
    return drained.then((s) => {
      this.#afterCheck = true;
      return this.#done(te.encode(out + s));
    });
  }

  #done(bytes: Uint8Array): Uint8Array {
    this.#lastDone = performance.now();
    return bytes;
  }

  /** The event's output: undefined when it goes out as it came. */
  #event(ev: SseEvent): string | undefined {
    let json: unknown;
    try {
      json = ev.data === "[DONE]" ? undefined : JSON.parse(ev.data);
    } catch {
      json = undefined;
    }
    if (typeof json !== "object" || json === null || Array.isArray(json)) return this.#other(ev);
    const obj = json as Obj;
    if (typeof obj.sequence_number === "number" && obj.sequence_number > this.#seq) this.#seq = obj.sequence_number;
    const d = deltaOf(this.client, obj);
    if (d !== undefined) {
      const text = d.holder[d.key] as string;
      const tpl: Template = { ev, json: obj, holder: d.holder, key: d.key };
      let ch = this.#channels.get(d.channel);
      if (ch === undefined) {
        ch = { held: "", tail: "", tpl, received: "", sent: "" };
        this.#channels.set(d.channel, ch);
      }
      ch.tpl = tpl;
      if (this.#remote.length > 0) ch.received += text;
      // Nothing held before: the delta may go out as it came.
      const whole = ch.held === "";
      ch.held += text;
      const released = this.#release(ch, false);
      if (whole && released === text && this.#remote.length === 0) return undefined;
      // A chunk that names the role goes out all the same, with the text it may release.
      if (released === "" && (!d.role || this.#remote.length > 0)) return "";
      return this.#text(ch, released, tpl);
    }
    const slots = eventSlots(this.client, obj);
    if (slots.list.length === 0) return this.#other(ev);
    const out = this.#flush();
    const texts = slots.texts();
    let changed = false;
    const from: (Channel | undefined)[] = [];
    for (let i = 0; i < texts.length; i++) {
      const t = texts[i] as string;
      const ch = this.#remote.length > 0 && t !== "" ? this.#channelOf(t) : undefined;
      from.push(ch);
      if (ch !== undefined) continue;
      const spans = this.#scanners.length === 0 ? [] : scanAll(this.#scanners, t);
      if (spans.length === 0) continue;
      changed = true;
      texts[i] = RegexScanner.apply(t, spans);
    }
    if (this.#remote.length > 0) return out + this.#item({ kind: "whole", ev, json: obj, slots, texts, from });
    if (changed) {
      slots.write(texts);
      return out + serializeSse({ ...ev, data: JSON.stringify(obj) });
    }
    return out === "" ? undefined : out + serializeSse(ev);
  }

  /** An event without text: it ends what the channels hold. */
  #other(ev: SseEvent): string | undefined {
    const out = this.#flush();
    if (this.#remote.length > 0) return this.#item({ kind: "raw", text: serializeSse(ev) });
    return out === "" ? undefined : out + serializeSse(ev);
  }

  /** The channel whose text so far is `text` (an event repeating the whole text). */
  #channelOf(text: string): Channel | undefined {
    for (const ch of this.#channels.values()) if (ch.received === text) return ch;
    return undefined;
  }

  /** What `ch` may release now (all of it when `all`), masked; the rest stays held. */
  #release(ch: Channel, all: boolean): string {
    const text = ch.held;
    if (text === "") return "";
    if (this.#scanners.length === 0) {
      ch.held = "";
      return text;
    }
    let hold = 0;
    if (!all) for (const s of this.#scanners) hold = Math.max(hold, s.holdBack(text));
    let cut = text.length - hold;
    if (cut === 0) return "";
    // Scanned after as much released text as a scan of the whole text would have seen matches start in (a run that
    // was longer than a match), and the character before (lookbehinds), so both find the same matches.
    let lead = 0;
    for (const s of this.#scanners) lead = Math.max(lead, s.context(ch.tail));
    const seen: { start: number; end: number }[] = [];
    const spans =
      lead === 0
        ? scanAll(this.#scanners, text, seen)
        : scanAll(this.#scanners, ch.tail.slice(-lead) + text, seen).flatMap((s) =>
            s.end <= lead ? [] : [{ start: Math.max(0, s.start - lead), end: s.end - lead, mask: s.mask }],
          );
    // Never release part of a match, nor of one turned down (a checksum, an overlap): more text may make it the match
    // that is masked. A match the cut goes through is held whole.
    if (!all) {
      for (let moved = true; moved && cut > 0; ) {
        moved = false;
        for (const f of seen) {
          const start = Math.max(0, f.start - lead);
          if (start < cut && f.end - lead > cut) [cut, moved] = [start, true];
        }
      }
    }
    if (cut === 0) return "";
    ch.held = text.slice(cut);
    ch.tail = (ch.tail + text.slice(0, cut)).slice(-TAIL_CHARS);
    return RegexScanner.apply(
      text.slice(0, cut),
      spans.filter((s) => s.end <= cut),
    );
  }

  /** Released text of `ch`, carried by `tpl` (its delta): out now, or into the queue for the remote guards. */
  #text(ch: Channel, text: string, tpl: Template): string {
    if (this.#remote.length === 0) return this.#write(tpl, text);
    const last = this.#queue.at(-1);
    if (last?.kind === "seg" && last.ch === ch && !last.closed) {
      last.text += text;
      last.tpl = tpl;
    } else this.#item({ kind: "seg", ch, text, tpl, closed: false });
    return "";
  }

  #write(tpl: Template, text: string): string {
    tpl.holder[tpl.key] = text;
    return serializeSse({ ...tpl.ev, data: JSON.stringify(tpl.json) });
  }

  /** Out now (regex guards only), else into the queue behind what waits for the remote guards. */
  #item(item: Item): string {
    if (this.#remote.length === 0) return item.kind === "raw" ? item.text : "";
    const last = this.#queue.at(-1);
    if (last?.kind === "seg") last.closed = true;
    this.#queue.push(item);
    return "";
  }

  #flush(): string {
    let out = "";
    for (const ch of this.#channels.values()) {
      const rest = this.#release(ch, true);
      if (rest !== "") out += this.#text(ch, rest, ch.tpl);
    }
    return out;
  }

  #render(item: Item): string {
    if (item.kind === "raw") return item.text;
    if (item.kind === "seg") {
      item.ch.sent += item.text;
      return item.text === "" ? "" : this.#write(item.tpl, item.text);
    }
    const texts = item.texts.map((t, i) => item.from[i]?.sent ?? t);
    item.slots.write(texts);
    return serializeSse({ ...item.ev, data: JSON.stringify(item.json) });
  }

  /**
   * The queue's items that may go out: those before any unchecked text at once; then the closed segments (and the
   * sentences of the open one) checked by the remote guards in one call, unless this chunk waited behind the previous
   * check (its segments join the next one). At the end of the stream, everything.
   */
  #drain(end: boolean, queued: boolean): string | Promise<string> {
    const q = this.#queue;
    let out = "";
    while (q.length > 0 && pending(q[0] as Item) === 0 && (q[0]?.kind !== "seg" || end || q[0].closed)) {
      out += this.#render(q.shift() as Item);
    }
    if (q.length === 0 || (queued && !end)) return out;
    let upto = q.length;
    const last = q.at(-1) as Item;
    if (!end && last.kind === "seg" && !last.closed) {
      const cut = segmentEnd(last.text);
      if (cut > 0 && cut < last.text.length) {
        // The sentences go now; the rest stays open in a segment of its own.
        q.push({ kind: "seg", ch: last.ch, text: last.text.slice(cut), tpl: last.tpl, closed: false });
        last.text = last.text.slice(0, cut);
        last.closed = true;
        upto = q.length - 1;
      } else if (cut === 0) upto = q.length - 1;
    }
    if (upto === 0) return out;
    const batch = q.splice(0, upto);
    const texts: string[] = [];
    for (const item of batch) {
      if (item.kind === "seg" && item.text !== "") texts.push(item.text);
      else if (item.kind === "whole") {
        item.texts.forEach((t, i) => {
          if (t !== "" && item.from[i] === undefined) texts.push(t);
        });
      }
    }
    const apply = (o: GuardOutcome): string => {
      if (o.action === "reject") {
        this.#over = true;
        q.length = 0;
        return out + this.#rejection(o.guard);
      }
      if (o.action === "mask") {
        let k = 0;
        for (const item of batch) {
          if (item.kind === "seg" && item.text !== "") item.text = o.texts[k++] ?? item.text;
          else if (item.kind === "whole") {
            item.texts.forEach((t, i) => {
              if (t !== "" && item.from[i] === undefined) item.texts[i] = o.texts[k++] ?? t;
            });
          }
        }
      }
      for (const item of batch) out += this.#render(item);
      return out;
    };
    const o = runGuards("response", this.#remote, texts, this.#checkContext());
    return o instanceof Promise ? o.then(apply) : apply(o);
  }

  /** The request's guard context, with runGuards' deadline shortened to STREAM_CHECK_BUDGET_MS. */
  #checkContext(): GuardContext {
    const ctx = this.#ctx as GuardContext;
    const clock = ctx.now ?? Date.now;
    let first = true;
    return {
      ...ctx,
      // runGuards sets its deadline from its first reading of the clock, GUARDS_BUDGET_MS ahead.
      now: () => {
        const t = clock();
        if (!first) return t;
        first = false;
        return t - (GUARDS_BUDGET_MS - STREAM_CHECK_BUDGET_MS);
      },
    };
  }

  /** The error event that ends a rejected stream, in the client's format (what its SDK raises as an API error). */
  #rejection(spec: GuardSpec): string {
    const status = spec.response.statusCode;
    const err = { status, kind: kindForStatus(status), message: spec.response.message };
    if (this.client === "messages") return `event: error\ndata: ${JSON.stringify(errorBody("messages", err))}\n\n`;
    if (this.client === "responses") {
      const e = (errorBody("responses", err) as { error: { type: string; code: string | null; message: string } })
        .error;
      const data = {
        type: "error",
        code: e.code ?? e.type,
        message: e.message,
        param: null,
        sequence_number: this.#seq + 1,
      };
      return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
    }
    return `data: ${JSON.stringify(errorBody("chat-completions", err))}\n\n`;
  }
}
