// What the passes over a Gateway's AI clusters share (llm-connection.ts, llm-health.ts, llm-transformation.ts): the
// routes of a Gateway, and the Gateway again with some AI clusters changed and problems added to some routes (routes
// without problems stay the same objects, which the route memo keeps).
//
// Route-level settings (a route-level GwPolicy's `backend` section, a route's retry.condition) are served by variants
// of the AI cluster, `<cluster>~<hash>` (withLlmVariants): one Envoy cluster holds every provider of a GwBackend so
// that Envoy's priorities fail over between them, so a route asking other cluster settings than the others gets a
// copy of the cluster with its own. The passes compose: each sets its fields on the cluster or variant a route already
// reaches, so a route asking another transformation and another connect timeout gets one variant carrying both, named
// by what it changes from the cluster.

import { createHash } from "node:crypto";
import type { BackendProblemIR, ClusterIR, GatewayIR, LlmClusterIR, PolicyLevel, RouteIR } from "../ir.js";
import { clusterVariantBase, clusterVariantName } from "../names.js";

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
    // A variant (withLlmVariants) counts as the cluster it was made from: route policies name that one.
    for (const name of new Set(r.action.backends.map((b) => clusterVariantBase(b.cluster)))) {
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

/** Levels of a GwPolicy that depend on the route (the others target the GwBackend or one of its providers). */
export const ROUTE_LEVELS: ReadonlySet<PolicyLevel> = new Set(["gateway", "port", "listener", "route", "rule"]);

/** The fields of an AI cluster a route can have its own value of (a variant). */
export type LlmVariantFields = {
  readonly [K in "connection" | "transformation" | "health" | "groups"]?: LlmClusterIR[K] | undefined;
};

/**
 * What one pass asks: `own`, by AI cluster name, the values of its fields for the cluster itself (what the GwBackend's
 * levels give; a field given as undefined is removed); `routes`, per route and AI cluster name, the values where the
 * route's differ from `own` (the other routes reaching the cluster get `own`).
 */
export interface LlmVariantPass {
  readonly own: ReadonlyMap<string, LlmVariantFields>;
  readonly routes: ReadonlyMap<RouteIR, ReadonlyMap<string, LlmVariantFields>>;
  readonly problems?: ReadonlyMap<RouteIR, readonly BackendProblemIR[]>;
}

function patched(c: LlmClusterIR, fields: LlmVariantFields | undefined): LlmClusterIR {
  if (fields === undefined) return c;
  const out: Record<string, unknown> = { ...c };
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) delete out[k];
    else out[k] = v;
  }
  return out as unknown as LlmClusterIR;
}

/** JSON with object keys sorted: the same content gives the same text, whatever order it was built in. */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    typeof x === "object" && x !== null && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}

/**
 * The fields in which `v` differs from `base` (its name aside), for the variant's name. A client certificate's chain
 * and key are named by their SDS secret: cluster names show in stats and admin output, and a changed key reaches Envoy
 * through its secret, under the same name.
 */
function difference(v: LlmClusterIR, base: LlmClusterIR): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const a = v as unknown as Record<string, unknown>;
  const b = base as unknown as Record<string, unknown>;
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    // edsOf: which EDS resource a scored variant reads follows from its other fields (llm-health.ts).
    if (k === "name" || k === "edsOf" || canonical(a[k]) === canonical(b[k])) continue;
    out[k] =
      k === "groups"
        ? v.groups.map((g) =>
            g.map((p) =>
              p.tls?.clientCert === undefined ? p : { ...p, tls: { ...p.tls, clientCert: p.tls.clientCert.secret } },
            ),
          )
        : (a[k] ?? null);
  }
  return out;
}

/**
 * `gw` after one pass over its AI clusters: each cluster with the pass's `own` values, each route reaching one sent to
 * the cluster, or to the variant that is the cluster (or the variant an earlier pass gave the route) with the route's
 * values, named by how it differs from the cluster. One variant per distinct difference, so never more than routes;
 * variants no route reaches any more are dropped. Routes whose backends and problems stay are the same objects.
 */
export function withLlmVariants(gw: GatewayIR, pass: LlmVariantPass): GatewayIR {
  const problems = pass.problems ?? new Map<RouteIR, readonly BackendProblemIR[]>();
  if (pass.own.size === 0 && pass.routes.size === 0 && problems.size === 0) return gw;
  const all = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  const bases = new Map(
    [...all.values()]
      .filter((c) => clusterVariantBase(c.name) === c.name)
      .map((c) => [c.name, patched(c, pass.own.get(c.name))]),
  );
  if (![...all.keys()].some((n) => !bases.has(n)) && pass.routes.size === 0 && problems.size === 0) {
    return pass.own.size === 0 ? gw : { ...gw, clusters: gw.clusters.map((c) => bases.get(c.name) ?? c) };
  }
  const variants = new Map<string, LlmClusterIR>();
  /** The cluster route `r` reaches instead of `name` (a cluster or a variant) after this pass. */
  const target = (r: RouteIR, name: string): string => {
    const current = all.get(name);
    const baseName = clusterVariantBase(name);
    const base = bases.get(baseName);
    if (current === undefined || base === undefined) return name;
    const own = pass.routes.get(r)?.get(baseName);
    // The cluster with the pass's own values is the cluster as it now is.
    if (name === baseName && own === undefined) return name;
    const wanted = patched(current, own ?? pass.own.get(baseName));
    const diff = difference(wanted, base);
    if (Object.keys(diff).length === 0) return baseName;
    const v = clusterVariantName(baseName, createHash("sha256").update(canonical(diff)).digest("hex").slice(0, 10));
    if (!variants.has(v)) variants.set(v, { ...wanted, name: v });
    return v;
  };
  const routeOf = (r: RouteIR): RouteIR => {
    const more = problems.get(r);
    const a = r.action;
    let backends = a.kind === "forward" ? a.backends : undefined;
    if (a.kind === "forward" && a.backends.some((b) => all.has(b.cluster))) {
      const moved = a.backends.map((b) => {
        const to = target(r, b.cluster);
        return to === b.cluster ? b : { ...b, cluster: to };
      });
      if (moved.some((b, i) => b !== a.backends[i])) backends = moved;
    }
    if (more === undefined && (a.kind !== "forward" || backends === a.backends)) return r;
    return {
      ...r,
      ...(more !== undefined ? { backendProblems: [...(r.backendProblems ?? []), ...more] } : {}),
      ...(a.kind === "forward" && backends !== undefined && backends !== a.backends
        ? { action: { ...a, backends } }
        : {}),
    };
  };
  const routeConfigs = gw.routeConfigs.map((rc) => {
    const virtualHosts = rc.virtualHosts.map((vh) => {
      const routes = vh.routes.map(routeOf);
      return routes.every((x, i) => x === vh.routes[i]) ? vh : { ...vh, routes };
    });
    return virtualHosts.every((x, i) => x === rc.virtualHosts[i]) ? rc : { ...rc, virtualHosts };
  });
  return {
    ...gw,
    clusters: [
      // Variants of earlier passes are made again above (every route reaching one was moved anew).
      ...gw.clusters.flatMap((c): ClusterIR[] => {
        if (c.kind !== "llm") return [c];
        const b = bases.get(c.name);
        return b === undefined ? [] : [b];
      }),
      ...[...variants.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
    ],
    routeConfigs: routeConfigs.every((x, i) => x === gw.routeConfigs[i]) ? gw.routeConfigs : routeConfigs,
  };
}
