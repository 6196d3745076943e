// The request a piece of work belongs to, kept across callbacks and awaits (AsyncLocalStorage): log lines written
// meanwhile carry its trace id (from the `traceparent` Envoy sent with its ext_authz / ext_proc call) or an id Sluice
// gives it, and the hooks that count and trace a request find its span here. The wrappers below set it around the
// handlers of Sluice's HTTP/2 server, so the services' own code needs no change to take part.

import { AsyncLocalStorage } from "node:async_hooks";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Span } from "@opentelemetry/api";
import type { Http1Handler } from "../grpc/http1.js";
import type { BidiCall, BidiHandler, UnaryHandler } from "../grpc/unary-server.js";
import { startChildSpan } from "./trace.js";

export interface RequestContext {
  readonly requestId: string;
  /** Envoy's `traceparent` header, as sent. */
  readonly traceparent: string | undefined;
  /** Sluice's span for this request, when tracing is on and Envoy traces the request. */
  span: Span | undefined;
}

const storage = new AsyncLocalStorage<RequestContext>();
let sequence = 0;
const prefix = `${process.pid.toString(36)}-`;

export function currentRequest(): (RequestContext & { traceId?: string; spanId?: string }) | undefined {
  const r = storage.getStore();
  if (r === undefined) return undefined;
  const ids = traceIds(r.traceparent);
  return ids === undefined ? r : { ...r, ...ids };
}

/** The span of the request being handled, if any: what the per-request hooks need, without reading the ids. */
export function currentSpan(): Span | undefined {
  return storage.getStore()?.span;
}

/** The trace and parent span ids of a W3C `traceparent` (version 00), or undefined for anything else. */
export function traceIds(traceparent: string | undefined): { traceId: string; spanId: string } | undefined {
  if (traceparent === undefined) return undefined;
  const m = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(traceparent.trim());
  if (m === null || /^0+$/.test(m[1] as string)) return undefined;
  return { traceId: m[1] as string, spanId: m[2] as string };
}

function contextOf(name: string, traceparent: string | undefined): RequestContext {
  return { requestId: prefix + (++sequence).toString(36), traceparent, span: startChildSpan(name, traceparent) };
}

/** A unary handler run in a request context of its own, its span ended when it answers. */
export function withRequestContext(name: string, handler: UnaryHandler): UnaryHandler {
  return (bytes, headers) => {
    const ctx = contextOf(name, headers["traceparent"]);
    const out = storage.run(ctx, () => handler(bytes, headers));
    if (ctx.span === undefined) return out;
    const span = ctx.span;
    return out.finally(() => span.end());
  };
}

/** An HTTP/1.1 handler (Envoy's HTTP ext_authz check) run in a request context of its own; it answers synchronously. */
export function withHttp1Context(name: string, handler: Http1Handler): Http1Handler {
  return (req) => {
    let traceparent: string | undefined;
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      if (raw[i]?.toLowerCase() === "traceparent") {
        traceparent = raw[i + 1];
        break;
      }
    }
    const ctx = contextOf(name, traceparent);
    try {
      return storage.run(ctx, () => handler(req));
    } finally {
      ctx.span?.end();
    }
  };
}

/**
 * A bidirectional handler run in a request context of its own: the listeners it registers run in that context too
 * (events come from the connection's socket, outside it otherwise). Its span ends when the call ends either way.
 */
export function withStreamContext(name: string, handler: BidiHandler): BidiHandler {
  return (call) => {
    const ctx = contextOf(name, call.headers["traceparent"]);
    const span = ctx.span;
    const wrapped: BidiCall = {
      headers: call.headers,
      on: ((event: "data" | "end" | "error", fn: (arg: never) => void) => {
        if (event === "error" && span !== undefined) {
          call.on("error", (e: Error) => {
            span.recordException(e);
            span.end();
          });
        }
        // storage.run rather than AsyncResource.bind: bind defines accessor properties on each bound function, which
        // made a request context cost about 50 µs of CPU and garbage per LLM request (bench/observability-llm.ts).
        const f = fn as (m: Uint8Array) => void;
        call.on(event as "data", (m: Uint8Array) => storage.run(ctx, f, m));
      }) as BidiCall["on"],
      write: (m) => call.write(m),
      end: () => {
        span?.end();
        call.end();
      },
    };
    storage.run(ctx, () => handler(wrapped));
  };
}

/**
 * A node:http request handler (the MCP service's) run in a request context of its own while `wanted()` says so; its
 * span ends when the response does.
 */
export function withIncomingContext(
  name: string,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  wanted: () => boolean,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (!wanted()) {
      handler(req, res);
      return;
    }
    const tp = req.headers["traceparent"];
    const ctx = contextOf(name, typeof tp === "string" ? tp : undefined);
    const span = ctx.span;
    if (span !== undefined) res.once("close", () => span.end());
    storage.run(ctx, () => handler(req, res));
  };
}
