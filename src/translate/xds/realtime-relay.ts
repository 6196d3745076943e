// The twin route that sends a guarded Realtime route's websocket upgrades to Sluice's Realtime relay
// (src/extproc/llm/realtime/relay.ts): Envoy's ext_proc does not see websocket frames, so prompt guards on a Realtime
// session, and counting its tokens against a `tokens` limit, need Sluice in the path. Only routes whose AI backends
// have prompt guards get it, routes with a `tokens` limit or `Tokens` descriptor, and those to a provider behind an InferencePool
// (realtimeToPool); other Realtime routes stay websockets Envoy passes straight to the provider.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../cel/rbac.js";
import { EXTAUTHZ_METADATA_NAMESPACE } from "../../extauthz/user-ext-auth.js";
import {
  HeaderValueOption_HeaderAppendAction,
  HeaderValueOptionSchema,
} from "../../gen/envoy/config/core/v3/base_pb.js";
import {
  HeaderMatcherSchema,
  type Route,
  RouteAction_UpgradeConfigSchema,
  RouteMatchSchema,
  RouteSchema,
} from "../../gen/envoy/config/route/v3/route_components_pb.js";
import { durationFromMs } from "../duration.js";
import type { EffectivePolicyIR, RouteIR } from "../ir.js";
import {
  REALTIME_AUTHZ_HEADER,
  REALTIME_CLUSTER_HEADER,
  REALTIME_DESTINATION_HEADER,
  REALTIME_ENTRY_HEADER,
  REALTIME_JWT_HEADER,
  REALTIME_SOURCE_HEADER,
  SLUICE_AUTHZ_HTTP_CLUSTER,
} from "../names.js";
import { ENDPOINT_PICKER_FILTER } from "./filters/inference-pool.js";
import type { BuildContext } from "./filters/types.js";
import { servesRealtime } from "./llm.js";

type Init<T extends Parameters<typeof create>[0]> = MessageInitShape<T>;

function hasGuards(policy: EffectivePolicyIR | undefined): boolean {
  const ai = policy?.ai;
  if (ai === undefined || "combined" in ai) return false;
  const g = (ai.value as { promptGuard?: { request?: unknown; response?: unknown } } | undefined)?.promptGuard;
  const some = (v: unknown) => Array.isArray(v) && v.length > 0;
  return typeof g === "object" && g !== null && (some(g.request) || some(g.response));
}

/**
 * Whether the route counts tokens: a `rateLimit.local[].tokens` limit, or a global `Tokens` descriptor, which the relay
 * debits with its sessions' tokens.
 */
function countsTokens(route: RouteIR): boolean {
  return [route.policy?.preRouting, route.policy?.traffic].some((phase) => {
    const f = phase?.["rateLimit"];
    if (f === undefined || "combined" in f) return false;
    const v = f.value as { local?: unknown; global?: { descriptors?: unknown } } | undefined;
    const local = Array.isArray(v?.local) ? v.local : [];
    const global = Array.isArray(v?.global?.descriptors) ? v.global.descriptors : [];
    return (
      local.some((l) => typeof (l as { tokens?: unknown } | null)?.tokens === "number") ||
      global.some((d) => (d as { unit?: unknown } | null)?.unit === "Tokens")
    );
  });
}

/**
 * Whether the route serves Realtime and its upgrades go through the relay: a provider behind it has prompt guards, or
 * the route has a `tokens` limit or a global `Tokens` descriptor (a websocket Envoy passes through is never read: its
 * responses' tokens could not be counted; extproc/llm/realtime/usage.ts, global-tokens.ts).
 */
export function relaysRealtime(route: RouteIR): boolean {
  if (!servesRealtime(route)) return false;
  return (
    countsTokens(route) ||
    (route.policy?.backends ?? []).some(
      (b) => hasGuards(b.policy) || (b.subBackends ?? []).some((s) => hasGuards(s.policy)),
    )
  );
}

/**
 * Whether the route serves Realtime to a provider behind an InferencePool: its upgrades go through the relay too, which
 * asks the pool's endpoint picker once per session (extproc/llm/realtime/picker.ts). On the direct route Envoy's picker
 * filter holds the upgrade until a request body ends, which a websocket's never does, and the session never opens.
 */
export function realtimeToPool(route: RouteIR, ctx: BuildContext | undefined): boolean {
  if (route.action.kind !== "forward" || !servesRealtime(route)) return false;
  return route.action.backends.some((b) => {
    const c = ctx?.cluster?.(b.cluster);
    return c?.kind === "llm" && c.groups.flat().some((p) => p.pool !== undefined);
  });
}

/**
 * The relay twin of `main` (the route as built, a copy of its own: it is changed in place), to go before it: the same
 * match plus a websocket `Upgrade` header and all its filters (the LLM ext_proc too: it admits the upgrade against the
 * `tokens` limits; the provider's work, its extAuth included, is the relay's), to `sluice_authz_http`
 * with the route's LLM entry, AI cluster and the client's connection in headers that overwrite any the client sent.
 * Undefined when the route does not relay.
 */
export function buildRealtimeRelayRoute(
  r: RouteIR,
  main: Init<typeof RouteSchema>,
  ctx: BuildContext | undefined,
): Route | undefined {
  const a = r.action;
  if (a.kind !== "forward" || !(relaysRealtime(r) || realtimeToPool(r, ctx))) return undefined;
  const entry = ctx?.llmEntry?.(r.name);
  const cluster = a.backends.find((b) => ctx?.cluster?.(b.cluster)?.kind === "llm")?.cluster;
  if (entry === undefined || cluster === undefined) return undefined;
  const twin = create(RouteSchema, main);
  if (twin.action.case !== "route") return undefined;
  twin.name = `${r.name}/realtime`;
  twin.match ??= create(RouteMatchSchema);
  twin.match.headers.push(
    create(HeaderMatcherSchema, {
      name: "upgrade",
      headerMatchSpecifier: {
        case: "stringMatch",
        value: { matchPattern: { case: "contains", value: "websocket" }, ignoreCase: true },
      },
    }),
  );
  for (const [key, value] of [
    [REALTIME_ENTRY_HEADER, entry],
    // The cluster the route reaches: a variant's providers carry the route's own TLS, tunnel and tcp, which the relay
    // dials with; it finds the provider's table entry under the AI cluster's name (clusterVariantBase).
    [REALTIME_CLUSTER_HEADER, cluster],
    // The client's connection, for a provider's extAuth check (the relay's own peer is Envoy).
    [REALTIME_SOURCE_HEADER, "%DOWNSTREAM_REMOTE_ADDRESS%"],
    [REALTIME_DESTINATION_HEADER, "%DOWNSTREAM_LOCAL_ADDRESS%"],
    // The route's identity, as JSON (absent metadata: no header; a client's own is removed first).
    [REALTIME_JWT_HEADER, `%DYNAMIC_METADATA(${JWT_METADATA_NAMESPACE}:${JWT_PAYLOAD_KEY})%`],
    [REALTIME_AUTHZ_HEADER, `%DYNAMIC_METADATA(${EXTAUTHZ_METADATA_NAMESPACE})%`],
  ] as const) {
    twin.requestHeadersToAdd.push(
      create(HeaderValueOptionSchema, {
        header: { key, value },
        appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
      }),
    );
  }
  // Envoy removes these before it adds the route's own: a value Envoy leaves empty (no metadata) is not the client's.
  twin.requestHeadersToRemove.push(REALTIME_JWT_HEADER, REALTIME_AUTHZ_HEADER);
  // A provider behind an InferencePool: the relay asks the pool's picker itself, once per session
  // (extproc/llm/realtime/picker.ts); Envoy's picker filter would wait for a body the upgrade never ends.
  for (const name of Object.keys(twin.typedPerFilterConfig)) {
    if (name.startsWith(`${ENDPOINT_PICKER_FILTER}/`)) delete twin.typedPerFilterConfig[name];
  }
  const action = twin.action.value;
  action.clusterSpecifier = { case: "cluster", value: SLUICE_AUTHZ_HTTP_CLUSTER };
  action.retryPolicy = undefined;
  action.requestMirrorPolicies = [];
  action.hostRewriteSpecifier = { case: undefined };
  // A session lasts as long as the client keeps it.
  action.timeout = create(DurationSchema, durationFromMs(0));
  action.upgradeConfigs = [create(RouteAction_UpgradeConfigSchema, { upgradeType: "websocket", enabled: true })];
  return twin;
}
