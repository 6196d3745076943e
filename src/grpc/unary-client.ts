// A minimal unary gRPC client on node:http2, the counterpart of unary-server.ts: Sluice's ext_authz calls a user's
// authorization service with it when it fronts that service (extAuth.cache), over TLS when the service's backend
// policy sets it. One HTTP/2 session per target, reused
// by every call, reopened after it closes; a call is request headers, one length-prefixed message, and the answer's
// message plus grpc-status. Anything else (connection error, deadline, non-200, non-OK grpc-status, a compressed or
// malformed answer) is a failure the caller turns into its failure mode.

import { createHash } from "node:crypto";
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  type IncomingHttpHeaders,
  type IncomingHttpStatusHeader,
} from "node:http2";
import { connect as netConnect } from "node:net";
import { nodeTlsOptions } from "../security/backend-tls.js";
import type { BackendTlsIR } from "../translate/ir.js";
import { frame } from "./unary-server.js";

/**
 * Where a call goes: a TCP host (name or IP) and port, with the backend's TLS when its backend policy sets one (the
 * same settings as Envoy's cluster to it), or a Unix socket.
 */
export type UnaryTarget =
  | { readonly host: string; readonly port: number; readonly tls?: BackendTlsIR }
  | { readonly unixPath: string };

export type UnaryResult =
  | { readonly ok: true; readonly message: Uint8Array }
  | { readonly ok: false; readonly error: string; readonly grpcStatus?: number };

export interface UnaryCallOptions {
  readonly timeoutMs: number;
  /** The `:authority` of the call. */
  readonly authority: string;
  /** Custom metadata (lowercase names; the translator leaves out reserved ones). */
  readonly metadata?: Readonly<Record<string, string>>;
}

/** Larger answers are refused (a CheckResponse carries a few headers and a body). */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Idle sessions are closed after this long. */
const IDLE_MS = 60_000;

export function targetKey(t: UnaryTarget): string {
  return "unixPath" in t
    ? `unix:${t.unixPath}`
    : t.host.includes(":")
      ? `[${t.host}]:${t.port}`
      : `${t.host}:${t.port}`;
}

/** Settings objects' identities: a session is reused only for the same TLS settings. */
const tlsIds = new WeakMap<BackendTlsIR, string>();

/** The session a target's calls share: its address, and its TLS settings' digest when it has some. */
function sessionKey(t: UnaryTarget): string {
  if ("unixPath" in t || t.tls === undefined) return targetKey(t);
  let id = tlsIds.get(t.tls);
  if (id === undefined) {
    id = createHash("sha256").update(JSON.stringify(t.tls)).digest("base64url");
    tlsIds.set(t.tls, id);
  }
  return `${targetKey(t)}|tls:${id}`;
}

export class UnaryGrpcClient {
  readonly #sessions = new Map<string, ClientHttp2Session>();
  #closed = false;

  /** Calls `method` (`/package.Service/Method`) on `target`; never rejects. */
  call(target: UnaryTarget, method: string, message: Uint8Array, opts: UnaryCallOptions): Promise<UnaryResult> {
    if (this.#closed) return Promise.resolve({ ok: false, error: "client closed" });
    return new Promise<UnaryResult>((resolve) => {
      let done = false;
      let session: ClientHttp2Session | undefined;
      let stream: ClientHttp2Stream | undefined;
      const finish = (r: UnaryResult) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (stream !== undefined && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
        resolve(r);
      };
      const timer = setTimeout(() => {
        // A peer that never completes the connection: drop the session so the next call connects afresh.
        if (session?.connecting === true) session.destroy();
        finish({ ok: false, error: `deadline of ${opts.timeoutMs} ms exceeded`, grpcStatus: 4 });
      }, opts.timeoutMs);
      try {
        session = this.#session(target);
        stream = session.request({
          ...opts.metadata,
          ":method": "POST",
          ":path": method,
          ":authority": opts.authority,
          "content-type": "application/grpc",
          te: "trailers",
          "grpc-timeout": `${Math.max(1, Math.ceil(opts.timeoutMs))}m`,
        });
      } catch (e) {
        finish({ ok: false, error: e instanceof Error ? e.message : String(e) });
        return;
      }
      let headers: (IncomingHttpHeaders & IncomingHttpStatusHeader) | undefined;
      let trailers: IncomingHttpHeaders | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on("response", (h) => {
        headers = h;
      });
      stream.on("trailers", (t) => {
        trailers = t;
      });
      stream.on("data", (c: Buffer) => {
        size += c.byteLength;
        if (size > MAX_MESSAGE_BYTES + 5) finish({ ok: false, error: "answer too large" });
        else chunks.push(c);
      });
      stream.on("error", (e) => finish({ ok: false, error: e.message }));
      stream.on("close", () => finish(outcome(headers, trailers, Buffer.concat(chunks))));
      stream.end(frame(message));
    });
  }

  #session(target: UnaryTarget): ClientHttp2Session {
    const key = sessionKey(target);
    const existing = this.#sessions.get(key);
    if (existing !== undefined && !existing.closed && !existing.destroyed) return existing;
    const session =
      "unixPath" in target
        ? connect("http://localhost", { createConnection: () => netConnect(target.unixPath) })
        : target.tls !== undefined
          ? connect(`https://${targetKey(target)}`, nodeTlsOptions(target.tls, "h2"))
          : connect(`http://${key}`);
    const forget = () => {
      if (this.#sessions.get(key) === session) this.#sessions.delete(key);
    };
    // Errors fail the streams on the session (each reports its own); the session is then dropped and reopened.
    session.on("error", forget);
    session.on("close", forget);
    session.on("goaway", forget);
    session.setTimeout(IDLE_MS, () => session.close());
    this.#sessions.set(key, session);
    return session;
  }

  /** Closes every session; later calls fail at once. */
  close(): void {
    this.#closed = true;
    for (const s of this.#sessions.values()) s.destroy();
    this.#sessions.clear();
  }
}

function outcome(
  headers: (IncomingHttpHeaders & IncomingHttpStatusHeader) | undefined,
  trailers: IncomingHttpHeaders | undefined,
  data: Buffer,
): UnaryResult {
  if (headers === undefined) return { ok: false, error: "the stream closed without a response" };
  if (headers[":status"] !== 200) return { ok: false, error: `HTTP status ${String(headers[":status"])}` };
  // A trailers-only answer carries grpc-status in its headers.
  const status = Number(trailers?.["grpc-status"] ?? headers["grpc-status"]);
  if (!Number.isInteger(status)) return { ok: false, error: "no grpc-status" };
  if (status !== 0) {
    const message = String(trailers?.["grpc-message"] ?? headers["grpc-message"] ?? "");
    return {
      ok: false,
      error: `grpc-status ${status}${message ? `: ${percentDecoded(message)}` : ""}`,
      grpcStatus: status,
    };
  }
  if (data.byteLength < 5 || data[0] !== 0 || data.readUInt32BE(1) !== data.byteLength - 5) {
    return { ok: false, error: "expected one uncompressed message" };
  }
  return { ok: true, message: data.subarray(5) };
}

function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
