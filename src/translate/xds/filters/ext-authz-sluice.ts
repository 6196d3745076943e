// ext_authz → Sluice (src/extauthz/server.ts): basic and API key authentication at `sluiceAuthn`, and CEL
// authorization that does not compile to RBAC at `authorization` (or joined with authentication in one call).
// Envoy names the policy-table entry with the per-route context extension `sluice.policy`, or, for an authorization
// that reads only the request and its source, checks over HTTP with the id in the path (src/extauthz/http-check.ts).

import { create, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { JWT_METADATA_NAMESPACE } from "../../../cel/rbac.js";
import { type RequestReads, requestReads } from "../../../cel/reads.js";
import {
  HTTP_AUTHZ_HEADERS,
  HTTP_AUTHZ_PREFIX,
  ORIGINAL_PREFIX,
  RESERVED_PREFIX,
  SHADOWED_HEADERS,
  VALUE_MARK,
} from "../../../extauthz/http-check.js";
import { type ExtAuthzPolicy, httpCheckable, POLICY_CONTEXT_KEY } from "../../../extauthz/server.js";
import { EXTAUTHZ_METADATA_NAMESPACE } from "../../../extauthz/user-ext-auth.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  ExtAuthzPerRouteSchema,
  ExtAuthzSchema,
  HttpServiceSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_authz/v3/ext_authz_pb.js";
import type { HttpAuthzPlan } from "../../authz/plan.js";
import type { RouteIR } from "../../ir.js";
import { SLUICE_AUTHZ_CLUSTER, SLUICE_AUTHZ_HTTP_CLUSTER } from "../../names.js";
import { routeAuthzPlan } from "./authz-plan.js";
import { instanceName, phaseOrder } from "./policy-fields.js";
import {
  type BuildContext,
  type FilterInstance,
  FilterOrder,
  type HttpFilterBuilder,
  SLUICE_ROUTE_METADATA,
} from "./types.js";

export const SLUICE_AUTHN_FILTER = "sluice.ext_authz.authn";
export const SLUICE_AUTHZ_FILTER = "sluice.ext_authz.authz";
/** The authorization for policies that read only the request and its source, as an HTTP check (http-check.ts). */
export const SLUICE_AUTHZ_HTTP_FILTER = "sluice.ext_authz.authz_http";

/** Listener-level config: call Sluice over the bootstrap cluster, fail closed, pass the JWT payload. */
export function sluiceExtAuthz() {
  return create(ExtAuthzSchema, {
    services: {
      case: "grpcService",
      value: {
        targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
        timeout: { seconds: 2n },
      },
    },
    transportApiVersion: ApiVersion.V3,
    // A Sluice that cannot answer must not open the gate (status_on_error defaults to 403).
    failureModeAllow: false,
    // The JWT payload (`jwt`), and what a user's extAuth fronted by Sluice left for later steps (`extauthz`).
    metadataContextNamespaces: [JWT_METADATA_NAMESPACE, EXTAUTHZ_METADATA_NAMESPACE],
  });
}

/** Route metadata (namespace `sluice`) naming the policy of a route's HTTP check. */
export const AUTHZ_POLICY_METADATA_KEY = "authzPolicy";

/**
 * Config of the HTTP check: the request's headers that the policy reads go to Sluice (all of them when it reads the
 * map as a whole), with the policy id from the route's metadata and, where the policy reads them, what the gRPC check
 * has in its attributes (source, scheme, the headers Envoy's client overwrites); failures deny. Routes only enable it
 * (a per-route http_service would name the policy too, but Envoy then makes a client per check: about 10% fewer
 * checks per second in bench/authz). Sending less than every header saves Envoy and Sluice about 12 µs per check.
 */
export function sluiceExtAuthzHttp(reads: RequestReads = READS_EVERYTHING) {
  const shadowed = SHADOWED_HEADERS.filter((h) => reads.headers === "all" || reads.headers.has(h));
  const named =
    reads.headers === "all"
      ? undefined
      : [...reads.headers].filter((h) => !h.startsWith(":") && !(SHADOWED_HEADERS as readonly string[]).includes(h));
  return create(ExtAuthzSchema, {
    services: {
      case: "httpService",
      value: create(HttpServiceSchema, {
        serverUri: {
          uri: `http://${SLUICE_AUTHZ_HTTP_CLUSTER}`,
          httpUpstreamType: { case: "cluster", value: SLUICE_AUTHZ_HTTP_CLUSTER },
          timeout: { seconds: 2n },
        },
        pathPrefix: HTTP_AUTHZ_PREFIX,
        authorizationRequest: {
          // Each value starts with `v=`: Envoy leaves out a header whose value formats to nothing, which would
          // then be absent rather than empty (and, without disallowed_headers below, the client's would pass).
          headersToAdd: [
            {
              key: HTTP_AUTHZ_HEADERS.policy,
              value: `${VALUE_MARK}%METADATA(ROUTE:${SLUICE_ROUTE_METADATA}:${AUTHZ_POLICY_METADATA_KEY})%`,
            },
            ...(reads.source
              ? [{ key: HTTP_AUTHZ_HEADERS.source, value: `${VALUE_MARK}%DOWNSTREAM_REMOTE_ADDRESS%` }]
              : []),
            ...(reads.scheme ? [{ key: HTTP_AUTHZ_HEADERS.scheme, value: `${VALUE_MARK}%REQ(:SCHEME)%` }] : []),
            ...shadowed.map((h) => ({ key: `${ORIGINAL_PREFIX}${h}`, value: `${VALUE_MARK}%REQ(${h})%` })),
          ],
        },
      }),
    },
    transportApiVersion: ApiVersion.V3,
    failureModeAllow: false,
    allowedHeaders: {
      patterns:
        named === undefined
          ? [{ matchPattern: { case: "safeRegex", value: { regex: ".*" } } }]
          : named.length === 0
            ? // At least one pattern is required; a reserved name is dropped below, so none of the request's pass.
              [{ matchPattern: { case: "exact", value: HTTP_AUTHZ_HEADERS.policy } }]
            : named.sort().map((h) => ({ matchPattern: { case: "exact" as const, value: h }, ignoreCase: true })),
    },
    // A client's own x-sluice-authz-* headers never reach Sluice: only the ones added above do.
    disallowedHeaders: { patterns: [{ matchPattern: { case: "prefix", value: RESERVED_PREFIX } }] },
  });
}

/**
 * The id of the route's Sluice authorization when it goes over HTTP: a policy that reads only the request and its
 * source (Envoy's HTTP client costs it about half of what its gRPC client does per check), unless gRPC is asked for.
 */
export function httpAuthzPolicyId(route: RouteIR, ctx: BuildContext): string | undefined {
  return httpAuthzOf(routeAuthzPlan(route, ctx), ctx);
}

function httpAuthzOf(plan: HttpAuthzPlan | undefined, ctx: BuildContext): string | undefined {
  return httpPolicyOf(plan, ctx)?.id;
}

function httpPolicyOf(
  plan: HttpAuthzPlan | undefined,
  ctx: BuildContext,
): { readonly id: string; readonly policy: ExtAuthzPolicy } | undefined {
  const id = plan?.authzPolicyId;
  if (id === undefined || ctx.authz?.path === "sluice-grpc") return undefined;
  const policy = ctx.authz?.table.get(id);
  return policy !== undefined && httpCheckable(policy) ? { id, policy } : undefined;
}

function instance(name: string, order: number, policyId: string): FilterInstance {
  return {
    name,
    order,
    config: anyPack(ExtAuthzSchema, sluiceExtAuthz()),
    perRoute: anyPack(
      ExtAuthzPerRouteSchema,
      create(ExtAuthzPerRouteSchema, {
        override: { case: "checkSettings", value: { contextExtensions: { [POLICY_CONTEXT_KEY]: policyId } } },
      }),
    ),
  };
}

// Envoy wants a per-route config for ext_authz; empty check settings change nothing.
const HTTP_PER_ROUTE = anyPack(
  ExtAuthzPerRouteSchema,
  create(ExtAuthzPerRouteSchema, { override: { case: "checkSettings", value: {} } }),
);
/** What a policy reading the whole request needs; the default of sluiceExtAuthzHttp. */
const READS_EVERYTHING: RequestReads = { headers: "all", scheme: true, source: true };

/** HTTP check instances by what their policies read: routes whose policies read the same share one. */
const httpInstances = new Map<string, FilterInstance>();
/** The instance of each policy id (ids are content hashes), so a policy's expressions are read once. */
const httpInstanceOfPolicy = new Map<string, FilterInstance>();

/**
 * The HTTP check for a policy, enabled on its route (its id is in the route's metadata, traffic-route.ts): one
 * instance per distinct set of what policies read, `sluice.ext_authz.authz_http` when they read everything.
 */
function httpInstance(id: string, policy: ExtAuthzPolicy): FilterInstance {
  const known = httpInstanceOfPolicy.get(id);
  if (known !== undefined) return known;
  const a = policy.authorization;
  const reads = requestReads([...a.deny, ...a.require, ...a.allow].flatMap((r) => r.expressions));
  const key = JSON.stringify([reads.headers === "all" ? "all" : [...reads.headers].sort(), reads.scheme, reads.source]);
  let instance = httpInstances.get(key);
  if (instance === undefined) {
    const built = sluiceExtAuthzHttp(reads);
    instance = {
      name:
        reads.headers === "all" && reads.scheme && reads.source
          ? SLUICE_AUTHZ_HTTP_FILTER
          : instanceName(SLUICE_AUTHZ_HTTP_FILTER, toBinary(ExtAuthzSchema, built)),
      order: FilterOrder.authorization,
      config: anyPack(ExtAuthzSchema, built),
      perRoute: HTTP_PER_ROUTE,
    };
    if (httpInstances.size >= 4096) httpInstances.clear();
    httpInstances.set(key, instance);
  }
  if (httpInstanceOfPolicy.size >= 4096) httpInstanceOfPolicy.clear();
  httpInstanceOfPolicy.set(id, instance);
  return instance;
}

export const sluiceExtAuthzBuilder: HttpFilterBuilder = {
  id: "sluice-ext-authz",
  schemas: [ExtAuthzSchema, ExtAuthzPerRouteSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    // PreRouting authentication and authorization: filters of their own, before every PostRouting filter, calling
    // Sluice over gRPC (the HTTP check finds its policy in the route's metadata, which names the PostRouting one).
    const pre = routeAuthzPlan(route, ctx, "preRouting");
    if (pre?.authnPolicyId !== undefined) {
      filters.push(
        instance(
          `${SLUICE_AUTHN_FILTER}.pre_routing`,
          phaseOrder(FilterOrder.sluiceAuthn, "preRouting"),
          pre.authnPolicyId,
        ),
      );
    }
    if (pre?.authzPolicyId !== undefined) {
      filters.push(
        instance(
          `${SLUICE_AUTHZ_FILTER}.pre_routing`,
          phaseOrder(FilterOrder.authorization, "preRouting"),
          pre.authzPolicyId,
        ),
      );
    }
    const plan = routeAuthzPlan(route, ctx);
    if (plan === undefined) return filters.length > 0 ? { filters } : undefined;
    if (plan.authnPolicyId !== undefined) {
      filters.push(instance(SLUICE_AUTHN_FILTER, FilterOrder.sluiceAuthn, plan.authnPolicyId));
    }
    if (plan.authzPolicyId !== undefined) {
      const http = httpPolicyOf(plan, ctx);
      filters.push(
        http !== undefined
          ? httpInstance(http.id, http.policy)
          : instance(SLUICE_AUTHZ_FILTER, FilterOrder.authorization, plan.authzPolicyId),
      );
    }
    return filters.length > 0 ? { filters } : undefined;
  },
};
