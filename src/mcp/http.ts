// The MCP endpoint as a client sees it, behind Envoy: Streamable HTTP (MCP 2025-03-26 and later). POST carries one
// JSON-RPC message, answered as JSON or, for requests that may bring progress or requests of the target, as an SSE
// stream; GET opens the stream of what the targets send on their own; DELETE ends the session. Envoy names the
// backend in a header it sets (names.ts MCP_ROUTE_HEADER); a request without a known one is refused.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { withIncomingContext } from "../observability/context.js";
import { requestContextWanted } from "../observability/options.js";
import { type MutualTls, mutualTlsServerOptions } from "../security/tls.js";
import type { McpBackendEntry } from "../translate/mcp/table.js";
import { MCP_APIKEY_HEADER, MCP_JWT_HEADER, MCP_ROUTE_HEADER } from "../translate/names.js";
import type { McpRequestContext } from "./authorization.js";
import { guarded, runGuardrails } from "./guardrails.js";
import { InitializeCache, type InitializeCacheOptions, initializeCacheOptionsFromEnv } from "./initialize-cache.js";
import {
  ErrorCodes,
  errorResponse,
  isNotification,
  isRequest,
  type JsonRpcId,
  type JsonRpcRequest,
  type JsonRpcResponse,
  parseMessage,
  RpcError,
} from "./jsonrpc.js";
import type { McpMetrics } from "./metrics.js";
import { challenge, McpOAuth, oauthPath } from "./oauth.js";
import { type Channel, McpSession, SUPPORTED_VERSIONS } from "./session.js";
import type { SessionCodec } from "./session-codec.js";
import { SparePool, type SparePoolOptions, spareOptionsFromEnv } from "./spare-pool.js";

/** Largest message a client may POST. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;
/** A session unused this long is closed on this replica (its targets' sessions stay; the id can resume them). */
const IDLE_MS = 30 * 60_000;
/** SSE comments on the GET stream, so Envoy's stream idle timeout (5 minutes by default) never ends a quiet one. */
const KEEPALIVE_MS = 20_000;
/** Requests whose answer may come with progress or requests of the target: answered as an SSE stream. */
const STREAMED = new Set(["tools/call", "prompts/get", "resources/read", "completion/complete"]);
const SESSION_HEADER = "mcp-session-id";
const VERSION_HEADER = "mcp-protocol-version";

export interface McpHttpOptions {
  readonly codec: SessionCodec;
  /** The backend of a route key (the MCP table). */
  readonly entry: (key: string) => McpBackendEntry | undefined;
  readonly log: (line: string) => void;
  readonly metrics?: McpMetrics;
  /** Spare target sessions (spare-pool.ts); default from the environment (`SLUICE_MCP_SPARE_*`). */
  readonly spares?: SparePoolOptions;
  /** Stateless backends' cached initialize answer (initialize-cache.ts); default from the environment. */
  readonly initializeCache?: InitializeCacheOptions;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly rpc: JsonRpcResponse,
    readonly headers: Record<string, string> = {},
  ) {
    super(rpc.error?.message ?? String(status));
  }
}

function httpError(status: number, code: number, message: string, id: JsonRpcId | null = null): HttpError {
  return new HttpError(status, errorResponse(id, { code, message }));
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** An SSE response as a channel: each message one `message` event. */
class SseChannel implements Channel {
  #open = true;
  constructor(private readonly res: ServerResponse) {
    res.once("close", () => {
      this.#open = false;
    });
  }
  get open(): boolean {
    return this.#open && !this.res.writableEnded;
  }
  send(message: object): void {
    if (!this.open) return;
    this.res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }
  /** The last message, and the end of the stream, in one write (with nothing sent before: one with the headers). */
  end(message: object): void {
    if (!this.open) {
      this.res.end();
      return;
    }
    this.res.end(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }
}

/** Envoy's dynamic metadata in a header its route set (JSON); absent when Envoy had none ("-" or empty). */
function metadataHeader(req: IncomingMessage, name: string): unknown {
  const v = req.headers[name];
  if (typeof v !== "string" || v === "" || v === "-") return undefined;
  try {
    const parsed: unknown = JSON.parse(v);
    return typeof parsed === "object" && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}

const INTERNAL_HEADERS = new Set([MCP_ROUTE_HEADER, MCP_JWT_HEADER, MCP_APIKEY_HEADER]);

/** What the authorization rules see of the request: as Envoy forwarded it, Sluice's own headers left out. */
function requestContext(req: IncomingMessage): McpRequestContext {
  const headers = new Map<string, string>();
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || INTERNAL_HEADERS.has(k)) continue;
    headers.set(k, Array.isArray(v) ? v.join(",") : v);
  }
  const url = new URL(req.url ?? "/", "http://localhost");
  const query = new Map<string, string>();
  for (const [k, v] of url.searchParams) if (!query.has(k)) query.set(k, v);
  const jwt = metadataHeader(req, MCP_JWT_HEADER);
  const apiKey = metadataHeader(req, MCP_APIKEY_HEADER);
  return {
    request: {
      method: req.method ?? "POST",
      path: url.pathname,
      host: String(req.headers.host ?? ""),
      scheme: String(req.headers["x-forwarded-proto"] ?? "http"),
      headers,
      query,
    },
    ...(jwt !== undefined ? { jwt } : {}),
    ...(apiKey !== undefined ? { apiKey } : {}),
  };
}

/** Whether serving `entry` reads the client's request: authorization rules, or a credential minted from its token. */
function readsRequest(entry: McpBackendEntry): boolean {
  return (
    entry.authorization.length > 0 ||
    entry.targetAuthorization !== undefined ||
    entry.targetGuardrails !== undefined ||
    entry.targets.some((t) => t.connection?.minted !== undefined)
  );
}

/** Whether an Origin header names the host the request was sent to (scheme and port aside). */
function sameHost(origin: string, host: string | undefined): boolean {
  try {
    const hostname = (h: string) => h.replace(/:\d+$/, "").toLowerCase();
    return host !== undefined && hostname(new URL(origin).host) === hostname(host);
  } catch {
    return false;
  }
}

/** A JSON answer's channel: nothing but the answer goes through it. */
const NO_CHANNEL: Channel = { open: false, send() {} };

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > MAX_BODY_BYTES) {
      reject(httpError(413, ErrorCodes.InvalidRequest, `message over ${MAX_BODY_BYTES} bytes`));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.byteLength;
      if (size > MAX_BODY_BYTES) {
        reject(httpError(413, ErrorCodes.InvalidRequest, `message over ${MAX_BODY_BYTES} bytes`));
        req.removeAllListeners("data");
        req.resume();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

export class McpHttpServer {
  readonly #opts: McpHttpOptions;
  #server: Server | undefined;
  /** Sessions this replica serves now, by session id (a resume in progress is a promise too). */
  readonly #sessions = new Map<string, Promise<McpSession>>();
  /** Session ids ended by DELETE here (bounded); another replica learns it from the targets, whose sessions ended. */
  readonly #ended = new Set<string>();
  #sweep: NodeJS.Timeout | undefined;
  /** Counters for /metrics and tests. */
  readonly counters = { sessions: 0, resumed: 0, refused: 0, requests: 0, errors: 0 };
  readonly #oauth: McpOAuth;
  /** Spare target sessions for Stateful backends, adopted by new sessions. */
  readonly spares: SparePool;
  /** Stateless backends' initialize answers. */
  readonly initializeCache: InitializeCache;

  constructor(opts: McpHttpOptions) {
    this.#opts = opts;
    this.#oauth = new McpOAuth(opts.log);
    this.spares = new SparePool(opts.spares ?? spareOptionsFromEnv(process.env), opts.log);
    this.initializeCache = new InitializeCache(
      opts.initializeCache ?? initializeCacheOptionsFromEnv(process.env),
      async (entry, params) => {
        const { session, result } = await McpSession.initialize(entry, params, this.#sessionOptions());
        // Nobody keeps this session: the targets' are ended once the answer is had (not waited for).
        void session.close(true);
        return { result, complete: session.skipped.size === 0 };
      },
      opts.log,
    );
  }

  /** A new MCP table: spare sessions and cached answers of backends gone or changed are dropped. */
  retain(entries: ReadonlyMap<string, McpBackendEntry>): void {
    this.spares.retain(entries);
    this.initializeCache.retain(entries);
  }

  #sessionOptions(): { log: (line: string) => void; metrics?: McpMetrics } {
    return { log: this.#opts.log, ...(this.#opts.metrics !== undefined ? { metrics: this.#opts.metrics } : {}) };
  }

  async start(host: string, port: number, tls?: MutualTls): Promise<number> {
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      this.#handle(req, res).catch((e: unknown) => {
        const err =
          e instanceof HttpError
            ? e
            : httpError(500, ErrorCodes.InternalError, `internal error: ${(e as Error).message}`);
        if (!(e instanceof HttpError)) this.#opts.log(`sluice mcp: ${(e as Error).stack ?? String(e)}`);
        this.counters.errors++;
        if (!res.headersSent) sendJson(res, err.status, err.rpc, err.headers);
        else res.end();
      });
    };
    // With mutual TLS only Envoys holding a certificate of Sluice's CA get in: the route header is trusted.
    // Each request in a context of its own: its target calls are its span's children, its log lines carry its ids.
    const served = withIncomingContext("mcp", handler, requestContextWanted);
    const server =
      tls === undefined ? createServer(served) : createHttpsServer(mutualTlsServerOptions(tls, ["http/1.1"]), served);
    // Long tool calls and GET streams: no request timeout here (Envoy's route and idle timeouts apply).
    server.requestTimeout = 0;
    server.headersTimeout = 30_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => resolve());
    });
    this.#server = server;
    this.#sweep = setInterval(() => void this.#evictIdle(), 60_000);
    this.#sweep.unref();
    return (server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    if (this.#sweep !== undefined) clearInterval(this.#sweep);
    await this.spares.close();
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(sessions.map((p) => p.then((s) => s.close(false)).catch(() => undefined)));
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }

  async #evictIdle(): Promise<void> {
    const now = Date.now();
    for (const [id, p] of this.#sessions) {
      const s = await p.catch(() => undefined);
      if (s === undefined || now - s.lastUsed > IDLE_MS) {
        this.#sessions.delete(id);
        await s?.close(false);
      }
    }
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.counters.requests++;
    const key = req.headers[MCP_ROUTE_HEADER];
    const entry = typeof key === "string" ? this.#opts.entry(key) : undefined;
    if (entry === undefined) {
      // Only Envoy's MCP routes set the header; this is not one, or its backend left the configuration.
      throw httpError(404, ErrorCodes.ServerError, "no MCP backend is served on this route");
    }
    const oauth = entry.oauth;
    if (oauth !== undefined) {
      // Discovery and registration (the route's twins bring them here without a token); public, any origin.
      const at = oauthPath(new URL(req.url ?? "/", "http://localhost").pathname);
      if (at !== undefined) return this.#oauth.serve(req, res, oauth, at);
      const verified = await this.#oauth.verify(req, oauth);
      if (verified === "refused") {
        req.resume();
        throw new HttpError(
          401,
          errorResponse(null, {
            code: ErrorCodes.InvalidRequest,
            message: "Unauthorized: a valid bearer token is required",
          }),
          { "www-authenticate": challenge(req) },
        );
      }
      // What the authorization rules read as `jwt` (Envoy removed any copy the client sent).
      if (verified !== undefined) req.headers[MCP_JWT_HEADER] = JSON.stringify(verified);
    }
    // DNS rebinding (Streamable HTTP security): a browser's request from another origin is refused. The Host itself is
    // the route's business (its hostnames; Envoy answers 404 for others).
    const origin = req.headers.origin;
    if (typeof origin === "string" && origin !== "null" && !sameHost(origin, req.headers.host)) {
      req.resume();
      throw httpError(403, ErrorCodes.InvalidRequest, `Forbidden: Origin ${origin} is not this server's`);
    }
    const version = req.headers[VERSION_HEADER];
    if (typeof version === "string" && !(SUPPORTED_VERSIONS as readonly string[]).includes(version)) {
      throw httpError(
        400,
        ErrorCodes.InvalidRequest,
        `unsupported ${VERSION_HEADER} ${version}; supported: ${SUPPORTED_VERSIONS.join(", ")}`,
      );
    }
    switch (req.method) {
      case "POST":
        return this.#post(req, res, entry);
      case "GET":
        return this.#get(req, res, entry);
      case "DELETE":
        return this.#delete(req, res, entry);
      default:
        res.writeHead(405, { allow: "GET, POST, DELETE" }).end();
    }
  }

  /** The session of a request (Stateful): cached here, or resumed from its sealed id. */
  async #session(req: IncomingMessage, entry: McpBackendEntry): Promise<{ session: McpSession; id: string }> {
    const id = req.headers[SESSION_HEADER];
    if (typeof id !== "string" || id === "") {
      throw httpError(400, ErrorCodes.InvalidRequest, `Bad Request: ${SESSION_HEADER} header is required`);
    }
    const notFound = (why: string) => {
      this.counters.refused++;
      if (this.#opts.metrics !== undefined) this.#opts.metrics.sessions.refused++;
      return httpError(404, ErrorCodes.ServerError, `Session not found: ${why}`);
    };
    if (this.#ended.has(id)) throw notFound("the session was ended");
    let p = this.#sessions.get(id);
    if (p === undefined) {
      const opened = this.#opts.codec.open(id, entry.key);
      if (!opened.ok) {
        throw notFound(
          opened.reason === "other-route"
            ? "the session belongs to another Gateway or MCP backend"
            : "the session id is not one this gateway issued",
        );
      }
      this.counters.resumed++;
      if (this.#opts.metrics !== undefined) this.#opts.metrics.sessions.resumed++;
      p = McpSession.resume(entry, opened.state, this.#sessionOptions());
      this.#sessions.set(id, p);
      p.catch(() => this.#sessions.delete(id));
    }
    let session: McpSession;
    try {
      session = await p;
    } catch (e) {
      throw e instanceof RpcError ? notFound(e.message) : e;
    }
    // Cached by id alone: the route must still be the session's (another backend's or Gateway's is refused).
    if (session.entry.key !== entry.key) throw notFound("the session belongs to another Gateway or MCP backend");
    if (session.failed !== undefined) throw notFound(`the session failed (${session.failed}); start a new one`);
    return { session, id };
  }

  async #post(req: IncomingMessage, res: ServerResponse, entry: McpBackendEntry): Promise<void> {
    const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
    if (type !== "application/json") {
      req.resume();
      throw httpError(415, ErrorCodes.InvalidRequest, "Content-Type must be application/json");
    }
    const body = await readBody(req);
    const parsed = parseMessage(body);
    if (!parsed.ok) throw new HttpError(400, parsed.error);
    const msg = parsed.message;
    const stateful = entry.sessionRouting === "Stateful";
    if (isRequest(msg) && msg.method === "initialize") {
      if (stateful && req.headers[SESSION_HEADER] !== undefined) {
        throw httpError(
          400,
          ErrorCodes.InvalidRequest,
          "initialize starts a session: send it without mcp-session-id",
          msg.id,
        );
      }
      let started: Awaited<ReturnType<typeof McpSession.initialize>> | undefined;
      let result: Record<string, unknown>;
      const ctx = requestContext(req);
      const input = { backend: entry.backend, method: msg.method, id: msg.id, params: msg.params };
      try {
        const params = guarded(entry.guardrails, msg.method, "Request")
          ? (await runGuardrails(entry.guardrails, "Request", input, ctx, this.#opts.log)).params
          : msg.params;
        if (stateful) {
          started = await McpSession.initialize(entry, params, this.#sessionOptions(), {
            pool: this.spares,
            headers: ctx.request.headers,
          });
          result = started.result;
        } else {
          result = await this.initializeCache.result(entry, params);
        }
        if (guarded(entry.guardrails, msg.method, "Response")) {
          const g = await runGuardrails(entry.guardrails, "Response", { ...input, result }, ctx, this.#opts.log).catch(
            async (e: unknown) => {
              await started?.session.close(true);
              throw e;
            },
          );
          result = g.result as Record<string, unknown>;
        }
      } catch (e) {
        if (e instanceof RpcError) return sendJson(res, 200, errorResponse(msg.id, e.toObject()));
        throw e;
      }
      this.counters.sessions++;
      if (this.#opts.metrics !== undefined) this.#opts.metrics.sessions.started++;
      if (started === undefined) return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result });
      const id = this.#opts.codec.seal(started.session.state());
      this.#sessions.set(id, Promise.resolve(started.session));
      sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result }, { [SESSION_HEADER]: id });
      // The targets hear notifications/initialized (held so far, see McpSession.release) once the client sends its
      // own, after that is answered, or before the first request or notification the session sends them, whichever
      // comes first; an adopted spare's were sent before the answer when the check asks them (spare-pool.ts).
      // A spare set for the next client like this one, started once this one is answered (spare-pool.ts).
      const template = started.template;
      setImmediate(() => this.spares.refill(entry, template));
      return;
    }
    // Stateless: every request has a session of its own with each target, ended when it is answered.
    let session: McpSession;
    let ephemeral = false;
    if (stateful) session = (await this.#session(req, entry)).session;
    else {
      if (!isRequest(msg)) {
        res.writeHead(202).end();
        return;
      }
      const pv = req.headers[VERSION_HEADER];
      try {
        session = (
          await McpSession.initialize(
            entry,
            { protocolVersion: typeof pv === "string" ? pv : undefined },
            this.#sessionOptions(),
          )
        ).session;
      } catch (e) {
        if (e instanceof RpcError) return sendJson(res, 200, errorResponse(msg.id, e.toObject()));
        throw e;
      }
      ephemeral = true;
    }
    try {
      if (isNotification(msg)) {
        await session.notify(msg.method, msg.params);
        res.writeHead(202).end();
        // The client is initialized: its targets are told once its 202 is written, so its wait does not include a
        // request to each target (and their answers on this process's event loop).
        if (msg.method === "notifications/initialized") setImmediate(() => session.release());
        return;
      }
      if (!isRequest(msg)) {
        const r = msg as JsonRpcResponse;
        if (r.id !== null) session.respond(r.id, r.result, r.error);
        res.writeHead(202).end();
        return;
      }
      const accept = String(req.headers["accept"] ?? "");
      if (STREAMED.has(msg.method) && accept.includes("text/event-stream")) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        const channel = new SseChannel(res);
        let answer: object;
        try {
          answer = { jsonrpc: "2.0", id: msg.id, result: await this.#guarded(entry, session, msg, channel, req) };
        } catch (e) {
          answer = errorResponse(msg.id, this.#rpcError(e));
        }
        channel.end(answer);
        return;
      }
      try {
        sendJson(res, 200, {
          jsonrpc: "2.0",
          id: msg.id,
          result: await this.#guarded(entry, session, msg, NO_CHANNEL, req),
        });
      } catch (e) {
        sendJson(res, 200, errorResponse(msg.id, this.#rpcError(e)));
      }
    } finally {
      if (ephemeral) await session.close(true);
    }
  }

  /** A request served with the guardrail processors that want its method around it (guardrails.ts). */
  async #guarded(
    entry: McpBackendEntry,
    session: McpSession,
    msg: JsonRpcRequest,
    channel: Channel,
    req: IncomingMessage,
  ): Promise<unknown> {
    const guards = entry.guardrails;
    // What the rules, processors and minted credentials read of the request; built only for them (per request cost).
    if (guards === undefined)
      return session.handle(msg, channel, readsRequest(entry) ? requestContext(req) : undefined);
    const ctx = requestContext(req);
    const log = this.#opts.log;
    let m = msg;
    if (guarded(guards, msg.method, "Request")) {
      const input = { backend: entry.backend, method: msg.method, id: msg.id, params: msg.params };
      const g = await runGuardrails(guards, "Request", input, ctx, log);
      m = { ...msg, ...(g.params !== undefined ? { params: g.params } : {}) };
    }
    if (!guarded(guards, msg.method, "Response")) return session.handle(m, channel, ctx);
    let result: unknown;
    let error: RpcError | undefined;
    try {
      result = await session.handle(m, channel, ctx);
    } catch (e) {
      if (!(e instanceof RpcError)) throw e;
      error = e;
    }
    const input = { backend: entry.backend, method: msg.method, id: msg.id, params: m.params };
    const g = await runGuardrails(
      guards,
      "Response",
      { ...input, ...(error !== undefined ? { error: error.toObject() } : { result }) },
      ctx,
      log,
    );
    if (error !== undefined) throw error;
    return g.result;
  }

  #rpcError(e: unknown): { code: number; message: string; data?: unknown } {
    if (e instanceof RpcError) return e.toObject();
    this.#opts.log(`sluice mcp: ${(e as Error).stack ?? String(e)}`);
    return { code: ErrorCodes.InternalError, message: `internal error: ${(e as Error).message}` };
  }

  async #get(req: IncomingMessage, res: ServerResponse, entry: McpBackendEntry): Promise<void> {
    if (entry.sessionRouting === "Stateless") {
      res.writeHead(405, { allow: "POST" }).end();
      return;
    }
    if (!String(req.headers["accept"] ?? "").includes("text/event-stream")) {
      throw httpError(406, ErrorCodes.InvalidRequest, "Not Acceptable: the GET stream needs Accept: text/event-stream");
    }
    const { session } = await this.#session(req, entry);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.flushHeaders();
    const channel = new SseChannel(res);
    session.attachStream(channel);
    const keepalive = setInterval(() => res.write(": keepalive\n\n"), KEEPALIVE_MS);
    res.once("close", () => {
      clearInterval(keepalive);
      session.detachStream(channel);
    });
  }

  async #delete(req: IncomingMessage, res: ServerResponse, entry: McpBackendEntry): Promise<void> {
    if (entry.sessionRouting === "Stateless") {
      res.writeHead(405, { allow: "POST" }).end();
      return;
    }
    const { session, id } = await this.#session(req, entry);
    this.#sessions.delete(id);
    this.#ended.add(id);
    if (this.#ended.size > 10_000) this.#ended.delete(this.#ended.values().next().value as string);
    await session.close(true);
    res.writeHead(200).end();
  }
}
