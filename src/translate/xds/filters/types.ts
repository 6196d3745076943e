// The HTTP filter chain framework. Every HttpConnectionManager has the same filters in one fixed order
// (ARCHITECTURE.md, "Envoy filter chain"); each optional filter is present but `disabled: true` and is enabled per
// route through typed_per_filter_config. One file per Envoy filter implements HttpFilterBuilder and registers in
// ./registry.ts.

import type { DescMessage } from "@bufbuild/protobuf";
import type { Any } from "@bufbuild/protobuf/wkt";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import type { AuthzContext, NoteReason } from "../../authz/plan.js";
import type { ClusterIR, EffectivePolicyIR, PolicyFieldIR, PolicySourceIR, RouteIR } from "../../ir.js";

/** Positions in the chain (ARCHITECTURE.md); gaps leave room. Lower runs first. */
export const FilterOrder = {
  cors: 100,
  /** Sluice computing `jwtAuthentication.location.expression` into a header jwt_authn reads (context.ts). */
  jwtContext: 190,
  jwtAuthn: 200,
  jwtKidRequired: 250,
  sluiceAuthn: 300,
  userExtAuthz: 400,
  authorization: 500,
  localRateLimit: 600,
  /** Sluice computing values the global rate limit and the user's ext_proc read (context.ts). */
  context: 640,
  globalRateLimit: 650,
  buffer: 700,
  userExtProc: 750,
  /** Sluice computing the user's ext_proc response attributes on the response, which reaches it first (context.ts). */
  responseContext: 755,
  /** traffic.transformation in Sluice's ext_proc. */
  transformation: 760,
  /** A GwBackend a2a's agent card served with the Gateway's address (after transformations, which see the agent's). */
  a2a: 770,
  sluiceExtProc: 800,
  /** An InferencePool's endpoint picker: after the LLM ext_proc, so it sees the body the model server gets. */
  endpointPicker: 810,
  /** Global rate limits that count LLM tokens or read `llm`: after the LLM ext_proc (global-ratelimit.ts says why). */
  llmRateLimit: 820,
  csrf: 850,
  /** `backend.extAuth`: after every traffic filter, as close to the backend as a route-level filter gets. */
  backendExtAuthz: 860,
  /** Resolves the Host header's host for a dynamic forward proxy backend, just before the router. */
  dynamicForwardProxy: 880,
  headerMutation: 900,
  fault: 950,
} as const;

/** Namespace of Sluice's own route metadata (read by local-reply mappers). */
export const SLUICE_ROUTE_METADATA = "sluice";

/** One filter in the chain. Several routes asking for the same `name` share it; the first config wins. */
export interface FilterInstance {
  /** Unique name in the chain, e.g. `envoy.filters.http.cors` or `sluice.user_ext_authz/<id>` for one of several. */
  readonly name: string;
  readonly order: number;
  /** Listener-level config (the filter is added with `disabled: true` and enabled per route). */
  readonly config: Any;
  /** Per-route config; when absent the route enables the filter with its listener-level config. */
  readonly perRoute?: Any;
}

/** What a builder adds to one route. */
export interface RouteContribution {
  readonly filters?: readonly FilterInstance[];
  /** Clusters the filter calls (a JWKS server, a rate limit service, an ext_authz service, ...). */
  readonly clusters?: readonly Cluster[];
}

/**
 * A policy field Sluice accepts but cannot apply (yet), or applies in a way the user should know about (an expression
 * that can never match), reported as a Warning condition in the policy's status, never dropped silently.
 */
export interface PolicyNote {
  readonly from: PolicySourceIR;
  readonly field: string;
  readonly message: string;
  /** The Warning reason; NotYetSupported when absent. */
  readonly reason?: NoteReason;
}

export interface BuildContext {
  /** Reports a field that is accepted but not (yet) applied, or never matches, with the reason. */
  note(from: PolicySourceIR, field: string, message: string, reason?: NoteReason): void;
  /** Translation-wide authentication/authorization state (policy table, Secrets); absent in bare builder tests. */
  readonly authz?: AuthzContext;
  /** Id of the LLM table entry of a route (routes to AI backends), if any. */
  llmEntry?(routeName: string): string | undefined;
  /** A cluster of the Gateway by name (policy backendRefs resolve to these), for services Sluice itself calls. */
  cluster?(name: string): ClusterIR | undefined;
}

export interface HttpFilterBuilder {
  /** For docs and errors. */
  readonly id: string;
  /** Message types this builder packs into Any, for printing (`sluice translate`, goldens). */
  readonly schemas: readonly DescMessage[];
  /** What this builder adds for one route, from its effective policies; undefined when nothing. */
  forRoute(route: RouteIR, ctx: BuildContext): RouteContribution | undefined;
}

/** The post-routing traffic field `name` of a route, if set (single value; combined fields return undefined). */
export function trafficField(route: RouteIR, name: string): { value: unknown; from: PolicySourceIR } | undefined {
  return singleField(route.policy?.traffic, name);
}

export function singleField(
  policy: EffectivePolicyIR | undefined,
  name: string,
): { value: unknown; from: PolicySourceIR } | undefined {
  const f: PolicyFieldIR | undefined = policy?.[name];
  if (f === undefined || "combined" in f) return undefined;
  return f;
}
