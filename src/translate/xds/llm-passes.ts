// What the passes over a Gateway's AI clusters share (llm-connection.ts, llm-health.ts, llm-transformation.ts): the
// routes of a Gateway, and the Gateway again with some AI clusters changed and problems added to some routes (routes
// without problems stay the same objects, which the route memo keeps).

import type { BackendProblemIR, GatewayIR, LlmClusterIR, RouteIR } from "../ir.js";

export function* routesOf(gw: GatewayIR): Generator<RouteIR> {
  for (const rc of gw.routeConfigs) for (const vh of rc.virtualHosts) yield* vh.routes;
}

/**
 * For each AI cluster of `gw` that forwarding routes reach, what `use` says of each such route (once per route, even
 * when several of its backendRefs name the cluster).
 */
export function llmClusterUses<U>(
  gw: GatewayIR,
  use: (c: LlmClusterIR, r: RouteIR) => U,
): Map<string, { readonly cluster: LlmClusterIR; readonly uses: U[] }> {
  const llm = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  const out = new Map<string, { cluster: LlmClusterIR; uses: U[] }>();
  if (llm.size === 0) return out;
  for (const r of routesOf(gw)) {
    if (r.action.kind !== "forward") continue;
    for (const name of new Set(r.action.backends.map((b) => b.cluster))) {
      const cluster = llm.get(name);
      if (cluster === undefined) continue;
      const entry = out.get(name) ?? { cluster, uses: [] };
      entry.uses.push(use(cluster, r));
      out.set(name, entry);
    }
  }
  return out;
}

/** `gw` with the AI clusters `changed` (by name) replaced and each route's `problems` added to its backend problems. */
export function withLlmChanges(
  gw: GatewayIR,
  changed: ReadonlyMap<string, LlmClusterIR>,
  problems: ReadonlyMap<RouteIR, readonly BackendProblemIR[]>,
): GatewayIR {
  if (changed.size === 0 && problems.size === 0) return gw;
  const routeOf = (r: RouteIR): RouteIR => {
    const more = problems.get(r);
    return more === undefined ? r : { ...r, backendProblems: [...(r.backendProblems ?? []), ...more] };
  };
  return {
    ...gw,
    clusters: gw.clusters.map((c) => (c.kind === "llm" ? (changed.get(c.name) ?? c) : c)),
    routeConfigs:
      problems.size === 0
        ? gw.routeConfigs
        : gw.routeConfigs.map((rc) => ({
            ...rc,
            virtualHosts: rc.virtualHosts.map((vh) => ({ ...vh, routes: vh.routes.map(routeOf) })),
          })),
  };
}
