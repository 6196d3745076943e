// A route's global `Tokens` descriptors as Sluice's Realtime relay sends them itself (extproc/llm/realtime/
// global-tokens.ts). Envoy adds an HTTP request's tokens when its stream ends, from the metadata the LLM ext_proc wrote
// (xds/filters/global-ratelimit.ts); a websocket session's events never pass that ext_proc, so on a route that serves
// Realtime the relay counts each response.done and sends the same descriptors (domain, entries, cost) to the same
// rate limit service, with the response's tokens as hits. Envoy still checks the upgrade with 0 hits.

import type { UnaryTarget } from "../../extauthz/user-ext-auth.js";
import type { ClusterIR, RouteIR } from "../ir.js";
import { unaryTargets } from "../xds/filters/ext-authz-options.js";

export interface RealtimeTokenDescriptor {
  /** Entry name → its CEL expression, in order (the descriptor's entries). */
  readonly entries: readonly { readonly key: string; readonly expression: string }[];
  /** The descriptor's `cost` over `llm`; absent: the total tokens. */
  readonly cost?: string;
}

export interface RealtimeTokenLimit {
  readonly domain: string;
  /** The service as configured, for logs. */
  readonly service: string;
  /** Its ready endpoints, called in turn (none: every debit fails, logged). */
  readonly targets: readonly UnaryTarget[];
  readonly descriptors: readonly RealtimeTokenDescriptor[];
}

const isRec = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The `Tokens` descriptors of the route's `rateLimit.global` (PreRouting and PostRouting), with their service. */
export function realtimeTokenLimits(route: RouteIR, clusters: ReadonlyMap<string, ClusterIR>): RealtimeTokenLimit[] {
  const out: RealtimeTokenLimit[] = [];
  for (const phase of ["preRouting", "traffic"] as const) {
    const f = route.policy?.[phase]?.["rateLimit"];
    if (f === undefined || "combined" in f || !isRec(f.value) || !isRec(f.value.global)) continue;
    const g = f.value.global;
    const descriptors: RealtimeTokenDescriptor[] = [];
    for (const d of Array.isArray(g.descriptors) ? g.descriptors : []) {
      if (!isRec(d) || d.unit !== "Tokens" || !Array.isArray(d.entries)) continue;
      const entries = d.entries.flatMap((e) =>
        isRec(e) && typeof e.name === "string" && typeof e.expression === "string"
          ? [{ key: e.name, expression: e.expression }]
          : [],
      );
      descriptors.push({ entries, ...(typeof d.cost === "string" ? { cost: d.cost } : {}) });
    }
    if (descriptors.length === 0 || typeof g.domain !== "string") continue;
    // Resolved as for Envoy's filter (policy-fields.ts serviceCluster); one that is not is reported there.
    const ref = route.policy?.refs?.[`${phase}.rateLimit.global.backendRef`];
    const t = ref !== undefined && "cluster" in ref ? unaryTargets(clusters.get(ref.cluster), ref.cluster) : undefined;
    const backendRef = isRec(g.backendRef) ? g.backendRef : {};
    out.push({
      domain: g.domain,
      service: `${String(backendRef.kind ?? "Service")} ${String(backendRef.name ?? "")}`,
      targets: t !== undefined && "targets" in t ? t.targets : [],
      descriptors,
    });
  }
  return out;
}
