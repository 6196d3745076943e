// Envoy's envoy.service.auth.v3.Authorization/Check, served by Sluice for what Envoy cannot do natively:
// API keys, basic auth with non-SHA-1 hashes, and CEL authorization.
//
// Envoy names the policy to apply with the context extension `sluice.policy` (a content-hash id from the policy
// table). Tables are immutable and swapped whole, so a request is decided entirely by one table version. An unknown
// id fails closed (403) with a log line: it means Envoy and Sluice disagree, which must never open the gate.
//
// Order per request: authentication (basic auth, then API key) → 401; authorization → 403; else OK with the identity
// as dynamic metadata (namespace of the ext_authz filter) and, where configured, as headers to the upstream.
// An entry with `userExtAuth` instead fronts the user's own authorization service with a decision cache
// (user-ext-auth.ts).

import { create, fromBinary, type JsonObject, toBinary } from "@bufbuild/protobuf";
import type * as grpc from "@grpc/grpc-js";
import { type CelActivation, peerIpValue, toCel } from "../cel/index.js";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../cel/rbac.js";
import type { HeaderValueOption } from "../gen/envoy/config/core/v3/base_pb.js";
import { HeaderValueOption_HeaderAppendAction, HeaderValueOptionSchema } from "../gen/envoy/config/core/v3/base_pb.js";
import {
  Authorization,
  type CheckRequest,
  CheckRequestSchema,
  type CheckResponse,
  CheckResponseSchema,
} from "../gen/envoy/service/auth/v3/external_auth_pb.js";
import { StatusCode } from "../gen/envoy/type/v3/http_status_pb.js";
import type { Http1Answer, Http1Handler } from "../grpc/http1.js";
import { addGrpcService } from "../grpc/service.js";
import type { UnaryHandler } from "../grpc/unary-server.js";
import { authzOutcomeOf, observeAuthz } from "../observability/metrics.js";
import { type ApiKeyAuth, checkApiKey } from "./api-keys.js";
import { authorize, type CompiledAuthorization, EMPTY_AUTHORIZATION } from "./authorization.js";
import { type BasicAuth, checkBasicAuth } from "./basic-auth.js";
import { type CheckFields, checkFieldsOf, filterMetadataStruct, readCheckRequest } from "./check-request.js";
import { parseQuery } from "./credentials.js";
import { checkFieldsOfHttp, dropReservedHeaders, httpCheckAnswer } from "./http-check.js";
import {
  checkUserExtAuth,
  copyCheckRequest,
  EXTAUTHZ_METADATA_KEY,
  EXTAUTHZ_METADATA_NAMESPACE,
  type UserExtAuth,
  UserExtAuthClients,
} from "./user-ext-auth.js";

/** The context extension carrying the policy id. */
export const POLICY_CONTEXT_KEY = "sluice.policy";
/** The gRPC metadata carrying the policy id where Envoy has no context extensions (network ext_authz). */
export const POLICY_METADATA_KEY = "x-sluice-policy";
// Where Envoy's jwt_authn filter puts the verified payload; shared with the native RBAC translation.
export { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY };

const GRPC_OK = 0;
const GRPC_PERMISSION_DENIED = 7;
const GRPC_UNAUTHENTICATED = 16;

/** One compiled policy of the table: everything Sluice decides for a route. */
export interface ExtAuthzPolicy {
  readonly basicAuth?: BasicAuth;
  readonly apiKey?: ApiKeyAuth;
  readonly authorization: CompiledAuthorization;
  /** JWT authentication applies to the route, so `jwt` exists (empty when no token was presented under Optional). */
  readonly jwt: boolean;
  /** The authorization reads `extauthz`, which the user's extAuth (fronted by Sluice) left in the request metadata. */
  readonly extauthz?: boolean;
  /** Optional headers to the upstream carrying the identity. */
  readonly upstreamHeaders?: {
    /** header receiving the basic-auth username */
    readonly basicAuthUsername?: string;
    /** header receiving the API key metadata as JSON */
    readonly apiKeyMetadata?: string;
  };
  /** The user's extAuth with a decision cache: Sluice answers from the cache or asks the user's service. */
  readonly userExtAuth?: UserExtAuth;
}

/** Immutable policies keyed by content-hash id. */
export type PolicyTable = ReadonlyMap<string, ExtAuthzPolicy>;

export interface ExtAuthzLogger {
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface ExtAuthzOptions {
  /** Called per request, so a new table published by the translator is picked up at once. */
  readonly policies: () => PolicyTable;
  readonly logger?: ExtAuthzLogger;
  /** Connections to users' authorization services (entries with `userExtAuth`); the owner closes them. */
  readonly clients?: UserExtAuthClients;
}

export const EMPTY_POLICY: ExtAuthzPolicy = { authorization: EMPTY_AUTHORIZATION, jwt: false };

/**
 * Decides one CheckRequest. Never throws; an internal failure denies. The policy id comes from the context extension
 * `sluice.policy` (HTTP), else from `metadataId`, the `x-sluice-policy` gRPC metadata (network ext_authz).
 */
export function check(request: CheckRequest, options: ExtAuthzOptions, metadataId?: string): Promise<CheckResponse> {
  const id = request.attributes?.contextExtensions[POLICY_CONTEXT_KEY] ?? metadataId;
  return decide(id, (p) => activationOf(checkFieldsOf(request), p.jwt, p.extauthz === true), options);
}

/** check() on the fields read straight from the wire (check-request.ts), for the unary hot path. */
export function checkFields(f: CheckFields, options: ExtAuthzOptions, metadataId?: string): Promise<CheckResponse> {
  const id = f.contextExtensions.get(POLICY_CONTEXT_KEY) ?? metadataId;
  return decide(id, (p) => activationOf(f, p.jwt, p.extauthz === true), options);
}

async function decide(
  id: string | undefined,
  activationFor: (policy: ExtAuthzPolicy) => CelActivation,
  options: ExtAuthzOptions,
): Promise<CheckResponse> {
  const policy = id === undefined ? undefined : options.policies().get(id);
  if (policy === undefined) {
    options.logger?.warn("ext_authz: unknown policy id, denying (fail closed)", { policy: id ?? null });
    return UNKNOWN_POLICY;
  }
  const activation = activationFor(policy);
  const metadata: JsonObject = {};
  const upstream: HeaderValueOption[] = [];
  // Identity headers are Sluice's to set: a client-sent value never reaches the upstream (anonymous requests too).
  const remove: string[] = [];
  if (policy.upstreamHeaders?.basicAuthUsername !== undefined) remove.push(policy.upstreamHeaders.basicAuthUsername);
  if (policy.upstreamHeaders?.apiKeyMetadata !== undefined) remove.push(policy.upstreamHeaders.apiKeyMetadata);
  let identity: CelActivation = activation;

  if (policy.basicAuth !== undefined) {
    const r = await checkBasicAuth(policy.basicAuth, activation);
    if (r.outcome === "denied") {
      return denied(GRPC_UNAUTHENTICATED, StatusCode.Unauthorized, "unauthorized", [
        header("www-authenticate", r.wwwAuthenticate),
      ]);
    }
    if (r.outcome === "authenticated") {
      identity = { ...identity, basicAuth: { username: r.username } };
      metadata["basicAuth"] = { username: r.username };
      const h = policy.upstreamHeaders?.basicAuthUsername;
      if (h !== undefined) upstream.push(header(h, r.username));
    }
  }
  if (policy.apiKey !== undefined) {
    const r = checkApiKey(policy.apiKey, activation);
    if (r.outcome === "denied") return denied(GRPC_UNAUTHENTICATED, StatusCode.Unauthorized, "unauthorized", []);
    if (r.outcome === "authenticated") {
      identity = { ...identity, apiKey: r.entry.metadata as never };
      metadata["apiKey"] = r.entry.metadata as JsonObject;
      const h = policy.upstreamHeaders?.apiKeyMetadata;
      if (h !== undefined) upstream.push(header(h, JSON.stringify(r.entry.metadata)));
    }
  }
  const decision = authorize(policy.authorization, identity);
  if (!decision.allowed) return denied(GRPC_PERMISSION_DENIED, StatusCode.Forbidden, "forbidden", []);
  if (upstream.length === 0 && remove.length === 0 && Object.keys(metadata).length === 0) return OK;
  const set = new Set(upstream.map((h) => h.header?.key));
  return create(CheckResponseSchema, {
    status: { code: GRPC_OK },
    httpResponse: {
      case: "okResponse",
      value: { headers: upstream, headersToRemove: remove.filter((h) => !set.has(h)) },
    },
    ...(Object.keys(metadata).length > 0 ? { dynamicMetadata: metadata } : {}),
  });
}

// Responses are only serialized, never mutated, so the plain OK is shared.
const OK: CheckResponse = create(CheckResponseSchema, {
  status: { code: GRPC_OK },
  httpResponse: { case: "okResponse", value: {} },
});

const OK_BYTES = toBinary(CheckResponseSchema, OK);
const FORBIDDEN: CheckResponse = denied(GRPC_PERMISSION_DENIED, StatusCode.Forbidden, "forbidden", []);
const UNKNOWN_POLICY: CheckResponse = denied(GRPC_PERMISSION_DENIED, StatusCode.Forbidden, "unknown policy", []);
const ALLOW_ANSWER = httpCheckAnswer(OK);
const FORBIDDEN_ANSWER = httpCheckAnswer(FORBIDDEN);
const UNKNOWN_POLICY_ANSWER = httpCheckAnswer(UNKNOWN_POLICY);

/** The CEL activation for a CheckRequest decoded by protobuf-es (the grpc-js path). */
export function buildActivation(request: CheckRequest, jwt: boolean): CelActivation {
  return activationOf(checkFieldsOf(request), jwt);
}

/** The CEL activation for the fields of a CheckRequest (check-request.ts). */
export function activationOf(f: CheckFields, jwt: boolean, extauthz = false): CelActivation {
  const out: { -readonly [K in "request" | "source" | "jwt" | "extauthz"]?: NonNullable<CelActivation[K]> } = {};
  if (f.hasHttp) {
    // The headers Sluice has Envoy add to an HTTP check are not the client's to set (http-check.ts).
    dropReservedHeaders(f.headers);
    const q = f.path.indexOf("?");
    out.request = {
      method: f.method,
      path: q < 0 ? f.path : f.path.slice(0, q),
      host: f.host,
      scheme: f.scheme,
      headers: f.headers,
      query: parseQuery(f.path),
    };
  }
  if (f.sourceAddress !== undefined) {
    const ip = peerIpValue(f.sourceAddress);
    if (ip !== undefined) out.source = { address: ip, port: BigInt(f.sourcePort) };
  }
  if (jwt) {
    const payload = filterMetadataStruct(f, JWT_METADATA_NAMESPACE)?.[JWT_PAYLOAD_KEY];
    out.jwt = (payload !== null && typeof payload === "object" && !Array.isArray(payload) ? payload : {}) as never;
  }
  if (extauthz) {
    // Absent when the extAuth did not run or allow: then expressions reading it fail to evaluate.
    const v = filterMetadataStruct(f, EXTAUTHZ_METADATA_NAMESPACE)?.[EXTAUTHZ_METADATA_KEY];
    if (v !== null && typeof v === "object" && !Array.isArray(v)) out.extauthz = toCel(v) as never;
  }
  return out;
}

function header(key: string, value: string): HeaderValueOption {
  return create(HeaderValueOptionSchema, {
    header: { key, value },
    appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
  });
}

function denied(grpcCode: number, http: StatusCode, body: string, headers: HeaderValueOption[]): CheckResponse {
  return create(CheckResponseSchema, {
    status: { code: grpcCode, message: body },
    httpResponse: { case: "deniedResponse", value: { status: { code: http }, headers, body } },
  });
}

/**
 * Whether a policy can be decided from an HTTP check (http-check.ts): it reads only the request and its source, and
 * answers nothing but allow or deny. The translator sends exactly these over HTTP.
 */
export function httpCheckable(p: ExtAuthzPolicy): boolean {
  return (
    p.basicAuth === undefined &&
    p.apiKey === undefined &&
    p.userExtAuth === undefined &&
    !p.jwt &&
    p.extauthz !== true &&
    p.upstreamHeaders === undefined
  );
}

/** Envoy's HTTP ext_authz check (http-check.ts) on the hot-path server's HTTP/1.1 connections (src/grpc/http1.ts). */
export function extAuthzHttpHandler(options: ExtAuthzOptions): Http1Handler {
  const deny = (why: string, fields?: Record<string, unknown>): Http1Answer => {
    options.logger?.warn(`ext_authz: ${why}, denying`, fields);
    return FORBIDDEN_ANSWER;
  };
  return (req) => {
    const started = performance.now();
    const parsed = checkFieldsOfHttp(req);
    if (typeof parsed === "string") {
      observeAuthz("unknown", "error", started);
      return deny(`malformed HTTP check (${parsed})`);
    }
    const policy = options.policies().get(parsed.id);
    if (policy === undefined) {
      options.logger?.warn("ext_authz: unknown policy id, denying (fail closed)", { policy: parsed.id });
      observeAuthz("unknown", "deny", started);
      return UNKNOWN_POLICY_ANSWER;
    }
    // Fail closed on what only the gRPC check can carry (identity, metadata): the translator never sends those here.
    if (!httpCheckable(policy)) return deny("policy needs the gRPC check", { policy: parsed.id });
    // What an HTTP check decides needs nothing asynchronous (no basic-auth hash, no user extAuth): answered in the
    // same turn of the event loop, without a promise per check.
    let allowed: boolean;
    try {
      allowed = authorize(policy.authorization, activationOf(parsed.fields, false)).allowed;
    } catch (e) {
      observeAuthz(parsed.id, "error", started);
      return deny("internal error", { error: String(e) });
    }
    observeAuthz(parsed.id, allowed ? "allow" : "deny", started);
    return allowed ? ALLOW_ANSWER : FORBIDDEN_ANSWER;
  };
}

/** The clients of `options`, or ones made on first use (tests that never close them). */
function clientsOf(options: ExtAuthzOptions): () => UserExtAuthClients {
  let clients = options.clients;
  return () => {
    if (clients === undefined) clients = new UserExtAuthClients();
    return clients;
  };
}

/**
 * The Check method for the unary gRPC server (src/grpc/unary-server.ts), which serves it on Envoy's hot path with far
 * less overhead than grpc-js. Same decisions as addExtAuthzService.
 */
export function extAuthzUnaryHandlers(options: ExtAuthzOptions): ReadonlyMap<string, UnaryHandler> {
  const clients = clientsOf(options);
  const handler: UnaryHandler = async (bytes, headers) => {
    const started = performance.now();
    const fromMetadata = headers[POLICY_METADATA_KEY];
    let response: CheckResponse;
    // The policy's id when the table has it: a label of the decision metrics (ids never come from clients).
    let policy = "unknown";
    try {
      const fields = readCheckRequest(bytes);
      const metadataId = typeof fromMetadata === "string" ? fromMetadata : undefined;
      const id = fields.contextExtensions.get(POLICY_CONTEXT_KEY) ?? metadataId;
      const p = id === undefined ? undefined : options.policies().get(id);
      if (p !== undefined && id !== undefined) policy = id;
      const ua = p?.userExtAuth;
      if (ua !== undefined) {
        const request = () => fromBinary(CheckRequestSchema, bytes);
        const out = await checkUserExtAuth(ua, activationOf(fields, ua.jwt), request, clients(), options.logger);
        observeAuthz(policy, authzOutcomeOf(out), started);
        return out;
      }
      response = await checkFields(fields, options, metadataId);
    } catch (e) {
      options.logger?.warn("ext_authz: internal error, denying", { error: String(e) });
      response = denied(GRPC_PERMISSION_DENIED, StatusCode.Forbidden, "internal error", []);
    }
    const out = response === OK ? OK_BYTES : toBinary(CheckResponseSchema, response);
    observeAuthz(policy, authzOutcomeOf(out), started);
    return out;
  };
  return new Map([[`/${Authorization.typeName}/Check`, handler]]);
}

/** Adds the Authorization service to a grpc-js server. */
export function addExtAuthzService(server: grpc.Server, options: ExtAuthzOptions): void {
  const clients = clientsOf(options);
  addGrpcService(server, Authorization, {
    check: (call, callback) => {
      const fromMetadata = call.metadata.get(POLICY_METADATA_KEY)[0];
      const metadataId = typeof fromMetadata === "string" ? fromMetadata : undefined;
      const id = call.request.attributes?.contextExtensions[POLICY_CONTEXT_KEY] ?? metadataId;
      const ua = id === undefined ? undefined : options.policies().get(id)?.userExtAuth;
      const answer: Promise<CheckResponse> =
        ua === undefined
          ? check(call.request, options, metadataId)
          : checkUserExtAuth(
              ua,
              buildActivation(call.request, ua.jwt),
              () => copyCheckRequest(call.request),
              clients(),
              options.logger,
            ).then((bytes) => fromBinary(CheckResponseSchema, bytes));
      answer.then(
        (r) => callback(null, r),
        (e: unknown) => {
          // A bug, not user input: deny rather than let Envoy apply its failure mode to an error status.
          options.logger?.warn("ext_authz: internal error, denying", { error: String(e) });
          callback(null, denied(GRPC_PERMISSION_DENIED, StatusCode.Forbidden, "internal error", []));
        },
      );
    },
  });
}
