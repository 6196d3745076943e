// One HTTP/2 connection of the hot-path server (./unary-server.ts): the preface, frames in and out (./h2-frames.ts),
// flow control both ways, stream states (./h2-call.ts), HPACK, and the defences of docs/http2.md (reset and control
// frame budgets, header and CONTINUATION limits, stalled windows, idle connections), with the limits of ./limits.ts.

import type { Socket } from "node:net";
import { type BidiHandler, Http2BidiCall, Stream, type UnaryHandler } from "./h2-call.js";
import {
  CONTINUATION,
  ERROR,
  FLAG,
  FRAME,
  frame,
  frameHeader,
  GRPC_INTERNAL,
  GRPC_RESOURCE_EXHAUSTED,
  GRPC_UNIMPLEMENTED,
  MAX_FRAME,
  MAX_MESSAGE_BYTES,
  MAX_WINDOW,
  PREFACE,
  ProtocolError,
  WINDOW_UPDATE,
  writeFrameHeader,
} from "./h2-frames.js";
import { requestHead, trailersProblem } from "./h2-headers.js";
import { GRPC_RESPONSE_HEADERS, grpcTrailers, grpcTrailersOnly, HpackDecoder, HpackError } from "./hpack.js";
import { Budget, type ServerLimits } from "./limits.js";

/** What a connection needs of its server: the handlers by gRPC path, where bugs are reported, and its own end. */
export interface ConnectionServer {
  readonly handlers: ReadonlyMap<string, UnaryHandler>;
  readonly bidi: ReadonlyMap<string, BidiHandler>;
  readonly log: (line: string) => void;
  forget(c: Connection): void;
}

/** Not a wire flag: marks a header block whose stream depends on itself (a stream error once the block is decoded). */
const SELF_DEPENDENT = 0x100;
/** How many of the streams this side reset are remembered, so that the peer's frames in flight on them are ignored. */
const RECENT_RESETS = 256;

export class Connection {
  readonly #socket: Socket;
  readonly #server: ConnectionServer;
  readonly #limits: ServerLimits;
  readonly #decoder = new HpackDecoder(4096);
  readonly #streams = new Map<number, Stream>();
  #input: Buffer = Buffer.alloc(0);
  #prefaceSeen = false;
  /** The highest stream id the peer has opened; streams at or below it that are not in #streams are closed. */
  #lastStream = 0;
  /** Streams this side reset lately: frames the peer sent before it learnt of the reset are ignored (RFC 9113 §5.4.2). */
  readonly #resetHere = new Set<number>();
  #sendWindow = 65_535;
  #peerInitialWindow = 65_535;
  #peerMaxFrame = MAX_FRAME;
  #consumed = 0;
  /** A header block split over CONTINUATION frames. */
  #block: { stream: number; flags: number; parts: Buffer[]; size: number; frames: number } | undefined;
  readonly #out: Buffer[] = [];
  #flushScheduled = false;
  #dead = false;
  /** The peer sent GOAWAY: it opens no more streams; the connection ends when its last stream does. */
  #peerGoaway = false;
  readonly #resets: Budget;
  readonly #control: Budget;
  #lastActive = Date.now();
  #idleTimer: NodeJS.Timeout | undefined;
  #stallTimer: NodeJS.Timeout | undefined;
  #readPaused = false;

  /** `first`: what the peer sent before the connection was recognised as HTTP/2. */
  constructor(socket: Socket, server: ConnectionServer, limits: ServerLimits, first?: Buffer) {
    this.#socket = socket;
    this.#server = server;
    this.#limits = limits;
    this.#resets = new Budget(limits.resetBurst, limits.resetsPerSecond);
    this.#control = new Budget(limits.controlBurst, limits.controlPerSecond);
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.#onData(chunk));
    socket.on("error", () => this.#teardown());
    socket.on("close", () => this.#teardown());
    socket.on("drain", () => this.#onDrain());
    // Our SETTINGS: streams may carry up to 2^31-1 bytes before a WINDOW_UPDATE; the connection window is opened too.
    const settings = Buffer.alloc(18);
    settings.writeUInt16BE(0x3, 0); // MAX_CONCURRENT_STREAMS
    settings.writeUInt32BE(limits.maxConcurrentStreams, 2);
    settings.writeUInt16BE(0x4, 6); // INITIAL_WINDOW_SIZE
    settings.writeUInt32BE(MAX_WINDOW, 8);
    settings.writeUInt16BE(0x6, 12); // MAX_HEADER_LIST_SIZE
    settings.writeUInt32BE(limits.maxHeaderListSize, 14);
    this.#queue(frameHeader(18, FRAME.SETTINGS, 0, 0), settings);
    this.#windowUpdate(0, MAX_WINDOW - 65_535);
    this.#armIdle(limits.handshakeTimeoutMs);
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
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    if (this.#stallTimer !== undefined) clearTimeout(this.#stallTimer);
    this.#server.forget(this);
    for (const s of this.#streams.values()) s.bidi?.abort(new Error(why));
    this.#streams.clear();
  }

  close(): void {
    this.#goaway(ERROR.NO_ERROR, "server stopping");
  }

  // ---- timers ----

  /** One timer per connection: the preface must arrive in time, and a connection without streams may idle so long. */
  #armIdle(ms: number): void {
    this.#idleTimer = setTimeout(() => this.#onIdleTimer(), ms);
    this.#idleTimer.unref();
  }

  #onIdleTimer(): void {
    this.#idleTimer = undefined;
    if (this.#dead) return;
    if (!this.#prefaceSeen) {
      this.#abandon("no connection preface in time");
      this.#socket.destroy();
      return;
    }
    const quiet = Date.now() - this.#lastActive;
    if (this.#streams.size === 0 && quiet >= this.#limits.idleTimeoutMs) {
      this.#goaway(ERROR.NO_ERROR, "idle");
      return;
    }
    this.#armIdle(Math.max(1, this.#limits.idleTimeoutMs - (this.#streams.size === 0 ? quiet : 0)));
  }

  /** Output waits for the peer's window: streams still waiting when the timer fires, and since before it, are reset. */
  #armStall(): void {
    if (this.#stallTimer !== undefined || this.#dead) return;
    this.#stallTimer = setTimeout(() => {
      this.#stallTimer = undefined;
      const before = Date.now() - this.#limits.stallTimeoutMs;
      let waiting = false;
      for (const s of [...this.#streams.values()]) {
        if (s.blocked.length === 0) continue;
        if (s.blockedSince <= before) this.#resetStream(s.id, ERROR.CANCEL, "response stalled by flow control");
        else waiting = true;
      }
      if (waiting) this.#armStall();
    }, this.#limits.stallTimeoutMs);
    this.#stallTimer.unref();
  }

  // ---- input ----

  #onData(chunk: Buffer): void {
    if (this.#dead) return;
    this.#input = this.#input.byteLength === 0 ? chunk : Buffer.concat([this.#input, chunk]);
    this.#lastActive = Date.now();
    try {
      if (!this.#prefaceSeen) {
        const n = Math.min(this.#input.byteLength, PREFACE.byteLength);
        if (!this.#input.subarray(0, n).equals(PREFACE.subarray(0, n))) {
          throw new ProtocolError(ERROR.PROTOCOL_ERROR, "not an HTTP/2 connection preface");
        }
        if (n < PREFACE.byteLength) return;
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

  /** A frame that costs work and carries no request: spent from the connection's control budget. */
  #spendControl(): void {
    if (!this.#control.take()) throw new ProtocolError(ERROR.ENHANCE_YOUR_CALM, "too many control frames");
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
      case CONTINUATION:
        this.#onContinuation(flags, id, payload);
        return;
      case FRAME.PRIORITY:
        this.#onPriority(id, payload);
        return;
      case FRAME.RST_STREAM:
        this.#onReset(id, payload);
        return;
      case FRAME.SETTINGS:
        this.#onSettings(flags, id, payload);
        return;
      case FRAME.PING:
        if (id !== 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "PING on a stream");
        if (payload.byteLength !== 8) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "PING length");
        if (flags & FLAG.ACK) return;
        this.#spendControl();
        this.#queue(frameHeader(8, FRAME.PING, FLAG.ACK, 0), Buffer.from(payload));
        return;
      case FRAME.GOAWAY:
        if (id !== 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "GOAWAY on a stream");
        if (payload.byteLength < 8) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "GOAWAY length");
        // The client opens no more streams here; the ones in flight finish, then the connection closes.
        this.#peerGoaway = true;
        this.#closeIfDone();
        return;
      case WINDOW_UPDATE:
        this.#onWindowUpdate(id, payload);
        return;
      case FRAME.PUSH_PROMISE:
        throw new ProtocolError(ERROR.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
      default:
        // Frame types this server does not know are ignored (RFC 9113 §5.5), but not without limit.
        this.#spendControl();
        return;
    }
  }

  /** The state of a stream the peer names in a frame other than HEADERS. */
  #state(id: number): Stream | "idle" | "closed" {
    const s = this.#streams.get(id);
    if (s !== undefined) return s;
    return id > this.#lastStream ? "idle" : "closed";
  }

  #onContinuation(flags: number, id: number, payload: Buffer): void {
    const block = this.#block;
    if (block === undefined || block.stream !== id) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "stray CONTINUATION");
    block.parts.push(Buffer.from(payload));
    block.size += payload.byteLength;
    block.frames++;
    if (block.size > this.#limits.maxHeaderBlockBytes)
      throw new ProtocolError(ERROR.ENHANCE_YOUR_CALM, "header block too large");
    if (block.frames > this.#limits.maxContinuationFrames)
      throw new ProtocolError(ERROR.ENHANCE_YOUR_CALM, "too many CONTINUATION frames");
    if (flags & FLAG.END_HEADERS) {
      this.#block = undefined;
      this.#onHeaderBlock(id, block.flags, Buffer.concat(block.parts));
    }
  }

  #onPriority(id: number, payload: Buffer): void {
    if (id === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "PRIORITY on stream 0");
    this.#spendControl();
    const idle = id > this.#lastStream;
    if (payload.byteLength !== 5) {
      if (idle) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "PRIORITY length");
      this.#resetStream(id, ERROR.FRAME_SIZE_ERROR, "PRIORITY length");
      return;
    }
    if ((payload.readUInt32BE(0) & 0x7fffffff) === id) {
      if (idle) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "stream depends on itself");
      this.#resetStream(id, ERROR.PROTOCOL_ERROR, "stream depends on itself");
    }
    // Otherwise ignored: this server does not prioritise its answers.
  }

  #onReset(id: number, payload: Buffer): void {
    if (id === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    if (payload.byteLength !== 4) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "RST_STREAM length");
    const s = this.#state(id);
    if (s === "idle") throw new ProtocolError(ERROR.PROTOCOL_ERROR, "RST_STREAM on an idle stream");
    if (s === "closed") return;
    this.#streams.delete(id);
    s.bidi?.abort(new Error("stream reset by the client"));
    // Only a premature reset (before this side answered) costs from the budget, as in Envoy's own premature-reset
    // guard: the rapid-reset attack opens streams and resets them before any answer, while Envoy's ext_proc client
    // closes and resets every stream it is done with, answered long before (thousands a second under load).
    if (!s.headersSent && !this.#resets.take())
      throw new ProtocolError(ERROR.ENHANCE_YOUR_CALM, "too many stream resets");
    this.#closeIfDone();
  }

  #onSettings(flags: number, id: number, payload: Buffer): void {
    if (id !== 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & FLAG.ACK) {
      if (payload.byteLength !== 0) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      return;
    }
    if (payload.byteLength % 6 !== 0) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "SETTINGS length");
    this.#spendControl();
    for (let i = 0; i < payload.byteLength; i += 6)
      this.#onSetting(payload.readUInt16BE(i), payload.readUInt32BE(i + 2));
    this.#queue(frameHeader(0, FRAME.SETTINGS, FLAG.ACK, 0));
    this.#drainBlocked();
  }

  #onSetting(id: number, value: number): void {
    if (id === 0x2) {
      if (value > 1) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH other than 0 or 1");
    } else if (id === 0x4) {
      if (value > MAX_WINDOW) throw new ProtocolError(ERROR.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE");
      const delta = value - this.#peerInitialWindow;
      this.#peerInitialWindow = value;
      for (const s of this.#streams.values()) {
        s.sendWindow += delta;
        if (s.sendWindow > MAX_WINDOW) throw new ProtocolError(ERROR.FLOW_CONTROL_ERROR, "stream window overflow");
      }
    } else if (id === 0x5) {
      if (value < MAX_FRAME || value > 16_777_215)
        throw new ProtocolError(ERROR.PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE");
      this.#peerMaxFrame = value;
    }
    // HEADER_TABLE_SIZE: this side's encoder never indexes. MAX_CONCURRENT_STREAMS (we never open a stream),
    // MAX_HEADER_LIST_SIZE (our headers are a few fixed fields) and unknown settings need nothing.
  }

  #onWindowUpdate(id: number, payload: Buffer): void {
    if (payload.byteLength !== 4) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "WINDOW_UPDATE length");
    const inc = payload.readUInt32BE(0) & 0x7fffffff;
    if (id === 0) {
      if (inc === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      this.#sendWindow += inc;
      if (this.#sendWindow > MAX_WINDOW) throw new ProtocolError(ERROR.FLOW_CONTROL_ERROR, "window overflow");
      this.#drainBlocked();
      return;
    }
    const s = this.#state(id);
    if (s === "idle") throw new ProtocolError(ERROR.PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream");
    if (s === "closed") return;
    if (inc === 0) {
      this.#resetStream(id, ERROR.PROTOCOL_ERROR, "WINDOW_UPDATE of 0");
      return;
    }
    s.sendWindow += inc;
    if (s.sendWindow > MAX_WINDOW) {
      this.#resetStream(id, ERROR.FLOW_CONTROL_ERROR, "stream window overflow");
      return;
    }
    if (s.blocked.length > 0) this.#drain(s);
  }

  /** The frame's payload without padding (and, for HEADERS, without priority fields). */
  static #unpad(flags: number, payload: Buffer, priority: boolean): Buffer {
    let start = 0;
    let end = payload.byteLength;
    if (flags & FLAG.PADDED) {
      if (end === 0) throw new ProtocolError(ERROR.FRAME_SIZE_ERROR, "PADDED frame without a pad length");
      start = 1;
      end -= payload[0] ?? 0;
    }
    if (priority && flags & FLAG.PRIORITY) start += 5;
    if (start > end) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "padding longer than the frame");
    return payload.subarray(start, end);
  }

  #onHeaders(flags: number, id: number, payload: Buffer): void {
    if (id === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "HEADERS on stream 0");
    if (id % 2 === 0) throw new ProtocolError(ERROR.PROTOCOL_ERROR, "HEADERS on an even stream id");
    const block = Connection.#unpad(flags, payload, true);
    // A stream that depends on itself is a stream error, known once the block is decoded (the table must follow).
    let f = flags;
    if (flags & FLAG.PRIORITY && (payload.readUInt32BE(flags & FLAG.PADDED ? 1 : 0) & 0x7fffffff) === id)
      f |= SELF_DEPENDENT;
    if (flags & FLAG.END_HEADERS) this.#onHeaderBlock(id, f, block);
    else this.#block = { stream: id, flags: f, parts: [Buffer.from(block)], size: block.byteLength, frames: 0 };
  }

  #onHeaderBlock(id: number, flags: number, block: Buffer): void {
    // Every block is decoded, even one this server refuses: the HPACK dynamic table must follow the encoder's.
    const list = this.#decoder.decode(block, this.#limits.maxHeaderListSize);
    const existing = this.#streams.get(id);
    if (existing !== undefined) {
      // Trailers from the client: they end its stream, and carry no pseudo-header fields.
      if (existing.remoteEnded) this.#resetStream(id, ERROR.STREAM_CLOSED, "HEADERS after the end of the stream");
      else if (!(flags & FLAG.END_STREAM)) this.#resetStream(id, ERROR.PROTOCOL_ERROR, "trailers without END_STREAM");
      else if (trailersProblem(list) !== undefined) this.#resetStream(id, ERROR.PROTOCOL_ERROR, "malformed trailers");
      else this.#remoteEnd(existing);
      return;
    }
    if (id <= this.#lastStream) {
      if (this.#resetHere.has(id)) return;
      if (id === this.#lastStream) throw new ProtocolError(ERROR.STREAM_CLOSED, "HEADERS on a closed stream");
      throw new ProtocolError(ERROR.PROTOCOL_ERROR, "stream id lower than one already used");
    }
    this.#lastStream = id;
    if (this.#peerGoaway) {
      this.#resetStream(id, ERROR.REFUSED_STREAM, "stream opened after GOAWAY");
      return;
    }
    if (flags & SELF_DEPENDENT) {
      this.#resetStream(id, ERROR.PROTOCOL_ERROR, "stream depends on itself");
      return;
    }
    if (this.#streams.size >= this.#limits.maxConcurrentStreams) {
      // Above what this side advertised (SETTINGS_MAX_CONCURRENT_STREAMS).
      this.#resetStream(id, ERROR.REFUSED_STREAM, "too many concurrent streams");
      return;
    }
    const head = requestHead(list);
    if (typeof head === "string") {
      this.#resetStream(id, ERROR.PROTOCOL_ERROR, head);
      return;
    }
    const s = new Stream(id, head.headers, this.#peerInitialWindow, head.contentLength);
    this.#streams.set(id, s);
    const path = head.headers[":path"] ?? "";
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
    const data = Connection.#unpad(flags, payload, false);
    this.#consumed += payload.byteLength;
    if (this.#consumed >= 2 ** 30) {
      this.#windowUpdate(0, this.#consumed);
      this.#consumed = 0;
    }
    if (payload.byteLength === 0 && !(flags & FLAG.END_STREAM)) this.#spendControl();
    const s = this.#state(id);
    if (s === "idle") throw new ProtocolError(ERROR.PROTOCOL_ERROR, "DATA on an idle stream");
    if (s === "closed") {
      if (!this.#resetHere.has(id)) this.#resetStream(id, ERROR.STREAM_CLOSED, "DATA on a closed stream");
      return;
    }
    if (s.remoteEnded) {
      this.#resetStream(id, ERROR.STREAM_CLOSED, "DATA after the end of the stream");
      return;
    }
    s.consumed += payload.byteLength;
    if (s.consumed >= 2 ** 30) {
      this.#windowUpdate(id, s.consumed);
      s.consumed = 0;
    }
    if (s.contentLength !== undefined) {
      s.received += data.byteLength;
      if (s.received > s.contentLength) {
        this.#resetStream(id, ERROR.PROTOCOL_ERROR, "DATA does not add up to content-length");
        return;
      }
    }
    if (data.byteLength > 0 && !s.closed) {
      if (s.bidi !== undefined) s.bidi.push(data);
      else {
        s.size += data.byteLength;
        if (s.size > MAX_MESSAGE_BYTES + 5) this.#fail(s, GRPC_RESOURCE_EXHAUSTED, "message too large");
        else s.chunks.push(Buffer.from(data));
      }
    }
    if (flags & FLAG.END_STREAM && this.#streams.get(id) === s) this.#remoteEnd(s);
  }

  /** The peer's side of `s` ended (END_STREAM): a declared content-length must have been met. */
  #remoteEnd(s: Stream): void {
    if (s.remoteEnded) return;
    if (s.contentLength !== undefined && s.received !== s.contentLength) {
      this.#resetStream(s.id, ERROR.PROTOCOL_ERROR, "DATA does not add up to content-length");
      return;
    }
    s.remoteEnded = true;
    if (s.closed) {
      if (s.blocked.length === 0) this.#streams.delete(s.id);
      this.#closeIfDone();
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

  /** A stream error (RFC 9113 §5.4.2): RST_STREAM, the stream is forgotten, its call ends with an error. */
  #resetStream(id: number, code: number, why: string): void {
    const s = this.#streams.get(id);
    if (s !== undefined) {
      this.#streams.delete(id);
      s.closed = true;
      s.bidi?.abort(new Error(`stream reset: ${why}`));
    }
    this.#frame32(FRAME.RST_STREAM, id, code);
    this.#rememberReset(id);
    // Each costs the peer from its reset budget: a client could make this side reset streams as fast as it resets them.
    if (!this.#resets.take()) throw new ProtocolError(ERROR.ENHANCE_YOUR_CALM, "too many stream resets");
    this.#closeIfDone();
  }

  #rememberReset(id: number): void {
    this.#resetHere.add(id);
    if (this.#resetHere.size > RECENT_RESETS) {
      const oldest = this.#resetHere.values().next().value as number;
      this.#resetHere.delete(oldest);
    }
  }

  /** After the peer's GOAWAY, the connection ends once no stream is left. */
  #closeIfDone(): void {
    if (this.#peerGoaway && this.#streams.size === 0 && !this.#dead) this.#goaway(ERROR.NO_ERROR, "");
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
    // A peer that does not read what it asked for (PING and SETTINGS floods, responses it never takes) is not read
    // either until the socket drains.
    if (!this.#readPaused && this.#socket.writableLength > this.#limits.maxQueuedOutputBytes) {
      this.#readPaused = true;
      this.#socket.pause();
    }
  }

  #onDrain(): void {
    if (!this.#readPaused || this.#dead) return;
    this.#readPaused = false;
    this.#socket.resume();
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
    if (!s.remoteEnded) {
      this.#frame32(FRAME.RST_STREAM, s.id, ERROR.NO_ERROR);
      this.#rememberReset(s.id);
    }
    this.#closeIfDone();
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
      if (n <= 0) {
        if (s.blockedSince === 0) {
          s.blockedSince = Date.now();
          this.#armStall();
        }
        return;
      }
      s.blockedSince = 0;
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
