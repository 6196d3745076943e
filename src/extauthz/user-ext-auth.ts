// A user's `extAuth` fronted by Sluice, for what Envoy's ext_authz lacks: a decision `cache`, CEL in the call (HTTP
// path, added headers, body; gRPC metadata), a `redirect` for denials, and `responseMetadata`. For such a route Envoy's
// ext_authz filter calls Sluice (policy-table entry named by `sluice.policy`), and Sluice answers from the cache or
// calls the user's service (gRPC: the CheckRequest with the user's context extensions; HTTP: the request Envoy's HTTP
// ext_authz would send, with the CEL applied) and caches its decision, allow or deny, for the ttl.
//
// - What the service tells later steps is `extauthz` in their CEL: the gRPC service's dynamic metadata, or the
//   evaluated responseMetadata of an HTTP answer. Sluice returns it as dynamic metadata of the ext_authz namespace
//   under EXTAUTHZ_METADATA_KEY, where Sluice's authorization check reads it (server.ts).
//
// - The key comes from the request's CEL activation; a key that fails to evaluate means "call, don't cache" (spec).
//   The ttl may read `extauthz`: the service's dynamic metadata (gRPC). A failing ttl also means "don't cache".
// - A service that fails (connection error, deadline, non-OK gRPC status, HTTP 5xx) is never cached: FailClosed
//   answers 403, FailOpen allows (Envoy's own failure_mode_allow semantics).
// - Concurrent misses for one key share one call to the service.
// - The cache and its in-flight calls belong to the entry's `state`, carried across translations to the new entry of
//   the same `scope` (everything the decision depends on except the service's endpoints), so a config update or an
//   endpoint change does not empty it.

import {
  type ClientRequest,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from "node:http";
import { request as httpsRequest } from "node:https";
import { clone, create, fromBinary, type JsonObject, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import type { CelActivation } from "../cel/index.js";
import { JWT_METADATA_NAMESPACE } from "../cel/rbac.js";
import {
  HeaderValueOption_HeaderAppendAction,
  type HeaderValueOptionSchema,
} from "../gen/envoy/config/core/v3/base_pb.js";
import type { AttributeContext_HttpRequest } from "../gen/envoy/service/auth/v3/attribute_context_pb.js";
import {
  Authorization,
  type CheckRequest,
  CheckRequestSchema,
  type CheckResponse,
  CheckResponseSchema,
} from "../gen/envoy/service/auth/v3/external_auth_pb.js";
import { targetKey, UnaryGrpcClient, type UnaryTarget } from "../grpc/unary-client.js";
import { HttpsAgents } from "../security/backend-tls.js";
import type { DecisionCache } from "./decision-cache.js";
import {
  type CompiledUserExtAuth,
  evalBody,
  evalHeaderValue,
  evalPath,
  evalResponseMetadata,
  type UserExtAuthExpressions,
} from "./user-ext-auth-cel.js";

export type { UnaryTarget };

/** What Sluice needs to call the user's service, as compiled by the translator. */
export interface UserExtAuthConfig {
  /** The backendRef, for logs: `Service default/authz port 80`. */
  readonly service: string;
  readonly protocol: "grpc" | "http";
  /** The backendRef's ready endpoints, called in turn; none: every call fails and the failure mode decides. */
  readonly targets: readonly UnaryTarget[];
  /** `:authority` of gRPC calls. */
  readonly authority: string;
  /** gRPC: the context extensions the user's service gets (Sluice's own `sluice.policy` is not passed on). */
  readonly contextExtensions: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly failureMode: "FailClosed" | "FailOpen";
  readonly http?: UserExtAuthHttp;
  /**
   * The key, the ttl or an expression reads `jwt` and JWT authentication applies: Envoy sends Sluice the jwt_authn
   * metadata, `jwt` exists (empty when no token was presented), and the metadata is removed before the request is
   * passed on.
   */
  readonly jwt: boolean;
  /** The CEL fields, as written. */
  readonly expressions?: UserExtAuthExpressions;
}

/** The HTTP protocol's options, with Envoy's http_service semantics. */
export interface UserExtAuthHttp {
  /** Replaces the request's path (query included). */
  readonly path?: string;
  /** Request headers passed on besides `authorization` and the host (lowercase). */
  readonly allowedRequestHeaders: readonly string[];
  readonly headersToAdd: readonly { readonly key: string; readonly value: string }[];
  /** Headers of a 200 answer set on the request to the upstream (lowercase). */
  readonly allowedUpstreamHeaders: readonly string[];
}

/** One table entry: the config plus its live state. */
export interface UserExtAuth extends UserExtAuthConfig {
  /** Entries of equal scope share `state` across translations (a hash of everything but `targets`). */
  readonly scope: string;
  readonly state: UserExtAuthState;
  /** `expressions` compiled (those that do not compile are left out; the translator reported them). */
  readonly compiled?: CompiledUserExtAuth;
}

/** Where the `extauthz` of later steps travels: a key of the ext_authz filter's dynamic metadata namespace. */
export const EXTAUTHZ_METADATA_NAMESPACE = "envoy.filters.http.ext_authz";
export const EXTAUTHZ_METADATA_KEY = "sluice_extauthz";

/** The decisions (CheckResponse bytes as Envoy gets them) and the calls in flight, by cache key; no cache: none. */
export class UserExtAuthState {
  readonly inflight = new Map<string, Promise<Uint8Array>>();
  next = 0;
  lastWarning = 0;
  constructor(readonly cache?: DecisionCache<Uint8Array>) {}
}

/** Connections to users' services: HTTP/2 sessions for gRPC, a keep-alive agent for HTTP. */
export class UserExtAuthClients {
  readonly grpc = new UnaryGrpcClient();
  readonly http = new HttpAgent({ keepAlive: true, maxSockets: 64 });
  /** HTTPS: a keep-alive agent per TLS setting (a backend policy's TLS, as Envoy's cluster has it). */
  readonly #https = new HttpsAgents();

  /** The agent of a target: plain HTTP, or HTTPS with the target's TLS. */
  httpAgent(target: UnaryTarget): HttpAgent {
    if ("unixPath" in target || target.tls === undefined) return this.http;
    return this.#https.agent(target.tls);
  }

  close(): void {
    this.grpc.close();
    this.http.destroy();
    this.#https.close();
  }
}

export interface UserExtAuthLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

const CHECK_PATH = `/${Authorization.typeName}/Check`;
const GRPC_PERMISSION_DENIED = 7;
/** Larger HTTP answers count as a failure of the service. */
const MAX_HTTP_BODY = 1024 * 1024;
/** At most one failure log line per entry and interval: a dead service would otherwise log every request. */
const WARN_INTERVAL_MS = 10_000;

const OK_BYTES = toBinary(
  CheckResponseSchema,
  create(CheckResponseSchema, { status: { code: 0 }, httpResponse: { case: "okResponse", value: {} } }),
);
// Envoy's status_on_error: 403 with an empty body.
const FAIL_CLOSED_BYTES = toBinary(
  CheckResponseSchema,
  create(CheckResponseSchema, {
    status: { code: GRPC_PERMISSION_DENIED, message: "authorization service failed" },
    httpResponse: { case: "deniedResponse", value: { status: { code: 403 } } },
  }),
);

type Outcome =
  | { readonly decision: Uint8Array; readonly metadata?: JsonObject }
  | { readonly failure: string; readonly target?: string }
  /** An expression of the call failed: the request is denied, whatever the failure mode, and nothing is cached. */
  | { readonly rejected: string };

const REJECTED_BYTES = toBinary(
  CheckResponseSchema,
  create(CheckResponseSchema, {
    status: { code: GRPC_PERMISSION_DENIED, message: "extAuth expression failed" },
    httpResponse: { case: "deniedResponse", value: { status: { code: 403 } } },
  }),
);

/**
 * The answer to one CheckRequest for the entry: cached, or the service's (then cached), or the failure mode's.
 * `request` gives a mutable copy of the CheckRequest, decoded only on a miss. Never rejects.
 */
export function checkUserExtAuth(
  ua: UserExtAuth,
  activation: CelActivation,
  request: () => CheckRequest,
  clients: UserExtAuthClients,
  logger?: UserExtAuthLogger,
): Promise<Uint8Array> {
  const { cache, inflight } = ua.state;
  const key = cache?.keyFor(activation);
  if (cache !== undefined && key !== undefined) {
    const hit = cache.get(key);
    if (hit !== undefined) return Promise.resolve(hit);
    const pending = inflight.get(key);
    if (pending !== undefined) return pending;
  }
  const answer = callService(ua, activation, request, clients).then(
    (o) => {
      if ("decision" in o) {
        if (cache !== undefined && key !== undefined) {
          cache.set(key, o.decision, o.metadata === undefined ? activation : { ...activation, extauthz: o.metadata });
        }
        return o.decision;
      }
      if ("rejected" in o) {
        warn(ua, logger, { failure: o.rejected }, "ext_authz: an extAuth expression failed, denying");
        return REJECTED_BYTES;
      }
      warn(ua, logger, o);
      return ua.failureMode === "FailOpen" ? OK_BYTES : FAIL_CLOSED_BYTES;
    },
    (e: unknown) => {
      warn(ua, logger, { failure: `internal error: ${String(e)}` });
      return ua.failureMode === "FailOpen" ? OK_BYTES : FAIL_CLOSED_BYTES;
    },
  );
  if (key !== undefined) {
    inflight.set(key, answer);
    void answer.then(() => inflight.delete(key));
  }
  return answer;
}

function warn(
  ua: UserExtAuth,
  logger: UserExtAuthLogger | undefined,
  o: { failure: string; target?: string },
  message = "ext_authz: the extAuth service failed, applying the failure mode",
): void {
  const now = Date.now();
  if (logger === undefined || now - ua.state.lastWarning < WARN_INTERVAL_MS) return;
  ua.state.lastWarning = now;
  logger.warn(message, {
    service: ua.service,
    ...(o.target !== undefined ? { target: o.target } : {}),
    error: o.failure,
    failureMode: ua.failureMode,
  });
}

async function callService(
  ua: UserExtAuth,
  activation: CelActivation,
  request: () => CheckRequest,
  clients: UserExtAuthClients,
): Promise<Outcome> {
  if (ua.targets.length === 0) return { failure: "the service has no ready endpoints" };
  const target = ua.targets[ua.state.next++ % ua.targets.length]!;
  if (ua.state.next >= 2 ** 31) ua.state.next = 0;
  if (ua.protocol === "http" && ua.http !== undefined) {
    const call = httpCall(ua.http, ua.compiled, activation);
    if ("rejected" in call) return call;
    const r = await callHttp(call, target, request(), ua.timeoutMs, clients.httpAgent(target));
    return "failure" in r ? { ...r, target: targetKey(target) } : r;
  }
  const metadata: Record<string, string> = {};
  for (const [k, expr] of ua.compiled?.grpcMetadata ?? []) {
    const v = evalHeaderValue(expr, activation, `grpc.requestMetadata.${k}`);
    if ("error" in v) return { rejected: v.error };
    metadata[k] = v.value;
  }
  const r = await clients.grpc.call(target, CHECK_PATH, forwardedCheckRequest(ua, request()), {
    timeoutMs: ua.timeoutMs,
    authority: ua.authority,
    metadata,
  });
  if (!r.ok) return { failure: r.error, target: targetKey(target) };
  let response: CheckResponse;
  try {
    response = fromBinary(CheckResponseSchema, r.message);
  } catch (e) {
    return { failure: `malformed CheckResponse: ${String(e)}`, target: targetKey(target) };
  }
  // No status is OK, as for Envoy.
  if ((response.status?.code ?? 0) !== 0) return { decision: Uint8Array.from(r.message) };
  // An allow carries the service's metadata for later steps as `extauthz` too ({} when it sent none).
  const own = response.dynamicMetadata ?? {};
  response.dynamicMetadata = { ...own, [EXTAUTHZ_METADATA_KEY]: own };
  return { decision: toBinary(CheckResponseSchema, response), metadata: own };
}

/** The HTTP call's options with the CEL fields evaluated for this request. */
interface HttpCall extends UserExtAuthHttp {
  readonly body?: Buffer;
  readonly compiled?: CompiledUserExtAuth;
  readonly activation: CelActivation;
}

function httpCall(
  cfg: UserExtAuthHttp,
  compiled: CompiledUserExtAuth | undefined,
  activation: CelActivation,
): HttpCall | { rejected: string } {
  if (compiled === undefined) return { ...cfg, activation };
  let path = cfg.path;
  if (compiled.path !== undefined) {
    const v = evalPath(compiled.path, activation, "http.path");
    if ("error" in v) return { rejected: v.error };
    path = v.value;
  }
  const headersToAdd = [...cfg.headersToAdd];
  for (const [k, expr] of compiled.headers) {
    const v = evalHeaderValue(expr, activation, `http.addRequestHeaders.${k}`);
    if ("error" in v) return { rejected: v.error };
    headersToAdd.push({ key: k, value: v.value });
  }
  let body: Buffer | undefined;
  if (compiled.body !== undefined) {
    const v = evalBody(compiled.body, activation);
    if ("error" in v) return { rejected: v.error };
    body = v.value;
  }
  return {
    ...cfg,
    ...(path !== undefined ? { path } : {}),
    headersToAdd,
    ...(body !== undefined ? { body } : {}),
    compiled,
    activation,
  };
}

/** The CheckRequest the user's service would get from Envoy directly: its own context extensions, no Sluice data. */
export function forwardedCheckRequest(ua: UserExtAuthConfig, req: CheckRequest): Uint8Array {
  const attrs = req.attributes;
  if (attrs !== undefined) {
    attrs.contextExtensions = { ...ua.contextExtensions };
    const md = attrs.metadataContext;
    if (ua.jwt && md !== undefined) {
      delete md.filterMetadata[JWT_METADATA_NAMESPACE];
      if (Object.keys(md.filterMetadata).length === 0 && Object.keys(md.typedFilterMetadata).length === 0) {
        attrs.metadataContext = undefined;
      }
    }
    // Envoy sends Sluice the body as bytes (binary-safe); the user's filter would have sent UTF-8 text.
    const http = attrs.request?.http;
    if (http !== undefined && http.rawBody.byteLength > 0 && http.body === "") {
      const text = utf8(http.rawBody);
      if (text !== undefined) {
        http.body = text;
        http.rawBody = new Uint8Array(0);
      }
    }
  }
  return toBinary(CheckRequestSchema, req);
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

function utf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Request headers as Envoy lists them: `header_map` when raw headers are sent, else the `headers` map. */
function requestHeaders(http: AttributeContext_HttpRequest): [string, string][] {
  if (http.headerMap !== undefined && http.headerMap.headers.length > 0) {
    return http.headerMap.headers.map((h) => [
      h.key.toLowerCase(),
      h.rawValue.byteLength > 0 ? Buffer.from(h.rawValue).toString("utf8") : h.value,
    ]);
  }
  return Object.entries(http.headers).map(([k, v]) => [k.toLowerCase(), v]);
}

// Not passed on from a denial: they describe the service's connection, not the answer.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"]);
const HEADERS_TO_REMOVE = "x-envoy-auth-headers-to-remove";

type HeaderOption = MessageInitShape<typeof HeaderValueOptionSchema>;

/**
 * Envoy's HTTP ext_authz exchange (ext_authz_http_impl.cc): the original method, the path (or the configured one),
 * the host, `authorization` and the allowed headers, the added headers and the body; 200 allows and passes the
 * allowed headers upstream, 5xx is a failure, anything else denies with the service's status, headers and body.
 */
function callHttp(
  cfg: HttpCall,
  target: UnaryTarget,
  req: CheckRequest,
  timeoutMs: number,
  agent: HttpAgent,
): Promise<Outcome> {
  const http = req.attributes?.request?.http;
  const allowed = new Set(["authorization", ...cfg.allowedRequestHeaders]);
  const headers: OutgoingHttpHeaders = {};
  if (http !== undefined) {
    for (const [name, value] of requestHeaders(http)) {
      if (name.startsWith(":") || name === "host" || name === "content-length" || !allowed.has(name)) continue;
      headers[name] = value;
    }
  }
  for (const h of cfg.headersToAdd) headers[h.key.toLowerCase()] = h.value;
  const body =
    cfg.body !== undefined
      ? cfg.body
      : http === undefined
        ? Buffer.alloc(0)
        : http.rawBody.byteLength > 0
          ? Buffer.from(http.rawBody)
          : Buffer.from(http.body);
  headers["content-length"] = String(body.byteLength);
  headers["host"] = http?.host ?? "";
  return new Promise<Outcome>((resolve) => {
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (o: Outcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(o);
    };
    let r: ClientRequest;
    try {
      r = (!("unixPath" in target) && target.tls !== undefined ? httpsRequest : httpRequest)(
        {
          ...("unixPath" in target ? { socketPath: target.unixPath } : { host: target.host, port: target.port }),
          method: http?.method || "GET",
          path: cfg.path ?? (http?.path || "/"),
          headers,
          setHost: false,
          agent,
        },
        (res) => readAnswer(res, cfg).then(finish),
      );
    } catch (e) {
      // A header value Node refuses to send, for instance.
      finish({ failure: e instanceof Error ? e.message : String(e) });
      return;
    }
    timer = setTimeout(() => {
      finish({ failure: `deadline of ${timeoutMs} ms exceeded` });
      r.destroy();
    }, timeoutMs);
    r.on("error", (e) => finish({ failure: e.message }));
    r.end(body);
  });
}

function readAnswer(res: IncomingMessage, cfg: HttpCall): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on("data", (c: Buffer) => {
      size += c.byteLength;
      if (size > MAX_HTTP_BODY) {
        resolve({ failure: "answer body too large" });
        res.destroy();
      } else chunks.push(c);
    });
    res.on("error", (e) => resolve({ failure: e.message }));
    res.on("end", () => resolve(httpDecision(res, Buffer.concat(chunks), cfg)));
  });
}

function httpDecision(res: IncomingMessage, body: Buffer, cfg: HttpCall): Outcome {
  const status = res.statusCode ?? 0;
  if (status >= 500 || status < 100) return { failure: `HTTP status ${status}` };
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < res.rawHeaders.length; i += 2)
    pairs.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!]);
  let response: CheckResponse;
  let metadata: JsonObject | undefined;
  const redirect = status === 200 ? undefined : cfg.compiled?.redirect;
  if (redirect !== undefined) {
    const to = evalHeaderValue(redirect, cfg.activation, "http.redirect");
    // The denial as the service gave it when the redirect cannot be computed.
    if ("value" in to) {
      response = create(CheckResponseSchema, {
        status: { code: GRPC_PERMISSION_DENIED },
        httpResponse: {
          case: "deniedResponse",
          value: { status: { code: 302 }, headers: [overwrite("location", to.value)] },
        },
      });
      return { decision: toBinary(CheckResponseSchema, response) };
    }
  }
  if (status === 200) {
    const upstream = new Set(cfg.allowedUpstreamHeaders);
    const remove = pairs
      .filter(([k]) => k === HEADERS_TO_REMOVE)
      .flatMap(([, v]) => v.split(",").map((s) => s.trim().toLowerCase()))
      .filter((s) => s !== "");
    response = create(CheckResponseSchema, {
      status: { code: 0 },
      httpResponse: {
        case: "okResponse",
        value: {
          headers: pairs.filter(([k]) => upstream.has(k)).map(([key, value]) => overwrite(key, value)),
          headersToRemove: remove,
        },
      },
    });
    if (cfg.compiled !== undefined && cfg.compiled.responseMetadata.length > 0) {
      const answerHeaders = new Map<string, string>();
      for (const [k, v] of pairs) answerHeaders.set(k, answerHeaders.has(k) ? `${answerHeaders.get(k)},${v}` : v);
      metadata = evalResponseMetadata(cfg.compiled, cfg.activation, {
        code: BigInt(status),
        headers: answerHeaders,
        body: body.toString("utf8"),
      }) as JsonObject;
    }
    response.dynamicMetadata = { [EXTAUTHZ_METADATA_KEY]: metadata ?? {} };
  } else {
    const seen = new Set<string>();
    const headers: HeaderOption[] = [];
    for (const [key, value] of pairs) {
      if (HOP_BY_HOP.has(key) || key === HEADERS_TO_REMOVE) continue;
      // The first value replaces the local reply's header (content-type), repeats are appended (set-cookie).
      headers.push(seen.has(key) ? { header: { key, value } } : overwrite(key, value));
      seen.add(key);
    }
    response = create(CheckResponseSchema, {
      status: { code: GRPC_PERMISSION_DENIED },
      httpResponse: {
        case: "deniedResponse",
        value: { status: { code: status }, headers, body: body.toString("utf8") },
      },
    });
  }
  const decision = toBinary(CheckResponseSchema, response);
  return metadata === undefined ? { decision } : { decision, metadata };
}

function overwrite(key: string, value: string): HeaderOption {
  return { header: { key, value }, appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD };
}

/** A copy of a CheckRequest to pass on (the grpc-js path hands Sluice a decoded message it may still read). */
export function copyCheckRequest(req: CheckRequest): CheckRequest {
  return clone(CheckRequestSchema, req);
}

/**
 * `next` with each cached entry's state taken from the entry of the same scope in `olds` (newest first), so a new
 * translation keeps the decisions of unchanged services, including when only their endpoints changed.
 */
export function carryOverState<P extends { readonly userExtAuth?: UserExtAuth }>(
  next: ReadonlyMap<string, P>,
  olds: readonly ReadonlyMap<string, P>[],
): ReadonlyMap<string, P> {
  const byScope = new Map<string, UserExtAuthState>();
  for (const table of olds) {
    for (const p of table.values()) {
      const ua = p.userExtAuth;
      if (ua !== undefined && !byScope.has(ua.scope)) byScope.set(ua.scope, ua.state);
    }
  }
  if (byScope.size === 0) return next;
  let changed = false;
  const out = new Map<string, P>();
  for (const [id, p] of next) {
    const ua = p.userExtAuth;
    const state = ua === undefined ? undefined : byScope.get(ua.scope);
    if (ua !== undefined && state !== undefined && state !== ua.state) {
      out.set(id, { ...p, userExtAuth: { ...ua, state } });
      changed = true;
    } else out.set(id, p);
  }
  return changed ? out : next;
}
