// Native authorization: Envoy's RBAC filter, for authorization rules whose expressions all compile to RBAC
// (src/cel/rbac.ts). Up to three filters, Deny then Require then Allow, each enabled per route with its rules.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { RBACPerRouteSchema, RBACSchema } from "../../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb.js";
import { routeAuthzPlan } from "./authz-plan.js";
import { phaseOrder } from "./policy-fields.js";
import { FilterOrder, type HttpFilterBuilder } from "./types.js";

const OFFSET = { deny: 0, require: 1, allow: 2 } as const;

export const rbacBuilder: HttpFilterBuilder = {
  id: "rbac",
  schemas: [RBACSchema, RBACPerRouteSchema],
  forRoute(route, ctx) {
    // PreRouting rules get filters of their own, before every PostRouting filter.
    const filters = (["preRouting", "traffic"] as const).flatMap((phase) =>
      (routeAuthzPlan(route, ctx, phase)?.rbac ?? []).map(({ kind, config }) => ({
        name: `sluice.rbac.${kind}${phase === "preRouting" ? ".pre_routing" : ""}`,
        order: phaseOrder(FilterOrder.authorization + OFFSET[kind], phase),
        // No rules at listener level: the filter only acts where a route enables it with its own rules.
        config: anyPack(RBACSchema, create(RBACSchema)),
        perRoute: anyPack(
          RBACPerRouteSchema,
          create(RBACPerRouteSchema, { rbac: { rules: config, rulesStatPrefix: `sluice_${kind}_` } }),
        ),
      })),
    );
    return filters.length > 0 ? { filters } : undefined;
  },
};
