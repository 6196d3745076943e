// Status of the InferencePools that routes of Sluice's Gateways send traffic to: one parent entry per Gateway.

import { GATEWAY_API_GROUP, SLUICE_CONTROLLER_NAME } from "../../api/gateway-api.js";
import type { GatewayIR } from "../ir.js";
import { condition, type ResourceStatus } from "../status/conditions.js";

/**
 * FailOpen needs Sluice's LLM stage to leave one of the pool's ready Pods for the picker's failure (docs/llm.md); a
 * route straight to the pool has none.
 */
const FAIL_OPEN_NOT_APPLIED =
  "; spec.endpointPickerRef.failureMode FailOpen is not applied to an HTTPRoute backendRef straight to the pool (only through an AI GwBackend's custom provider): there, a request the picker does not answer fails as with FailClose";

/** From the Gateways' clusters: a pool whose endpoint picker resolved has a cluster; one that did not is reported on
 * the route (BackendNotFound) and gets no entry here. */
export function inferencePoolStatuses(gateways: readonly GatewayIR[]): ResourceStatus[] {
  const byPool = new Map<string, string[]>();
  const failOpen = new Set<string>();
  for (const g of gateways) {
    for (const c of g.clusters) {
      if (c.kind !== "pool") continue;
      const list = byPool.get(c.pool.name) ?? [];
      if (!list.includes(g.key)) list.push(g.key);
      byPool.set(c.pool.name, list);
      if (c.pool.failOpen) failOpen.add(c.pool.name);
    }
  }
  return [...byPool]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([pool, gws]) => {
      const [namespace = "", name = ""] = pool.split("/");
      return {
        kind: "InferencePool",
        namespace,
        name,
        status: {
          parents: gws.sort().map((key) => {
            const [gwNamespace = "", gwName = ""] = key.split("/");
            return {
              parentRef: { group: GATEWAY_API_GROUP, kind: "Gateway", namespace: gwNamespace, name: gwName },
              controllerName: SLUICE_CONTROLLER_NAME,
              conditions: [
                condition(
                  "Accepted",
                  true,
                  "Accepted",
                  `routes of this Gateway send traffic to the pool${failOpen.has(pool) ? FAIL_OPEN_NOT_APPLIED : ""}`,
                ),
                condition("ResolvedRefs", true, "ResolvedRefs", "the endpoint picker resolved"),
              ],
            };
          }),
        },
      };
    });
}
