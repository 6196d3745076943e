// GatewayIR → the xDS resources of that Gateway.

import type { GatewayIR } from "../ir.js";
import { buildCluster, buildLoadAssignment } from "./cluster.js";
import { buildListener } from "./listener.js";
import type { XdsResources } from "./resources.js";
import { buildRouteConfiguration } from "./route.js";
import { buildSecret } from "./secret.js";

export function buildXds(gw: GatewayIR): XdsResources {
  return {
    clusters: gw.clusters.map(buildCluster),
    endpoints: gw.clusters.flatMap((c) => {
      const la = buildLoadAssignment(c);
      return la === undefined ? [] : [la];
    }),
    listeners: gw.listeners.map(buildListener),
    routes: gw.routeConfigs.map(buildRouteConfiguration),
    secrets: gw.secrets.map(buildSecret),
  };
}
