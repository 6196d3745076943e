// Assembles the HTTP filter chain of one HttpConnectionManager from the routes it serves.

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import type { Cluster } from "../../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { FilterConfigSchema } from "../../../gen/envoy/config/route/v3/route_components_pb.js";
import { RouterSchema } from "../../../gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import type {
  HttpFilter,
  HttpFilterSchema,
} from "../../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import type { RouteConfigIR, RouteIR } from "../../ir.js";
import { HTTP_FILTER_BUILDERS } from "./registry.js";
import type { BuildContext, FilterInstance, HttpFilterBuilder, RouteContribution } from "./types.js";

export interface FilterChainResult {
  readonly httpFilters: readonly import("@bufbuild/protobuf").MessageInitShape<typeof HttpFilterSchema>[];
  /** typed_per_filter_config per route (by route name). */
  readonly perRoute: ReadonlyMap<string, Readonly<Record<string, Any>>>;
  readonly clusters: readonly Cluster[];
}

const ROUTER = "envoy.filters.http.router";

/** What the builders contribute to one route; a memo (src/translate/xds/memo.ts) may answer instead of them. */
export type RouteContributions = (
  route: RouteIR,
  compute: (route: RouteIR) => readonly (RouteContribution | undefined)[],
) => readonly (RouteContribution | undefined)[];

/** What the routes of one virtual host bring to the chain, each part in the order the routes first bring it. */
export interface HostContributions {
  readonly instances: readonly FilterInstance[];
  /** typed_per_filter_config of the routes that have one, by route name. */
  readonly perRoute: readonly (readonly [string, Readonly<Record<string, Any>>])[];
  readonly clusters: readonly Cluster[];
}

/** The contributions of a virtual host's routes; a memo may answer for a routes list it has seen. */
export type VirtualHostContributions = (
  routes: readonly RouteIR[],
  compute: (routes: readonly RouteIR[]) => HostContributions,
) => HostContributions;

export function buildFilterChain(
  routeConfigs: readonly RouteConfigIR[],
  ctx: BuildContext,
  builders: readonly HttpFilterBuilder[] = HTTP_FILTER_BUILDERS,
  contributionsOf: RouteContributions = (route, compute) => compute(route),
  hostContributionsOf: VirtualHostContributions = (routes, compute) => compute(routes),
): FilterChainResult {
  const compute = (route: RouteIR) => builders.map((b) => b.forRoute(route, ctx));
  const computeHost = (routes: readonly RouteIR[]): HostContributions => {
    const instances = new Map<string, FilterInstance>();
    const perRoute = new Map<string, Record<string, Any>>();
    const clusters = new Map<string, Cluster>();
    for (const route of routes) {
      for (const c of contributionsOf(route, compute)) {
        if (c === undefined) continue;
        for (const cl of c.clusters ?? []) if (!clusters.has(cl.name)) clusters.set(cl.name, cl);
        for (const f of c.filters ?? []) {
          if (!instances.has(f.name)) instances.set(f.name, f);
          const configs = perRoute.get(route.name) ?? {};
          configs[f.name] = enabling(f);
          perRoute.set(route.name, configs);
        }
      }
    }
    return { instances: [...instances.values()], perRoute: [...perRoute], clusters: [...clusters.values()] };
  };
  const instances = new Map<string, FilterInstance>();
  const perRoute = new Map<string, Readonly<Record<string, Any>>>();
  const clusters = new Map<string, Cluster>();
  for (const rc of routeConfigs) {
    for (const vh of rc.virtualHosts) {
      const host = hostContributionsOf(vh.routes, computeHost);
      for (const f of host.instances) if (!instances.has(f.name)) instances.set(f.name, f);
      for (const cl of host.clusters) if (!clusters.has(cl.name)) clusters.set(cl.name, cl);
      for (const [name, configs] of host.perRoute) {
        // A route served under several host names is visited once per virtual host: its configs are the union.
        const known = perRoute.get(name);
        perRoute.set(name, known === undefined ? configs : { ...known, ...configs });
      }
    }
  }
  const ordered = [...instances.values()].sort((a, b) => a.order - b.order || (a.name < b.name ? -1 : 1));
  const httpFilters: FilterChainResult["httpFilters"] = [
    ...ordered.map((f) => ({
      name: f.name,
      disabled: true,
      configType: { case: "typedConfig" as const, value: f.config },
    })),
    { name: ROUTER, configType: { case: "typedConfig" as const, value: anyPack(RouterSchema, create(RouterSchema)) } },
  ];
  return { httpFilters, perRoute, clusters: [...clusters.values()] };
}

const enablers = new WeakMap<FilterInstance, Any>();

/**
 * The FilterConfig that enables the (disabled) filter for a route, with the per-route config if there is one. One
 * object per instance, so an unchanged route gets the same config objects and its memoized bytes stay valid.
 */
function enabling(f: FilterInstance): Any {
  let any = enablers.get(f);
  if (any === undefined) {
    any = anyPack(
      FilterConfigSchema,
      create(FilterConfigSchema, { ...(f.perRoute !== undefined ? { config: f.perRoute } : {}), disabled: false }),
    );
    enablers.set(f, any);
  }
  return any;
}

export type { HttpFilter };
