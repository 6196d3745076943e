// The Streamable HTTP client side towards one target, on node:http / node:https with keep-alive agents (or node:http2
// for `http.version: HTTP2`; target-request.ts), in place of the SDK's transport (which runs on fetch). Profiled under bench/mcp, fetch and the web streams under it were the
// largest part of Sluice's CPU per request; a plain request on a pooled socket, its JSON read whole and its SSE read
// by the project's own decoder, costs a fraction. The SDK's Client still runs on top (request ids, timeouts,
// progress, cancellation): this is only the `Transport` it sends through.
//
// What it keeps of the SDK transport: the session id the target issues on initialize and sends back on every request,
// the negotiated protocol version header, JSON or SSE answers to a POST, a POST's SSE answer resumed with a GET and
// Last-Event-ID when the target closed it after an event id and before the answer, the GET stream for the target's
// own messages with bounded reconnection, DELETE to end the session (405 taken as "not supported"), and its error
// messages (`Error POSTing to endpoint: ...`). What it does not: the GET stream is not opened after
// notifications/initialized; the session opens it (`openStream`) when the client opens its own or at the first call
// forwarded to the target (docs/mcp.md, "Target streams").

import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { SseParser } from "../llm/codec/sse.js";
import type { McpTargetConnection } from "../translate/mcp/connection.js";
import { type TargetResponse, targetRequest } from "./target-request.js";

export { MAX_SOCKETS_PER_TARGET } from "./target-connection.js";

export interface ReconnectOptions {
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
  readonly growFactor: number;
  readonly maxRetries: number;
}

export interface TargetTransportOptions {
  /** Resume this target session (its id) instead of starting one. */
  readonly sessionId?: string;
  readonly reconnect: ReconnectOptions;
  /** Headers sent with every request (after Sluice's own, which they cannot replace). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The target's connection policies (TLS, credential, timeouts, proxy); absent: plain defaults. */
  readonly connection?: McpTargetConnection;
}

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function mediaType(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

function readAll(res: TargetResponse): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.once("error", reject);
    res.once("aborted", () => reject(new Error("the target closed the connection mid-answer")));
    res.once("close", () => {
      if (!res.complete) reject(new Error("the target closed the connection mid-answer"));
    });
  });
}

/**
 * Reads a response to its end, unread. Awaited before the next request is sent: the socket goes back to the agent's
 * pool only at the end, so a request sent before it would open a new connection.
 */
function drain(res: TargetResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.readableEnded) {
      resolve();
      return;
    }
    res.once("end", resolve);
    res.once("close", resolve);
    res.once("error", () => resolve());
    res.resume();
  });
}

function isMessage(v: unknown): v is JSONRPCMessage {
  return typeof v === "object" && v !== null && !Array.isArray(v) && (v as { jsonrpc?: unknown }).jsonrpc === "2.0";
}

export class TargetTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  sessionId?: string | undefined;
  #protocolVersion: string | undefined;
  readonly #url: URL;
  readonly #opts: TargetTransportOptions;
  /** Requests and streams in progress (how to cancel each): cancelled on close. */
  readonly #active = new Set<(e: Error) => void>();
  #reconnectTimer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Whether the GET stream is open, and a count of its openings and closings (what it carried may have been lost). */
  #streamOpen = false;
  #streamEpoch = 0;

  constructor(url: URL, opts: TargetTransportOptions) {
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`unsupported target URL ${url.href}`);
    this.#url = url;
    this.#opts = opts;
    if (opts.sessionId !== undefined) this.sessionId = opts.sessionId;
  }

  async start(): Promise<void> {}

  setProtocolVersion(version: string): void {
    this.#protocolVersion = version;
  }

  get protocolVersion(): string | undefined {
    return this.#protocolVersion;
  }

  /**
   * While the GET stream is open, a number that changes whenever it opens or closes: what the target sent on its own
   * (list_changed) has reached Sluice since the number was read if it is still the same. Undefined while not open.
   */
  get streamEpoch(): number | undefined {
    return this.#streamOpen ? this.#streamEpoch : undefined;
  }

  #headers(extra: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...this.#opts.headers, ...extra };
    if (this.sessionId !== undefined) h["mcp-session-id"] = this.sessionId;
    if (this.#protocolVersion !== undefined) h["mcp-protocol-version"] = this.#protocolVersion;
    return h;
  }

  /** One request under the target's connection policies (target-request.ts); cancelled when the transport closes. */
  #request(method: string, headers: Record<string, string>, body: string | undefined, stream: boolean) {
    return targetRequest(this.#url, this.#opts.connection, {
      method,
      headers,
      ...(body !== undefined ? { body } : {}),
      stream,
      track: (cancel) => {
        if (this.#closed) {
          cancel(new Error("the connection to the target is closed"));
          return () => {};
        }
        this.#active.add(cancel);
        return () => this.#active.delete(cancel);
      },
    });
  }

  async send(message: JSONRPCMessage | JSONRPCMessage[], options?: TransportSendOptions): Promise<void> {
    try {
      if (options?.resumptionToken !== undefined) {
        const id = "id" in message && "method" in message ? message.id : undefined;
        this.#openStream(options.resumptionToken, id, 0).catch((e: unknown) => this.onerror?.(e as Error));
        return;
      }
      const res = await this.#request(
        "POST",
        this.#headers({ "content-type": "application/json", accept: "application/json, text/event-stream" }),
        JSON.stringify(message),
        false,
      );
      const sid = res.headers["mcp-session-id"];
      if (typeof sid === "string" && sid !== "") this.sessionId = sid;
      const status = res.statusCode ?? 0;
      if (status < 200 || status > 299) {
        const text = await readAll(res).catch(() => "");
        throw new HttpError(status, `Error POSTing to endpoint: ${text}`);
      }
      const messages = Array.isArray(message) ? message : [message];
      const hasRequests = messages.some((m) => "method" in m && "id" in m && m.id !== undefined);
      if (status === 202 || !hasRequests) {
        await drain(res);
        return;
      }
      const type = mediaType(res.headers["content-type"]);
      if (type === "text/event-stream") {
        this.#readStream(res, false, undefined);
      } else if (type === "application/json") {
        const data: unknown = JSON.parse(await readAll(res));
        for (const m of Array.isArray(data) ? data : [data]) {
          if (isMessage(m)) this.onmessage?.(m);
          else this.onerror?.(new Error("the target answered with something that is not a JSON-RPC message"));
        }
      } else {
        res.resume();
        throw new HttpError(-1, `Unexpected content type: ${res.headers["content-type"]}`);
      }
    } catch (e) {
      this.onerror?.(e as Error);
      throw e;
    }
  }

  /**
   * Opens the target's GET stream (its messages not tied to a request); quiet if the target offers none (405).
   * Resolves once the target answered it (the stream is then there for what it sends), never rejects.
   */
  openStream(): Promise<void> {
    return this.#openStream(undefined, undefined, 0).catch((e: unknown) => this.onerror?.(e as Error));
  }

  async #openStream(lastEventId: string | undefined, replayId: unknown, attempt: number): Promise<void> {
    if (this.#closed) return;
    const headers = this.#headers({ accept: "text/event-stream" });
    if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
    let res: TargetResponse;
    try {
      res = await this.#request("GET", headers, undefined, true);
    } catch (e) {
      if (this.#closed) return;
      this.#reconnect(lastEventId, replayId, attempt, `Failed to open SSE stream: ${(e as Error).message}`);
      return;
    }
    const status = res.statusCode ?? 0;
    if (status === 405) {
      res.resume();
      return;
    }
    if (status < 200 || status > 299) {
      res.resume();
      throw new HttpError(status, `Failed to open SSE stream: ${res.statusMessage ?? status}`);
    }
    if (replayId === undefined) {
      this.#streamOpen = true;
      this.#streamEpoch++;
    }
    this.#readStream(res, true, replayId, lastEventId);
  }

  #reconnect(lastEventId: string | undefined, replayId: unknown, attempt: number, why: string): void {
    const r = this.#opts.reconnect;
    if (attempt >= r.maxRetries) {
      this.onerror?.(new Error(`${why}; maximum reconnection attempts (${r.maxRetries}) exceeded.`));
      return;
    }
    const delay = Math.min(r.initialDelayMs * r.growFactor ** attempt, r.maxDelayMs);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.#openStream(lastEventId, replayId, attempt + 1).catch((e: unknown) => this.onerror?.(e as Error));
    }, delay);
  }

  /**
   * Reads an SSE stream: a GET stream (`reconnectable`) is opened again when it ends; a POST's answer is taken up
   * again with a GET only if the target gave an event id and closed the stream before the answer.
   */
  #readStream(res: TargetResponse, reconnectable: boolean, replayId: unknown, lastId?: string): void {
    const parser = new SseParser();
    let lastEventId = lastId;
    let primed = false;
    let answered = false;
    let ended = false;
    let dispatch = Promise.resolve();
    const deliver = (events: ReturnType<SseParser["push"]>): void => {
      for (const ev of events) {
        if (ev.id !== undefined && ev.id !== "") {
          lastEventId = ev.id;
          primed = true;
        }
        if (ev.data === "" || (ev.event !== undefined && ev.event !== "message")) continue;
        let m: unknown;
        try {
          m = JSON.parse(ev.data);
        } catch (e) {
          this.onerror?.(e as Error);
          continue;
        }
        if (!isMessage(m)) {
          this.onerror?.(new Error("the target sent an SSE event that is not a JSON-RPC message"));
          continue;
        }
        if ("id" in m && !("method" in m)) {
          answered = true;
          if (replayId !== undefined) (m as { id: unknown }).id = replayId;
        }
        // One message per microtask, as a web stream reader hands them out: the SDK handles a notification in a
        // microtask of its own and an answer at once, so a progress notice followed by the answer in one chunk would
        // otherwise find its request already answered (and be dropped).
        const msg = m;
        dispatch = dispatch.then(() => {
          try {
            this.onmessage?.(msg);
          } catch (e) {
            this.onerror?.(e as Error);
          }
        });
      }
    };
    const finish = (error: string | undefined): void => {
      if (ended) return;
      ended = true;
      if (reconnectable && replayId === undefined) {
        this.#streamOpen = false;
        this.#streamEpoch++;
      }
      if (error === undefined) deliver(parser.end());
      if (this.#closed) return;
      if (error !== undefined) this.onerror?.(new Error(`SSE stream disconnected: ${error}`));
      if ((reconnectable || primed) && !answered) {
        this.#reconnect(lastEventId, replayId, 0, error ?? "the SSE stream ended");
      }
    };
    res.on("data", (chunk: Buffer) => {
      deliver(parser.push(chunk));
      // An event past the parser's bound: the stream is dropped as a cut one (no unbounded memory for a target).
      if (parser.overflow !== undefined && !ended) {
        finish(`the target sent ${parser.overflow}`);
        res.destroy();
      }
    });
    res.once("end", () => finish(undefined));
    res.once("aborted", () => finish("aborted"));
    res.once("error", (e) => finish(e.message));
    res.once("close", () => finish(res.complete ? undefined : "closed"));
  }

  /** Ends the target's session (DELETE); a target that does not let clients end sessions answers 405. */
  async terminateSession(): Promise<void> {
    if (this.sessionId === undefined) return;
    try {
      const res = await this.#request("DELETE", this.#headers({}), undefined, false);
      await drain(res);
      const status = res.statusCode ?? 0;
      if ((status < 200 || status > 299) && status !== 405) {
        throw new HttpError(status, `Failed to terminate session: ${res.statusMessage ?? status}`);
      }
      this.sessionId = undefined;
    } catch (e) {
      this.onerror?.(e as Error);
      throw e;
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#reconnectTimer !== undefined) clearTimeout(this.#reconnectTimer);
    for (const cancel of [...this.#active]) cancel(new Error("the connection to the target is closed"));
    this.#active.clear();
    this.onclose?.();
  }
}
