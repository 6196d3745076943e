// The authentication/authorization plan of a route, computed once per route and shared by the filter builders that
// emit it (ext-authz-sluice.ts, rbac.ts).

import { type HttpAuthzPlan, planHttpAuthz } from "../../authz/plan.js";
import type { EffectivePolicyIR, RouteIR } from "../../ir.js";
import type { BuildContext } from "./types.js";

const plans = new WeakMap<object, WeakMap<EffectivePolicyIR, HttpAuthzPlan | null>>();

const PRE_ROUTING_FIELDS = ["authorization", "basicAuthentication", "apiKeyAuthentication"] as const;

export function routeAuthzPlan(route: RouteIR, ctx: BuildContext): HttpAuthzPlan | undefined {
  const authz = ctx.authz;
  const pre = route.policy?.preRouting;
  for (const field of PRE_ROUTING_FIELDS) {
    const f = pre?.[field];
    if (f === undefined) continue;
    for (const v of "combined" in f ? f.combined : [f]) {
      ctx.note(v.from, `traffic.${field}`, "phase PreRouting is not applied yet; with PostRouting it applies");
    }
  }
  const traffic = route.policy?.traffic;
  if (authz === undefined || traffic === undefined) return undefined;
  let byTraffic = plans.get(authz);
  if (byTraffic === undefined) {
    byTraffic = new WeakMap();
    plans.set(authz, byTraffic);
  }
  let plan = byTraffic.get(traffic);
  if (plan === undefined) {
    plan = planHttpAuthz(traffic, authz) ?? null;
    byTraffic.set(traffic, plan);
  }
  return plan ?? undefined;
}
