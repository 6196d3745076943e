// ext_authz → Sluice (src/extauthz/server.ts): basic and API key authentication at `sluiceAuthn`, and CEL
// authorization that does not compile to RBAC at `authorization` (or joined with authentication in one call).
// Envoy names the policy-table entry with the per-route context extension `sluice.policy`.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { JWT_METADATA_NAMESPACE } from "../../../cel/rbac.js";
import { POLICY_CONTEXT_KEY } from "../../../extauthz/server.js";
import { ApiVersion } from "../../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  ExtAuthzPerRouteSchema,
  ExtAuthzSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_authz/v3/ext_authz_pb.js";
import { SLUICE_AUTHZ_CLUSTER } from "../../names.js";
import { routeAuthzPlan } from "./authz-plan.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

export const SLUICE_AUTHN_FILTER = "sluice.ext_authz.authn";
export const SLUICE_AUTHZ_FILTER = "sluice.ext_authz.authz";

/** Listener-level config: call Sluice over the bootstrap cluster, fail closed, pass the JWT payload. */
export function sluiceExtAuthz() {
  return create(ExtAuthzSchema, {
    services: {
      case: "grpcService",
      value: {
        targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
        timeout: { seconds: 2n },
      },
    },
    transportApiVersion: ApiVersion.V3,
    // A Sluice that cannot answer must not open the gate (status_on_error defaults to 403).
    failureModeAllow: false,
    metadataContextNamespaces: [JWT_METADATA_NAMESPACE],
  });
}

function instance(name: string, order: number, policyId: string): FilterInstance {
  return {
    name,
    order,
    config: anyPack(ExtAuthzSchema, sluiceExtAuthz()),
    perRoute: anyPack(
      ExtAuthzPerRouteSchema,
      create(ExtAuthzPerRouteSchema, {
        override: { case: "checkSettings", value: { contextExtensions: { [POLICY_CONTEXT_KEY]: policyId } } },
      }),
    ),
  };
}

export const sluiceExtAuthzBuilder: HttpFilterBuilder = {
  id: "sluice-ext-authz",
  schemas: [ExtAuthzSchema, ExtAuthzPerRouteSchema],
  forRoute(route, ctx) {
    const plan = routeAuthzPlan(route, ctx);
    if (plan === undefined) return undefined;
    const filters: FilterInstance[] = [];
    if (plan.authnPolicyId !== undefined) {
      filters.push(instance(SLUICE_AUTHN_FILTER, FilterOrder.sluiceAuthn, plan.authnPolicyId));
    }
    if (plan.authzPolicyId !== undefined) {
      filters.push(instance(SLUICE_AUTHZ_FILTER, FilterOrder.authorization, plan.authzPolicyId));
    }
    return filters.length > 0 ? { filters } : undefined;
  },
};
