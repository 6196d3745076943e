// A GwPolicy's `backend.tcp` and `backend.http.version` reaching an AI GwBackend: connection settings of the AI cluster
// (the connect timeout, TCP keepalive, HTTP/1.1 or HTTP/2), as the GwBackend's own `spec.policies` give them
// (backend/ai.ts clusterConnection). The spec merges per top-level field, GwPolicy first, so a GwPolicy's value is the
// effective one only where the GwBackend's own policies do not set that field; the two are never combined.
//
// One Envoy cluster holds every provider of the GwBackend, so that Envoy's priorities fail over between them. The
// cluster gets what the GwBackend's levels give (a GwPolicy targeting the GwBackend), or what every route asks when
// they all agree; a route asking other settings (a route-level GwPolicy's backend section) gets a variant of the
// cluster with its own (llm-passes.ts withLlmVariants), which later passes (health, transformation) complete, so a
// route with another transformation too gets one variant carrying both. `http.requestTimeout` is the route's timeout
// (traffic-route.ts), per route.

import { clusterConnection } from "../backend/ai.js";
import type { BackendProblemIR, GatewayIR, LlmClusterIR, RouteIR } from "../ir.js";
import { type LlmVariantFields, llmClusterUses, ROUTE_LEVELS, withLlmVariants } from "./llm-passes.js";
import { relaysRealtime } from "./realtime-relay.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** The cluster fields this pass serves from a GwPolicy. */
const FIELDS = ["tcp", "http"] as const;

interface Use {
  readonly route: RouteIR;
  /** The route's effective `http.version: HTTP2` and where it comes from (any level), when it has one. */
  readonly http2?: BackendProblemIR["from"];
  /** What the route's GwPolicies ask of the cluster (JSON of the parts served; "" for nothing). */
  readonly key: string;
  readonly policies: Rec;
  readonly from: readonly { field: string; from: BackendProblemIR["from"] }[];
}

function useOf(c: LlmClusterIR, r: RouteIR): Use {
  const bp = r.policy?.backends?.find((x) => x.cluster === c.name);
  const policies: Rec = {};
  const from: { field: string; from: BackendProblemIR["from"] }[] = [];
  for (const field of FIELDS) {
    const f = bp?.policy[field];
    if (f === undefined || "combined" in f || f.from.kind !== "GwPolicy" || !isRec(f.value)) continue;
    // Of `http`, the version only: its requestTimeout is the route's.
    const value = field === "http" ? (f.value.version !== undefined ? { version: f.value.version } : {}) : f.value;
    if (Object.keys(value).length === 0) continue;
    policies[field] = value;
    from.push({ field, from: f.from });
  }
  const http = bp?.policy["http"];
  const http2 =
    http !== undefined && !("combined" in http) && isRec(http.value) && http.value.version === "HTTP2"
      ? http.from
      : undefined;
  return {
    route: r,
    key: Object.keys(policies).length === 0 ? "" : JSON.stringify(policies),
    policies,
    from,
    ...(http2 !== undefined ? { http2 } : {}),
  };
}

/** The cluster's connection for `u`: the GwBackend's own, with what the route's GwPolicies add. */
function connectionOf(c: LlmClusterIR, u: Use): LlmVariantFields {
  if (u.key === "") return { connection: c.connection };
  return { connection: { ...c.connection, ...clusterConnection(u.policies) } };
}

/** `gw` with the AI clusters' connection settings from GwPolicies, and a variant per other settings routes ask. */
export function withLlmConnections(gw: GatewayIR): GatewayIR {
  const own = new Map<string, LlmVariantFields>();
  const routes = new Map<RouteIR, Map<string, LlmVariantFields>>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  for (const { cluster: c, uses: list } of llmClusterUses(gw, useOf).values()) {
    // The cluster's own: what every route asks when they agree, else what the GwBackend's levels give (a route with
    // no route-level GwPolicy for these fields has it; with none such, nothing from a GwPolicy).
    const keys = new Set(list.map((u) => u.key));
    const base =
      keys.size === 1 ? list[0] : list.find((u) => u.from.every(({ from }) => !ROUTE_LEVELS.has(from.level)));
    const ownKey = base?.key ?? "";
    if (ownKey !== "" && base !== undefined) own.set(c.name, connectionOf(c, base));
    for (const u of list) {
      if (u.key !== ownKey) {
        routes.set(
          u.route,
          (routes.get(u.route) ?? new Map<string, LlmVariantFields>()).set(c.name, connectionOf(c, u)),
        );
      }
      if (u.http2 === undefined || !relaysRealtime(u.route)) continue;
      // The relay dials with the variant's tcp (its route names the variant); its websocket to the provider is an
      // HTTP/1.1 upgrade whatever the version (the GwBackend's own too), so HTTP/2 serves the requests Envoy forwards.
      problems.set(u.route, [
        ...(problems.get(u.route) ?? []),
        {
          from: u.http2,
          // A GwBackend's own field is named under its spec.policies by the status.
          field: u.http2.kind === "GwPolicy" ? "backend.http.version" : "http.version",
          message: `applied to the requests of route ${u.route.name} that Envoy forwards, not to its Realtime sessions: Sluice's relay opens AI GwBackend ${c.backend}'s provider websockets with an HTTP/1.1 upgrade`,
          fatal: false,
        },
      ]);
    }
  }
  return withLlmVariants(gw, { own, routes, problems });
}
