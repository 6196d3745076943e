// One HTTP/2 stream of the hot-path server: the call types its handlers see, the stream's state (windows, what waits
// for window, the request so far) and a bidirectional call over it. The connection (./h2-connection.ts) owns streams
// and writes; a call reaches it through CallConnection only.

import { GRPC_INTERNAL, GRPC_RESOURCE_EXHAUSTED, MAX_MESSAGE_BYTES } from "./h2-frames.js";

export type Headers = Readonly<Record<string, string>>;

export type UnaryHandler = (message: Uint8Array, headers: Headers) => Promise<Uint8Array>;

/**
 * One bidirectional call: messages arrive as `data` events (already framed out, still encoded), then `end` when the
 * client half-closes, or `error` if the stream breaks.
 */
export interface BidiCall {
  readonly headers: Headers;
  on(event: "data", fn: (message: Uint8Array) => void): void;
  on(event: "end", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  write(message: Uint8Array): void;
  /** Ends the call with status OK (trailers). Later writes are ignored. */
  end(): void;
}

export type BidiHandler = (call: BidiCall) => void;

/** What a bidirectional call needs of its connection. */
export interface CallConnection {
  /** Runs a handler's code for stream `s`, turning what it throws into the stream's failure. */
  guard(s: Stream, fn: () => void): void;
  sendMessage(s: Stream, message: Uint8Array): void;
  endCall(s: Stream): void;
  failStream(s: Stream, code: number, message: string): void;
}

export class Stream {
  headersSent = false;
  /** Our side is done (trailers queued). */
  closed = false;
  remoteEnded = false;
  sendWindow: number;
  /** Bytes of the peer's DATA not yet given back with WINDOW_UPDATE. */
  consumed = 0;
  /** DATA and trailers waiting for flow-control window, in order. */
  readonly blocked: { data?: Buffer; trailers?: Buffer }[] = [];
  /** When output last started waiting for window (Date.now()). */
  blockedSince = 0;
  /** DATA bytes received, counted against a declared content-length. */
  received = 0;
  /** Unary: the request so far. Bidi: bytes of an incomplete message. */
  chunks: Buffer[] = [];
  size = 0;
  bidi: Http2BidiCall | undefined;
  unary: UnaryHandler | undefined;

  constructor(
    readonly id: number,
    readonly headers: Headers,
    sendWindow: number,
    readonly contentLength: number | undefined,
  ) {
    this.sendWindow = sendWindow;
  }
}

/** BidiCall over one stream: messages framed out of DATA, responses framed, trailers on end. */
export class Http2BidiCall implements BidiCall {
  readonly #conn: CallConnection;
  readonly #stream: Stream;
  readonly #data: ((m: Uint8Array) => void)[] = [];
  readonly #endFns: (() => void)[] = [];
  readonly #errorFns: ((e: Error) => void)[] = [];
  #pending: Buffer | undefined;
  #over = false;

  constructor(conn: CallConnection, stream: Stream) {
    this.#conn = conn;
    this.#stream = stream;
  }

  get headers(): Headers {
    return this.#stream.headers;
  }

  on(event: "data" | "end" | "error", fn: (arg: never) => void): void {
    if (event === "data") this.#data.push(fn as (m: Uint8Array) => void);
    else if (event === "end") this.#endFns.push(fn as () => void);
    else this.#errorFns.push(fn as (e: Error) => void);
  }

  push(chunk: Buffer): void {
    let buf = this.#pending === undefined ? chunk : Buffer.concat([this.#pending, chunk]);
    while (buf.byteLength >= 5) {
      if (buf[0] !== 0) {
        this.#failCall(GRPC_INTERNAL, "compressed messages are not supported");
        return;
      }
      const len = buf.readUInt32BE(1);
      if (len > MAX_MESSAGE_BYTES) {
        this.#failCall(GRPC_RESOURCE_EXHAUSTED, "message too large");
        return;
      }
      if (buf.byteLength < 5 + len) break;
      // A copy: the frame's bytes belong to the connection's read buffer.
      const message = Buffer.from(buf.subarray(5, 5 + len));
      buf = buf.subarray(5 + len);
      this.#conn.guard(this.#stream, () => {
        for (const fn of this.#data) fn(message);
      });
      if (this.#over) return;
    }
    this.#pending = buf.byteLength > 0 ? Buffer.from(buf) : undefined;
  }

  remoteEnd(): void {
    if (this.#pending !== undefined) {
      this.#failCall(GRPC_INTERNAL, "truncated message");
      return;
    }
    this.#conn.guard(this.#stream, () => {
      for (const fn of this.#endFns) fn();
    });
  }

  abort(e: Error): void {
    if (this.#over) return;
    this.#over = true;
    for (const fn of this.#errorFns) {
      try {
        fn(e);
      } catch {
        // The call is already over; nothing is left to fail.
      }
    }
  }

  write(message: Uint8Array): void {
    if (this.#over) return;
    this.#conn.sendMessage(this.#stream, message);
  }

  end(): void {
    if (this.#over) return;
    this.#over = true;
    this.#conn.endCall(this.#stream);
  }

  #failCall(code: number, message: string): void {
    this.#over = true;
    this.#pending = undefined;
    // Through the connection, so the stream's state stays in one place.
    this.#conn.failStream(this.#stream, code, message);
    for (const fn of this.#errorFns) fn(new Error(message));
  }
}
