// Server-sent events, parsed as the WHATWG HTML spec says (any of CRLF/CR/LF ends a line, `data` lines join with LF,
// `:` starts a comment, a blank line dispatches) and incrementally: bytes arrive in arbitrary pieces from Envoy, so a
// line, a CRLF pair or a UTF-8 sequence may be split across chunks. Nothing is buffered beyond the current event,
// and the current event is bounded (MAX_SSE_EVENT): a peer that never ends a line or an event cannot make the parser
// hold unbounded memory; past the bound it stops, and says so in `overflow` for its caller to answer with an error.

/** Characters (UTF-16 units; bytes for the ASCII JSON of LLM events) one event may hold, its pending line included. */
export const MAX_SSE_EVENT = 16 * 1024 * 1024;

export interface SseEvent {
  /** `event:` field; absent means the default "message". */
  event?: string;
  data: string;
  id?: string;
}

export class SseParser {
  private readonly decoder = new TextDecoder("utf-8");
  private buf = "";
  private data: string[] = [];
  private hasData = false;
  private event: string | undefined;
  private id: string | undefined;
  /** The previous chunk ended with CR: a LF at the start of the next one belongs to the same line break. */
  private pendingCR = false;
  /** Characters of `data` held for the current event. */
  private held = 0;
  /** Set once an event outgrew the bound: the parser holds nothing more and returns no more events. */
  overflow: string | undefined;

  constructor(private readonly maxEvent = MAX_SSE_EVENT) {}

  push(chunk: Uint8Array | string): SseEvent[] {
    if (this.overflow !== undefined) return [];
    let text = typeof chunk === "string" ? chunk : this.decoder.decode(chunk, { stream: true });
    if (this.pendingCR && text.startsWith("\n")) text = text.slice(1);
    this.pendingCR = false;
    // What is left of earlier chunks holds no line break: the scan starts at the new text, not at the line's start,
    // and a piece without one is only appended (a long line arriving in small pieces was rescanned and copied whole
    // on every piece: quadratic, found by fuzzing).
    if (text.indexOf("\n") < 0 && text.indexOf("\r") < 0) {
      this.buf += text;
      this.bound();
      return [];
    }
    const from = this.buf.length;
    this.buf += text;
    const out: SseEvent[] = [];
    let start = 0;
    const b = this.buf;
    for (let i = from; i < b.length; i++) {
      const c = b.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(b.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < b.length) {
          if (b.charCodeAt(i + 1) === 10) i++;
        } else {
          this.pendingCR = true;
        }
      }
      start = i + 1;
    }
    this.buf = start === 0 ? b : b.slice(start);
    // Events completed in this chunk are still handed out; an overflow stops the ones after them.
    this.bound();
    return out;
  }

  /** Past the bound: drop what is held, remember why. True when the parser has stopped. */
  private bound(): boolean {
    if (this.overflow !== undefined) return true;
    if (this.buf.length + this.held <= this.maxEvent) return false;
    this.overflow = `an event or line longer than ${this.maxEvent} characters`;
    this.buf = "";
    this.data = [];
    this.held = 0;
    this.hasData = false;
    return true;
  }

  /** End of stream. Providers sometimes omit the final blank line, so a pending event is still dispatched. */
  end(): SseEvent[] {
    if (this.overflow !== undefined) return [];
    const out: SseEvent[] = [];
    const rest = this.buf + this.decoder.decode();
    this.buf = "";
    if (rest !== "") this.line(rest, out);
    this.dispatch(out);
    return out;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === "") {
      this.dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 58) return; // ':' comment (keep-alives)
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case "data":
        this.data.push(value);
        this.held += value.length + 1;
        this.hasData = true;
        break;
      case "event":
        this.event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.id = value;
        break;
      default: // `retry` and unknown fields carry nothing a translator needs
    }
  }

  private dispatch(out: SseEvent[]): void {
    if (this.hasData) {
      const ev: SseEvent = { data: this.data.join("\n") };
      if (this.event !== undefined && this.event !== "") ev.event = this.event;
      if (this.id !== undefined) ev.id = this.id;
      out.push(ev);
    }
    this.data = [];
    this.held = 0;
    this.hasData = false;
    this.event = undefined;
  }
}

/** One SSE event on the wire. Data with line breaks becomes several `data:` lines, which the parser joins back. */
export function serializeSse(ev: SseEvent): string {
  let s = ev.event === undefined ? "" : `event: ${ev.event}\n`;
  if (ev.id !== undefined) s += `id: ${ev.id}\n`;
  const d = ev.data;
  if (d.indexOf("\n") < 0 && d.indexOf("\r") < 0) return `${s}data: ${d}\n\n`;
  for (const line of d.split(/\r\n|\r|\n/)) s += `data: ${line}\n`;
  return `${s}\n`;
}

/** Shorthand for a JSON event: `JSON.stringify` never emits raw line breaks, so one `data:` line always suffices. */
export function sseJson(data: unknown, event?: string): string {
  const body = `data: ${JSON.stringify(data)}\n\n`;
  return event === undefined ? body : `event: ${event}\n${body}`;
}
