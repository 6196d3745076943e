// A minimal gRPC server for unary methods on node:http2, for the one call on Envoy's hot path (ext_authz Check).
// grpc-js spends about 20 times the decision's own CPU per call (bench/authz.ts); a unary gRPC exchange is a small,
// fixed protocol (request headers, one length-prefixed message, response headers, one message, trailers), so it is
// served directly here. Streaming services (ADS, ext_proc) stay on grpc-js.

import { createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";

export type UnaryHandler = (message: Uint8Array, headers: IncomingHttpHeaders) => Promise<Uint8Array>;

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

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.byteLength);
  out[0] = 0;
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
}

export class UnaryGrpcServer {
  readonly #handlers: ReadonlyMap<string, UnaryHandler>;
  #server: Http2Server | undefined;

  /** `handlers` by gRPC path, e.g. `/envoy.service.auth.v3.Authorization/Check`. */
  constructor(handlers: ReadonlyMap<string, UnaryHandler>) {
    this.#handlers = handlers;
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
