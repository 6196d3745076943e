// GwBackend `dynamicForwardProxy: {}` → Envoy's dynamic forward proxy: each request goes to the host (and port) its
// Host header names, resolved by Envoy's DNS cache. The HTTP filter resolves the host before the router and is enabled
// on the routes to such a backend only; the cluster (cluster.ts) connects to what the cache resolved. One DNS cache for
// the whole Envoy, named so the filter and every such cluster share it (Envoy requires the same config under a name).
//
// It can reach any destination the Host header names: the spec leaves access control to the route's policies
// (authorization on the route, or network policy), and so does Sluice.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { Cluster_DnsLookupFamily } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ClusterConfigSchema } from "../../../gen/envoy/extensions/clusters/dynamic_forward_proxy/v3/cluster_pb.js";
import { DnsCacheConfigSchema } from "../../../gen/envoy/extensions/common/dynamic_forward_proxy/v3/dns_cache_pb.js";
import {
  FilterConfigSchema,
  PerRouteConfigSchema,
} from "../../../gen/envoy/extensions/filters/http/dynamic_forward_proxy/v3/dynamic_forward_proxy_pb.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

const FILTER = "envoy.filters.http.dynamic_forward_proxy";
export const DFP_CLUSTER_TYPE = "envoy.clusters.dynamic_forward_proxy";

/** The one DNS cache: IPv4 first (then IPv6), hosts unused for 5 minutes forgotten, at most 1,024 hosts. */
export function dnsCacheConfig() {
  return create(DnsCacheConfigSchema, {
    name: "sluice_dynamic_forward_proxy",
    dnsLookupFamily: Cluster_DnsLookupFamily.V4_PREFERRED,
    hostTtl: { seconds: 300n },
    maxHosts: 1024,
  });
}

export function dfpClusterConfig() {
  return anyPack(
    ClusterConfigSchema,
    create(ClusterConfigSchema, {
      clusterImplementationSpecifier: { case: "dnsCacheConfig", value: dnsCacheConfig() },
    }),
  );
}

function dfpFilter(): FilterInstance {
  const config = create(FilterConfigSchema, {
    implementationSpecifier: { case: "dnsCacheConfig", value: dnsCacheConfig() },
  });
  return {
    name: FILTER,
    order: FilterOrder.dynamicForwardProxy,
    config: anyPack(FilterConfigSchema, config),
    // Envoy refuses this filter enabled per route without a config of its own; an empty one rewrites nothing.
    perRoute: anyPack(PerRouteConfigSchema, create(PerRouteConfigSchema)),
  };
}

export const dynamicForwardProxyBuilder: HttpFilterBuilder = {
  id: "dynamic-forward-proxy",
  schemas: [FilterConfigSchema, PerRouteConfigSchema, ClusterConfigSchema],
  forRoute(route, ctx) {
    if (route.action.kind !== "forward") return undefined;
    const dfp = route.action.backends.some((b) => ctx.cluster?.(b.cluster)?.kind === "dfp");
    return dfp ? { filters: [dfpFilter()] } : undefined;
  },
};
