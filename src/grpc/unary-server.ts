// A minimal gRPC server on node:http2 for the calls on Envoy's request path: unary (ext_authz Check) and
// bidirectional streams (the LLM ext_proc). grpc-js spends many times the handler's own CPU per message
// (bench/authz.ts, bench/llm.ts); gRPC over HTTP/2 is a small, fixed protocol (request headers, length-prefixed
// messages both ways, response headers, trailers), so it is served directly here. ADS stays on grpc-js.

import { EventEmitter } from "node:events";
import {
  constants,
  createServer,
  type Http2Server,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import type { AddressInfo } from "node:net";

export type UnaryHandler = (message: Uint8Array, headers: IncomingHttpHeaders) => Promise<Uint8Array>;

/**
 * One bidirectional call: messages arrive as `data` events (already framed out, still encoded), then `end` when the
 * client half-closes, or `error` if the stream breaks. The subset of grpc-js's ServerDuplexStream Sluice uses.
 */
export interface BidiCall {
  readonly headers: IncomingHttpHeaders;
  on(event: "data", fn: (message: Uint8Array) => void): void;
  on(event: "end", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  write(message: Uint8Array): void;
  /** Ends the call with status OK (trailers). Later writes are ignored. */
  end(): void;
}

export type BidiHandler = (call: BidiCall) => void;

const GRPC_UNIMPLEMENTED = 12;
const GRPC_INTERNAL = 13;
const GRPC_RESOURCE_EXHAUSTED = 8;
/** Larger requests are refused: a CheckRequest carries headers and at most a bounded body. */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

function fail(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(
    {
      ":status": 200,
      "content-type": "application/grpc",
      "grpc-status": String(code),
      "grpc-message": encodeURIComponent(message),
    },
    { endStream: true },
  );
}

/** A gRPC length-prefixed message (uncompressed). */
export function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

export class UnaryGrpcServer {
  readonly #handlers: ReadonlyMap<string, UnaryHandler>;
  readonly #bidi: ReadonlyMap<string, BidiHandler>;
  #server: Http2Server | undefined;

  /** Handlers by gRPC path, e.g. `/envoy.service.auth.v3.Authorization/Check`. */
  constructor(handlers: ReadonlyMap<string, UnaryHandler>, bidi: ReadonlyMap<string, BidiHandler> = new Map()) {
    this.#handlers = handlers;
    this.#bidi = bidi;
  }

  async start(host: string, port: number): Promise<number> {
    const server = createServer({
      // Envoy keeps few connections with many streams and resets finished ones freely: no limits meant for browsers.
      maxSessionMemory: 1024,
      streamResetBurst: 1_000_000,
      streamResetRate: 1_000_000,
    } as Parameters<typeof createServer>[0]);
    server.on("stream", (stream, headers) => this.#onStream(stream, headers));
    server.on("sessionError", () => {});
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    this.#server = server;
    return (server.address() as AddressInfo).port;
  }

  #onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    stream.on("error", () => {});
    const bidi = this.#bidi.get(String(headers[":path"]));
    if (bidi !== undefined) {
      bidi(new Http2BidiCall(stream, headers));
      return;
    }
    const handler = this.#handlers.get(String(headers[":path"]));
    if (handler === undefined) {
      fail(stream, GRPC_UNIMPLEMENTED, `unknown method ${String(headers[":path"])}`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on("data", (c: Buffer) => {
      size += c.byteLength;
      if (size > MAX_MESSAGE_BYTES + 5) {
        fail(stream, GRPC_RESOURCE_EXHAUSTED, "message too large");
        stream.close();
        return;
      }
      chunks.push(c);
    });
    stream.on("end", () => {
      if (stream.destroyed || stream.headersSent) return;
      const data = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (data.byteLength < 5 || data[0] !== 0 || data.readUInt32BE(1) !== data.byteLength - 5) {
        fail(stream, GRPC_INTERNAL, "expected one uncompressed message");
        return;
      }
      handler(data.subarray(5), headers).then(
        (reply) => {
          if (stream.destroyed) return;
          stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
          stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
          stream.end(frame(reply));
        },
        (e: unknown) => fail(stream, GRPC_INTERNAL, e instanceof Error ? e.message : String(e)),
      );
    });
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 1000);
      server.close(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

/** BidiCall over one HTTP/2 stream: frames split out of `data` chunks, responses framed, trailers on end. */
class Http2BidiCall implements BidiCall {
  readonly #stream: ServerHttp2Stream;
  readonly #events = new EventEmitter();
  #pending: Buffer | undefined;
  #ended = false;

  constructor(
    stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
  ) {
    this.#stream = stream;
    // Listeners are attached by the handler synchronously, before any data event can fire.
    stream.on("data", (c: Buffer) => this.#onData(c));
    stream.on("end", () => {
      if (this.#pending !== undefined && this.#pending.byteLength > 0) {
        this.#fail(GRPC_INTERNAL, "truncated message");
        return;
      }
      this.#events.emit("end");
    });
    stream.on("aborted", () => this.#events.emit("error", new Error("stream aborted")));
    stream.on("close", () => {
      // Reset by the client before it half-closed: the call is over without an end.
      if (!this.#ended && !stream.readableEnded) this.#events.emit("error", new Error("stream closed"));
      this.#ended = true;
    });
    this.#events.on("error", () => {});
  }

  on(event: "data" | "end" | "error", fn: (arg: never) => void): void {
    this.#events.on(event, fn as (...a: unknown[]) => void);
  }

  #onData(chunk: Buffer): void {
    let buf = this.#pending === undefined ? chunk : Buffer.concat([this.#pending, chunk]);
    while (buf.byteLength >= 5) {
      if (buf[0] !== 0) {
        this.#fail(GRPC_INTERNAL, "compressed messages are not supported");
        return;
      }
      const len = buf.readUInt32BE(1);
      if (len > MAX_MESSAGE_BYTES) {
        this.#fail(GRPC_RESOURCE_EXHAUSTED, "message too large");
        return;
      }
      if (buf.byteLength < 5 + len) break;
      const message = buf.subarray(5, 5 + len);
      buf = buf.subarray(5 + len);
      this.#events.emit("data", message);
      if (this.#ended) return;
    }
    this.#pending = buf.byteLength > 0 ? buf : undefined;
  }

  #respond(): void {
    if (this.#stream.headersSent || this.#stream.destroyed) return;
    this.#stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    this.#stream.once("wantTrailers", () => {
      this.#stream.sendTrailers({ "grpc-status": "0" });
      // The call is complete; Envoy never half-closes an ext_proc stream, it resets it once it reads the trailers,
      // and Node turns a peer's reset into an error with a formatted stack trace (tens of µs per call). Closing
      // with NO_ERROR after the trailers (RFC 9113 §8.1: a complete response, the request no longer wanted) ends
      // the stream on our side first.
      if (this.#ended) this.#stream.close(constants.NGHTTP2_NO_ERROR);
    });
  }

  write(message: Uint8Array): void {
    if (this.#ended || this.#stream.destroyed) return;
    this.#respond();
    this.#stream.write(frame(message));
  }

  end(): void {
    if (this.#ended || this.#stream.destroyed) return;
    this.#ended = true;
    this.#respond();
    this.#stream.end();
  }

  #fail(code: number, message: string): void {
    this.#ended = true;
    this.#pending = undefined;
    if (!this.#stream.headersSent) fail(this.#stream, code, message);
    else this.#stream.close();
    this.#events.emit("error", new Error(message));
  }
}
