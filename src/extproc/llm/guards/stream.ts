// Response regex guards on a streamed response, in the client's format (after translation), so every format Sluice
// serves is guarded the same way. Text arrives in deltas, and a card number may come as "4111 1111 " then
// "1111 1111": each stream of text (a choice, a content block, an output part: its channel) keeps back the tail that
// may still be the beginning of a match (regex.ts holdBack: a run of characters a builtin match may contain, up to its
// longest match, or the pattern window for user patterns) and releases the rest, masked, in the delta that brought it.
// A delta that releases nothing is held whole. Any other event (a finish reason, a block's end, usage, an error, the
// end of the stream) first releases every channel's held text, masked to the end, in a copy of that channel's last
// delta. Events that repeat the whole text (the responses format's `done` events) are masked as they are.

import { type ClientFormat, type SseEvent, SseParser, serializeSse } from "../../../llm/index.js";
import type { GuardSpec } from "../../../translate/llm/guards.js";
import { RegexScanner, type Span, scannerFor } from "./regex.js";
import { eventSlots, textDelta } from "./text.js";

type Obj = Record<string, unknown>;
const te = new TextEncoder();

interface Channel {
  /** Text received and not yet released. */
  held: string;
  /** The channel's last delta, reused to release what is held when something else comes. */
  ev: SseEvent;
  json: Obj;
  holder: Obj;
  key: string;
}

/** The spans of several scanners over one text: the first scanner to claim a span wins. */
function scanAll(scanners: readonly RegexScanner[], text: string): Span[] {
  if (scanners.length === 1) return (scanners[0] as RegexScanner).scan(text);
  const out: Span[] = [];
  for (const s of scanners) {
    for (const span of s.scan(text)) {
      if (!out.some((o) => span.start < o.end && o.start < span.end)) out.push(span);
    }
  }
  return out.sort((a, b) => a.start - b.start);
}

export class StreamGuard {
  readonly #parser = new SseParser();
  readonly #channels = new Map<string, Channel>();
  readonly #scanners: readonly RegexScanner[];

  constructor(
    readonly client: ClientFormat,
    specs: readonly GuardSpec[],
  ) {
    this.#scanners = specs.flatMap((s) => (s.kind === "regex" ? [scannerFor(s)] : []));
  }

  /** Whether `specs` give this guard anything to do. */
  static applies(specs: readonly GuardSpec[]): boolean {
    return specs.some((s) => s.kind === "regex");
  }

  /** Client-format bytes in, the same events out with text masked and tails held back. */
  push(bytes: Uint8Array, end: boolean): Uint8Array {
    const events = this.#parser.push(bytes);
    if (end) events.push(...this.#parser.end());
    let out = "";
    for (const ev of events) out += this.#event(ev);
    if (end) out += this.#flush();
    return out === "" ? new Uint8Array(0) : te.encode(out);
  }

  #event(ev: SseEvent): string {
    let json: unknown;
    try {
      json = ev.data === "[DONE]" ? undefined : JSON.parse(ev.data);
    } catch {
      json = undefined;
    }
    if (typeof json !== "object" || json === null || Array.isArray(json)) return this.#flush() + serializeSse(ev);
    const obj = json as Obj;
    const d = textDelta(this.client, obj);
    if (d !== undefined) {
      let ch = this.#channels.get(d.channel);
      const text = d.holder[d.key] as string;
      if (ch === undefined) {
        ch = { held: text, ev, json: obj, holder: d.holder, key: d.key };
        this.#channels.set(d.channel, ch);
      } else {
        ch.held += text;
        ch.ev = ev;
        ch.json = obj;
        ch.holder = d.holder;
        ch.key = d.key;
      }
      const released = this.#release(ch, false);
      return released === "" ? "" : this.#write(ch, released);
    }
    let out = this.#flush();
    const slots = eventSlots(this.client, obj);
    const texts = slots.texts();
    let changed = false;
    const masked = texts.map((t) => {
      const spans = scanAll(this.#scanners, t);
      if (spans.length === 0) return t;
      changed = true;
      return RegexScanner.apply(t, spans);
    });
    if (changed) {
      slots.write(masked);
      out += serializeSse({ ...ev, data: JSON.stringify(obj) });
    } else out += serializeSse(ev);
    return out;
  }

  /** What `ch` may release now (all of it when `all`), masked; the rest stays held. */
  #release(ch: Channel, all: boolean): string {
    const text = ch.held;
    if (text === "") return "";
    const spans = scanAll(this.#scanners, text);
    let cut = all ? text.length : text.length - Math.max(0, ...this.#scanners.map((s) => s.holdBack(text)));
    // Never release part of a match: a match the cut goes through is held whole.
    for (const s of spans) if (s.start < cut && s.end > cut) cut = s.start;
    ch.held = text.slice(cut);
    return RegexScanner.apply(
      text.slice(0, cut),
      spans.filter((s) => s.end <= cut),
    );
  }

  #write(ch: Channel, text: string): string {
    ch.holder[ch.key] = text;
    return serializeSse({ ...ch.ev, data: JSON.stringify(ch.json) });
  }

  #flush(): string {
    let out = "";
    for (const ch of this.#channels.values()) {
      const rest = this.#release(ch, true);
      if (rest !== "") out += this.#write(ch, rest);
    }
    return out;
  }
}
