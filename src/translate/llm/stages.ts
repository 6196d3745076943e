// Where the provider work of a request to an AI backend is done (docs/llm.md, "One stage or two"): translating the
// body for the provider, setting its path, authority and credentials. The decision is made here and only here.
//
// - Two stages: the router-level Sluice ext_proc reads the request, and an upstream ext_proc on the AI cluster does
//   the provider work for the provider Envoy picked, once per attempt, so a retry can fail over to a provider of
//   another format.
// - One stage: when every request of a route can reach one provider only, the router-level ext_proc does the provider
//   work itself (one gRPC stream per request instead of two). It then runs before the rest of Envoy's request path,
//   so a route keeps two stages when something after that point would see or undo the provider's request (below).
//
// A cluster keeps the upstream ext_proc filter while some route (or request mirror) reaching it needs it.

import type { GatewayIR, LlmClusterIR, RouteIR } from "../ir.js";
import { clusterVariantBase } from "../names.js";
import { readsVariable } from "../xds/filters/envoy-cel.js";
import { runsAfterLlmExtProc } from "../xds/filters/global-ratelimit.js";
import { phaseFields } from "../xds/filters/policy-fields.js";

/** The one provider every request of a route reaches; the router-level stage does its provider work. */
export interface SingleStage {
  readonly cluster: string;
  /** The provider's name in the GwBackend (`default` for a single `provider`). */
  readonly provider: string;
}

export interface LlmStagePlan {
  /** By `gatewayKey|routeName`: the routes served in one stage. */
  readonly single: ReadonlyMap<string, SingleStage>;
  /** By Gateway key: the AI clusters that keep the upstream ext_proc filter. */
  readonly upstream: ReadonlyMap<string, ReadonlySet<string>>;
}

type Descriptor = Parameters<typeof runsAfterLlmExtProc>[0];

/**
 * The provider of `route` when it is served in one stage; undefined when it needs two. One stage needs all of:
 * - one provider: every backendRef left after weights is the same AI backend, and that backend has one provider (a
 *   single `provider`, or groups holding one in all). With several backends Envoy picks one per request, after the
 *   router-level stage, and a backend that is not an AI backend must not get a provider's request.
 * - nothing after the router-level stage that sees or changes the request's path, host or headers, since in one stage
 *   it would act on the provider's request (with the provider's credentials) rather than the client's:
 *   request mirrors (the copy would carry the provider's credentials), URL rewrites and `hostRewrite: Auto` (Envoy's
 *   router would overwrite the provider's path or host), request header modifiers of the rule, a backendRef or a
 *   `headerModifiers` policy (Envoy's router applies them last, so they would override what the provider stage
 *   sets, where the upstream stage overrides them), `csrf` (its filter compares the Origin with the Host) and global
 *   rate limit descriptors placed after the LLM ext_proc that read `request`.
 */
export function singleStage(route: RouteIR, llm: ReadonlyMap<string, LlmClusterIR>): SingleStage | undefined {
  const a = route.action;
  if (a.kind !== "forward") return undefined;
  const clusters = new Set(a.backends.map((b) => b.cluster));
  const [name] = clusters;
  const cluster = name === undefined || clusters.size !== 1 ? undefined : llm.get(name);
  const providers = cluster?.groups.flat() ?? [];
  const provider = providers[0];
  if (cluster === undefined || provider === undefined || providers.length !== 1) return undefined;

  const modifies = (m: RouteIR["requestHeaders"]) =>
    m !== undefined && m.set.length + m.add.length + m.remove.length > 0;
  if (
    a.mirrors.length > 0 ||
    a.rewrite !== undefined ||
    modifies(route.requestHeaders) ||
    a.backends.some((b) => modifies(b.requestHeaders))
  ) {
    return undefined;
  }
  const after = [
    ...phaseFields<{ request?: unknown }>(route, "headerModifiers").filter((f) => f.value.request !== undefined),
    ...phaseFields<{ mode?: string }>(route, "hostRewrite").filter((f) => f.value.mode === "Auto"),
    ...phaseFields<unknown>(route, "csrf"),
    ...phaseFields<{ global?: { descriptors: readonly Descriptor[] } }>(route, "rateLimit").filter((f) =>
      (f.value.global?.descriptors ?? []).some(
        (d) => runsAfterLlmExtProc(d) && d.entries.some((e) => readsVariable(e.expression, "request")),
      ),
    ),
  ];
  // A variant's (xds/llm-passes.ts) is the cluster's entry.
  return after.length > 0 ? undefined : { cluster: clusterVariantBase(cluster.name), provider: provider.name };
}

/** One stage or two for every route of the Gateways to an AI backend, and the clusters that keep the upstream stage. */
export function planLlmStages(gateways: readonly GatewayIR[]): LlmStagePlan {
  const single = new Map<string, SingleStage>();
  const upstream = new Map<string, ReadonlySet<string>>();
  for (const gw of gateways) {
    const llm = new Map(
      gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c] as const),
    );
    if (llm.size === 0) continue;
    const needed = new Set<string>();
    for (const rc of gw.routeConfigs) {
      for (const vh of rc.virtualHosts) {
        for (const route of vh.routes) {
          if (route.action.kind !== "forward") continue;
          const one = singleStage(route, llm);
          if (one !== undefined) single.set(`${gw.key}|${route.name}`, one);
          else for (const b of route.action.backends) if (llm.has(b.cluster)) needed.add(clusterVariantBase(b.cluster));
          // A mirrored request goes out without the router-level stage's provider work for the mirror's cluster.
          for (const m of route.action.mirrors) if (llm.has(m.cluster)) needed.add(m.cluster);
        }
      }
    }
    upstream.set(gw.key, needed);
  }
  return { single, upstream };
}
