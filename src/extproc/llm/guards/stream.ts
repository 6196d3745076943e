// Response guards on a streamed response, in the client's format (after translation), so every format Sluice serves
// is guarded the same way. Each stream of text (a choice, a content block, an output part: its channel) goes through
// two stages.
//
// Regex guards: text arrives in deltas, and a card number may come as "4111 1111 " then "1111 1111": a channel keeps
// back the tail that may still be the beginning of a match (regex.ts holdBack: from the first character a builtin
// match may start with in the trailing run of characters it may contain, within its longest match; the pattern
// window for user patterns) and releases the rest, masked, in the delta that brought it. The held text is scanned after
// as much released text as a match attempt in progress needs (regex.ts context), and a cut never goes through any
// match found, masked or turned down, so the stream is masked as a scan of the whole text would mask it. A delta that
// releases all of itself unchanged goes out as it came (no re-serialization); one that releases nothing is held
// whole (chat chunks naming the role go out all the same, with what they release). Any other event (a finish reason,
// a block's end, usage, an error, the end of the stream) first releases every channel's held text, masked to the end,
// in a copy of that channel's last delta.
//
// Webhook and remote guards (when the response has any) then check what the regex stage releases, by segments
// (stream-segments.ts).
//
// Events that repeat the whole text (the responses format's `done` events, `response.completed`) get the text that
// was released for that channel; a text that is no channel's is masked (and checked) as it is.

import { type ClientFormat, type SseEvent, SseParser, serializeSse } from "../../../llm/index.js";
import type { GuardSpec } from "../../../translate/llm/guards.js";
import { RegexScanner, type Span, scannerFor } from "./regex.js";
import type { GuardContext } from "./runner.js";
import { type SegmentChannel, Segments, type Template, writeDelta } from "./stream-segments.js";
import { eventSlots, textDelta } from "./text.js";

export { SEGMENT_MAX_CHARS, STREAM_CHECK_BUDGET_MS, segmentEnd } from "./stream-segments.js";

type Obj = Record<string, unknown>;
const te = new TextEncoder();

/** Released text kept as the context of the next scan: more than the longest builtin match (an e-mail, 254). */
const TAIL_CHARS = 512;
/** A body chunk handled this soon (ms) after the previous one was answered waited in Envoy's queue meanwhile. */
const QUEUED_MS = 0.5;
/**
 * The type of an event without text that ends no stream of text (a Realtime session's audio chunk between the deltas
 * of its transcript): it goes out without releasing what the channels hold.
 */
export const PASSING_EVENT = "sluice.passing";

interface Channel extends SegmentChannel {
  /** Text received and not yet released by the regex stage. */
  held: string;
  /** The last characters the regex stage released (unmasked): what a scan of `held` may need before it. */
  tail: string;
  /** The channel's last delta, reused to release what is held when something else comes. */
  tpl: Template;
  /** Webhook and remote guards: all the text received (events repeating it get the text sent). */
  received: string;
}

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

/**
 * A delta of one stream of text (text.ts textDelta), and chat-completions chunks whose text comes with more: the role
 * (servers that repeat it on every chunk, as Ollama's OpenAI API does) or the finish reason (the last text with the
 * end). They go out all the same (`keep`), and the finish ends the channel (`last`); read as deltas, a match split
 * across them and the chunks before is still caught whole.
 */
function deltaOf(
  client: ClientFormat,
  json: Obj,
): { channel: string; holder: Obj; key: string; keep?: boolean; last?: boolean } | undefined {
  const d = textDelta(client, json);
  if (d !== undefined || client !== "chat-completions") return d;
  const choices = json.choices;
  if (!Array.isArray(choices) || choices.length !== 1 || (json.usage !== undefined && json.usage !== null)) return;
  const c = choices[0] as Obj | undefined;
  const delta = c?.delta as Obj | undefined;
  if (typeof delta !== "object" || delta === null || typeof delta.content !== "string" || delta.content === "") return;
  for (const k of Object.keys(delta)) if (k !== "content" && k !== "role" && delta[k] !== null) return undefined;
  const last = c?.finish_reason !== undefined && c.finish_reason !== null;
  return { channel: String(c?.index ?? 0), holder: delta, key: "content", keep: true, last };
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

export class StreamGuard {
  readonly #parser = new SseParser();
  readonly #channels = new Map<string, Channel>();
  readonly #scanners: readonly RegexScanner[];
  /** The webhook and remote guards' stage; undefined when only regex guards apply. */
  readonly #segments: Segments | undefined;
  /** The bytes so far ended with a whole event (a blank line). */
  #aligned = true;
  #lastDone = performance.now();
  /** The previous chunk waited for a check, and chunks have come back to back since. */
  #afterCheck = false;

  constructor(
    readonly client: ClientFormat,
    specs: readonly GuardSpec[],
    ctx?: GuardContext,
  ) {
    this.#scanners = specs.flatMap((s) => (s.kind === "regex" ? [scannerFor(s)] : []));
    const remote =
      ctx === undefined
        ? []
        : specs.filter((s) => s.kind === "webhook" || (s.kind !== "regex" && ctx.remote?.(s) !== undefined));
    this.#segments = ctx !== undefined && remote.length > 0 ? new Segments(client, remote, ctx) : undefined;
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
    const seg = this.#segments;
    if (seg?.over === true) return this.#done(new Uint8Array(0));
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
    if (seg === undefined) return this.#done(same ? bytes : out === "" ? new Uint8Array(0) : te.encode(out));
    const drained = seg.drain(end, this.#afterCheck);
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
    if (obj.type === PASSING_EVENT) return this.#other(ev, false);
    const seg = this.#segments;
    if (seg !== undefined && typeof obj.sequence_number === "number" && obj.sequence_number > seg.seq) {
      seg.seq = obj.sequence_number;
    }
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
      if (seg !== undefined) ch.received += text;
      // Nothing held before: the delta may go out as it came.
      const whole = ch.held === "";
      ch.held += text;
      const released = this.#release(ch, d.last === true);
      if (whole && released === text && seg === undefined) return undefined;
      // A chunk that carries more than text goes out all the same, with the text it may release.
      if (released === "" && (d.keep !== true || seg !== undefined)) return "";
      const out = this.#text(ch, released, tpl);
      // The finish goes out after the text of its segment, checked whole.
      if (d.last === true) seg?.close();
      return out;
    }
    const slots = eventSlots(this.client, obj);
    if (slots.list.length === 0) return this.#other(ev);
    const out = this.#flush();
    const texts = slots.texts();
    let changed = false;
    const from: (Channel | undefined)[] = [];
    for (let i = 0; i < texts.length; i++) {
      const t = texts[i] as string;
      const ch = seg !== undefined && t !== "" ? this.#channelOf(t) : undefined;
      from.push(ch);
      if (ch !== undefined) continue;
      const spans = this.#scanners.length === 0 ? [] : scanAll(this.#scanners, t);
      if (spans.length === 0) continue;
      changed = true;
      texts[i] = RegexScanner.apply(t, spans);
    }
    if (seg !== undefined) {
      seg.add({ kind: "whole", ev, json: obj, slots, texts, from });
      return out;
    }
    if (changed) {
      slots.write(texts);
      return out + serializeSse({ ...ev, data: JSON.stringify(obj) });
    }
    return out === "" ? undefined : out + serializeSse(ev);
  }

  /** An event without text: it ends what the channels hold (unless `ends` is false). */
  #other(ev: SseEvent, ends = true): string | undefined {
    const out = ends ? this.#flush() : "";
    if (this.#segments !== undefined) {
      this.#segments.add({ kind: "raw", text: serializeSse(ev) });
      return out;
    }
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

  /** Released text of `ch`, carried by `tpl` (its delta): out now, or to the webhook and remote guards' stage. */
  #text(ch: Channel, text: string, tpl: Template): string {
    if (this.#segments === undefined) return writeDelta(tpl, text);
    this.#segments.text(ch, text, tpl);
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
}
