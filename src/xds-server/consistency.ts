// Checks that a snapshot is complete before it is published, like go-control-plane: a Cluster of type EDS needs its
// ClusterLoadAssignment and a listener's RDS needs its RouteConfiguration in the same snapshot, or Envoy would warm
// forever (or, on timeout, serve without them). Reports every problem; never throws.
import { fromBinary } from "@bufbuild/protobuf";
import { type Any, anyUnpack } from "@bufbuild/protobuf/wkt";
import { Cluster_DiscoveryType, ClusterSchema } from "../gen/envoy/config/cluster/v3/cluster_pb.js";
import type { FilterChain } from "../gen/envoy/config/listener/v3/listener_components_pb.js";
import { ListenerSchema } from "../gen/envoy/config/listener/v3/listener_pb.js";
import { HttpConnectionManagerSchema } from "../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { resourcesOf, type Snapshot } from "./snapshot.js";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from "./type-urls.js";

export type SnapshotErrorCode =
  | "DuplicateResource"
  | "UndecodableResource"
  | "MissingClusterLoadAssignment"
  | "MissingRouteConfiguration";

export interface SnapshotError {
  readonly code: SnapshotErrorCode;
  /** Type URL of the resource the problem is in. */
  readonly typeUrl: string;
  /** Name of the resource the problem is in. */
  readonly name: string;
  readonly message: string;
}

const HCM_TYPE = `type.googleapis.com/${HttpConnectionManagerSchema.typeName}`;

/** Names of the RouteConfigurations a listener's HttpConnectionManagers fetch over RDS. */
function rdsNames(anys: readonly (Any | undefined)[]): string[] {
  const names: string[] = [];
  for (const any of anys) {
    if (any?.typeUrl !== HCM_TYPE) continue;
    const hcm = anyUnpack(any, HttpConnectionManagerSchema);
    if (hcm?.routeSpecifier.case === "rds") names.push(hcm.routeSpecifier.value.routeConfigName);
  }
  return names;
}

function filterConfigs(chains: readonly (FilterChain | undefined)[]): (Any | undefined)[] {
  return chains.flatMap((chain) =>
    (chain?.filters ?? []).map((f) => (f.configType.case === "typedConfig" ? f.configType.value : undefined)),
  );
}

function decodeError(typeUrl: string, name: string, e: unknown): SnapshotError {
  const reason = e instanceof Error ? e.message : String(e);
  return { code: "UndecodableResource", typeUrl, name, message: `cannot decode ${name}: ${reason}` };
}

/** Problems that would make Envoy reject or stall on `snapshot`; empty when it can be published. */
export function checkConsistency(snapshot: Snapshot): SnapshotError[] {
  const errors: SnapshotError[] = [];
  for (const key of snapshot.duplicates) {
    const slash = key.lastIndexOf("/");
    const typeUrl = key.slice(0, slash);
    const name = key.slice(slash + 1);
    errors.push({ code: "DuplicateResource", typeUrl, name, message: `${name} is given more than once` });
  }

  const endpoints = resourcesOf(snapshot, ENDPOINT_TYPE);
  for (const resource of resourcesOf(snapshot, CLUSTER_TYPE).values()) {
    try {
      const cluster = fromBinary(ClusterSchema, resource.value);
      const isEds =
        cluster.clusterDiscoveryType.case === "type" &&
        cluster.clusterDiscoveryType.value === Cluster_DiscoveryType.EDS;
      if (!isEds) continue;
      // Envoy asks EDS for service_name when set, else for the cluster's own name.
      const wanted = cluster.edsClusterConfig?.serviceName || cluster.name;
      if (!endpoints.has(wanted)) {
        errors.push({
          code: "MissingClusterLoadAssignment",
          typeUrl: CLUSTER_TYPE,
          name: resource.name,
          message: `cluster ${resource.name} is of type EDS but the snapshot has no ClusterLoadAssignment named ${wanted}`,
        });
      }
    } catch (e) {
      errors.push(decodeError(CLUSTER_TYPE, resource.name, e));
    }
  }

  const routes = resourcesOf(snapshot, ROUTE_TYPE);
  for (const resource of resourcesOf(snapshot, LISTENER_TYPE).values()) {
    try {
      const listener = fromBinary(ListenerSchema, resource.value);
      const anys = [
        listener.apiListener?.apiListener,
        ...filterConfigs([...listener.filterChains, listener.defaultFilterChain]),
      ];
      for (const wanted of new Set(rdsNames(anys))) {
        if (routes.has(wanted)) continue;
        errors.push({
          code: "MissingRouteConfiguration",
          typeUrl: LISTENER_TYPE,
          name: resource.name,
          message: `listener ${resource.name} uses RDS route configuration ${wanted}, which the snapshot does not have`,
        });
      }
    } catch (e) {
      errors.push(decodeError(LISTENER_TYPE, resource.name, e));
    }
  }
  return errors;
}
