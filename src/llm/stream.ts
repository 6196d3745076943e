// Streaming pipeline: upstream framing decoder → stateful event mapper(s) → client framing encoder. Each upstream
// chunk is translated as soon as it arrives; state is per stream and holds only what the next event needs (open
// blocks, tool indexes, usage), never the response so far.
import { type EventStreamDecoder as EsDecoder, EventStreamDecoder } from "./codec/eventstream.js";
import { type SseEvent, SseParser } from "./codec/sse.js";
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

/** Stream passthrough (same format both sides): bytes go out unchanged; a parser on the side reads usage. */
export function passthroughStream(
  usageOf: (ev: SseEvent, json: unknown) => TokenUsage | undefined,
  onUsage?: (u: TokenUsage | undefined) => void,
): StreamTranslator {
  const parser = new SseParser();
  let usage: TokenUsage | undefined;
  const look = (evs: SseEvent[]): void => {
    for (const ev of evs) {
      // Usage sits in the last events only; skipping a parse of the many small deltas keeps passthrough cheap.
      if (ev.data === "[DONE]" || !ev.data.includes("usage")) continue;
      const p = parseJson(ev.data);
      if (p.ok) usage = usageOf(ev, p.value) ?? usage;
    }
  };
  return {
    push(chunk) {
      look(parser.push(chunk));
      return chunk;
    },
    end() {
      look(parser.end());
      onUsage?.(usage);
      return new Uint8Array(0);
    },
    usage: () => usage,
  };
}
