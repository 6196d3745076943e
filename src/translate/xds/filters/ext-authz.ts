// traffic.extAuth → envoy.filters.http.ext_authz calling the user's authorization service, gRPC
// (envoy.service.auth.v3) or HTTP. The service and its options are listener-level in Envoy, so there is one instance
// per distinct configuration; per-request context (contextExtensions) goes on the route.
//
// What Envoy lacks — a decision `cache`, CEL per request (a non-constant HTTP path or added header, the body, the
// redirect of a denial, responseMetadata, gRPC requestMetadata), or an authorization on the route reading `extauthz` —
// makes the filter call Sluice's ext_authz instead (cluster `sluice_authz`), naming a policy-table entry that holds
// the user's service (its endpoints, protocol and options), the compiled CEL and the cache; Sluice answers from the
// cache or asks the service (src/extauthz/user-ext-auth.ts).

import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import type { ExtAuth } from "../../../api/auth.js";
import type { Static } from "../../../api/schema-kit.js";
import { JWT_METADATA_NAMESPACE } from "../../../cel/rbac.js";
import { EMPTY_AUTHORIZATION } from "../../../extauthz/authorization.js";
import { DEFAULT_MAX_ENTRIES, DecisionCache } from "../../../extauthz/decision-cache.js";
import { POLICY_CONTEXT_KEY } from "../../../extauthz/server.js";
import {
  type UnaryTarget,
  type UserExtAuthConfig,
  type UserExtAuthHttp,
  UserExtAuthState,
} from "../../../extauthz/user-ext-auth.js";
import { compileUserExtAuthExpressions, type UserExtAuthExpressions } from "../../../extauthz/user-ext-auth-cel.js";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  ExtAuthzPerRouteSchema,
  ExtAuthzSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_authz/v3/ext_authz_pb.js";
import type { ListStringMatcherSchema } from "../../../gen/envoy/type/matcher/v3/string_pb.js";
import { policyId } from "../../authz/policy-table.js";
import { parseByteSize } from "../../bytes.js";
import { durationFromMs } from "../../duration.js";
import type { BackendConnectionIR, RouteIR } from "../../ir.js";
import { SLUICE_AUTHZ_CLUSTER } from "../../names.js";
import { backendExtAuthFields } from "../backend-ext-auth.js";
import { routeAuthzPlan } from "./authz-plan.js";
import { type Expressions, grpcMetadata, httpOptions, type Note, unaryTargets } from "./ext-authz-options.js";
import {
  grpcService,
  instanceName,
  type PhaseField,
  phaseFields,
  phaseOrder,
  serviceCluster,
} from "./policy-fields.js";
import { type BuildContext, type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

type ExtAuthT = Static<typeof ExtAuth>;

const FILTER = "envoy.filters.http.ext_authz";
/** A backend's extAuth: its own instances, apart from the traffic ones (the same config may be in both places). */
const BACKEND_FILTER = "sluice.backend_ext_authz";

/** Whether `f` is a backend's extAuth (backend-ext-auth.ts) rather than a traffic one. */
function isBackendField(f: PhaseField<ExtAuthT>): boolean {
  return f.path.startsWith("backend.");
}

function extAuthOrder(f: PhaseField<ExtAuthT>): number {
  return isBackendField(f) ? FilterOrder.backendExtAuthz : phaseOrder(FilterOrder.userExtAuthz, f.phase);
}
const CHECK_TIMEOUT_MS = 10_000;
/** Envoy waits this much longer for Sluice than Sluice waits for the user's service, so Sluice's answer wins. */
const SLUICE_MARGIN_MS = 1_000;

function headerList(names: readonly string[]): MessageInitShape<typeof ListStringMatcherSchema> {
  return {
    patterns: names.map((n) => ({
      matchPattern: { case: "exact" as const, value: n.toLowerCase() },
      ignoreCase: true,
    })),
  };
}

function withRequestBody(a: ExtAuthT, packAsBytes: boolean) {
  if (a.forwardBody === undefined) return {};
  // Without partial messages Envoy rejects larger bodies with 413, as the spec says.
  return {
    withRequestBody: {
      maxRequestBytes: Math.min(parseByteSize(a.forwardBody.maxSize) ?? 0, 0xffffffff),
      allowPartialMessage: false,
      packAsBytes,
    },
  };
}

export const extAuthzBuilder: HttpFilterBuilder = {
  id: "ext_authz",
  schemas: [ExtAuthzSchema, ExtAuthzPerRouteSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const clusters: Cluster[] = [];
    const traffic = phaseFields<ExtAuthT>(route, "extAuth");
    // backend.extAuth: the same filter after every traffic filter (backend-ext-auth.ts says why on the route).
    const fields = [...traffic, ...backendExtAuthFields(route, ctx)];
    // The route's authorization reads what the user's service told: Sluice must front it to pass that on.
    const readsExtauthz = traffic.length > 0 && routeAuthzPlan(route, ctx)?.readsExtauthz === true;
    for (const f of fields) {
      const a = f.value;
      const backend = isBackendField(f);
      const note: Note = (field, message, reason) =>
        ctx.note(f.from, `${backend ? "backend." : ""}extAuth.${field}`, message, reason);
      const expressions: Expressions = {};
      const http = a.http === undefined ? undefined : httpOptions(a.http, expressions, note);
      if (http === undefined && a.grpc !== undefined) grpcMetadata(a.grpc, expressions, note);
      const needsSluice = a.cache !== undefined || Object.keys(expressions).length > 0 || readsExtauthz;
      // The route's authorization runs before a backend's extAuth: it never reads what that one told.
      const fronted = needsSluice
        ? sluiceFronted(route, f, http, expressions, readsExtauthz && !backend, ctx, note)
        : undefined;
      if (fronted !== undefined) {
        filters.push(fronted);
        continue;
      }
      const svc = serviceCluster(route, `${f.path}.backendRef`, f.from, ctx, a.http === undefined);
      if (svc.extra !== undefined) clusters.push(svc.extra);
      const config: MessageInitShape<typeof ExtAuthzSchema> = {
        transportApiVersion: ApiVersion.V3,
        failureModeAllow: a.failureMode === "FailOpen",
        ...withRequestBody(a, false),
      };
      if (http !== undefined) {
        config.services = {
          case: "httpService",
          value: {
            serverUri: {
              uri: `http://${a.backendRef.name}`,
              httpUpstreamType: { case: "cluster", value: svc.cluster },
              timeout: durationFromMs(CHECK_TIMEOUT_MS),
            },
            ...(http.path !== undefined ? { pathOverride: http.path } : {}),
            authorizationRequest: { headersToAdd: [...http.headersToAdd] },
            authorizationResponse: {
              ...(a.http?.allowedResponseHeaders !== undefined
                ? { allowedUpstreamHeaders: headerList(http.allowedUpstreamHeaders) }
                : {}),
            },
          },
        };
        config.allowedHeaders = headerList(http.allowedRequestHeaders);
      } else {
        config.services = { case: "grpcService", value: grpcService(svc.cluster, a.backendRef.name, CHECK_TIMEOUT_MS) };
      }
      const built = create(ExtAuthzSchema, config);
      filters.push({
        name: instanceName(backend ? BACKEND_FILTER : FILTER, toBinary(ExtAuthzSchema, built)),
        order: extAuthOrder(f),
        config: anyPack(ExtAuthzSchema, built),
        perRoute: anyPack(
          ExtAuthzPerRouteSchema,
          create(ExtAuthzPerRouteSchema, {
            override: { case: "checkSettings", value: { contextExtensions: { ...(a.grpc?.contextExtensions ?? {}) } } },
          }),
        ),
      });
    }
    return filters.length === 0 ? undefined : { filters, clusters };
  },
};

/**
 * The filter instance calling Sluice, whose table entry holds the service, the compiled CEL and the cache. Undefined
 * without a policy table (bare builder tests): then Envoy calls the service directly and the CEL fields are reported.
 * A cache that cannot be used (a ttl that is neither a duration, a timestamp nor CEL) is reported and left out.
 */
function sluiceFronted(
  route: RouteIR,
  f: PhaseField<ExtAuthT>,
  http: UserExtAuthHttp | undefined,
  expressions: UserExtAuthExpressions,
  readsExtauthz: boolean,
  ctx: BuildContext,
  note: Note,
): FilterInstance | undefined {
  const a = f.value;
  const table = ctx.authz?.table;
  if (table === undefined) {
    for (const k of Object.keys(expressions)) note(k, "needs the Sluice ext_authz service, which is not configured");
    return undefined;
  }
  const spec = a.cache;
  const compiled = spec === undefined ? undefined : DecisionCache.compile<Uint8Array>(spec, `spec.${f.path}.cache`);
  for (const p of compiled?.problems ?? []) {
    note("cache", `${p.path}: ${p.message}; the cache is not used, every request is checked by the service`, "Ignored");
  }
  const cache = compiled?.cache;
  if (spec !== undefined && cache === undefined && Object.keys(expressions).length === 0 && !readsExtauthz) {
    return undefined;
  }
  const cel = compileUserExtAuthExpressions(expressions);
  for (const p of cel.problems) note(p.path, `${p.message}; left out`, "Ignored");
  // jwt_authn runs before extAuth, except a PostRouting one for a PreRouting extAuth.
  const jwt =
    route.policy?.preRouting?.["jwtAuthentication"] !== undefined ||
    (f.phase === "traffic" && route.policy?.traffic?.["jwtAuthentication"] !== undefined);
  const seen = ["request", "source", ...(jwt ? ["jwt"] : [])];
  for (const v of cel.compiled.variables) {
    if (seen.includes(v)) continue;
    note(
      http === undefined ? "grpc.requestMetadata" : "http",
      `an expression reads ${v}, which the call to the service does not see (it sees ${seen.join(", ")}): it fails ` +
        "to evaluate, and the request is denied",
      "NeverMatches",
    );
  }
  for (const v of cache?.keyVariables ?? []) {
    if (seen.includes(v)) continue;
    note(
      "cache.key",
      `reads ${v}, which the decision cache does not see (it sees ${seen.join(", ")}): the key fails to evaluate, ` +
        "so every request is checked by the service and nothing is cached",
      "NeverMatches",
    );
  }
  const ttlSeen = [...seen, ...(http === undefined || expressions.responseMetadata !== undefined ? ["extauthz"] : [])];
  for (const v of cache?.ttlVariables ?? []) {
    if (ttlSeen.includes(v)) continue;
    note(
      "cache.ttl",
      `reads ${v}, which the decision cache does not see (it sees ${ttlSeen.join(", ")}): the ttl fails to ` +
        "evaluate, so nothing is cached",
      "NeverMatches",
    );
  }
  const readsJwt =
    jwt &&
    (cache?.keyVariables.has("jwt") === true ||
      cache?.ttlVariables.has("jwt") === true ||
      cel.compiled.variables.has("jwt"));
  const ref = a.backendRef;
  const config: Omit<UserExtAuthConfig, "targets"> & { forwardBody?: string | number } = {
    service: `${ref.kind ?? "Service"} ${ref.namespace ?? f.from.name.split("/")[0]}/${ref.name}${
      ref.port !== undefined ? ` port ${ref.port}` : ""
    }`,
    protocol: http === undefined ? "grpc" : "http",
    authority: ref.name,
    contextExtensions: http === undefined ? { ...(a.grpc?.contextExtensions ?? {}) } : {},
    timeoutMs: CHECK_TIMEOUT_MS,
    failureMode: a.failureMode ?? "FailClosed",
    ...(http !== undefined ? { http } : {}),
    jwt: readsJwt,
    // The service sees the body only with forwardBody, so its decisions are kept apart.
    ...(a.forwardBody !== undefined ? { forwardBody: a.forwardBody.maxSize } : {}),
    ...(Object.keys(expressions).length > 0 ? { expressions } : {}),
  };
  const content = {
    ...config,
    ...(spec !== undefined && cache !== undefined
      ? { cache: { key: spec.key, ttl: spec.ttl, maxEntries: spec.maxEntries ?? DEFAULT_MAX_ENTRIES } }
      : {}),
  };
  const targets = serviceTargets(route, f, ctx);
  const scope = policyId({ userExtAuthScope: content });
  const id = table.add({ userExtAuth: { ...content, targets } }, () => ({
    authorization: EMPTY_AUTHORIZATION,
    jwt: false,
    userExtAuth: {
      ...config,
      targets,
      scope,
      state: new UserExtAuthState(cache),
      ...(Object.keys(expressions).length > 0 ? { compiled: cel.compiled } : {}),
    },
  }));
  const built = create(ExtAuthzSchema, {
    services: {
      case: "grpcService",
      value: {
        targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
        timeout: durationFromMs(CHECK_TIMEOUT_MS + SLUICE_MARGIN_MS),
      },
    },
    transportApiVersion: ApiVersion.V3,
    // Sluice applies the failure mode when the service fails; Envoy applies it when Sluice cannot answer.
    failureModeAllow: a.failureMode === "FailOpen",
    // As bytes: Sluice passes binary bodies on intact.
    ...withRequestBody(a, true),
    ...(readsJwt ? { metadataContextNamespaces: [JWT_METADATA_NAMESPACE] } : {}),
  });
  return {
    name: instanceName(isBackendField(f) ? BACKEND_FILTER : FILTER, toBinary(ExtAuthzSchema, built)),
    order: extAuthOrder(f),
    config: anyPack(ExtAuthzSchema, built),
    perRoute: anyPack(
      ExtAuthzPerRouteSchema,
      create(ExtAuthzPerRouteSchema, {
        override: { case: "checkSettings", value: { contextExtensions: { [POLICY_CONTEXT_KEY]: id } } },
      }),
    ),
  };
}

/** Where Sluice calls the service: the ready endpoints of the backendRef's cluster. */
function serviceTargets(route: RouteIR, f: PhaseField<ExtAuthT>, ctx: BuildContext): UnaryTarget[] {
  const ref = route.policy?.refs?.[`${f.path}.backendRef`];
  const field = `${isBackendField(f) ? "backend." : ""}extAuth.backendRef`;
  if (ref === undefined || "error" in ref) {
    ctx.note(
      f.from,
      field,
      `${ref?.error ?? "not resolved"}; calls to this service fail until it resolves (the failure mode applies)`,
    );
    return [];
  }
  const cluster = ctx.cluster?.(ref.cluster);
  const t = unaryTargets(cluster, ref.cluster);
  if ("problem" in t) ctx.note(f.from, field, t.problem, t.reason);
  if ("problem" in t) return [];
  // The Service's backend policy's TLS (a variant of its cluster, backend-connection.ts): Sluice's calls use it too.
  const connection = cluster !== undefined && "connection" in cluster ? cluster.connection : undefined;
  const tls = (connection as BackendConnectionIR | undefined)?.tls;
  return tls === undefined ? t.targets : t.targets.map((x) => ("unixPath" in x ? x : { ...x, tls }));
}
