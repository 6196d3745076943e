// The authentication/authorization plan of a route, computed once per route and shared by the filter builders that
// emit it (ext-authz-sluice.ts, rbac.ts).

import type { ExtAuthzPolicy } from "../../../extauthz/server.js";
import { type AuthzContext, type HttpAuthzPlan, planHttpAuthz } from "../../authz/plan.js";
import type { EffectivePolicyIR, RouteIR } from "../../ir.js";
import type { BuildContext } from "./types.js";

/**
 * A plan and what computing it reported (notes) and added to the policy table. A cached plan reports and adds the
 * same again, so whatever records one route's effects (the translation memo) sees all of them, cached or not.
 */
interface CachedPlan {
  readonly plan: HttpAuthzPlan | undefined;
  readonly notes: readonly Parameters<AuthzContext["note"]>[];
  readonly added: readonly (readonly [string, ExtAuthzPolicy])[];
}

const plans = new WeakMap<object, WeakMap<EffectivePolicyIR, CachedPlan>>();

function computePlan(traffic: EffectivePolicyIR, authz: AuthzContext): CachedPlan {
  const notes: Parameters<AuthzContext["note"]>[] = [];
  const added: [string, ExtAuthzPolicy][] = [];
  const recorded: AuthzContext = {
    ...authz,
    note(...args) {
      notes.push(args);
      authz.note(...args);
    },
    table: {
      add(content, compile) {
        const id = authz.table.add(content, compile);
        const policy = authz.table.get(id);
        if (policy !== undefined) added.push([id, policy]);
        return id;
      },
      addCompiled(id, policy) {
        added.push([id, policy]);
        authz.table.addCompiled(id, policy);
      },
      get: (id) => authz.table.get(id),
    },
  };
  return { plan: planHttpAuthz(traffic, recorded), notes, added };
}

/**
 * The plan of the route's PostRouting traffic policy, or (`phase: "preRouting"`) of its PreRouting one: the two
 * phases never merge, so each has its own authentication and authorization filters, PreRouting's first.
 */
export function routeAuthzPlan(
  route: RouteIR,
  ctx: BuildContext,
  phase: "preRouting" | "traffic" = "traffic",
): HttpAuthzPlan | undefined {
  const authz = ctx.authz;
  const traffic = route.policy?.[phase];
  if (authz === undefined || traffic === undefined) return undefined;
  let byTraffic = plans.get(authz);
  if (byTraffic === undefined) {
    byTraffic = new WeakMap();
    plans.set(authz, byTraffic);
  }
  let cached = byTraffic.get(traffic);
  if (cached === undefined) {
    cached = computePlan(traffic, authz);
    byTraffic.set(traffic, cached);
  } else {
    for (const args of cached.notes) authz.note(...args);
    for (const [id, policy] of cached.added) authz.table.addCompiled(id, policy);
  }
  return cached.plan;
}
