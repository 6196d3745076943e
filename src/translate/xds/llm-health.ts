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
import { clusterVariantBase } from "../names.js";
import { healthScoreOf, healthScoreParts } from "./backend-health.js";
import { llmClusterUses, withLlmChanges } from "./llm-passes.js";
import { providerHops } from "./llm-provider-hop.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

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
  const uses = llmClusterUses(gw, scoringOf);
  const applied = new Map<string, HealthScoreIR>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  const add = (r: RouteIR, p: readonly BackendProblemIR[]) => {
    if (p.length > 0) problems.set(r, [...(problems.get(r) ?? []), ...p]);
  };
  for (const [name, { cluster: c, uses: list }] of uses) {
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
      : `not applied: the routes reaching AI GwBackend ${c.backend} ask for different health scoring, and Sluice scores each provider of a GwBackend once, in the one EDS resource every route's cluster reads (so that an eviction holds on every route); a scoring per route would need a cluster variant with endpoints and a scoring of its own, as a Service backend's scored variant has, which AI clusters do not have yet (set it on the GwBackend, or in a GwPolicy targeting it); the GwBackend's own eviction.duration and consecutiveFailures apply (outlier detection)`;
    for (const u of list) {
      if (u.ir === undefined) continue;
      add(
        u.route,
        u.from.map((from) => ({ from, field: "backend.health", message: why, fatal: false })),
      );
    }
  }
  const changed = new Map<string, LlmClusterIR>();
  const llm = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  /** Variants that cannot read the scored cluster's endpoints, and why (see unshared). */
  const unscored = new Map<string, { what: string; why: string }>();
  // The cluster and its variants (another TLS or tunnel for some routes, ai-policy-tls.ts): the variants read the
  // cluster's EDS resource, evicted providers marked, and report to its scoring (llm.ts).
  for (const c of llm.values()) {
    const h = applied.get(clusterVariantBase(c.name));
    if (h === undefined) continue;
    const why = unshared(c, llm.get(clusterVariantBase(c.name)));
    if (why !== undefined) unscored.set(c.name, why);
    else changed.set(c.name, { ...c, health: h });
  }
  if (unscored.size > 0) {
    for (const { uses: list } of uses.values()) {
      for (const u of list) {
        const a = u.route.action;
        const to = a.kind === "forward" ? a.backends.find((b) => unscored.has(b.cluster)) : undefined;
        if (to === undefined) continue;
        add(
          u.route,
          u.from.map((from) => ({
            from,
            field: "backend.health",
            message: `Sluice's scoring not applied on route ${u.route.name}: a route-level GwPolicy gives it ${unscored.get(to.cluster)?.what} of AI GwBackend ${llm.get(to.cluster)?.backend}, and a scored variant reads the cluster's endpoints, one EDS resource for every route (where Sluice marks evicted providers), ${unscored.get(to.cluster)?.why}; this route keeps Envoy's outlier detection (eviction.duration and consecutiveFailures)`,
            fatal: false,
          })),
        );
      }
    }
  }
  return withLlmChanges(gw, changed, problems);
}

/**
 * Why variant `v` cannot read the endpoints of the scored cluster `base` it was made from (undefined: it can). An
 * endpoint's host name is what a tunnel's CONNECT asks for (the provider's host), else the provider's name; and a
 * provider reached through a hop of its own (llm-provider-hop.ts) is the cluster's hop there, whose socket is the
 * provider's TLS and tunnel as the cluster has them.
 */
function unshared(v: LlmClusterIR, base: LlmClusterIR | undefined): { what: string; why: string } | undefined {
  if (base === undefined || v === base) return undefined;
  const tunnelled = (x: LlmClusterIR) => JSON.stringify(x.groups.map((g) => g.map((p) => p.tunnel !== undefined)));
  if (tunnelled(v) !== tunnelled(base)) {
    return {
      what: "another tunnel to the providers",
      why: "whose host names are what the GwBackend's own tunnel settings ask a proxy for",
    };
  }
  const hops = providerHops(base).hops;
  const socket = (x: LlmClusterIR, name: string) => {
    const p = x.groups.flat().find((q) => q.name === name);
    return JSON.stringify([p?.tls, p?.tunnel]);
  };
  const moved = [...hops.keys()].filter((name) => socket(v, name) !== socket(base, name));
  if (moved.length === 0) return undefined;
  const names = moved.join(", ");
  return {
    what: `another TLS or tunnel for provider ${names}`,
    why: `where ${names} is the cluster's hop of its own (its own tcp or http, llm-provider-hop.ts), with the GwBackend's TLS and tunnel`,
  };
}
