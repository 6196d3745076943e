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
//
// The pieces: ./h2-frames.ts (frame layout), ./h2-call.ts (a stream's state and the call types handlers see),
// ./h2-connection.ts (one connection: frames, flow control, stream states, defences); this file accepts connections
// and tells HTTP/2 from HTTP/1.1 (./http1.ts).

import { createServer, type Server, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { type MutualTls, mutualTlsServerOptions } from "../security/tls.js";
import type { BidiHandler, UnaryHandler } from "./h2-call.js";
import { Connection } from "./h2-connection.js";
import { Http1Connection, type Http1Handler, type Http1Upgrade } from "./http1.js";
import { DEFAULT_LIMITS, type ServerLimits } from "./limits.js";

export type { BidiCall, BidiHandler, Headers, UnaryHandler } from "./h2-call.js";
export { frame } from "./h2-frames.js";

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
  readonly limits: ServerLimits;

  /**
   * Handlers by gRPC path, e.g. `/envoy.service.auth.v3.Authorization/Check`. With `http1`, connections that do not
   * start with the HTTP/2 preface are HTTP/1.1 and go to it (./http1.ts). With `tls`, connections are mutual TLS:
   * a client without a certificate of `tls.ca` is refused in the handshake. `limits` replace some of DEFAULT_LIMITS
   * (./limits.ts, docs/http2.md).
   */
  constructor(
    handlers: ReadonlyMap<string, UnaryHandler>,
    bidi: ReadonlyMap<string, BidiHandler> = new Map(),
    opts: {
      log?: (line: string) => void;
      http1?: Http1Handler;
      upgrade?: Http1Upgrade;
      tls?: MutualTls;
      limits?: Partial<ServerLimits>;
    } = {},
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...opts.limits };
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
      this.#connections.add(new Connection(socket, this, this.limits));
      return;
    }
    let seen: Buffer = Buffer.alloc(0);
    // A client that never says which protocol it speaks does not hold the socket.
    const timer = setTimeout(() => socket.destroy(), this.limits.handshakeTimeoutMs);
    timer.unref();
    const onData = (chunk: Buffer) => {
      seen = seen.byteLength === 0 ? chunk : Buffer.concat([seen, chunk]);
      const n = Math.min(seen.byteLength, H2_START.byteLength);
      const h2 = seen.subarray(0, n).equals(H2_START.subarray(0, n));
      if (h2 && n < H2_START.byteLength) return;
      clearTimeout(timer);
      socket.off("data", onData);
      socket.pause();
      if (h2) {
        this.#connections.add(new Connection(socket, this, this.limits, seen));
        socket.resume();
        return;
      }
      const c = new Http1Connection(socket, http1, this.log, seen, this.#upgrade, this.limits);
      this.#http1Connections.add(c);
      socket.once("close", () => this.#http1Connections.delete(c));
      socket.resume();
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
    socket.once("close", () => clearTimeout(timer));
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
