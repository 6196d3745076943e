// The HTTP/2 server of Sluice's request-path gRPC calls (ext_authz Check, the LLM ext_proc streams), written for the
// one peer it serves: Envoy's gRPC client on loopback or in the Pod network.
//
// Why not node:http2: per call it costs Sluice tens of µs of JavaScript and native work, and it sends a unary
// response's trailers one event-loop turn after its message (its sendTrailers defers to setImmediate), so Envoy wakes
// twice per Check (bench/authz.ts). Here a call's response (headers, message, trailers) leaves in one write, and all
// that a loop turn produced on a connection is written together. The protocol surface is small and fixed: RFC 9113
// frames (SETTINGS, PING, WINDOW_UPDATE with flow control both ways, HEADERS/CONTINUATION, DATA, RST_STREAM, GOAWAY;
// PRIORITY and unknown frame types ignored, no server push) and HPACK (./hpack.ts). A peer that breaks the protocol
// gets GOAWAY and its connection closed; nothing else is affected. Tested against Node's own HTTP/2 client
// (test/unit/unary-server.test.ts) and, end to end, Envoy.

import { createServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { type MutualTls, mutualTlsServerOptions } from "../security/tls.js";
import { GRPC_RESPONSE_HEADERS, grpcTrailers, grpcTrailersOnly, HpackDecoder, HpackError } from "./hpack.js";
import { Http1Connection, type Http1Handler, type Http1Upgrade } from "./http1.js";

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

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const FRAME = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7 };
const WINDOW_UPDATE = 8;
const CONTINUATION = 9;
const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 };
const ERROR = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  INTERNAL_ERROR: 2,
  FLOW_CONTROL_ERROR: 3,
  REFUSED_STREAM: 7,
  FRAME_SIZE_ERROR: 6,
  COMPRESSION_ERROR: 9,
};

const MAX_FRAME = 16_384;
const MAX_WINDOW = 2 ** 31 - 1;
const MAX_HEADER_LIST = 64 * 1024;
/** Streams open at once on a connection (advertised; Envoy's circuit breaker for sluice_authz allows as many). */
const MAX_STREAMS = 65_536;
/** Larger requests are refused: a CheckRequest carries headers and at most a bounded body. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

const GRPC_UNIMPLEMENTED = 12;
const GRPC_INTERNAL = 13;
const GRPC_RESOURCE_EXHAUSTED = 8;

class ProtocolError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

function frameHeader(length: number, type: number, flags: number, stream: number): Buffer {
  const h = Buffer.allocUnsafe(9);
  writeFrameHeader(h, length, type, flags, stream);
  return h;
}

function writeFrameHeader(h: Buffer, length: number, type: number, flags: number, stream: number): void {
  h.writeUIntBE(length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
}

/** A gRPC length-prefixed message (uncompressed), after `headroom` bytes left for the caller (an HTTP/2 frame header). */
export function frame(message: Uint8Array, headroom = 0): Buffer {
  const out = Buffer.allocUnsafe(headroom + 5 + message.byteLength);
  out[headroom] = 0;
  out.writeUInt32BE(message.byteLength, headroom + 1);
  out.set(message, headroom + 5);
  return out;
}

class Stream {
  headersSent = false;
  /** Our side is done (trailers queued). */
  closed = false;
  remoteEnded = false;
  sendWindow: number;
  /** Bytes of the peer's DATA not yet given back with WINDOW_UPDATE. */
  consumed = 0;
  /** DATA and trailers waiting for flow-control window, in order. */
  readonly blocked: { data?: Buffer; trailers?: Buffer }[] = [];
  /** Unary: the request so far. Bidi: bytes of an incomplete message. */
  chunks: Buffer[] = [];
  size = 0;
  bidi: Http2BidiCall | undefined;
  unary: UnaryHandler | undefined;

  constructor(
    readonly id: number,
    readonly headers: Headers,
    sendWindow: number,
  ) {
    this.sendWindow = sendWindow;
  }
}

class Connection {
  readonly #socket: Socket;
  readonly #server: UnaryGrpcServer;
  readonly #decoder = new HpackDecoder(4096);
  readonly #streams = new Map<number, Stream>();
  #input: Buffer = Buffer.alloc(0);
  #prefaceSeen = false;
  #lastStream = 0;
  #sendWindow = 65_535;
  #peerInitialWindow = 65_535;
  #peerMaxFrame = MAX_FRAME;
  #consumed = 0;
  /** A header block split over CONTINUATION frames. */
  #block: { stream: number; flags: number; parts: Buffer[]; size: number } | undefined;
  readonly #out: Buffer[] = [];
  #flushScheduled = false;
  #dead = false;

  /** `first`: what the peer sent before the connection was recognised as HTTP/2. */
  constructor(socket: Socket, server: UnaryGrpcServer, first?: Buffer) {
    this.#socket = socket;
    this.#server = server;
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.#onData(chunk));
    socket.on("error", () => this.#teardown());
    socket.on("close", () => this.#teardown());
    // Our SETTINGS: streams may carry up to 2^31-1 bytes before a WINDOW_UPDATE; the connection window is opened too.
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(0x3, 0); // MAX_CONCURRENT_STREAMS
    settings.writeUInt32BE(MAX_STREAMS, 2);
    settings.writeUInt16BE(0x4, 6); // INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(MAX_WINDOW, 8);
    this.#queue(frameHeader(12, FRAME.SETTINGS, 0, 0), settings);
    this.#windowUpdate(0, MAX_WINDOW - 65_535);
    if (first !== undefined) this.#onData(first);
  }

  #teardown(): void {
    if (this.#dead) return;
    this.#abandon("connection closed");
    this.#socket.destroy();
  }

  /** The connection is over: no more output, the server forgets it, open calls end with an error. */
  #abandon(why: string): void {
    this.#dead = true;
    this.#server.forget(this);
    for (const s of this.#streams.values()) s.bidi?.abort(new Error(why));
    this.#streams.clear();
  }

  close(): void {
    this.#goaway(ERROR.NO_ERROR, "server stopping");
  }

  // ---- input ----

  #onData(chunk: Buffer): void {
    this.#input = this.#input.byteLength === 0 ? chunk : Buffer.concat([this.#input, chunk]);
    try {
      if (!this.#prefaceSeen) {
        if (this.#input.byteLength < PREFACE.byteLength) return;
        if (!this.#input.subarray(0, PREFACE.byteLength).equals(PREFACE)) {
          throw new ProtocolError(ERROR.PROTOCOL_ERROR, "not an HTTP/2 connection preface");
        }
        this.#prefaceSeen = true;
        this.#input = this.#input.subarray(PREFACE.byteLength);
      }
      let b = this.#input;
      while (b.byteLength >= 9 && !this.#dead) {
        const length = b.readUIntBE(0, 3);
        if (length > MAX_FRAME)
          throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "frame larger than SETTINGS_MAX_FRAME_SIZE");
        if (b.byteLength < 9 + length) break;
        this.#onFrame(b[3] ?? 0, b[4] ?? 0, b.readUInt32BE(5) & 0x7fffffff, b.subarray(9, 9 + length));
        b = b.subarray(9 + length);
      }
      // Keep the unread rest in its own buffer, not a view pinning the whole chunk.
      this.#input = b.byteLength === 0 ? Buffer.alloc(0) : Buffer.from(b);
    } catch (e) {
      if (e instanceof ProtocolError) this.#goaway(e.code, e.message);
      else if (e instanceof HpackError) this.#goaway(ERROR.COMPRESSION_ERROR, e.message);
      else {
        // A bug here, not the peer's: this connection ends, the process and its other connections go on.
        this.#server.log(`gRPC server: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
        this.#goaway(ERROR.INTERNAL_ERROR, "internal error");
      }
    }
  }

  #onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.#block !== undefined && type !== CONTINUATION) {
      throw new ProtocolError(ERROR.PROTOCOL_ERROR, "header block interrupted");
    }
    switch (type) {
      case FRAME.DATA:
        this.#onDataFrame(flags, id, payload);
        return;
      case FRAME.HEADERS:
        this.#onHeaders(flags, id, payload);
        return;
      case CONTINUATION: {
        const block = this.#block;
        if (block === undefined || block.stream !== id)
          throw new ProtocolError(ERROR.PROTOCOL_ERROR, "stray CONTINUATION");
        block.parts.push(Buffer.from(payload));
        block.size += payload.byteLength;
        if (block.size > MAX_HEADER_LIST) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "header block too large");
        if (flags & FLAG.END_HEADERS) {
          this.#block = undefined;
          this.#onHeaderBlock(id, block.flags, Buffer.concat(block.parts));
        }
        return;
      }
      case FRAME.RST_STREAM: {
        const s = this.#streams.get(id);
        if (s === undefined) return;
        this.#streams.delete(id);
        s.bidi?.abort(new Error("stream reset by the client"));
        return;
      }
      case FRAME.SETTINGS:
        if (id !== 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "SETTINGS on a stream");
        if (flags & FLAG.ACK) return;
        if (payload.byteLength % 6 !== 0) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "SETTINGS length");
        for (let i = 0; i < payload.byteLength; i += 6)
          this.#onSetting(payload.readUInt16BE(i), payload.readUInt32BE(i + 2));
        this.#queue(frameHeader(0, FRAME.SETTINGS, FLAG.ACK, 0));
        this.#drainBlocked();
        return;
      case FRAME.PING:
        if (payload.byteLength !== 8) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "PING length");
        if (!(flags & FLAG.ACK)) this.#queue(frameHeader(8, FRAME.PING, FLAG.ACK, 0), Buffer.from(payload));
        return;
      case FRAME.GOAWAY:
        // The client opens no more streams here; the ones in flight finish and the client closes the connection.
        return;
      case WINDOW_UPDATE: {
        if (payload.byteLength !== 4) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "WINDOW_UPDATE length");
        const inc = payload.readUInt32BE(0) & 0x7fffffff;
        if (id === 0) {
          this.#sendWindow += inc;
          if (this.#sendWindow > MAX_WINDOW) throw new ProtocolError(ERROR.FLOW_CONTROL_ERROR, "window overflow");
        } else {
          const s = this.#streams.get(id);
          if (s !== undefined) s.sendWindow += inc;
        }
        this.#drainBlocked();
        return;
      }
      case FRAME.PUSH_PROMISE:
        throw new ProtocolError(ERROR.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
      default:
        // PRIORITY and frame types this server does not know are ignored (RFC 9113 §5.5).
        return;
    }
  }

  #onSetting(id: number, value: number): void {
    if (id === 0x4) {
      if (value > MAX_WINDOW) throw new ProtocolError(ERROR.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE");
      const delta = value - this.#peerInitialWindow;
      this.#peerInitialWindow = value;
      for (const s of this.#streams.values()) s.sendWindow += delta;
    } else if (id === 0x5) {
      if (value < MAX_FRAME || value > 16_777_215)
        throw new ProtocolError(ERROR.PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE");
      this.#peerMaxFrame = value;
    }
    // HEADER_TABLE_SIZE: this side's encoder never indexes. ENABLE_PUSH, MAX_CONCURRENT_STREAMS (we never open a
    // stream), MAX_HEADER_LIST_SIZE and unknown settings need nothing.
  }

  /** The frame's payload without padding (and, for HEADERS, without priority fields). */
  static #unpad(flags: number, payload: Buffer, priority: boolean): Buffer {
    let start = 0;
    let end = payload.byteLength;
    if (flags & FLAG.PADDED) {
      const pad = payload[0] ?? 0;
      start = 1;
      end -= pad;
    }
    if (priority && flags & FLAG.PRIORITY) start += 5;
    if (start > end) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "padding longer than the frame");
    return payload.subarray(start, end);
  }

  #onHeaders(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "HEADERS on stream 0");
    const block = Connection.#unpad(flags, payload, true);
    if (flags & FLAG.END_HEADERS) this.#onHeaderBlock(id, flags, block);
    else this.#block = { stream: id, flags, parts: [Buffer.from(block)], size: block.byteLength };
  }

  #onHeaderBlock(id: number, flags: number, block: Buffer): void {
    // Every block is decoded, even one this server ignores: the HPACK dynamic table must follow the encoder's.
    const list = this.#decoder.decode(block, MAX_HEADER_LIST);
    const existing = this.#streams.get(id);
    if (existing !== undefined) {
      // Trailers from the client: only the end of its stream matters.
      if (flags & FLAG.END_STREAM) this.#remoteEnd(existing);
      return;
    }
    if (id % 2 === 0 || id <= this.#lastStream) return; // a stream already closed here, or not a client stream
    this.#lastStream = id;
    if (this.#streams.size >= MAX_STREAMS) {
      // Above what this side advertised (SETTINGS_MAX_CONCURRENT_STREAMS).
      this.#frame32(FRAME.RST_STREAM, id, ERROR.REFUSED_STREAM);
      return;
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of list) headers[name] = name in headers ? `${headers[name]},${value}` : value;
    const s = new Stream(id, headers, this.#peerInitialWindow);
    this.#streams.set(id, s);
    const path = headers[":path"] ?? "";
    const bidi = this.#server.bidi.get(path);
    const unary = bidi === undefined ? this.#server.handlers.get(path) : undefined;
    if (bidi === undefined && unary === undefined) {
      this.#fail(s, GRPC_UNIMPLEMENTED, `unknown method ${path}`);
    } else if (bidi !== undefined) {
      const call = new Http2BidiCall(this, s);
      s.bidi = call;
      this.guard(s, () => bidi(call));
    } else {
      s.unary = unary;
    }
    if (flags & FLAG.END_STREAM) this.#remoteEnd(s);
  }

  #onDataFrame(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "DATA on stream 0");
    this.#consumed += payload.byteLength;
    if (this.#consumed >= 2 ** 30) {
      this.#windowUpdate(0, this.#consumed);
      this.#consumed = 0;
    }
    const s = this.#streams.get(id);
    if (s === undefined || s.remoteEnded) return;
    s.consumed += payload.byteLength;
    if (s.consumed >= 2 ** 30) {
      this.#windowUpdate(id, s.consumed);
      s.consumed = 0;
    }
    const data = Connection.#unpad(flags, payload, false);
    if (data.byteLength > 0 && !s.closed) {
      if (s.bidi !== undefined) s.bidi.push(data);
      else {
        s.size += data.byteLength;
        if (s.size > MAX_MESSAGE_BYTES + 5) this.#fail(s, GRPC_RESOURCE_EXHAUSTED, "message too large");
        else s.chunks.push(Buffer.from(data));
      }
    }
    if (flags & FLAG.END_STREAM) this.#remoteEnd(s);
  }

  #remoteEnd(s: Stream): void {
    if (s.remoteEnded) return;
    s.remoteEnded = true;
    if (s.closed) {
      this.#streams.delete(s.id);
      return;
    }
    if (s.bidi !== undefined) {
      s.bidi.remoteEnd();
      return;
    }
    const handler = s.unary;
    if (handler === undefined) return;
    const data = s.chunks.length === 1 ? (s.chunks[0] as Buffer) : Buffer.concat(s.chunks);
    s.chunks = [];
    if (data.byteLength < 5 || data[0] !== 0 || data.readUInt32BE(1) !== data.byteLength - 5) {
      this.#fail(s, GRPC_INTERNAL, "expected one uncompressed message");
      return;
    }
    let reply: Promise<Uint8Array>;
    try {
      reply = handler(data.subarray(5), s.headers);
    } catch (e) {
      reply = Promise.reject(e);
    }
    reply.then(
      (reply) => {
        if (this.#streams.get(s.id) !== s || s.closed) return;
        this.sendMessage(s, reply);
        this.endCall(s);
      },
      (e: unknown) => this.#fail(s, GRPC_INTERNAL, e instanceof Error ? e.message : String(e)),
    );
  }

  // ---- output ----

  #queue(...parts: Buffer[]): void {
    if (this.#dead) return;
    for (const p of parts) this.#out.push(p);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    // Everything this loop turn produces (answers of several streams, a message and its trailers) in one write.
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#flushScheduled = false;
    if (this.#dead || this.#out.length === 0) return;
    const out = this.#out.length === 1 ? (this.#out[0] as Buffer) : Buffer.concat(this.#out);
    this.#out.length = 0;
    this.#socket.write(out);
  }

  #windowUpdate(id: number, inc: number): void {
    this.#frame32(WINDOW_UPDATE, id, inc);
  }

  /** A frame whose payload is one 32-bit number (RST_STREAM's error code, WINDOW_UPDATE's increment). */
  #frame32(type: number, id: number, value: number): void {
    const p = Buffer.allocUnsafe(4);
    p.writeUInt32BE(value, 0);
    this.#queue(frameHeader(4, type, 0, id), p);
  }

  #goaway(code: number, reason: string): void {
    if (this.#dead) return;
    const p = Buffer.allocUnsafe(8 + Buffer.byteLength(reason));
    p.writeUInt32BE(this.#lastStream, 0);
    p.writeUInt32BE(code, 4);
    p.write(reason, 8);
    this.#out.push(frameHeader(p.byteLength, FRAME.GOAWAY, 0, 0), p);
    this.#flush();
    this.#socket.end();
    this.#abandon(`connection closed: ${reason}`);
  }

  #sendHeaders(s: Stream): void {
    if (s.headersSent) return;
    s.headersSent = true;
    this.#queue(
      frameHeader(GRPC_RESPONSE_HEADERS.byteLength, FRAME.HEADERS, FLAG.END_HEADERS, s.id),
      GRPC_RESPONSE_HEADERS,
    );
  }

  /** Queues one gRPC message on the stream (headers first if not sent yet), within the flow-control windows. */
  sendMessage(s: Stream, message: Uint8Array): void {
    if (s.closed || this.#streams.get(s.id) !== s) return;
    this.#sendHeaders(s);
    const n = 5 + message.byteLength;
    if (s.blocked.length === 0 && n <= Math.min(this.#peerMaxFrame, this.#sendWindow, s.sendWindow)) {
      // The usual case: the message fits one DATA frame now, written with its frame header in one buffer.
      const out = frame(message, 9);
      writeFrameHeader(out, n, FRAME.DATA, 0, s.id);
      this.#queue(out);
      this.#sendWindow -= n;
      s.sendWindow -= n;
      return;
    }
    s.blocked.push({ data: frame(message) });
    this.#drain(s);
  }

  /** Ends the call with status OK. */
  endCall(s: Stream): void {
    if (s.closed || this.#streams.get(s.id) !== s) return;
    this.#sendHeaders(s);
    s.closed = true;
    s.blocked.push({ trailers: grpcTrailers(0) });
    this.#drain(s);
  }

  #fail(s: Stream, code: number, message: string): void {
    if (s.closed) return;
    s.closed = true;
    s.blocked.length = 0;
    s.chunks = [];
    if (s.headersSent) s.blocked.push({ trailers: grpcTrailers(code, message) });
    else {
      const block = grpcTrailersOnly(code, message);
      this.#queue(frameHeader(block.byteLength, FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, s.id), block);
      this.#finish(s);
      return;
    }
    this.#drain(s);
  }

  /** Our side of the stream is done: forget it, and tell a client still sending that nothing more is needed. */
  #finish(s: Stream): void {
    this.#streams.delete(s.id);
    if (!s.remoteEnded) this.#frame32(FRAME.RST_STREAM, s.id, ERROR.NO_ERROR);
  }

  #drain(s: Stream): void {
    while (s.blocked.length > 0) {
      const next = s.blocked[0] as { data?: Buffer; trailers?: Buffer };
      if (next.trailers !== undefined) {
        const t = next.trailers;
        this.#queue(frameHeader(t.byteLength, FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, s.id), t);
        s.blocked.shift();
        this.#finish(s);
        return;
      }
      const data = next.data as Buffer;
      const n = Math.min(data.byteLength, this.#peerMaxFrame, this.#sendWindow, s.sendWindow);
      if (n <= 0) return;
      this.#queue(frameHeader(n, FRAME.DATA, 0, s.id), data.subarray(0, n));
      this.#sendWindow -= n;
      s.sendWindow -= n;
      if (n === data.byteLength) s.blocked.shift();
      else next.data = data.subarray(n);
    }
  }

  #drainBlocked(): void {
    for (const s of this.#streams.values()) if (s.blocked.length > 0) this.#drain(s);
  }

  /** Runs a handler's code for stream `s`: what it throws fails that call (INTERNAL), not the connection. */
  guard(s: Stream, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.#server.log(`gRPC server: a handler failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      this.#fail(s, GRPC_INTERNAL, "internal error");
      s.bidi?.abort(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** A bidirectional call failed on its own input: trailers with the status, then the stream is done. */
  failStream(s: Stream, code: number, message: string): void {
    this.#fail(s, code, message);
  }
}

/** BidiCall over one stream: messages framed out of DATA, responses framed, trailers on end. */
class Http2BidiCall implements BidiCall {
  readonly #conn: Connection;
  readonly #stream: Stream;
  readonly #data: ((m: Uint8Array) => void)[] = [];
  readonly #endFns: (() => void)[] = [];
  readonly #errorFns: ((e: Error) => void)[] = [];
  #pending: Buffer | undefined;
  #over = false;

  constructor(conn: Connection, stream: Stream) {
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

/** How an HTTP/2 client starts (RFC 9113 §3.4); no HTTP/1.1 request line starts with it. */
const H2_START = Buffer.from("PRI ");

export class UnaryGrpcServer {
  readonly handlers: ReadonlyMap<string, UnaryHandler>;
  readonly bidi: ReadonlyMap<string, BidiHandler>;
  /** Where bugs caught per call or per connection are reported. */
  readonly log: (line: string) => void;
  readonly #connections = new Set<Connection>();
  #server: Server | undefined;
  /** Answers the HTTP/1.1 connections of the same port (Envoy's HTTP ext_authz), when there is a handler for them. */
  readonly #http1: Http1Handler | undefined;
  /** Takes HTTP/1.1 upgrades it knows (the Realtime relay's websockets). */
  readonly #upgrade: Http1Upgrade | undefined;
  readonly #http1Connections = new Set<Http1Connection>();
  readonly #tls: MutualTls | undefined;
  /** Connections refused in the TLS handshake (no certificate of the CA, or not TLS), and when one was last logged. */
  #tlsRefused = 0;
  #tlsRefusedLogged = { at: 0, count: 0 };

  /**
   * Handlers by gRPC path, e.g. `/envoy.service.auth.v3.Authorization/Check`. With `http1`, connections that do not
   * start with the HTTP/2 preface are HTTP/1.1 and go to it (./http1.ts). With `tls`, connections are mutual TLS:
   * a client without a certificate of `tls.ca` is refused in the handshake.
   */
  constructor(
    handlers: ReadonlyMap<string, UnaryHandler>,
    bidi: ReadonlyMap<string, BidiHandler> = new Map(),
    opts: { log?: (line: string) => void; http1?: Http1Handler; upgrade?: Http1Upgrade; tls?: MutualTls } = {},
  ) {
    this.handlers = handlers;
    this.bidi = bidi;
    this.log = opts.log ?? ((line) => console.error(line));
    this.#http1 = opts.http1;
    this.#upgrade = opts.upgrade;
    this.#tls = opts.tls;
  }

  /** Connections refused in the TLS handshake since start. */
  get refusedConnections(): number {
    return this.#tlsRefused;
  }

  /** A refused handshake is logged, but at most once every 10 s (with how many there were), so a flood is one line. */
  #onTlsRefused(e: Error, socket: TLSSocket): void {
    this.#tlsRefused++;
    const now = Date.now();
    if (now - this.#tlsRefusedLogged.at < 10_000) return;
    const since = this.#tlsRefused - this.#tlsRefusedLogged.count;
    this.#tlsRefusedLogged = { at: now, count: this.#tlsRefused };
    // Node ends a connection whose certificate fails verification without saying why in the error ("socket hang
    // up"); the verification's verdict is on the socket.
    const why = socket.authorizationError?.toString() ?? e.message;
    this.log(`sluice: refused a TLS client on the ext_authz port (${since} since the last report): ${why}`);
  }

  /** A new connection: HTTP/2 (gRPC) or, with an HTTP/1.1 handler, HTTP/1.1, told apart by its first bytes. */
  #accept(socket: Socket): void {
    const http1 = this.#http1;
    if (http1 === undefined) {
      this.#connections.add(new Connection(socket, this));
      return;
    }
    let seen: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      seen = seen.byteLength === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.byteLength, H2_START.byteLength);
      const h2 = seen.subarray(0, n).equals(H2_START.subarray(0, n));
      if (h2 && n < H2_START.byteLength) return;
      socket.off("data", onData);
      socket.pause();
      if (h2) {
        this.#connections.add(new Connection(socket, this, seen));
        socket.resume();
        return;
      }
      const c = new Http1Connection(socket, http1, this.log, seen, this.#upgrade);
      this.#http1Connections.add(c);
      socket.once("close", () => this.#http1Connections.delete(c));
      socket.resume();
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  }

  async start(host: string, port: number): Promise<number> {
    const tls = this.#tls;
    let server: Server;
    if (tls === undefined) server = createServer((socket) => this.#accept(socket));
    else {
      // The protocol is still told by the first bytes; ALPN only lets clients that ask for one get it.
      const secure = createTlsServer(mutualTlsServerOptions(tls, ["h2", "http/1.1"]), (socket) => this.#accept(socket));
      secure.on("tlsClientError", (e, socket) => this.#onTlsRefused(e, socket));
      server = secure;
    }
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    this.#server = server;
    const address = server.address();
    return typeof address === "object" && address !== null ? address.port : port;
  }

  forget(c: Connection): void {
    this.#connections.delete(c);
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    for (const c of [...this.#connections]) c.close();
    for (const c of [...this.#http1Connections]) c.close();
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 1000);
      server.close(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
