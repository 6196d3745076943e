// Sluice's health scoring of AI backends: `backend.health` reaching an AI GwBackend (its own `spec.policies.health`,
// or a GwPolicy's), and a provider's own `health`, scored per provider as a Service's endpoints are
// (backend-health.ts, src/health/):
//
// - the cluster becomes EDS (llm.ts); Sluice resolves the providers' host names itself when it publishes
//   (health/provider-dns.ts), and marks an evicted provider's endpoints UNHEALTHY there, so Envoy's priorities move
//   its traffic to the rest of its group, then to the next group;
// - the health ext_proc, last before the codec in the cluster's upstream filters, reports each attempt's response with
//   the provider named in the endpoint metadata;
// - a provider's own `health` replaces the backend's for that provider, as a whole (as its own `tls` does).
//
// Served only when it changes something Envoy's outlier detection alone cannot give: a score field
// (`unhealthyCondition`, `restoreHealth`, `healthThreshold`), a provider's own `health`, or a GwPolicy's (the native
// cluster reads the GwBackend's own alone, backend/ai.ts). Else the cluster stays STRICT_DNS with outlier detection.
//
// One Envoy cluster serves every route reaching the GwBackend, so those routes must agree (they do for the GwBackend's
// own policies and a GwPolicy targeting the GwBackend); routes that differ (a route-level GwPolicy) get none, each
// reported, and the cluster keeps the GwBackend's own eviction natively.

import type { BackendProblemIR, GatewayIR, HealthScoreIR, LlmClusterIR, RouteIR } from "../ir.js";
import { healthScoreOf, healthScoreParts } from "./backend-health.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

function* routesOf(gw: GatewayIR): Generator<RouteIR> {
  for (const rc of gw.routeConfigs) for (const vh of rc.virtualHosts) yield* vh.routes;
}

interface Use {
  readonly route: RouteIR;
  /** The scoring this route asks for (undefined: none). */
  readonly ir?: HealthScoreIR;
  /** Where its `health` values come from (reported when not applied). */
  readonly from: readonly BackendProblemIR["from"][];
  readonly problems: readonly BackendProblemIR[];
}

/** The scoring a route's backend policy asks of AI cluster `c`, or undefined when Envoy's outlier detection suffices. */
function scoringOf(c: LlmClusterIR, r: RouteIR): Use {
  const bp = r.policy?.backends?.find((x) => x.cluster === c.name);
  const f = bp?.policy["health"];
  const whole = f !== undefined && !("combined" in f) && isRec(f.value) ? { value: f.value, from: f.from } : undefined;
  const own: { name: string; value: Rec; from: BackendProblemIR["from"] }[] = [];
  for (const s of bp?.subBackends ?? []) {
    const h = s.policy["health"];
    // The provider's own, or a GwPolicy's targeting the provider (a GwBackend section).
    if (h === undefined || "combined" in h || !isRec(h.value)) continue;
    if (h.from.level !== "subBackend" && h.from.level !== "backendSection") continue;
    own.push({ name: s.name, value: h.value, from: h.from });
  }
  const wanted =
    own.length > 0 ||
    (whole !== undefined && (whole.from.kind === "GwPolicy" || healthScoreParts(whole.value).length > 0));
  const from = [...(whole !== undefined ? [whole.from] : []), ...own.map((o) => o.from)];
  if (!wanted) return { route: r, from, problems: [] };
  const problems: BackendProblemIR[] = [];
  let base: HealthScoreIR;
  if (whole !== undefined) {
    const s = healthScoreOf(whole.value, whole.from);
    problems.push(...s.problems);
    base = s.ir;
  } else {
    // Only providers' own: the others keep what the cluster's outlier detection gave them (a 5xx, as often).
    base = {
      responseBody: false,
      consecutiveFailures: c.eviction.consecutiveFailures,
      durationMs: c.eviction.durationMs,
    };
  }
  const providers: Record<string, HealthScoreIR> = {};
  for (const o of own) {
    const s = healthScoreOf(o.value, o.from);
    problems.push(...s.problems);
    providers[o.name] = s.ir;
  }
  const names = Object.keys(providers).sort();
  const ir: HealthScoreIR = {
    ...base,
    // The filter streams the body when any provider's condition reads it.
    responseBody: base.responseBody || names.some((n) => providers[n]?.responseBody === true),
    ...(names.length > 0
      ? { providers: Object.fromEntries(names.map((n) => [n, providers[n] as HealthScoreIR])) }
      : {}),
  };
  return { route: r, ir, from, problems };
}

/** `gw` with each AI cluster's health scoring, and the routes' problems with theirs (bad CEL, routes that differ). */
export function withLlmHealth(gw: GatewayIR): GatewayIR {
  const llm = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  if (llm.size === 0) return gw;
  const uses = new Map<string, Use[]>();
  for (const r of routesOf(gw)) {
    if (r.action.kind !== "forward") continue;
    for (const name of new Set(r.action.backends.map((b) => b.cluster))) {
      const c = llm.get(name);
      if (c === undefined) continue;
      const list = uses.get(name) ?? [];
      list.push(scoringOf(c, r));
      uses.set(name, list);
    }
  }
  const applied = new Map<string, HealthScoreIR>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  const add = (r: RouteIR, p: readonly BackendProblemIR[]) => {
    if (p.length > 0) problems.set(r, [...(problems.get(r) ?? []), ...p]);
  };
  for (const [name, list] of uses) {
    const c = llm.get(name) as LlmClusterIR;
    const keys = new Set(list.map((u) => (u.ir === undefined ? "" : JSON.stringify(u.ir))));
    const first = list[0]?.ir;
    const pool = c.groups.flat()[0]?.pool !== undefined;
    if (keys.size === 1 && first === undefined) continue;
    if (keys.size === 1 && first !== undefined && !pool) {
      applied.set(name, first);
      for (const u of list) add(u.route, u.problems);
      continue;
    }
    const why = pool
      ? `not applied: AI GwBackend ${c.backend}'s provider is an InferencePool, whose endpoint picker, not Envoy's load balancer, chooses the model server; eviction.duration and consecutiveFailures of the GwBackend's own policies apply (outlier detection)`
      : `not applied: the routes reaching AI GwBackend ${c.backend} ask for different health scoring, and one Envoy cluster serves all of its providers for every route (set it on the GwBackend, or in a GwPolicy targeting it); the GwBackend's own eviction.duration and consecutiveFailures apply`;
    for (const u of list) {
      if (u.ir === undefined) continue;
      add(
        u.route,
        u.from.map((from) => ({ from, field: "backend.health", message: why, fatal: false })),
      );
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
      const h = c.kind === "llm" ? applied.get(c.name) : undefined;
      return h === undefined || c.kind !== "llm" ? c : { ...c, health: h };
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
