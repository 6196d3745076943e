// Native authorization: Envoy's RBAC filter, for authorization rules whose expressions all compile to RBAC
// (src/cel/rbac.ts). Up to three filters, Deny then Require then Allow, each enabled per route with its rules.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { RBACPerRouteSchema, RBACSchema } from "../../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb.js";
import { routeAuthzPlan } from "./authz-plan.js";
import { FilterOrder, type HttpFilterBuilder } from "./types.js";

const OFFSET = { deny: 0, require: 1, allow: 2 } as const;

export const rbacBuilder: HttpFilterBuilder = {
  id: "rbac",
  schemas: [RBACSchema, RBACPerRouteSchema],
  forRoute(route, ctx) {
    const plan = routeAuthzPlan(route, ctx);
    if (plan?.rbac === undefined) return undefined;
    return {
      filters: plan.rbac.map(({ kind, config }) => ({
        name: `sluice.rbac.${kind}`,
        order: FilterOrder.authorization + OFFSET[kind],
        // No rules at listener level: the filter only acts where a route enables it with its own rules.
        config: anyPack(RBACSchema, create(RBACSchema)),
        perRoute: anyPack(
          RBACPerRouteSchema,
          create(RBACPerRouteSchema, { rbac: { rules: config, rulesStatPrefix: `sluice_${kind}_` } }),
        ),
      })),
    };
  },
};
