// `backend.extAuth` → the route's own ext_authz filter (filters/ext-authz.ts), one instance per distinct config, placed
// after every traffic filter (FilterOrder.backendExtAuthz), just before the router. Envoy's ext_authz is a downstream
// filter only: Envoy 1.40 refuses it among a cluster's upstream http_filters ("Didn't find a registered implementation
// ... ExtAuthz"), so it cannot ride on the backend's cluster as the transformation does, and a route-level filter runs
// before the router picks one of the route's backendRefs. So a backend's extAuth checks every request of a route whose
// backends all have it. On a route whose backendRefs differ (one without it, or another service), every distinct
// extAuth of the route checks every request (never fewer checks than the spec asks for a backend) and the policy
// status says so.

import type { ExtAuth } from "../../api/auth.js";
import type { Static } from "../../api/schema-kit.js";
import type { BackendPolicyIR, PolicySourceIR, RouteIR, RoutePolicyIR } from "../ir.js";
import type { PhaseField } from "./filters/policy-fields.js";
import type { BuildContext } from "./filters/types.js";

type ExtAuthT = Static<typeof ExtAuth>;

/** Where the backendRef of the `i`th distinct backend extAuth of a route resolves (RoutePolicyIR.refs). */
export function backendExtAuthPath(i: number): string {
  return i === 0 ? "backend.extAuth" : `backend.extAuth#${i}`;
}

interface Distinct {
  readonly value: ExtAuthT;
  readonly from: PolicySourceIR;
  readonly backends: string[];
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (typeof v === "object" && v !== null) {
    const entries = Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`).join(",")}}`;
  }
  return JSON.stringify(v) ?? "null";
}

/**
 * The distinct `backend.extAuth` values of a route's backends, in backend order. Two are the same when their values
 * are and their policies are in one namespace (the backendRef resolves there).
 */
function distinctExtAuths(backends: readonly BackendPolicyIR[] | undefined): Distinct[] {
  const out = new Map<string, Distinct>();
  for (const b of backends ?? []) {
    const f = b.policy["extAuth"];
    if (f === undefined || "combined" in f) continue;
    const key = `${f.from.name.split("/")[0]}|${canonical(f.value)}`;
    const known = out.get(key);
    if (known !== undefined) known.backends.push(b.backend);
    else out.set(key, { value: f.value as ExtAuthT, from: f.from, backends: [b.backend] });
  }
  return [...out.values()];
}

/** The backend extAuth values whose backendRefs refs.ts resolves, each with its refs path. */
export function backendExtAuthRefs(
  policy: RoutePolicyIR,
): { readonly path: string; readonly value: ExtAuthT; readonly from: PolicySourceIR }[] {
  return distinctExtAuths(policy.backends).map((d, i) => ({
    path: backendExtAuthPath(i),
    value: d.value,
    from: d.from,
  }));
}

/**
 * The route's backend extAuth values as ext_authz fields (phase `traffic`; `path` names the resolved backendRef). A
 * route whose backendRefs do not all share one is reported on each policy concerned.
 */
export function backendExtAuthFields(route: RouteIR, ctx: BuildContext): PhaseField<ExtAuthT>[] {
  if (route.action.kind !== "forward") return [];
  // MCP backends: Sluice's MCP service reaches the targets, and its table reports what of their policy it serves.
  const mcp = new Set(
    route.action.backends.flatMap((x) => {
      const c = ctx.cluster?.(x.cluster);
      return c?.kind === "mcp" ? [`GwBackend ${c.backend}`] : [];
    }),
  );
  // Indexed before MCP backends are left out, as refs.ts numbered them.
  const distinct = distinctExtAuths(route.policy?.backends)
    .map((d, i) => ({ ...d, path: backendExtAuthPath(i), backends: d.backends.filter((b) => !mcp.has(b)) }))
    .filter((d) => d.backends.length > 0);
  if (distinct.length === 0) return [];
  const covered = distinct.reduce((n, d) => n + d.backends.length, 0);
  const all = route.action.backends.length;
  if (distinct.length > 1 || covered < all) {
    for (const d of distinct) {
      ctx.note(
        d.from,
        "backend.extAuth",
        `the route's backendRefs do not all have this extAuth (${d.backends.join(", ")} of ${all}); Envoy's ext_authz ` +
          "runs on the route, before a backend is chosen (it is not an upstream filter), so every extAuth of the " +
          "route's backends checks every request of the route",
      );
    }
  }
  return distinct.map((d) => ({ value: d.value, from: d.from, phase: "traffic", path: d.path }));
}
