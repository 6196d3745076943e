// The HTTP call every remote guard makes: a JSON POST on a pooled connection, bounded by the guard's deadline, its
// failures turned into GuardErrors that name the guard, the host and the status, never a text or a credential (error
// bodies can echo either, so only their machine-readable code is kept).

import { createHash } from "node:crypto";
import type { Socket } from "node:net";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import { Agent, buildConnector, type Dispatcher, ProxyAgent, request } from "undici";
import { setTcpKeepalive } from "../../../../translate/keepalive.js";
import { GuardError } from "../types.js";
import type { GuardConnection, GuardKeyAuth } from "./config.js";

/** Answers are the texts sent back at most (masked) plus assessments; more than this is not a guard's answer. */
const MAX_ANSWER_BYTES = 16 << 20;

let shared: Agent | undefined;

/** One pool for all remote guards: keep-alive connections reused across checks (TLS handshakes are most of a call). */
export function sharedDispatcher(): Dispatcher {
  // HTTP/1.1 unless a guard's http.version says HTTP2 (undici would otherwise offer h2 too).
  shared ??= new Agent({
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 120_000,
    connections: 64,
    allowH2: false,
    connect: { allowH2: false },
  });
  return shared;
}

/** Pools of guards with their own connection settings, by settings: a new LLM table with the same ones reuses them. */
const pools = new Map<string, Dispatcher>();
/** Pools kept at most; the least recently made is closed past it (connection settings change rarely). */
const MAX_POOLS = 64;

/**
 * The pool of a guard's calls: the shared one, or one for its connection settings (TLS, TCP, HTTP/2, tunnel), as
 * Envoy would connect to a backend with those policies.
 */
export function dispatcherFor(c: GuardConnection | undefined, shared: Dispatcher): Dispatcher {
  if (c === undefined) return shared;
  const id = createHash("sha256").update(JSON.stringify(c)).digest("hex");
  const known = pools.get(id);
  if (known !== undefined) return known;
  const t = c.tls;
  const sans = t?.sans;
  const tls: buildConnector.BuildOptions = {
    ...(t?.ca !== undefined ? { ca: t.ca } : {}),
    ...(t?.clientCert !== undefined ? { cert: t.clientCert.chain, key: t.clientCert.key } : {}),
    ...(t?.sni !== undefined ? { servername: t.sni } : {}),
    ...(t?.curves !== undefined && t.curves.length > 0 ? { ecdhCurve: t.curves.join(":") } : {}),
    ...(t?.insecure === "All" ? { rejectUnauthorized: false } : {}),
    ...(t?.insecure === "Hostname"
      ? { checkServerIdentity: () => undefined }
      : sans !== undefined && sans.length > 0
        ? {
            checkServerIdentity: (_host: string, cert: PeerCertificate) =>
              sans.some((n) => checkServerIdentity(n, cert) === undefined)
                ? undefined
                : new Error(`the certificate names none of ${sans.join(", ")}`),
          }
        : {}),
    ...(c.http2 === true ? { allowH2: true, preferH2: true } : { allowH2: false }),
  };
  const tcp = {
    ...(c.connectTimeoutMs !== undefined ? { timeout: c.connectTimeoutMs } : {}),
    ...(c.keepAliveMs !== undefined ? { keepAlive: true, keepAliveInitialDelay: c.keepAliveMs } : {}),
  };
  const common = {
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 120_000,
    connections: 64,
    ...(c.http2 === true ? { allowH2: true, h2Options: { useH2c: true } } : { allowH2: false }),
  };
  const pool =
    c.tunnel === undefined
      ? new Agent({ ...common, connect: withKeepaliveProbes(buildConnector({ ...tls, ...tcp }), c) })
      : new ProxyAgent({
          ...common,
          uri: `http://${c.tunnel.address.includes(":") ? `[${c.tunnel.address}]` : c.tunnel.address}:${c.tunnel.port}`,
          // Every call through the proxy, plain HTTP too: the guard never reaches its service another way.
          proxyTunnel: true,
          requestTls: tls,
          proxyTls: tcp,
          ...(c.connectTimeoutMs !== undefined ? { connectTimeout: c.connectTimeoutMs } : {}),
        });
  pools.set(id, pool);
  if (pools.size > MAX_POOLS) {
    const [oldest, p] = pools.entries().next().value as [string, Dispatcher];
    pools.delete(oldest);
    void p.close();
  }
  return pool;
}

/** The caller's signal combined with the guard's bound. */
export function deadline(signal: AbortSignal, ms: number): AbortSignal {
  return AbortSignal.any([signal, AbortSignal.timeout(ms)]);
}

function aborted(guard: string, signal: AbortSignal, ms: number): GuardError {
  const r: unknown = signal.reason;
  return r instanceof DOMException && r.name === "TimeoutError"
    ? new GuardError(`${guard}: no answer within ${ms} ms`)
    : new GuardError(`${guard}: cancelled`);
}

/** `work` (a credential lookup ...), or a GuardError when the deadline passes first or it fails. */
export async function within<T>(
  guard: string,
  what: string,
  work: Promise<T>,
  signal: AbortSignal,
  ms: number,
): Promise<T> {
  if (signal.aborted) throw aborted(guard, signal, ms);
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    onAbort = () => reject(aborted(guard, signal, ms));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([work, stop]);
  } catch (e) {
    if (e instanceof GuardError) throw e;
    throw new GuardError(`${guard}: ${what}: ${(e as Error).message}`);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
  }
}

/** Writes a key where its location says (default `Authorization: Bearer`). */
export function applyKey(auth: GuardKeyAuth, headers: Record<string, string>, url: URL): void {
  const l = auth.location;
  if (l !== undefined && "queryParameter" in l) url.searchParams.set(l.queryParameter.name, auth.key);
  else if (l !== undefined && "cookie" in l) headers.cookie = `${l.cookie.name}=${auth.key}`;
  else {
    const h = l !== undefined && "header" in l ? l.header : { name: "authorization", prefix: "Bearer" };
    headers[h.name.toLowerCase()] = h.prefix !== undefined && h.prefix !== "" ? `${h.prefix} ${auth.key}` : auth.key;
  }
}

/** A base URL without its trailing slash, or why it cannot be one (reported by every check, never thrown on build). */
export function baseUrl(value: string): { readonly url: string } | { readonly error: string } {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    return { error: `endpoint ${JSON.stringify(value)} is not a URL` };
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    return { error: `endpoint must be http or https, not ${u.protocol}` };
  }
  if (u.search !== "" || u.hash !== "" || u.username !== "") {
    return { error: "endpoint must have no query, fragment or user info" };
  }
  return { url: value.replace(/\/+$/, "") };
}

export interface GuardCall {
  readonly guard: string;
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly signal: AbortSignal;
  readonly timeoutMs: number;
  readonly dispatcher: Dispatcher;
  /** The machine-readable error code of a non-2xx answer (`error.code`, an AWS error type ...), if any. */
  readonly errorCode: (status: number, headers: Record<string, string | string[] | undefined>, body: unknown) => string;
}

/** POSTs the JSON body and answers the parsed JSON object of a 2xx; anything else is a GuardError. */
export async function postJson(call: GuardCall): Promise<Record<string, unknown>> {
  const { guard, url, signal, timeoutMs } = call;
  let status: number;
  let headers: Record<string, string | string[] | undefined>;
  let text: string;
  try {
    const res = await request(url, {
      method: "POST",
      headers: call.headers,
      body: call.body,
      signal,
      dispatcher: call.dispatcher,
    });
    status = res.statusCode;
    headers = res.headers;
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of res.body as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > MAX_ANSWER_BYTES) {
        res.body.destroy();
        throw new GuardError(`${guard}: ${url.host} answered more than ${MAX_ANSWER_BYTES} bytes`);
      }
      chunks.push(c);
    }
    text = Buffer.concat(chunks).toString("utf8");
  } catch (e) {
    if (e instanceof GuardError) throw e;
    if (signal.aborted) throw aborted(guard, signal, timeoutMs);
    const err = e as Error & { code?: string; cause?: { code?: string } };
    throw new GuardError(`${guard}: ${url.host} unreachable: ${err.cause?.code ?? err.code ?? err.message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (status < 200 || status > 299) {
    const code = call.errorCode(status, headers, parsed);
    throw new GuardError(`${guard}: ${url.host} answered ${status}${code !== "" ? ` (${code})` : ""}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new GuardError(`${guard}: ${url.host} answered ${status} without a JSON object`);
  }
  return parsed as Record<string, unknown>;
}

/** An environment variable's value, unless unset or blank. */
export function envValue(v: string | undefined): string | undefined {
  return v !== undefined && v.trim() !== "" ? v.trim() : undefined;
}

export type Json = Record<string, unknown>;
export const isObj = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** `fn` over `items` with at most `limit` running at once, results in order; the first failure rejects. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * What every remote guard checks before a call: the config's problem and the endpoint (each a GuardError), then the
 * texts worth sending (empty ones never are) with their positions in the input; undefined when there is none.
 */
export function textsToSend(
  guard: string,
  problem: string | undefined,
  base: { readonly url: string } | { readonly error: string },
  texts: readonly string[],
): { readonly url: string; readonly positions: readonly number[]; readonly texts: readonly string[] } | undefined {
  if (problem !== undefined) throw new GuardError(`${guard}: ${problem}`);
  if ("error" in base) throw new GuardError(`${guard}: ${base.error}`);
  const positions: number[] = [];
  texts.forEach((t, i) => {
    if (t !== "") positions.push(i);
  });
  if (positions.length === 0) return undefined;
  return { url: base.url, positions, texts: positions.map((i) => texts[i] as string) };
}

/**
 * undici's connector, followed by the keepalive probes where the settings carry them (Node.js 26): its own
 * `keepAliveInitialDelay` sets the idle time only, and libuv the rest.
 */
function withKeepaliveProbes(connect: buildConnector.connector, c: GuardConnection): buildConnector.connector {
  const probes = c.keepAliveProbes;
  const time = c.keepAliveMs;
  if (probes === undefined || time === undefined) return connect;
  return (options, callback) =>
    connect(options, (err, socket) => {
      if (err === null && socket !== null) setTcpKeepalive(socket as Socket, time, probes);
      // biome-ignore lint/suspicious/noExplicitAny: undici's callback is typed as a union of two tuples
      (callback as (...a: any[]) => void)(err, socket);
    });
}
