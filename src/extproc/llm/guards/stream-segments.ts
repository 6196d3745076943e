// The webhook and remote guards' stage of a streamed response (stream.ts): the text the regex stage releases, per
// stream of text, is gathered into segments (a sentence, at most SEGMENT_MAX_CHARS, or up to the next event that is
// not text), and nothing after a segment goes out before the guards have answered for it. The segments one body chunk
// completes are checked in one call (one text per segment), within STREAM_CHECK_BUDGET_MS; a mask replaces a segment,
// which goes out as one delta; a reject ends the stream with one error event in the client's format, the same shapes
// as an upstream error mid-stream (what the openai and @anthropic-ai/sdk clients raise as APIError).

import { kindForStatus } from "../../../llm/errors.js";
import { type ClientFormat, errorBody, type SseEvent, serializeSse } from "../../../llm/index.js";
import type { GuardSpec } from "../../../translate/llm/guards.js";
import { GUARDS_BUDGET_MS, type GuardContext, type GuardOutcome, runGuards } from "./runner.js";
import type { Slots } from "./text.js";

type Obj = Record<string, unknown>;

/** The longest segment a webhook or remote guard is asked about when no sentence ends sooner. */
export const SEGMENT_MAX_CHARS = 1000;
/**
 * One check of a stream's segments (all its guards), under half of Envoy's 5 s ext_proc message timeout: a body
 * chunk that waited behind a check and then completes the last segment is still answered in time.
 */
export const STREAM_CHECK_BUDGET_MS = 2000;

/** A delta event, and where its text sits: the event that carries released text. */
export interface Template {
  readonly ev: SseEvent;
  readonly json: Obj;
  readonly holder: Obj;
  readonly key: string;
}

/** The event `tpl` carrying `text`. */
export function writeDelta(tpl: Template, text: string): string {
  tpl.holder[tpl.key] = text;
  return serializeSse({ ...tpl.ev, data: JSON.stringify(tpl.json) });
}

/** A stream of text, as far as this stage knows it. */
export interface SegmentChannel {
  /** All the text sent to the client. */
  sent: string;
}

/** What waits for the guards, in stream order. */
export type Item =
  | { readonly kind: "raw"; readonly text: string }
  | { readonly kind: "seg"; readonly ch: SegmentChannel; text: string; tpl: Template; closed: boolean }
  | {
      readonly kind: "whole";
      readonly ev: SseEvent;
      readonly json: Obj;
      readonly slots: Slots;
      readonly texts: string[];
      /** Per text, the channel whose whole text it repeats (it gets the text sent for that channel). */
      readonly from: readonly (SegmentChannel | undefined)[];
    };

/** The texts of `item` the guards have not seen (empty ones need no check). */
function pending(item: Item): number {
  if (item.kind === "seg") return item.text === "" ? 0 : 1;
  if (item.kind === "whole") return item.texts.filter((t, i) => t !== "" && item.from[i] === undefined).length;
  return 0;
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

export class Segments {
  readonly #queue: Item[] = [];
  /** Rejected: the error event went out, nothing more does. */
  over = false;
  /** The last `sequence_number` of a responses stream (the error event takes the next). */
  seq = 0;

  constructor(
    readonly client: ClientFormat,
    /** Webhook and remote guards, in their order. */
    readonly specs: readonly GuardSpec[],
    readonly ctx: GuardContext,
  ) {}

  /** Released text of `ch`, carried by `tpl` (its delta): into the channel's open segment, or a new one. */
  text(ch: SegmentChannel, text: string, tpl: Template): void {
    const last = this.#queue.at(-1);
    if (last?.kind === "seg" && last.ch === ch && !last.closed) {
      last.text += text;
      last.tpl = tpl;
    } else this.add({ kind: "seg", ch, text, tpl, closed: false });
  }

  /** The last segment ends here: it is checked whole, not split at its sentences. */
  close(): void {
    const last = this.#queue.at(-1);
    if (last?.kind === "seg") last.closed = true;
  }

  /** Another event, behind what waits: it closes the segment before it. */
  add(item: Item): void {
    const last = this.#queue.at(-1);
    if (last?.kind === "seg") last.closed = true;
    this.#queue.push(item);
  }

  #render(item: Item): string {
    if (item.kind === "raw") return item.text;
    if (item.kind === "seg") {
      item.ch.sent += item.text;
      return item.text === "" ? "" : writeDelta(item.tpl, item.text);
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
  drain(end: boolean, queued: boolean): string | Promise<string> {
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
        this.over = true;
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
    const o = runGuards("response", this.specs, texts, this.#checkContext());
    return o instanceof Promise ? o.then(apply) : apply(o);
  }

  /** The request's guard context, with runGuards' deadline shortened to STREAM_CHECK_BUDGET_MS. */
  #checkContext(): GuardContext {
    const ctx = this.ctx;
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
        sequence_number: this.seq + 1,
      };
      return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
    }
    // Google's SDKs raise an ApiError for an event holding `error` with a numeric `code`.
    if (this.client === "generate-content") return `data: ${JSON.stringify(errorBody("generate-content", err))}\n\n`;
    return `data: ${JSON.stringify(errorBody("chat-completions", err))}\n\n`;
  }
}
