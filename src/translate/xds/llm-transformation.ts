// `backend.transformation` on AI backends (a GwBackend `ai`'s own `spec.policies.transformation`, a provider's own
// `policies.transformation`, or a GwPolicy's `backend.transformation` reaching either), and a `retry.condition` that
// reads more than the status code → the same upstream ext_proc as a Service's (backend-transformation.ts), in the AI
// cluster's upstream filters after the LLM one (llm.ts):
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
// Per provider: the spec's merge order for an LLM provider is GwPolicy, GwBackend, the provider's own `policies`, per
// top-level field (the policy engine's `subBackends`); a provider whose effective `transformation` differs from the
// backend's gets its own entries in the filter's spec, which the processor picks by the endpoint metadata naming the
// provider of the attempt.
//
// Per route: one Envoy cluster holds every provider of a GwBackend. Routes whose transformation differs from what the
// GwBackend's levels alone give (a route-level GwPolicy with a `backend` section, a route's `retry.condition`) get a
// variant of the cluster, `<cluster>~<hash of the transformation>`, as Service backends do (backend-connection.ts): one
// per distinct transformation, named by its content, so its name stays as long as the transformation does, and there
// are never more variants than routes. The cluster itself keeps the GwBackend's own, unnamed by any route-level policy.
// A variant is the AI cluster with another name and transformation (built by the same buildLlmCluster); the LLM
// ext_proc finds its table entry under the cluster's name (names.ts clusterVariantBase).
//
// Not applied, and reported: a transformation that buffers a body on a route serving Realtime (a websocket Envoy
// passes through is a request and a response whose bodies, the frames, never end, so the session would wait on the
// buffer; seen with Envoy 1.40).

import type {
  BackendPolicyIR,
  BackendProblemIR,
  EffectivePolicyIR,
  GatewayIR,
  LlmClusterIR,
  PolicyLevel,
  RouteIR,
  UpstreamTransformationIR,
} from "../ir.js";
import { clusterVariantBase } from "../names.js";
import { upstreamTransformation } from "./backend-transformation.js";
import { servesRealtime } from "./llm.js";
import { type LlmVariantFields, routesOf, withLlmVariants } from "./llm-passes.js";

/** Levels whose policy does not depend on the route: GwPolicies targeting the GwBackend or a provider, its own. */
const BACKEND_LEVELS: ReadonlySet<PolicyLevel> = new Set(["backend", "backendSection", "gwBackend", "subBackend"]);

/** `p` without a `transformation` set at a route's level (what the GwBackend's levels alone give). */
function backendLevelsOnly(p: EffectivePolicyIR | undefined): EffectivePolicyIR | undefined {
  const f = p?.["transformation"];
  if (p === undefined || f === undefined || ("combined" in f ? false : BACKEND_LEVELS.has(f.from.level))) return p;
  const { transformation: _, ...rest } = p;
  return rest;
}

/** One route's transformation of one AI cluster, and where its fields come from (for reports). */
interface RouteTransformation {
  readonly ir?: UpstreamTransformationIR;
  readonly problems: BackendProblemIR[];
  readonly from: BackendProblemIR["from"][];
}

const same = (a: EffectivePolicyIR | undefined, b: EffectivePolicyIR | undefined) =>
  JSON.stringify(a?.["transformation"]) === JSON.stringify(b?.["transformation"]);

/**
 * The transformation of `cluster` for route `r` (`withRoute` false: only what the GwBackend's levels give, and no
 * retry condition): the backend's, with the providers whose own differs, and the route's `retry.condition` read by
 * Sluice.
 */
function routeTransformation(
  r: RouteIR,
  cluster: LlmClusterIR,
  bp: BackendPolicyIR | undefined,
  withRoute: boolean,
): RouteTransformation {
  const level = (p: EffectivePolicyIR | undefined) => (withRoute ? p : backendLevelsOnly(p));
  const whole = level(bp?.policy);
  const problems: BackendProblemIR[] = [];
  const from: BackendProblemIR["from"][] = [];
  const fromOf = (p: EffectivePolicyIR | undefined) => {
    const f = p?.["transformation"];
    if (f !== undefined && !("combined" in f)) from.push(f.from);
  };
  const base = upstreamTransformation(r, whole, withRoute);
  problems.push(...base.problems);
  fromOf(whole);
  const providers: Record<string, UpstreamTransformationIR | undefined> = {};
  for (const p of cluster.groups.flat()) {
    const own = level(bp?.subBackends?.find((s) => s.name === p.name)?.policy);
    if (own === undefined || same(own, whole)) continue;
    const ut = upstreamTransformation(r, own, withRoute);
    problems.push(...ut.problems);
    fromOf(own);
    providers[p.name] = ut.ir;
  }
  const names = Object.keys(providers).sort();
  if (names.length === 0) {
    return {
      ...(base.ir !== undefined ? { ir: { ...base.ir, spec: { ...base.ir.spec, llm: true } } } : {}),
      problems,
      from,
    };
  }
  const all = [base.ir, ...names.map((n) => providers[n])];
  const spec = base.ir?.spec;
  const ir: UpstreamTransformationIR = {
    spec: {
      entries: spec?.entries ?? [],
      ...(spec?.retryCondition !== undefined ? { retryCondition: spec.retryCondition } : {}),
      providers: Object.fromEntries(names.map((n) => [n, providers[n]?.spec.entries ?? []])),
      llm: true,
      // What Envoy sends the processor is the filter's: the union of what every provider's entries read.
      requestBody: all.some((u) => u?.spec.requestBody === true),
      responseBody: all.some((u) => u?.spec.responseBody === true),
    },
    source: all.some((u) => u?.source === true),
    identity: all.some((u) => u?.identity === true),
  };
  return { ir, problems, from };
}

const keyOf = (ir: UpstreamTransformationIR | undefined) => (ir === undefined ? "" : JSON.stringify(ir));

/**
 * `gw` with each AI cluster's transformation, a variant per other transformation routes reaching it have, those routes
 * sent to their variant, and the routes' problems (bad CEL, a body on a Realtime route).
 */
export function withLlmTransformations(gw: GatewayIR): GatewayIR {
  const llm = new Map(gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c]));
  if (llm.size === 0) return gw;
  /** Per AI cluster: what the GwBackend's levels alone give (the cluster's own transformation). */
  const own = new Map<string, UpstreamTransformationIR | undefined>();
  const problems = new Map<RouteIR, BackendProblemIR[]>();
  const report = (r: RouteIR, more: readonly BackendProblemIR[]) => {
    if (more.length > 0) problems.set(r, [...(problems.get(r) ?? []), ...more]);
  };
  const uses: { route: RouteIR; cluster: string; ir?: UpstreamTransformationIR }[] = [];
  for (const r of routesOf(gw)) {
    if (r.action.kind !== "forward") continue;
    // A request mirrored to an AI cluster gets the cluster's own; mirrors have no backend policy of their own.
    // A route an earlier pass sent to a variant (llm-connection.ts) names the cluster it was made from.
    for (const name of new Set(r.action.backends.map((b) => clusterVariantBase(b.cluster)))) {
      const cluster = llm.get(name);
      if (cluster === undefined) continue;
      const bp = r.policy?.backends?.find((x) => x.cluster === name);
      const t = routeTransformation(r, cluster, bp, true);
      report(r, t.problems);
      if (!own.has(name)) own.set(name, routeTransformation(r, cluster, bp, false).ir);
      let ir = t.ir;
      if (ir !== undefined && (ir.spec.requestBody || ir.spec.responseBody) && servesRealtime(r)) {
        const why = `not applied: it reads or writes a body, and the route serves Realtime to AI GwBackend ${cluster.backend}: a websocket's frames are a body that never ends, so the session would wait on the buffer (a transformation of a Realtime backend may change headers only)`;
        const seen = new Set<string>();
        report(
          r,
          t.from
            .filter((f) => !seen.has(JSON.stringify(f)) && seen.add(JSON.stringify(f)))
            .map((f) => ({ from: f, field: "backend.transformation", message: why, fatal: false })),
        );
        ir = undefined;
      }
      uses.push({ route: r, cluster: name, ...(ir !== undefined ? { ir } : {}) });
    }
  }
  const routes = new Map<RouteIR, Map<string, LlmVariantFields>>();
  for (const u of uses) {
    if (keyOf(u.ir) === keyOf(own.get(u.cluster))) continue;
    const m = routes.get(u.route) ?? new Map<string, LlmVariantFields>();
    routes.set(u.route, m.set(u.cluster, { transformation: u.ir }));
  }
  const applied = new Map(
    [...own].filter(([, t]) => t !== undefined).map(([name, t]) => [name, { transformation: t }] as const),
  );
  return withLlmVariants(gw, { own: applied, routes, problems });
}
