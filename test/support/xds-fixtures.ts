// Small Envoy resources for xDS tests, built with the generated protobuf-es types.
import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import {
  type Cluster,
  Cluster_DiscoveryType,
  ClusterSchema,
} from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import {
  ApiVersion,
  type ConfigSource,
  ConfigSourceSchema,
} from "../../src/gen/envoy/config/core/v3/config_source_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../../src/gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { type Listener, ListenerSchema } from "../../src/gen/envoy/config/listener/v3/listener_pb.js";
import { type RouteConfiguration, RouteConfigurationSchema } from "../../src/gen/envoy/config/route/v3/route_pb.js";
import { RouterSchema } from "../../src/gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import { HttpConnectionManagerSchema } from "../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";

export function adsSource(): ConfigSource {
  return create(ConfigSourceSchema, {
    configSourceSpecifier: { case: "ads", value: {} },
    resourceApiVersion: ApiVersion.V3,
  });
}

/** A cluster of type EDS fed over ADS. */
export function edsCluster(name: string, init: Partial<Pick<Cluster, "lbPolicy" | "connectTimeout">> = {}): Cluster {
  return create(ClusterSchema, {
    name,
    clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.EDS },
    edsClusterConfig: { edsConfig: adsSource() },
    ...init,
  });
}

export function endpoints(clusterName: string, ports: readonly number[], host = "127.0.0.1"): ClusterLoadAssignment {
  return create(ClusterLoadAssignmentSchema, {
    clusterName,
    endpoints: [
      {
        locality: { region: "local" },
        loadBalancingWeight: 1,
        lbEndpoints: ports.map((port) => ({
          hostIdentifier: {
            case: "endpoint" as const,
            value: {
              address: {
                address: {
                  case: "socketAddress" as const,
                  value: { address: host, portSpecifier: { case: "portValue" as const, value: port } },
                },
              },
            },
          },
        })),
      },
    ],
  });
}

/** A gRPC-style API listener whose HttpConnectionManager fetches `routeName` over RDS. */
export function apiListener(name: string, routeName: string): Listener {
  const hcm = create(HttpConnectionManagerSchema, {
    statPrefix: name,
    routeSpecifier: { case: "rds", value: { routeConfigName: routeName, configSource: adsSource() } },
    httpFilters: [
      { name: "router", configType: { case: "typedConfig", value: anyPack(RouterSchema, create(RouterSchema)) } },
    ],
  });
  return create(ListenerSchema, {
    name,
    apiListener: { apiListener: anyPack(HttpConnectionManagerSchema, hcm) },
  });
}

/** A route configuration sending everything to `cluster`, or, with `extra`, some path prefixes elsewhere first. */
export function routeTo(
  name: string,
  cluster: string,
  domains: readonly string[] = ["*"],
  extra: readonly { readonly prefix: string; readonly cluster: string }[] = [],
): RouteConfiguration {
  const route = (prefix: string, to: string) => ({
    match: { pathSpecifier: { case: "prefix" as const, value: prefix } },
    action: { case: "route" as const, value: { clusterSpecifier: { case: "cluster" as const, value: to } } },
  });
  return create(RouteConfigurationSchema, {
    name,
    virtualHosts: [
      {
        name: "all",
        domains: [...domains],
        routes: [...extra.map((e) => route(e.prefix, e.cluster)), route("", cluster)],
      },
    ],
  });
}
