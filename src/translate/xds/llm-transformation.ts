// `backend.transformation` on AI backends (a GwBackend `ai`'s own `spec.policies.transformation`, or a GwPolicy's
// `backend.transformation` reaching it) → the same upstream ext_proc as a Service's (backend-transformation.ts), in
// the AI cluster's upstream filters after the LLM one (llm.ts):
//
//   request:  [sluice.llm_upstream_ext_proc] → sluice.backend_transformation → codec → provider
//   response: provider → codec → sluice.backend_transformation → (upstream LLM stage: skips responses) → router
//             → router-level LLM ext_proc (translates it back for the client)
//
// So the transformation sees and changes the provider's request as the provider will get it (its format, path, host
// and credentials, written by the upstream LLM stage, or by the router-level one on a route served in one stage), and
// the provider's response before it is translated back. Upstream filters run once per attempt: a failover to another
// provider writes that provider's request anew, and the transformation applies to it again.
//
// One Envoy cluster holds all the providers of a GwBackend and is shared by every route reaching it, so the filter is
// the cluster's: the routes reaching it must agree on their transformation (they do for the GwBackend's own and for a
// GwPolicy targeting the GwBackend). When routes differ (a route-level GwPolicy with a `backend` section), none is
// applied and each is reported; a provider's own `policies.transformation` is reported (traffic-route.ts). Nor is one
// that buffers a body on a GwBackend a route serves Realtime to: a websocket Envoy passes through is a request and a
// response whose bodies (the frames) never end, so the session would wait on the buffer (seen with Envoy 1.40).

import type { BackendProblemIR, GatewayIR, LlmClusterIR, RouteIR, UpstreamTransformationIR } from "../ir.js";
import { upstreamTransformation } from "./backend-transformation.js";
import { servesRealtime } from "./llm.js";

function* routesOf(gw: GatewayIR): Generator<RouteIR> {
  for (const rc of gw.routeConfigs) for (const vh of rc.virtualHosts) yield* vh.routes;
}

/** `gw` with each AI cluster's transformation, and the routes' problems with theirs (bad CEL, routes that differ). */
export function withLlmTransformations(gw: GatewayIR): GatewayIR {
  const llm = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  if (llm.size === 0) return gw;
  /** Per AI cluster: every route reaching it with its transformation (undefined: none). */
  const uses = new Map<string, { route: RouteIR; ir?: UpstreamTransformationIR; from?: BackendProblemIR["from"] }[]>();
  const realtime = new Set<string>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  for (const r of routesOf(gw)) {
    if (r.action.kind !== "forward") continue;
    // A request mirrored to an AI cluster gets its transformation too; mirrors have no backend policy of their own.
    const clusters = new Set(r.action.backends.map((b) => b.cluster));
    for (const name of clusters) {
      if (!llm.has(name)) continue;
      const policy = r.policy?.backends?.find((x) => x.cluster === name)?.policy;
      const ut = upstreamTransformation(r, policy, false);
      if (ut.problems.length > 0) problems.set(r, [...(problems.get(r) ?? []), ...ut.problems]);
      const f = policy?.["transformation"];
      const from = f !== undefined && !("combined" in f) ? f.from : undefined;
      if (servesRealtime(r)) realtime.add(name);
      const list = uses.get(name) ?? [];
      list.push({ route: r, ...(ut.ir !== undefined ? { ir: ut.ir } : {}), ...(from !== undefined ? { from } : {}) });
      uses.set(name, list);
    }
  }
  const applied = new Map<string, UpstreamTransformationIR>();
  for (const [name, list] of uses) {
    const keys = new Set(list.map((u) => (u.ir === undefined ? "" : JSON.stringify(u.ir))));
    const first = list[0]?.ir;
    const bodies = first !== undefined && (first.spec.requestBody || first.spec.responseBody);
    if (keys.size === 1 && first !== undefined && !(bodies && realtime.has(name))) {
      applied.set(name, first);
      continue;
    }
    if (keys.size === 1 && first === undefined) continue;
    const backend = llm.get(name)?.backend ?? name;
    const why =
      keys.size === 1
        ? `not applied: it reads or writes a body, and a route serves Realtime to AI GwBackend ${backend}: a websocket's frames are a body that never ends, so the session would wait on the buffer (a transformation of a Realtime backend may change headers only)`
        : `not applied: the routes reaching AI GwBackend ${backend} have different transformations, and one Envoy cluster serves all of its providers for every route (set it on the GwBackend, or in a GwPolicy targeting it)`;
    for (const u of list) {
      if (u.ir === undefined || u.from === undefined) continue;
      const p: BackendProblemIR = { from: u.from, field: "backend.transformation", message: why, fatal: false };
      problems.set(u.route, [...(problems.get(u.route) ?? []), p]);
    }
  }
  if (applied.size === 0 && problems.size === 0) return gw;
  const routeOf = (r: RouteIR): RouteIR => {
    const more = problems.get(r);
    return more === undefined ? r : { ...r, backendProblems: [...(r.backendProblems ?? []), ...more] };
  };
  return {
    ...gw,
    clusters: gw.clusters.map((c) => {
      const t = c.kind === "llm" ? applied.get(c.name) : undefined;
      return t === undefined ? c : { ...c, transformation: t };
    }),
    // Routes without problems stay the same objects (the route memo keeps them).
    routeConfigs:
      problems.size === 0
        ? gw.routeConfigs
        : gw.routeConfigs.map((rc) => ({
            ...rc,
            virtualHosts: rc.virtualHosts.map((vh) => ({ ...vh, routes: vh.routes.map(routeOf) })),
          })),
  };
}
