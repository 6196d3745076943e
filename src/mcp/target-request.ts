// One HTTP request to an MCP target under its connection policies: over HTTP/1.1 on the keep-alive agents of
// target-connection.ts, or over HTTP/2 (`http.version: HTTP2`: one node:http2 session per target and settings, h2 by
// ALPN over TLS, prior knowledge over plain TCP, multiplexing the session's requests and GET streams). Sluice's
// Streamable HTTP transport (target-transport.ts) sends through it, and so does the SDK's SSE transport, through
// `targetFetch`: both kinds of targets get the same TLS, credentials, timeouts, keepalive, proxy and HTTP version.

import http, { type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import http2 from "node:http2";
import https from "node:https";
import { isIP, type Socket } from "node:net";
import { type Duplex, Readable } from "node:stream";
import type { McpTargetConnection, McpTargetHealth } from "../translate/mcp/connection.js";
import {
  agentsFor,
  connectionKey,
  credentialHeaders,
  setTargetKeepalive,
  tlsOptions,
  tunnelled,
} from "./target-connection.js";
import { recordTarget, unhealthyAnswer } from "./target-health.js";

/** An answer being read: Node's IncomingMessage over HTTP/1.1, the stream with its head over HTTP/2. */
export type TargetResponse = Readable & {
  readonly statusCode?: number | undefined;
  readonly statusMessage?: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly complete: boolean;
};

export interface TargetRequest {
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
  /** A GET stream: over HTTP/1.1 a connection of its own (outside the keep-alive pool), with TCP keepalive. */
  readonly stream: boolean;
  /** Told how to cancel the request once it is under way; what it returns is called when the request is over. */
  readonly track?: (cancel: (e: Error) => void) => () => void;
}

/** Sends one request; resolves with the answer once its head arrived. */
export function targetRequest(url: URL, c: McpTargetConnection | undefined, r: TargetRequest): Promise<TargetResponse> {
  // Only a target with an unhealthyCondition pays for scoring here (target-health.ts).
  const condition = c?.health?.condition;
  return condition === undefined ? send(url, c, r) : scoredRequest(url, c as McpTargetConnection, condition, r);
}

/**
 * A request to a target whose health has an `unhealthyCondition`: exactly one outcome recorded for it. The answer's
 * status and headers judged by the condition, recorded once the answer ended (a GET stream's at its head: it lasts);
 * unhealthy without an answer: no connection, TLS, the connection cut before the answer's end, no end within
 * `http.requestTimeout`. Nothing when Sluice itself cancelled it (the session closed, the client cancelled).
 */
async function scoredRequest(
  url: URL,
  c: McpTargetConnection,
  condition: string,
  r: TargetRequest,
): Promise<TargetResponse> {
  const h = c.health as McpTargetHealth;
  let settled = false;
  let timer: NodeJS.Timeout | undefined;
  const settle = (ok: boolean) => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    recordTarget(h, ok);
  };
  const track =
    r.track === undefined
      ? undefined
      : (cancel: (e: Error) => void) =>
          (r.track as NonNullable<TargetRequest["track"]>)((e) => {
            // Sluice gave up on it: not the target's outcome.
            settled = true;
            clearTimeout(timer);
            cancel(e);
          });
  if (c.requestTimeoutMs !== undefined) timer = setTimeout(() => settle(false), c.requestTimeoutMs).unref();
  let res: TargetResponse;
  try {
    res = await send(url, c, { ...r, ...(track !== undefined ? { track } : {}) });
  } catch (e) {
    settle(false);
    throw e;
  }
  const ok = settled || !unhealthyAnswer(h, condition, res.statusCode ?? 0, res.headers);
  if (r.stream) settle(ok);
  else {
    res.once("end", () => settle(ok));
    res.once("close", () => settle(ok && res.complete));
  }
  return res;
}

async function send(url: URL, c: McpTargetConnection | undefined, r: TargetRequest): Promise<TargetResponse> {
  const sent =
    c?.header === undefined && c?.minted === undefined
      ? { headers: r.headers, path: `${url.pathname}${url.search}` }
      : await credentialHeaders(c, r.method, url, r.headers, r.body);
  return c?.http2 === true ? h2Request(url, c, r, sent, false) : h1Request(url, c, r, sent);
}

/**
 * HTTP/1.1. A request on a reused keep-alive socket that the target closed meanwhile (the idle-timeout race) is sent
 * once more on a new one.
 */
function h1Request(
  url: URL,
  c: McpTargetConnection | undefined,
  r: TargetRequest,
  sent: { headers: Record<string, string>; path: string },
): Promise<TargetResponse> {
  const mod = url.protocol === "https:" ? https : http;
  const agents = agentsFor(url.protocol as "http:" | "https:", c);
  const attempt = (retried: boolean): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const req = mod.request({
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port,
        path: sent.path,
        method: r.method,
        headers:
          r.body !== undefined
            ? { ...sent.headers, "content-length": String(Buffer.byteLength(r.body)) }
            : sent.headers,
        agent: r.stream ? agents.stream : agents.pooled,
      });
      if (c?.connectTimeoutMs !== undefined || (r.stream && c?.keepaliveMs !== undefined)) {
        req.once("socket", (socket) => {
          // A GET stream's connection is idle for long stretches: TCP keepalive finds a dead peer.
          if (r.stream) setTargetKeepalive(socket, c);
          const connectMs = c.connectTimeoutMs;
          if (connectMs === undefined || !socket.connecting) return;
          const timer = setTimeout(
            () => req.destroy(new Error(`no connection to ${url.host} within ${connectMs} ms (tcp.connectTimeout)`)),
            connectMs,
          );
          socket.once("connect", () => clearTimeout(timer));
          socket.once("secureConnect", () => clearTimeout(timer));
          socket.once("close", () => clearTimeout(timer));
        });
      }
      const untrack = r.track?.((e) => req.destroy(e));
      if (untrack !== undefined) req.once("close", untrack);
      req.once("response", resolve);
      req.once("error", (e: NodeJS.ErrnoException) => {
        if (!retried && req.reusedSocket && (e.code === "ECONNRESET" || e.code === "EPIPE")) {
          attempt(true).then(resolve, reject);
        } else reject(e);
      });
      req.end(r.body);
    });
  return attempt(false);
}

/** Connection-specific headers HTTP/2 forbids (RFC 9113 §8.2.2); Node refuses a request that carries one. */
const H2_FORBIDDEN = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"]);
/** A session with no stream open this long is closed (a new one is opened for the next request). */
const H2_IDLE_MS = 60_000;

interface H2 {
  readonly session: http2.ClientHttp2Session;
  open: number;
  idle?: NodeJS.Timeout;
  /** Takes the session out of the pool: the next request opens a new one. */
  drop(): void;
}

/** Open (or opening) HTTP/2 sessions, by target authority and connection settings. */
const h2Sessions = new Map<string, Promise<H2>>();

/** The session to a target: one per authority and settings, opened on first use, dropped once it closes or goes away. */
function h2Session(url: URL, c: McpTargetConnection | undefined): Promise<H2> {
  const key = `${url.host}|${connectionKey(url.protocol, c)}`;
  const known = h2Sessions.get(key);
  if (known !== undefined) return known;
  const drop = () => {
    if (h2Sessions.get(key) === p) h2Sessions.delete(key);
  };
  const p = openH2(url, c, drop);
  h2Sessions.set(key, p);
  p.then((h) => {
    h.session.once("close", drop);
    h.session.once("goaway", drop);
    h.session.once("error", drop);
  }, drop);
  return p;
}

async function openH2(url: URL, c: McpTargetConnection | undefined, drop: () => void): Promise<H2> {
  const secure = url.protocol === "https:";
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port !== "" ? url.port : secure ? 443 : 80);
  const tlsOpts = !secure ? {} : c?.tls !== undefined ? tlsOptions(c.tls, "h2") : { ALPNProtocols: ["h2"] };
  let socket: Duplex | undefined;
  if (c?.proxy !== undefined) {
    const open = tunnelled(c.proxy, secure, c.connectTimeoutMs) as unknown as (
      o: object,
      cb: (e: Error | null, s?: Duplex) => void,
    ) => void;
    const servername = c.tls?.sni ?? (isIP(host) === 0 ? host : undefined);
    socket = await new Promise<Duplex>((resolve, reject) =>
      open({ ...tlsOpts, host, port, ...(servername !== undefined ? { servername } : {}) }, (e, s) =>
        e !== null || s === undefined ? reject(e ?? new Error("no tunnel")) : resolve(s),
      ),
    );
  }
  const session = http2.connect(`${url.protocol}//${url.host}`, {
    ...tlsOpts,
    ...(socket !== undefined ? { createConnection: () => socket } : {}),
  });
  // Errors reach the streams under way; the session itself is dropped from the pool (h2Session).
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    const ms = c?.connectTimeoutMs;
    const timer =
      ms === undefined
        ? undefined
        : setTimeout(
            () => session.destroy(new Error(`no connection to ${url.host} within ${ms} ms (tcp.connectTimeout)`)),
            ms,
          );
    session.once("connect", () => {
      clearTimeout(timer);
      resolve();
    });
    session.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  if (secure && session.alpnProtocol !== "h2") {
    session.destroy();
    throw new Error(`target ${url.host} did not agree to HTTP/2 (ALPN ${String(session.alpnProtocol)}; http.version)`);
  }
  if (c !== undefined) setTargetKeepalive(session.socket as Socket, c);
  session.unref();
  return { session, open: 0, drop };
}

async function h2Request(
  url: URL,
  c: McpTargetConnection | undefined,
  r: TargetRequest,
  sent: { headers: Record<string, string>; path: string },
  retried: boolean,
): Promise<TargetResponse> {
  const h = await h2Session(url, c);
  const headers: http2.OutgoingHttpHeaders = { ":method": r.method, ":path": sent.path };
  for (const [k, v] of Object.entries(sent.headers)) {
    const name = k.toLowerCase();
    if (!H2_FORBIDDEN.has(name)) headers[name] = v;
  }
  if (r.body !== undefined) headers["content-length"] = Buffer.byteLength(r.body);
  let stream: http2.ClientHttp2Stream;
  try {
    if (h.session.closed || h.session.destroyed) throw new Error("the HTTP/2 session to the target closed");
    stream = h.session.request(headers, { endStream: r.body === undefined });
  } catch (e) {
    // The session went away between its lookup and this request: once more, on a new one.
    if (retried) throw e;
    h.drop();
    h.session.destroy();
    return h2Request(url, c, r, sent, true);
  }
  h.open++;
  clearTimeout(h.idle);
  const untrack = r.track?.((e) => stream.destroy(e));
  stream.once("close", () => {
    untrack?.();
    if (--h.open === 0) {
      h.idle = setTimeout(() => {
        if (h.open !== 0) return;
        h.drop();
        h.session.close();
      }, H2_IDLE_MS).unref();
    }
  });
  if (r.body !== undefined) stream.end(r.body);
  return new Promise((resolve, reject) => {
    stream.once("error", reject);
    stream.once("response", (head) => {
      let complete = false;
      stream.once("end", () => {
        complete = true;
      });
      Object.defineProperties(stream, {
        statusCode: { value: Number(head[":status"]) },
        statusMessage: { value: "" },
        headers: { value: head },
        complete: { get: () => complete },
      });
      resolve(stream as unknown as TargetResponse);
    });
  });
}

function readAll(res: TargetResponse): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (b: Buffer) => chunks.push(b));
    res.once("end", () => resolve(Buffer.concat(chunks)));
    res.once("error", reject);
    res.once("close", () => {
      if (!res.complete) reject(new Error("the target closed the connection mid-answer"));
    });
  });
}

/**
 * A `fetch` over targetRequest, for the SDK's SSE transport (which takes one): an SSE target's stream and POSTs get
 * the target's connection policies as Streamable HTTP targets do. A POST's answer (`Accepted`) is read whole before
 * it is handed over, so its keep-alive socket goes back to the pool (the SDK cancels the body, which would close it).
 */
export function targetFetch(c: McpTargetConnection | undefined): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input);
    const method = (init?.method ?? "GET").toUpperCase();
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => {
      headers[k] = v;
    });
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== "string") {
      throw new TypeError("targetFetch sends string bodies only");
    }
    const signal = init?.signal ?? undefined;
    signal?.throwIfAborted();
    const res = await targetRequest(url, c, {
      method,
      headers,
      ...(typeof body === "string" ? { body } : {}),
      stream: method === "GET",
      track: (cancel) => {
        if (signal === undefined) return () => {};
        const onAbort = () => cancel(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
        signal.addEventListener("abort", onAbort, { once: true });
        return () => signal.removeEventListener("abort", onAbort);
      },
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (k.startsWith(":") || v === undefined) continue;
      for (const x of Array.isArray(v) ? v : [v]) out.append(k, x);
    }
    const status = res.statusCode ?? 0;
    const init_ = { status, statusText: res.statusMessage ?? "", headers: out };
    if (status === 204 || status === 304 || method === "HEAD") {
      res.resume();
      return new Response(null, init_);
    }
    if (method !== "GET") return new Response(new Uint8Array(await readAll(res)), init_);
    return new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, init_);
  }) as typeof fetch;
}
