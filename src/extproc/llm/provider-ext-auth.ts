// A GwPolicy's `backend.extAuth` for one AI provider (translate/llm/provider-ext-auth.ts), served by the LLM ext_proc
// at the stage that knows the provider of an attempt: the upstream stage (once per attempt), or the router stage on a
// route served in one stage (its one provider). The user's service gets the client's request — its headers as the
// router stage read them, never the provider's credentials Sluice writes afterwards — through the same client, cache
// and failure mode as a route's extAuth fronted by Sluice (extauthz/user-ext-auth.ts).
//
// - allowed: the headers the service adds (gRPC: the OkHttpResponse's; HTTP: `allowedResponseHeaders` of its 200)
//   and removes go on the provider's request, after the provider work (a client credential header and the provider
//   work's own headers stay the provider work's: the service cannot replace the provider's credentials);
// - denied: the service's status (403 when it gives none), its headers and, in the client's error format, its body;
// - failing (unreachable, deadline, non-OK gRPC status, HTTP 5xx): `failureMode`, FailClosed (the default) denying.
//
// A denial is final: the client gets it, no other provider is tried. Envoy cannot retry it: an upstream filter's local
// reply (the ext_proc's immediate response) is sent as the downstream's local reply, past the router's retry policy
// (seen with Envoy 1.40); docs/llm.md says what this means for a GwBackend's groups.

import { create, fromBinary, type JsonObject } from "@bufbuild/protobuf";
import { type CelActivation, peerIpValue } from "../../cel/index.js";
import { DecisionCache } from "../../extauthz/decision-cache.js";
import {
  checkUserExtAuth,
  EXTAUTHZ_METADATA_KEY,
  type UserExtAuth,
  UserExtAuthClients,
  type UserExtAuthLogger,
  UserExtAuthState,
} from "../../extauthz/user-ext-auth.js";
import { type CompiledUserExtAuth, compileUserExtAuthExpressions } from "../../extauthz/user-ext-auth-cel.js";
import type { HeaderValueOption } from "../../gen/envoy/config/core/v3/base_pb.js";
import {
  type CheckRequest,
  CheckRequestSchema,
  CheckResponseSchema,
} from "../../gen/envoy/service/auth/v3/external_auth_pb.js";
import { kindForStatus } from "../../llm/errors.js";
import { type ClientFormat, clientError } from "../../llm/index.js";
import type { ProviderExtAuthConfig } from "../../translate/llm/provider-ext-auth.js";
import type { ImmediateReply, ReplyHeaders } from "./wire.js";

/** The client's request as the check sees it. */
export interface ExtAuthRequest {
  /** As the router stage read them, pseudo-headers included. */
  readonly headers: Readonly<Record<string, string>>;
  /** The client's body, when the router stage read it (LLM formats); sent with `forwardBody`. */
  readonly body?: Uint8Array;
  /** CEL variables of the call's expressions and the cache key (`request`, `llm`, `source`, the identity). */
  readonly activation: Readonly<Record<string, unknown>>;
  /** The client's connection as Envoy saw it (the downstream peer and Envoy's own address), when Envoy sent them. */
  readonly peer?: Peer;
}

/** One end of the client's connection. */
export interface Endpoint {
  readonly address: string;
  readonly port: number;
}

/** The client's connection: `source` (the client) and `destination` (Envoy's listener), as a route's check has them. */
export interface Peer {
  readonly source?: Endpoint;
  readonly destination?: Endpoint;
}

export interface Allowed {
  readonly set: Readonly<Record<string, string>>;
  readonly remove: readonly string[];
  /** What the service tells later steps (`extauthz`): a gRPC service's dynamic metadata, HTTP's responseMetadata. */
  readonly metadata?: JsonObject;
}

export type ExtAuthDecision = { readonly allow: Allowed } | { readonly deny: Denial };

/**
 * Envoy's `<side>.address` (`ip:port`, `[v6]:port`) and `<side>.port` request attributes as an endpoint; undefined
 * when Envoy sent none (a pipe, an Envoy without the attributes).
 */
export function endpointOf(address: unknown, port: unknown): Endpoint | undefined {
  if (typeof address !== "string" || address === "") return undefined;
  const v4 = /^([^:]+):(\d+)$/.exec(address);
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(address);
  const ip = v6?.[1] ?? v4?.[1] ?? address;
  const p = typeof port === "number" ? port : Number(v6?.[2] ?? v4?.[2] ?? 0);
  return { address: ip, port: Number.isInteger(p) && p >= 0 && p <= 65535 ? p : 0 };
}

/** The spec's `source` variable for a check: its address as an IP value, its port. Undefined when unknown. */
export function sourceVariable(peer: Peer | undefined): Record<string, unknown> | undefined {
  const s = peer?.source;
  const ip = s === undefined ? undefined : peerIpValue(s.address);
  return s === undefined || ip === undefined ? undefined : { address: ip, port: BigInt(s.port) };
}

export interface Denial {
  readonly status: number;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: string;
  /** Why, when Sluice denied rather than the service (a failure under FailClosed, a body too large ...). */
  readonly why?: string;
}

/** What Sluice's own denials say (user-ext-auth.ts), passed on; a service's gRPC status message is not. */
const SLUICE_MESSAGES = new Set(["authorization service failed", "extAuth expression failed"]);
// Not passed on from a denial: they describe the service's answer's own framing, which the client's error replaces.
const DROPPED = new Set([
  "content-type",
  "content-length",
  "connection",
  "keep-alive",
  "transfer-encoding",
  "host",
  "upgrade",
]);

const td = new TextDecoder();

function headerOf(h: HeaderValueOption): [string, string] | undefined {
  const key = h.header?.key.toLowerCase();
  if (key === undefined || key === "") return undefined;
  const raw = h.header?.rawValue;
  return [key, raw !== undefined && raw.byteLength > 0 ? td.decode(raw) : (h.header?.value ?? "")];
}

/** The decision a CheckResponse carries (Envoy's semantics: no status is OK, a denial without status is 403). */
export function decisionOf(bytes: Uint8Array): ExtAuthDecision {
  const r = fromBinary(CheckResponseSchema, bytes);
  if ((r.status?.code ?? 0) === 0) {
    const ok = r.httpResponse.case === "okResponse" ? r.httpResponse.value : undefined;
    const set: Record<string, string> = {};
    for (const h of ok?.headers ?? []) {
      const kv = headerOf(h);
      if (kv === undefined) continue;
      // Envoy's ext_authz overwrites unless the (deprecated) `append` asks otherwise; repeats of a name then join.
      set[kv[0]] = h.append === true && set[kv[0]] !== undefined ? `${set[kv[0]]},${kv[1]}` : kv[1];
    }
    // user-ext-auth.ts puts what later steps read under EXTAUTHZ_METADATA_KEY ({} when the service told nothing).
    const told = r.dynamicMetadata?.[EXTAUTHZ_METADATA_KEY];
    const metadata =
      told !== null && typeof told === "object" && !Array.isArray(told) && Object.keys(told).length > 0
        ? (told as JsonObject)
        : undefined;
    return {
      allow: {
        set,
        remove: (ok?.headersToRemove ?? []).map((n) => n.toLowerCase()),
        ...(metadata !== undefined ? { metadata } : {}),
      },
    };
  }
  const denied = r.httpResponse.case === "deniedResponse" ? r.httpResponse.value : undefined;
  const status = denied?.status?.code ?? 0;
  const message = r.status?.message ?? "";
  return {
    deny: {
      status: status >= 200 && status <= 599 ? status : 403,
      headers: (denied?.headers ?? []).flatMap((h) => {
        const kv = headerOf(h);
        return kv === undefined || DROPPED.has(kv[0]) || kv[0].startsWith(":") ? [] : [kv];
      }),
      body: denied?.body ?? "",
      ...(SLUICE_MESSAGES.has(message) ? { why: message } : {}),
    },
  };
}

/** The CheckRequest Envoy's ext_authz would send for the client's request (`body` with forwardBody). */
export function checkRequestOf(req: ExtAuthRequest, body: Uint8Array | undefined): CheckRequest {
  const h = req.headers;
  const path = h[":path"] ?? "/";
  const socket = (e: Endpoint | undefined) =>
    e === undefined
      ? undefined
      : {
          address: {
            address: {
              case: "socketAddress" as const,
              value: { address: e.address, portSpecifier: { case: "portValue" as const, value: e.port } },
            },
          },
        };
  const source = socket(req.peer?.source);
  const destination = socket(req.peer?.destination);
  return create(CheckRequestSchema, {
    attributes: {
      ...(source !== undefined ? { source } : {}),
      ...(destination !== undefined ? { destination } : {}),
      request: {
        http: {
          id: h["x-request-id"] ?? "",
          method: h[":method"] ?? "POST",
          headers: { ...h },
          path,
          host: h[":authority"] ?? "",
          scheme: h[":scheme"] ?? "http",
          size: BigInt(body?.byteLength ?? -1),
          ...(body !== undefined ? { rawBody: body } : {}),
        },
      },
    },
  });
}

/** The users' services of every provider extAuth, their live state (decision caches) kept across config updates. */
export class ProviderExtAuths {
  readonly #clients = new UserExtAuthClients();
  /** By scope: the cache and in-flight calls, and the compiled expressions. */
  #states = new Map<string, { state: UserExtAuthState; compiled?: CompiledUserExtAuth }>();
  readonly #live = new WeakMap<ProviderExtAuthConfig, UserExtAuth>();
  readonly #logger: UserExtAuthLogger;

  constructor(log: (line: string) => void) {
    this.#logger = {
      warn: (message, fields) => log(`llm provider extAuth: ${message}${fields ? ` ${JSON.stringify(fields)}` : ""}`),
    };
  }

  /** Keeps the state of the scopes still configured (the current and previous tables), forgets the rest. */
  retain(configs: Iterable<ProviderExtAuthConfig>): void {
    const keep = new Set<string>();
    for (const c of configs) keep.add(c.scope);
    for (const scope of this.#states.keys()) if (!keep.has(scope)) this.#states.delete(scope);
  }

  #liveOf(cfg: ProviderExtAuthConfig): UserExtAuth {
    const known = this.#live.get(cfg);
    if (known !== undefined) return known;
    let s = this.#states.get(cfg.scope);
    if (s === undefined) {
      // The translator compiled both already and reported what fails; here they are compiled for use.
      const cache =
        cfg.cache === undefined
          ? undefined
          : DecisionCache.compile<Uint8Array>({ ...cfg.cache, key: [...cfg.cache.key] }, "backend.extAuth.cache").cache;
      const compiled =
        cfg.expressions === undefined ? undefined : compileUserExtAuthExpressions(cfg.expressions).compiled;
      s = { state: new UserExtAuthState(cache), ...(compiled !== undefined ? { compiled } : {}) };
      this.#states.set(cfg.scope, s);
    }
    const { cache: _c, forwardBody: _f, policy: _p, ...rest } = cfg;
    const live: UserExtAuth = {
      ...rest,
      jwt: false,
      state: s.state,
      ...(s.compiled !== undefined ? { compiled: s.compiled } : {}),
    };
    this.#live.set(cfg, live);
    return live;
  }

  /** The decision for one attempt. Never rejects. */
  async check(cfg: ProviderExtAuthConfig, req: ExtAuthRequest): Promise<ExtAuthDecision> {
    let body: Uint8Array | undefined;
    if (cfg.forwardBody !== undefined) {
      body = req.body ?? new Uint8Array();
      // As Envoy's with_request_body without partial messages: a larger body is refused, the service not called.
      if (body.byteLength > cfg.forwardBody) {
        return {
          deny: {
            status: 413,
            headers: [],
            body: "",
            why: `the request body is larger than extAuth.forwardBody.maxSize (${cfg.forwardBody} bytes)`,
          },
        };
      }
    }
    const bytes = await checkUserExtAuth(
      this.#liveOf(cfg),
      req.activation as CelActivation,
      () => checkRequestOf(req, body),
      this.#clients,
      this.#logger,
    );
    return decisionOf(bytes);
  }

  close(): void {
    this.#clients.close();
  }
}

/**
 * The client's answer to a denial: its status and headers, the body in the client's error format (the service's body
 * as the message), or as the service wrote it on a route type forwarded as it is.
 */
export function denialReply(client: ClientFormat | undefined, provider: string, d: Denial): ImmediateReply {
  const status = d.status;
  const text = d.body.trim();
  const message =
    text !== ""
      ? text.slice(0, 4096)
      : `access to provider ${provider} denied by its authorization service${d.why !== undefined ? ` (${d.why})` : ""}`;
  const add = d.headers.map(([k, v]) => [k, v] as const);
  if (client === undefined && text !== "") {
    const headers: ReplyHeaders = { set: { "content-type": "text/plain" }, add };
    return { phase: "immediate", status, headers, body: d.body, details: "sluice_llm_ext_authz" };
  }
  const e = clientError(client ?? "chat-completions", { status: d.status, kind: kindForStatus(d.status), message });
  return {
    phase: "immediate",
    status,
    headers: { set: { "content-type": "application/json" }, add },
    body: JSON.stringify(e.body),
    details: "sluice_llm_ext_authz",
  };
}

/** How the request is framed and carried: never the service's to set or remove. */
const FRAMING = new Set(["content-length", "transfer-encoding", "connection", "keep-alive", "te", "upgrade", "host"]);

/**
 * The provider's request with the allowed check's headers: set and removed, but for pseudo-headers, the client's
 * credential headers (never the provider's) and what the provider work itself sets (its credentials, destination).
 */
export function withAllowedHeaders<
  W extends { readonly set: Readonly<Record<string, string>>; readonly remove: readonly string[] },
>(
  w: W,
  allow: { readonly set: Readonly<Record<string, string>>; readonly remove: readonly string[] },
  reserved: readonly string[],
): { work: W; written: string[] } {
  const usable = (k: string) => !k.startsWith(":") && !FRAMING.has(k) && !reserved.includes(k) && !(k in w.set);
  const set = Object.entries(allow.set).filter(([k]) => usable(k));
  const remove = allow.remove.filter(usable);
  if (set.length === 0 && remove.length === 0) return { work: w, written: [] };
  const names = new Set(set.map(([k]) => k));
  return {
    work: {
      ...w,
      set: { ...w.set, ...Object.fromEntries(set) },
      remove: [...w.remove.filter((r) => !names.has(r)), ...remove.filter((r) => !names.has(r))],
    },
    written: [...names],
  };
}
