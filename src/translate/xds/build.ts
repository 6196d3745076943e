// GatewayIR → the xDS resources of that Gateway.

import { fromBinary } from "@bufbuild/protobuf";
import { type RouteConfiguration, RouteConfigurationSchema } from "../../gen/envoy/config/route/v3/route_pb.js";
import type { AuthzContext } from "../authz/plan.js";
import type { GatewayIR } from "../ir.js";
import { buildCluster, buildLoadAssignment } from "./cluster.js";
import { buildFilterChain } from "./filters/chain.js";
import type { BuildContext, PolicyNote } from "./filters/types.js";
import { buildListener } from "./listener.js";
import { buildNetworkAuthorization } from "./network-authz.js";
import type { EncodedResource, XdsResources } from "./resources.js";
import { buildRoute } from "./route.js";
import { encodeRoute, encodeRouteConfiguration, encodeVirtualHost } from "./route-bytes.js";
import { buildSecret } from "./secret.js";

export interface BuildResult {
  readonly xds: XdsResources;
  /** Policy fields accepted but not applied (yet), for status. */
  readonly notes: readonly PolicyNote[];
}

export interface BuildOptions {
  /** Translation-wide authentication/authorization state (policy table, Secrets). */
  readonly authz?: Omit<AuthzContext, "note">;
  /** LLM table entry id by route name (this Gateway's routes to AI backends). */
  readonly llmEntries?: ReadonlyMap<string, string>;
}

export function buildXds(gw: GatewayIR, opts: BuildOptions = {}): BuildResult {
  const notes: PolicyNote[] = [];
  const seen = new Set<string>();
  const note: BuildContext["note"] = (from, field, message, reason) => {
    const key = `${from.kind}|${from.name}|${field}|${message}`;
    if (seen.has(key)) return;
    seen.add(key);
    notes.push({ from, field, message, ...(reason !== undefined ? { reason } : {}) });
  };
  const ctx: BuildContext = {
    note,
    ...(opts.authz !== undefined ? { authz: { ...opts.authz, note } } : {}),
    llmEntry: (routeName) => opts.llmEntries?.get(routeName),
  };
  const configs = new Map(gw.routeConfigs.map((rc) => [rc.name, rc]));
  // Each filter chain serves exactly one route configuration; its HTTP filters come from that configuration's routes.
  const chains = new Map(
    gw.listeners.flatMap((l) =>
      l.filterChains.map((c) => {
        const rc = configs.get(c.routeConfigName);
        return [c.name, buildFilterChain(rc === undefined ? [] : [rc], ctx)] as const;
      }),
    ),
  );
  const perRoute = new Map([...chains.values()].flatMap((c) => [...c.perRoute]));
  const extraClusters = new Map([...chains.values()].flatMap((c) => c.clusters.map((cl) => [cl.name, cl] as const)));
  const clusters = gw.clusters.map(buildCluster);
  for (const c of clusters) extraClusters.delete(c.name);
  return {
    xds: {
      clusters: [...clusters, ...[...extraClusters.values()].sort((a, b) => (a.name < b.name ? -1 : 1))],
      endpoints: gw.clusters.flatMap((c) => {
        const la = buildLoadAssignment(c);
        return la === undefined ? [] : [la];
      }),
      listeners: gw.listeners.map((l) =>
        buildListener(l, (chain) => chains.get(chain)?.httpFilters ?? [], buildNetworkAuthorization(l, ctx)),
      ),
      ...encodedRoutes(
        gw.routeConfigs.map((rc) => ({
          name: rc.name,
          value: encodeRouteConfiguration(
            rc.name,
            rc.virtualHosts.map((vh) =>
              encodeVirtualHost(
                vh.name,
                vh.domains,
                vh.routes.map((r) => encodeRoute(buildRoute(r, perRoute, ctx))),
              ),
            ),
          ),
        })),
      ),
      secrets: gw.secrets.map(buildSecret),
    },
    notes,
  };
}

/** `encodedRoutes`, with `routes` decoded from them the first time someone asks (printing, tests); ADS does not. */
function encodedRoutes(encoded: readonly EncodedResource[]): Pick<XdsResources, "routes" | "encodedRoutes"> {
  let routes: RouteConfiguration[] | undefined;
  return {
    encodedRoutes: encoded,
    get routes() {
      routes ??= encoded.map((r) => fromBinary(RouteConfigurationSchema, r.value));
      return routes;
    },
  };
}
