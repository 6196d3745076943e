// Streaming pipeline: upstream framing decoder → stateful event mapper(s) → client framing encoder. Each upstream
// chunk is translated as soon as it arrives; state is per stream and holds only what the next event needs (open
// blocks, tool indexes, usage), never the response so far.
import { type EventStreamDecoder as EsDecoder, EventStreamDecoder } from "./codec/eventstream.js";
import { MAX_SSE_EVENT, type SseEvent, SseParser } from "./codec/sse.js";
import { kindForStatus, type LlmError, parseProviderError } from "./errors.js";
import { isObject, parseJson, str } from "./json.js";
import type { TokenUsage } from "./usage.js";

export type Emit<O> = (o: O) => void;

/** Maps one stream of events into another, keeping whatever state the mapping needs. */
export interface StreamMapper<I, O> {
  event(ev: I, emit: Emit<O>): void;
  /** The upstream failed mid-stream: tell the client in its own format. */
  error(err: LlmError, emit: Emit<O>): void;
  /** The upstream ended (cleanly or not). */
  end(emit: Emit<O>): void;
  /** Usage seen so far in the upstream stream. */
  usage(): TokenUsage | undefined;
}

/** Bytes from the provider → provider events. */
export interface UpstreamDecoder<I> {
  push(chunk: Uint8Array, emit: Emit<I>, fail: (e: LlmError) => void): void;
  end(emit: Emit<I>, fail: (e: LlmError) => void): void;
}

/** Client events → bytes for the client. */
export interface ClientEncoder<O> {
  encode(o: O): string;
  /** Trailer at the end of a stream that did not fail (chat-completions' `[DONE]`). */
  trailer(failed: boolean): string;
}

/** What the ext_proc body handler drives: bytes in, bytes out, usage at the end. */
export interface StreamTranslator {
  push(chunk: Uint8Array): Uint8Array;
  end(): Uint8Array;
  usage(): TokenUsage | undefined;
  /** Why the stream ended with an error event in the client's format (an upstream error or a broken stream). */
  failure(): LlmError | undefined;
}

const te = new TextEncoder();

export function pipeline<I, O>(
  decoder: UpstreamDecoder<I>,
  mapper: StreamMapper<I, O>,
  encoder: ClientEncoder<O>,
  onUsage?: (u: TokenUsage | undefined) => void,
): StreamTranslator {
  let out = "";
  let failed = false;
  let failure: LlmError | undefined;
  let ended = false;
  const emit: Emit<O> = (o) => {
    out += encoder.encode(o);
  };
  const onEvent = (ev: I): void => {
    if (!failed) mapper.event(ev, emit);
  };
  const fail = (e: LlmError): void => {
    if (failed) return;
    failed = true;
    failure = e;
    mapper.error(e, emit);
  };
  const flush = (): Uint8Array => {
    const s = out;
    out = "";
    return s === "" ? new Uint8Array(0) : te.encode(s);
  };
  return {
    push(chunk) {
      if (!ended) decoder.push(chunk, onEvent, fail);
      return flush();
    },
    end() {
      if (ended) return new Uint8Array(0);
      ended = true;
      decoder.end(onEvent, fail);
      if (!failed) mapper.end(emit);
      out += encoder.trailer(failed);
      onUsage?.(mapper.usage());
      return flush();
    },
    usage: () => mapper.usage(),
    failure: () => failure,
  };
}

/** Two mappers in a row (converse → chat chunks → responses events). Usage comes from the upstream side. */
export function chain<A, B, C>(first: StreamMapper<A, B>, second: StreamMapper<B, C>): StreamMapper<A, C> {
  return {
    event(ev, emit) {
      first.event(ev, (b) => second.event(b, emit));
    },
    error(err, emit) {
      second.error(err, emit);
    },
    end(emit) {
      first.end((b) => second.event(b, emit));
      second.end(emit);
    },
    usage: () => first.usage() ?? second.usage(),
  };
}

/** SSE upstream whose events carry JSON. `interpret` turns one event into a provider event, an error, or nothing. */
export function sseDecoder<I>(
  interpret: (ev: SseEvent, json: unknown) => I | LlmError | undefined,
): UpstreamDecoder<I> {
  const parser = new SseParser();
  const handle = (events: SseEvent[], emit: Emit<I>, fail: (e: LlmError) => void): void => {
    for (const ev of events) {
      if (ev.data === "[DONE]") continue;
      const parsed = parseJson(ev.data);
      if (!parsed.ok) {
        fail({ status: 502, kind: "server", message: `malformed event from upstream: ${parsed.error}` });
        return;
      }
      const r = interpret(ev, parsed.value);
      if (r === undefined) continue;
      if (isLlmError(r)) {
        fail(r);
        return;
      }
      emit(r);
    }
  };
  const overflowed = (fail: (e: LlmError) => void): void => {
    if (parser.overflow !== undefined)
      fail({ status: 502, kind: "server", message: `upstream stream: ${parser.overflow}` });
  };
  return {
    push: (chunk, emit, fail) => {
      handle(parser.push(chunk), emit, fail);
      overflowed(fail);
    },
    end: (emit, fail) => {
      handle(parser.end(), emit, fail);
      overflowed(fail);
    },
  };
}

export function isLlmError(v: unknown): v is LlmError {
  return isObject(v) && typeof v.kind === "string" && typeof v.status === "number" && typeof v.message === "string";
}

/** An error object found inside a stream event (`{"error": {...}}` or `{"type":"error","error":{...}}`). */
export function streamError(json: unknown): LlmError | undefined {
  if (!isObject(json) || !isObject(json.error)) return undefined;
  const e = json.error;
  const code = typeof e.code === "number" ? e.code : undefined;
  const type = str(e.type) ?? str(e.status) ?? "";
  let status = code ?? 500;
  if (type.includes("overloaded")) status = 529;
  else if (type.includes("rate_limit") || type === "RESOURCE_EXHAUSTED") status = 429;
  else if (type.includes("invalid_request") || type === "INVALID_ARGUMENT") status = 400;
  const err: LlmError = { status, kind: kindForStatus(status), message: str(e.message) ?? "upstream stream error" };
  return type === "" ? err : { ...err, code: type };
}

/** A Bedrock event-stream message as `{type, body}`; exceptions become errors. */
export interface AwsEvent {
  type: string;
  body: Record<string, unknown>;
}

const exceptionStatus: Record<string, number> = {
  validationException: 400,
  throttlingException: 429,
  serviceUnavailableException: 503,
  internalServerException: 500,
  modelStreamErrorException: 424,
  modelTimeoutException: 408,
};

export function awsEventStreamDecoder(): UpstreamDecoder<AwsEvent> {
  const dec: EsDecoder = new EventStreamDecoder();
  const td = new TextDecoder();
  const handle = (
    r: { messages: { headers: Record<string, unknown>; payload: Uint8Array }[]; error?: string },
    emit: Emit<AwsEvent>,
    fail: (e: LlmError) => void,
  ): void => {
    for (const m of r.messages) {
      const body = parseJson(td.decode(m.payload));
      const obj = body.ok && isObject(body.value) ? body.value : {};
      const mt = str(m.headers[":message-type"]);
      if (mt === "exception" || mt === "error") {
        const t = str(m.headers[":exception-type"]) ?? str(m.headers[":error-code"]) ?? "internalServerException";
        const status = exceptionStatus[t] ?? 500;
        const message = str(obj.message) ?? str(obj.Message) ?? str(m.headers[":error-message"]) ?? t;
        fail({ status, kind: kindForStatus(status), message, code: t });
        return;
      }
      const type = str(m.headers[":event-type"]);
      if (type === undefined || !body.ok) {
        fail({ status: 502, kind: "server", message: "malformed event-stream message from upstream" });
        return;
      }
      emit({ type, body: obj });
    }
    if (r.error !== undefined) fail({ status: 502, kind: "server", message: `upstream event stream: ${r.error}` });
  };
  return {
    push: (chunk, emit, fail) => handle(dec.push(chunk), emit, fail),
    end: (emit, fail) => {
      const e = dec.end();
      handle({ messages: [], ...(e === undefined ? {} : { error: e }) }, emit, fail);
    },
  };
}

/** A non-2xx upstream answer that arrives on a streaming request is a whole error body, not a stream. */
export function upstreamHttpError(status: number, body: string, headers?: Record<string, string>): LlmError {
  return parseProviderError(status, body, headers);
}

/** A client format's error event, written when a passthrough stream must end early; `last` is the last event let
 * through (parsed), for formats whose events are numbered (responses' `sequence_number`). */
export type PassthroughErrorEvent = (err: LlmError, last: unknown) => string;

const LF = 10;
const CR = 13;

/**
 * Stream passthrough (same format both sides): the provider's bytes go out unchanged, but only whole events, each
 * checked to hold JSON (`[DONE]` aside) before it leaves. A malformed event, or one past the parser's bound, ends the
 * stream with `errorEvent` in the client's format, after the events before it, as a translated stream ends; nothing
 * of the broken event or after it goes out. The blank line that ends an event is found on the bytes (CR and LF never
 * occur inside a UTF-8 sequence), so the bytes of good events go out as they came, never re-serialised.
 */
export function passthroughStream(
  usageOf: (ev: SseEvent, json: unknown) => TokenUsage | undefined,
  errorEvent: PassthroughErrorEvent,
  onUsage?: (u: TokenUsage | undefined) => void,
  maxEvent = MAX_SSE_EVENT,
): StreamTranslator {
  const parser = new SseParser(maxEvent);
  let usage: TokenUsage | undefined;
  let last: unknown;
  let failure: LlmError | undefined;
  /** An error event of the provider's, in the client's format: let through, and reported by `failure()`. */
  let reported: LlmError | undefined;
  let ended = false;
  /** Bytes of the event in progress (received, not yet let out), in arrival order. */
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  /** The next byte starts a line; a line break there ends an event. */
  let lineStart = true;
  /** The previous byte was a CR: a LF now belongs to the same line break. */
  let afterCR = false;

  /** The events in one whole event's bytes are fine to let out; otherwise the stream fails. */
  const check = (evs: SseEvent[]): boolean => {
    for (const ev of evs) {
      if (ev.data === "[DONE]") continue;
      try {
        last = JSON.parse(ev.data);
      } catch (e) {
        failure = { status: 502, kind: "server", message: `malformed event from upstream: ${(e as Error).message}` };
        return false;
      }
      // Usage sits in the last events only: most deltas skip the usage reader.
      if (ev.data.includes("usage")) usage = usageOf(ev, last) ?? usage;
      // The provider's own error event reaches the client as sent; it is remembered to be counted as a failure.
      if (reported === undefined && ev.data.includes('"error"')) reported = streamError(last);
    }
    if (parser.overflow !== undefined) {
      failure = { status: 502, kind: "server", message: `upstream stream: ${parser.overflow}` };
      return false;
    }
    return true;
  };
  const failed = (good: Uint8Array[]): Uint8Array => {
    held = [];
    heldBytes = 0;
    good.push(te.encode(errorEvent(failure as LlmError, last)));
    return concatBytes(good);
  };

  return {
    push(chunk) {
      if (failure !== undefined || ended) return new Uint8Array(0);
      // What goes out: `lead` (an event begun in earlier chunks, completed in this one), then chunk[start, from).
      let lead: Uint8Array | undefined;
      let start = 0;
      let from = 0;
      const good = (): Uint8Array[] => {
        const view = chunk.subarray(start, from);
        return lead === undefined ? [view] : [lead, view];
      };
      const n = chunk.length;
      // Most providers end lines with LF alone: then the native indexOf finds each line's end.
      const lfOnly = chunk.indexOf(CR) < 0;
      let i = 0;
      while (i < n) {
        if (afterCR) {
          afterCR = false;
          if (chunk[i] === LF) {
            // The LF of a CRLF whose CR ended the last chunk's last event goes out with that event (and the parser
            // sees it, to forget the CR).
            if (i === from && heldBytes === 0) {
              parser.push(chunk.subarray(i, i + 1));
              from = i + 1;
            }
            i++;
            continue;
          }
        }
        let j = i;
        if (lfOnly) j = chunk.indexOf(LF, i);
        else while (j < n && chunk[j] !== LF && chunk[j] !== CR) j++;
        if (j < 0 || j === n) {
          lineStart = false;
          break;
        }
        if (j > i) lineStart = false;
        afterCR = chunk[j] === CR;
        i = j + 1;
        if (!lineStart) {
          lineStart = true;
          continue;
        }
        // An empty line: the event ends here (with the LF of a CRLF when it is in this chunk).
        if (afterCR && i < n && chunk[i] === LF) {
          i++;
          afterCR = false;
        }
        let piece = chunk.subarray(from, i);
        if (heldBytes > 0) {
          held.push(piece);
          piece = concatBytes(held);
          held = [];
          heldBytes = 0;
          if (!check(parser.push(piece))) return failed([]);
          lead = piece;
          start = i;
        } else if (!check(parser.push(piece))) return failed(good());
        from = i;
      }
      if (from < chunk.length) {
        // Copied: the caller's buffer may be reused once this call returns.
        held.push(chunk.slice(from));
        heldBytes += chunk.length - from;
        if (heldBytes > maxEvent) {
          failure = {
            status: 502,
            kind: "server",
            message: `upstream stream: an event or line longer than ${maxEvent} characters`,
          };
          return failed(good());
        }
      }
      // The usual chunk of whole events goes out as a view of itself, not a copy.
      return concatBytes(good());
    },
    end() {
      if (ended) return new Uint8Array(0);
      ended = true;
      let tail: Uint8Array = new Uint8Array(0);
      if (failure === undefined) {
        // Providers sometimes omit the blank line after the last event: what is held is checked as one.
        const rest = concatBytes(held);
        held = [];
        heldBytes = 0;
        const evs = parser.push(rest);
        evs.push(...parser.end());
        tail = check(evs) ? rest : failed([]);
      }
      onUsage?.(usage);
      return tail;
    },
    usage: () => usage,
    failure: () => failure ?? reported,
  };
}

function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 0) return new Uint8Array(0);
  if (parts.length === 1) return parts[0] as Uint8Array;
  let n = 0;
  for (const p of parts) n += p.byteLength;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
