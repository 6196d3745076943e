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
// Per route: one Envoy cluster holds every provider of a GwBackend, so a route whose scoring differs from what the
// GwBackend's levels give (a route-level GwPolicy's `backend.health`) goes to a variant of the cluster
// (llm-passes.ts withLlmVariants), with that scoring, an EDS resource and a scoring of its own, keyed by the variant's
// name (the health filter's metadata, the variant's EDS service name): an eviction through it marks the provider in
// its own assignment only, and the cluster's evictions do not reach it. A variant scored as its cluster (another
// tcp, TLS or transformation, the same health) reads the cluster's EDS resource and reports to its scoring, so an
// eviction holds on every route asking that scoring; but a variant whose endpoints differ from the cluster's (another
// tunnel, or another TLS or tunnel for a provider behind a hop of its own) has its own, and so its own scoring.
// This pass runs after the other variant passes (build.ts): the variants it makes carry every difference of a route.

import type { BackendProblemIR, GatewayIR, HealthScoreIR, LlmClusterIR, RouteIR } from "../ir.js";
import { clusterVariantBase } from "../names.js";
import { healthScoreOf, healthScoreParts } from "./backend-health.js";
import { canonical, type LlmVariantFields, llmClusterUses, ROUTE_LEVELS, withLlmVariants } from "./llm-passes.js";
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

const keyOf = (h: HealthScoreIR | undefined) => (h === undefined ? "" : canonical(h));

/**
 * `gw` with each AI cluster's health scoring (what the GwBackend's levels give, or what every route asks when they
 * agree), a variant per other scoring routes ask, each scored variant reading the EDS resource it is scored by (its
 * cluster's, or its own: edsOf), and the routes' problems (bad CEL, an InferencePool).
 */
export function withLlmHealth(gw: GatewayIR): GatewayIR {
  const own = new Map<string, LlmVariantFields>();
  const routes = new Map<RouteIR, Map<string, LlmVariantFields>>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  const add = (r: RouteIR, p: readonly BackendProblemIR[]) => {
    if (p.length > 0) problems.set(r, [...(problems.get(r) ?? []), ...p]);
  };
  for (const [name, { cluster: c, uses: list }] of llmClusterUses(gw, scoringOf)) {
    if (c.groups.flat()[0]?.pool !== undefined) {
      const why = `not applied: AI GwBackend ${c.backend}'s provider is an InferencePool, whose endpoint picker, not Envoy's load balancer, chooses the model server; eviction.duration and consecutiveFailures of the GwBackend's own policies apply (outlier detection)`;
      for (const u of list) {
        if (u.ir !== undefined)
          add(
            u.route,
            u.from.map((from) => ({ from, field: "backend.health", message: why, fatal: false })),
          );
      }
      continue;
    }
    for (const u of list) add(u.route, u.problems);
    // The cluster's own: what every route asks when they agree, else what the GwBackend's levels give (a route whose
    // health comes from no route-level GwPolicy has it).
    const keys = new Set(list.map((u) => keyOf(u.ir)));
    const base = keys.size === 1 ? list[0] : list.find((u) => u.from.every((from) => !ROUTE_LEVELS.has(from.level)));
    const ownIr = base?.ir;
    if (ownIr !== undefined) own.set(name, { health: ownIr });
    for (const u of list) {
      if (keyOf(u.ir) === keyOf(ownIr)) continue;
      routes.set(u.route, (routes.get(u.route) ?? new Map<string, LlmVariantFields>()).set(name, { health: u.ir }));
    }
  }
  const next = withLlmVariants(gw, { own, routes, problems });
  const llm = new Map(next.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  let shared = false;
  const clusters = next.clusters.map((c) => {
    if (c.kind !== "llm" || c.health === undefined) return c;
    const base = llm.get(clusterVariantBase(c.name));
    if (base === undefined || base === c || keyOf(base.health) !== keyOf(c.health) || !sameEndpoints(c, base)) return c;
    shared = true;
    return { ...c, edsOf: base.name };
  });
  return shared ? { ...next, clusters } : next;
}

/**
 * Whether variant `v` has the endpoints of the cluster `base` it was made from, so that it can read base's EDS
 * resource. An endpoint's host name is what a tunnel's CONNECT asks for (the provider's host), else the provider's
 * name; and a provider reached through a hop of its own (llm-provider-hop.ts) is the cluster's hop there, whose socket
 * is the provider's TLS and tunnel as the cluster has them.
 */
function sameEndpoints(v: LlmClusterIR, base: LlmClusterIR): boolean {
  const tunnelled = (x: LlmClusterIR) => JSON.stringify(x.groups.map((g) => g.map((p) => p.tunnel !== undefined)));
  if (tunnelled(v) !== tunnelled(base)) return false;
  const socket = (x: LlmClusterIR, name: string) => {
    const p = x.groups.flat().find((q) => q.name === name);
    return JSON.stringify([p?.tls, p?.tunnel]);
  };
  return [...providerHops(base).hops.keys()].every((name) => socket(v, name) === socket(base, name));
}
