// One target of a session, through the MCP SDK's own Client: on Sluice's Streamable HTTP transport (node:http with
// keep-alive agents, target-transport.ts), or the SDK's SSE transport for targets that still use SSE (sending through
// Sluice's requests, target-request.ts, so that both get the target's connection policies). The SDK keeps
// request ids, progress tokens and cancellation notices; Sluice only forwards what passes through it (docs/mcp.md says
// why the SDK).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage, McpError } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { z } from "zod";
import type { McpTargetConnection, McpTargetHealth } from "../translate/mcp/connection.js";
import { ErrorCodes, RpcError } from "./jsonrpc.js";
import { recordTarget, targetEvicted } from "./target-health.js";
import { targetFetch } from "./target-request.js";
import { TargetTransport } from "./target-transport.js";

/** Any result: Sluice forwards what the target answered without reading more of it than it rewrites. */
const AnyResult = z.looseObject({});

/**
 * One JSON Schema validator for every target client. The SDK's Client makes its own Ajv instance otherwise, about 1 ms
 * of CPU each (8 per new session over 8 targets, before the first initialize is sent); Sluice forwards tool results
 * without validating them against output schemas, so the instance is never used for more than construction anyway.
 */
const SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

/** Longest wait for a target's answer; the client's cancellation or Envoy's route timeout usually end it sooner. */
const REQUEST_TIMEOUT_MS = 10 * 60_000;
/** Longest wait for a target to answer the GET of its stream before the first call to it is sent anyway. */
const STREAM_WAIT_MS = 2_000;
/** Starting a target's session (initialize). */
const CONNECT_TIMEOUT_MS = 10_000;
/**
 * Longest a target's list stays cached (list caching, docs/mcp.md): a safety net, since it is dropped anyway at the
 * target's list_changed or when its GET stream (which carries that notification) closes.
 */
export const LIST_CACHE_MS = 5 * 60_000;

/** The capability whose `listChanged` a list method depends on, and the notification that says it changed. */
const LIST_KINDS: Readonly<Record<string, { capability: string; changed: string }>> = {
  "tools/list": { capability: "tools", changed: "notifications/tools/list_changed" },
  "prompts/list": { capability: "prompts", changed: "notifications/prompts/list_changed" },
  "resources/list": { capability: "resources", changed: "notifications/resources/list_changed" },
  "resources/templates/list": { capability: "resources", changed: "notifications/resources/list_changed" },
};

/** A request not sent: the target is evicted by its health policy (not itself a failure to score). */
class TargetEvicted extends Error {}

/** The health scored per request: a target's without an `unhealthyCondition` (with one, target-request.ts scores). */
const scoredByRequest = (h: McpTargetHealth | undefined) => (h?.condition === undefined ? h : undefined);

const isTimeout = (e: unknown) => e instanceof McpError && e.code === ErrorCode.RequestTimeout;

export interface TargetHooks {
  /** A request of the target to the client (sampling, elicitation, roots): its answer, or an RpcError. */
  onRequest(target: string, method: string, params: Record<string, unknown> | undefined): Promise<unknown>;
  onNotification(target: string, method: string, params: Record<string, unknown> | undefined): void;
  log(line: string): void;
  /** One request to the target: whether it was answered without an error, and how long it took. */
  observe?(target: string, method: string, ok: boolean, ms: number): void;
}

export interface ConnectOptions {
  readonly name: string;
  readonly url: string;
  readonly protocol: "StreamableHTTP" | "SSE";
  /** Resume this target session instead of starting one (Streamable HTTP only). */
  readonly sessionId?: string;
  readonly protocolVersion?: string;
  /** What the client declared at initialize, declared to the target in turn. */
  readonly capabilities?: Record<string, unknown>;
  readonly clientInfo?: { readonly name: string; readonly version: string };
  /** The target's connection policies (translate/mcp/connection.ts). */
  readonly connection?: McpTargetConnection;
}

/**
 * The SDK's Client, but notifications/initialized does not hold up connect(): it is held until `release()` (the
 * session releases it once the client's own notifications/initialized is answered, so the targets' notices are off the
 * client's wait), and every later request to the target releases it and waits for it to be accepted (`initialized`),
 * so the target still sees it before anything else. A new session over several targets
 * then costs one round trip to each on the way to the client's answer, not two.
 */
class TargetClient extends Client {
  initialized: Promise<void> = Promise.resolve();
  #release: (() => void) | undefined;

  override notification(...args: Parameters<Client["notification"]>): Promise<void> {
    if (args[0].method !== "notifications/initialized") return super.notification(...args);
    const held = new Promise<void>((resolve) => {
      this.#release = resolve;
    });
    this.initialized = held.then(() => super.notification(...args));
    // Its failure is the failure of the first request that waits for it.
    this.initialized.catch(() => {});
    return Promise.resolve();
  }

  /** Sends the held notifications/initialized (once; nothing if none is held). */
  release(): void {
    this.#release?.();
    this.#release = undefined;
  }
}

export class TargetConnection {
  readonly name: string;
  readonly url: string;
  readonly protocol: "StreamableHTTP" | "SSE";
  readonly #client: TargetClient;
  readonly #transport: Transport & { sessionId?: string | undefined };
  readonly #observe: TargetHooks["observe"];
  /** `http.requestTimeout` of the target: a request not answered in time fails alone (the target is not failed). */
  readonly #requestTimeoutMs: number | undefined;
  /** `health` of the target: none is sent while it is evicted. */
  readonly #health: McpTargetHealth | undefined;
  /**
   * Where each request's outcome is scored: here without an `unhealthyCondition` (`#byRequest`); with one, at the HTTP
   * layer (target-request.ts), and here only an initialize that timed out (connect) and an SSE-protocol target's
   * request left unanswered in time (`#unanswered`: its answer was to come on the GET stream, not in an HTTP answer).
   */
  readonly #byRequest: McpTargetHealth | undefined;
  readonly #unanswered: McpTargetHealth | undefined;
  /** Set once the target failed (a transport error, a refused request): FailOpen skips it. */
  failure: string | undefined;
  closed = false;
  #stream: Promise<void> | undefined;
  /** First pages of lists, by method, while the target says they are unchanged (`listCached`). */
  readonly #lists = new Map<string, { result: Record<string, unknown>; epoch: number; at: number }>();
  /** Bumped by each list_changed: an answer asked for before one is not cached. */
  #listGeneration = 0;
  /** Requests sent past the SDK's Protocol (`#send`), by id: how each is settled. */
  readonly #direct = new Map<string, (answer: JSONRPCMessage | Error) => void>();
  #directId = 0;

  private constructor(
    o: ConnectOptions,
    client: TargetClient,
    transport: Transport & { sessionId?: string | undefined },
    observe: TargetHooks["observe"],
  ) {
    this.#observe = observe;
    this.#requestTimeoutMs = o.connection?.requestTimeoutMs;
    this.#health = o.connection?.health;
    this.#byRequest = scoredByRequest(this.#health);
    this.#unanswered = this.#byRequest === undefined && o.protocol === "SSE" ? this.#health : undefined;
    this.name = o.name;
    this.url = o.url;
    this.protocol = o.protocol;
    this.#client = client;
    this.#transport = transport;
  }

  static async connect(o: ConnectOptions, hooks: TargetHooks): Promise<TargetConnection> {
    // An evicted target is not contacted: the session counts it as a target that failed to start.
    const evicted = targetEvicted(o.connection?.health);
    if (evicted !== undefined) throw new Error(evicted);
    const url = new URL(o.url);
    const transport =
      o.protocol === "SSE"
        ? // The SDK's SSE transport, sending through Sluice's requests: the target's connection policies apply.
          new SSEClientTransport(url, { fetch: targetFetch(o.connection) })
        : new TargetTransport(url, {
            ...(o.sessionId !== undefined ? { sessionId: o.sessionId } : {}),
            ...(o.connection !== undefined ? { connection: o.connection } : {}),
            // A target that went away is not waited for long: FailOpen skips it, FailClosed fails the session.
            reconnect: { initialDelayMs: 500, maxDelayMs: 5000, growFactor: 2, maxRetries: 3 },
          });
    const client = new TargetClient(
      { name: o.clientInfo?.name ?? "sluice", version: o.clientInfo?.version ?? "0" },
      { capabilities: (o.capabilities ?? {}) as never, jsonSchemaValidator: SCHEMA_VALIDATOR },
    );
    const conn = new TargetConnection(o, client, transport, hooks.observe);
    client.fallbackRequestHandler = async (req) => {
      try {
        return (await hooks.onRequest(o.name, req.method, req.params as Record<string, unknown> | undefined)) as never;
      } catch (e) {
        if (e instanceof RpcError) throw new McpError(e.code, e.message, e.data);
        throw e;
      }
    };
    client.fallbackNotificationHandler = async (n) => {
      for (const [method, k] of Object.entries(LIST_KINDS)) if (k.changed === n.method) conn.#lists.delete(method);
      if (n.method.endsWith("/list_changed")) conn.#listGeneration++;
      hooks.onNotification(o.name, n.method, n.params as Record<string, unknown> | undefined);
    };
    client.onerror = (e) => {
      hooks.log(`sluice mcp: target ${o.name} (${o.url}): ${e.message}`);
    };
    client.onclose = () => {
      conn.closed = true;
    };
    try {
      await client.connect(transport, {
        timeout: Math.min(CONNECT_TIMEOUT_MS, o.connection?.requestTimeoutMs ?? Infinity),
      });
    } catch (e) {
      // With a condition, a timed-out initialize is the one outcome recorded here: the SDK closes the transport at
      // its deadline, which cancels the request before the HTTP layer's own deadline counts it (target-request.ts).
      recordTarget(conn.#byRequest ?? (isTimeout(e) ? conn.#health : undefined), false);
      throw e;
    }
    // A resumed Streamable HTTP session sent nothing yet: nothing to score.
    if (o.sessionId === undefined || o.protocol === "SSE") recordTarget(conn.#byRequest, true);
    if (o.sessionId !== undefined && o.protocolVersion !== undefined) {
      (transport as TargetTransport).setProtocolVersion(o.protocolVersion);
    }
    if (o.protocol === "StreamableHTTP") conn.#interceptAnswers();
    return conn;
  }

  get sessionId(): string | undefined {
    return this.protocol === "SSE" ? undefined : this.#transport.sessionId;
  }

  get protocolVersion(): string | undefined {
    return this.protocol === "SSE" ? undefined : (this.#transport as TargetTransport).protocolVersion;
  }

  /** The target's capabilities; undefined for a resumed session (no initialize on this replica). */
  get capabilities(): Record<string, unknown> | undefined {
    return this.#client.getServerCapabilities() as Record<string, unknown> | undefined;
  }

  get instructions(): string | undefined {
    return this.#client.getInstructions();
  }

  /**
   * Opens the target's GET stream (once), for what the target sends outside the answer to a request: list_changed,
   * resource updates, logging, and its own requests, which a target may send there even while serving a call. Opened
   * when the client opens its own GET stream or when a call is first forwarded to the target (docs/mcp.md).
   */
  openStream(): Promise<void> {
    if (this.protocol !== "StreamableHTTP") return Promise.resolve();
    const transport = this.#transport as TargetTransport;
    if (this.#stream === undefined) {
      this.#client.release();
      const opened = this.#client.initialized.then(
        () => (this.closed ? undefined : transport.openStream()),
        () => {},
      );
      // A target that holds back the head of its GET answer does not hold up the calls waiting for it for long.
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, STREAM_WAIT_MS).unref();
      });
      this.#stream = Promise.race([opened, late]).finally(() => clearTimeout(timer));
    }
    return this.#stream;
  }

  /**
   * Answers to `#send`'s requests are taken from the transport before the SDK's Protocol sees them (it would not know
   * their ids); everything else goes on to it. A closed transport fails them as the SDK fails its own.
   */
  #interceptAnswers(): void {
    const t = this.#transport;
    const sdkMessage = t.onmessage;
    const sdkClose = t.onclose;
    t.onmessage = (m, extra) => {
      const id = (m as { id?: unknown }).id;
      const settle = typeof id === "string" && !("method" in m) ? this.#direct.get(id) : undefined;
      if (settle !== undefined) settle(m);
      else sdkMessage?.(m, extra);
    };
    t.onclose = () => {
      sdkClose?.();
      const closed = new McpError(ErrorCode.ConnectionClosed, "Connection closed");
      for (const settle of [...this.#direct.values()]) settle(closed);
    };
  }

  /**
   * A request without progress, sent straight through the transport: the SDK's Protocol adds, per request, zod checks
   * of each message and handler maps, which Sluice does not need to forward an answer (in a profile of the call path,
   * about 0.2 ms of CPU per call on the loaded development host). Timeout and cancellation as the SDK does them:
   * `notifications/cancelled` to the target, the same errors. Requests with progress keep the SDK's path.
   */
  #send(
    method: string,
    params: Record<string, unknown> | undefined,
    signal: AbortSignal | undefined,
    timeoutMs: number,
  ) {
    const id = `sluice-r${++this.#directId}`;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const cancel = (reason: string) => {
        this.#transport
          .send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: id, reason } })
          .catch(() => {});
      };
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        this.#direct.delete(id);
      };
      const onAbort = () => {
        done();
        cancel(String(signal?.reason ?? "cancelled"));
        reject(signal?.reason instanceof Error ? signal.reason : new Error(String(signal?.reason ?? "cancelled")));
      };
      const timer = setTimeout(() => {
        done();
        cancel("Request timed out");
        reject(new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout: timeoutMs }));
      }, timeoutMs);
      this.#direct.set(id, (answer) => {
        done();
        if (answer instanceof Error) reject(answer);
        else if ("error" in answer) reject(new McpError(answer.error.code, answer.error.message, answer.error.data));
        else if ("result" in answer) resolve(answer.result as Record<string, unknown>);
        else reject(new Error("the target answered with neither result nor error"));
      });
      if (signal?.aborted === true) {
        onAbort();
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#transport
        .send({ jsonrpc: "2.0", id, method, ...(params !== undefined ? { params } : {}) } as JSONRPCMessage)
        .catch((e: unknown) => {
          done();
          reject(e);
        });
    });
  }

  /**
   * The first page of a list, from the cache while it holds: the target declared `listChanged` for it, its GET stream
   * (which carries list_changed) has stayed open since the page was fetched, and it is younger than LIST_CACHE_MS.
   * Otherwise asked of the target, and cached under the same conditions.
   */
  async list(method: string): Promise<Record<string, unknown>> {
    const kind = LIST_KINDS[method];
    const caps = this.capabilities?.[kind?.capability ?? ""];
    const cacheable =
      kind !== undefined &&
      typeof caps === "object" &&
      caps !== null &&
      (caps as { listChanged?: unknown }).listChanged === true;
    const epoch = () => (this.#transport as TargetTransport).streamEpoch;
    if (cacheable) {
      const hit = this.#lists.get(method);
      if (hit !== undefined && hit.epoch === epoch() && Date.now() - hit.at < LIST_CACHE_MS) return hit.result;
    }
    const generation = this.#listGeneration;
    const before = cacheable ? epoch() : undefined;
    const result = await this.request(method, undefined);
    if (before !== undefined && before === epoch() && generation === this.#listGeneration) {
      this.#lists.set(method, { result, epoch: before, at: Date.now() });
    }
    return result;
  }

  /**
   * Forwards a request. `onProgress`: the target's progress notices for it (the SDK gives the target its own token);
   * `signal`: the client cancelled (the SDK tells the target with notifications/cancelled).
   */
  async request(
    method: string,
    params: Record<string, unknown> | undefined,
    opts: { signal?: AbortSignal; onProgress?: (p: Record<string, unknown>) => void } = {},
  ): Promise<Record<string, unknown>> {
    // The client's progress token is the client's: the target gets the SDK's, and progress comes back through it.
    let sent = params;
    if (params !== undefined && typeof params["_meta"] === "object" && params["_meta"] !== null) {
      const { progressToken: _, ...meta } = params["_meta"] as Record<string, unknown>;
      sent = { ...params, _meta: meta };
      if (Object.keys(meta).length === 0) {
        const { _meta: __, ...rest } = params;
        sent = rest;
      }
    }
    const started = performance.now();
    let ok = false;
    const health = this.#byRequest;
    try {
      const evicted = targetEvicted(this.#health);
      if (evicted !== undefined) throw new TargetEvicted(evicted);
      this.#client.release();
      await this.#client.initialized;
      const result =
        opts.onProgress === undefined && this.protocol === "StreamableHTTP"
          ? await this.#send(method, sent, opts.signal, this.#requestTimeoutMs ?? REQUEST_TIMEOUT_MS)
          : await this.#client.request(
              { method, ...(sent !== undefined ? { params: sent } : {}) } as never,
              AnyResult,
              {
                ...(this.#requestTimeoutMs !== undefined
                  ? { timeout: this.#requestTimeoutMs, maxTotalTimeout: this.#requestTimeoutMs }
                  : { timeout: REQUEST_TIMEOUT_MS, resetTimeoutOnProgress: true }),
                ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
                ...(opts.onProgress !== undefined
                  ? { onprogress: (p) => opts.onProgress?.(p as unknown as Record<string, unknown>) }
                  : {}),
              },
            );
      ok = true;
      recordTarget(health, true);
      return result;
    } catch (e) {
      if (e instanceof McpError && e.code === -32001 && this.#requestTimeoutMs !== undefined) {
        // The policy's deadline (the SDK told the target with notifications/cancelled): this request fails alone.
        recordTarget(health ?? this.#unanswered, false);
        throw new RpcError(
          ErrorCodes.ServerError,
          `target ${this.name} did not answer ${method} within ${this.#requestTimeoutMs} ms (http.requestTimeout)`,
        );
      }
      if (e instanceof McpError && e.code !== -32001) {
        // The target answered with an error: the client gets it as it is.
        recordTarget(health, true);
        throw new RpcError(e.code, e.message.replace(/^MCP error -?\d+: /, ""), e.data);
      }
      if (opts.signal?.aborted === true) throw new RpcError(ErrorCodes.InternalError, "cancelled");
      if (!(e instanceof TargetEvicted)) recordTarget(health ?? (isTimeout(e) ? this.#unanswered : undefined), false);
      this.failure = (e as Error).message;
      throw new RpcError(ErrorCodes.ServerError, `target ${this.name} failed: ${(e as Error).message}`);
    } finally {
      this.#observe?.(this.name, method, ok, performance.now() - started);
    }
  }

  async notify(method: string, params?: Record<string, unknown>): Promise<void> {
    this.#client.release();
    await this.#client.initialized;
    await this.#client.notification({ method, ...(params !== undefined ? { params } : {}) } as never);
  }

  /** Ends the target's session (DELETE) and the connection. */
  async terminate(): Promise<void> {
    if (this.protocol === "StreamableHTTP") {
      this.#client.release();
      await this.#client.initialized.catch(() => {});
      await (this.#transport as TargetTransport).terminateSession().catch(() => {});
    }
    await this.close();
  }

  /**
   * Sends the target's notifications/initialized if it is still held (a new session: its client has the answer to
   * initialize now). Requests to the target release it themselves; this sends it without waiting for one.
   */
  release(): void {
    this.#client.release();
  }

  /**
   * A spare session adopted by a client (spare-pool.ts): its held notifications/initialized is sent now and its answer
   * awaited, which also proves the target and its session are still there (a dead target refuses the connection, one
   * that lost the session answers 404). Rejects with why, within `timeoutMs`.
   */
  async confirm(timeoutMs: number): Promise<void> {
    if (this.closed || this.failure !== undefined) throw new Error(this.failure ?? "the connection closed");
    this.#client.release();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer to notifications/initialized in ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      await Promise.race([this.#client.initialized, late]);
    } finally {
      clearTimeout(timer);
    }
    if (this.closed) throw new Error("the connection closed");
  }

  /**
   * Ends a spare session no client adopted: DELETE without its held notifications/initialized (the target never saw
   * a client in it), then the connection.
   */
  async discard(): Promise<void> {
    if (this.protocol === "StreamableHTTP") {
      await (this.#transport as TargetTransport).terminateSession().catch(() => {});
    }
    await this.close();
  }

  /** Closes the connection, leaving the target's session for another replica to resume. */
  async close(): Promise<void> {
    this.closed = true;
    await this.#client.close().catch(() => {});
  }
}
