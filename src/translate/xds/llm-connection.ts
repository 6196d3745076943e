// A GwPolicy's `backend.tcp` and `backend.http.version` reaching an AI GwBackend: connection settings of the AI cluster
// (the connect timeout, TCP keepalive, HTTP/1.1 or HTTP/2), as the GwBackend's own `spec.policies` give them
// (backend/ai.ts clusterConnection). The spec merges per top-level field, GwPolicy first, so a GwPolicy's value is the
// effective one only where the GwBackend's own policies do not set that field; the two are never combined.
//
// One Envoy cluster serves every route reaching the GwBackend, so those routes must agree: they do for a GwPolicy
// targeting the GwBackend. Routes that differ (a route-level GwPolicy's backend section for some of them) get none,
// each reported naming the field. `http.requestTimeout` is the route's timeout (traffic-route.ts), per route.

import { clusterConnection } from "../backend/ai.js";
import type { BackendProblemIR, GatewayIR, LlmClusterIR, RouteIR } from "../ir.js";
import { llmClusterUses, withLlmChanges } from "./llm-passes.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** The cluster fields this pass serves from a GwPolicy. */
const FIELDS = ["tcp", "http"] as const;

interface Use {
  readonly route: RouteIR;
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
  return { route: r, key: Object.keys(policies).length === 0 ? "" : JSON.stringify(policies), policies, from };
}

/** `gw` with the AI clusters' connection settings from GwPolicies, and the routes whose GwPolicies could not apply. */
export function withLlmConnections(gw: GatewayIR): GatewayIR {
  const changed = new Map<string, LlmClusterIR>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  for (const { cluster: c, uses: list } of llmClusterUses(gw, useOf).values()) {
    const keys = new Set(list.map((u) => u.key));
    const first = list[0];
    if (keys.size === 1 && first !== undefined) {
      if (first.key !== "")
        changed.set(c.name, { ...c, connection: { ...c.connection, ...clusterConnection(first.policies) } });
      continue;
    }
    for (const u of list) {
      if (u.from.length === 0) continue;
      problems.set(u.route, [
        ...(problems.get(u.route) ?? []),
        ...u.from.map(({ field, from }) => ({
          from,
          field: `backend.${field}`,
          message: `not applied: the routes reaching AI GwBackend ${c.backend} ask for different ${field} settings, and one Envoy cluster serves all of its providers for every route (set it in a GwPolicy targeting the GwBackend, or in its spec.policies)`,
          fatal: false,
        })),
      ]);
    }
  }
  return withLlmChanges(gw, changed, problems);
}
