// Status of the GatewayClasses Sluice's controller handles: Accepted, and the Gateway API features it serves.

import type { GatewayClass } from "../../api/gateway-api.js";
import { SLUICE_CONTROLLER_NAME } from "../../api/gateway-api.js";
import { condition, type ResourceStatus } from "../status/conditions.js";

/**
 * Features of the Gateway API conformance suite that the translator serves (route/ and gateway/), sorted by name as
 * the API asks. A feature goes here when the translator implements it, not before.
 */
export const SUPPORTED_FEATURES: readonly string[] = [
  "Gateway",
  "GRPCRoute",
  "HTTPRoute",
  "HTTPRouteHostRewrite",
  "HTTPRouteMethodMatching",
  "HTTPRoutePathRedirect",
  "HTTPRoutePathRewrite",
  "HTTPRoutePortRedirect",
  "HTTPRouteQueryParamMatching",
  "HTTPRouteRequestMirror",
  "HTTPRouteRequestTimeout",
  "HTTPRouteResponseHeaderModification",
  "HTTPRouteSchemeRedirect",
  "ReferenceGrant",
].sort();

/** GatewayClasses are cluster-scoped: their status has namespace "". */
export function gatewayClassStatuses(classes: readonly GatewayClass[]): ResourceStatus[] {
  return classes
    .filter((c) => c.spec.controllerName === SLUICE_CONTROLLER_NAME)
    .map((c) => ({
      kind: "GatewayClass",
      namespace: "",
      name: c.metadata.name,
      status: {
        conditions: [condition("Accepted", true, "Accepted", `handled by ${SLUICE_CONTROLLER_NAME}`)],
        supportedFeatures: SUPPORTED_FEATURES.map((name) => ({ name })),
      },
    }));
}
