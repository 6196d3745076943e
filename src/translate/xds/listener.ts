// ListenerIR → Envoy Listener with one HttpConnectionManager whose routes come over RDS (ADS).

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { type Listener, ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { TlsInspectorSchema } from "../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb.js";
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManagerSchema,
} from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { DownstreamTlsContextSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import type { FilterChainIR, ListenerIR } from "../ir.js";
import type { FilterChainResult } from "./filters/chain.js";
import type { NetworkFilter } from "./network-authz.js";

type HttpFilters = FilterChainResult["httpFilters"];

function buildHcm(chain: FilterChainIR, httpFilters: HttpFilters) {
  return create(HttpConnectionManagerSchema, {
    statPrefix: chain.name,
    codecType: HttpConnectionManager_CodecType.AUTO,
    routeSpecifier: {
      case: "rds",
      value: {
        routeConfigName: chain.routeConfigName,
        configSource: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
      },
    },
    normalizePath: true,
    mergeSlashes: true,
    useRemoteAddress: true,
    httpFilters: [...httpFilters],
  });
}

function buildTransportSocket(chain: FilterChainIR) {
  if (chain.tls === undefined) return undefined;
  const tls = create(DownstreamTlsContextSchema, {
    commonTlsContext: {
      tlsCertificateSdsSecretConfigs: chain.tls.secrets.map((name) => ({
        name,
        sdsConfig: { configSourceSpecifier: { case: "ads" as const, value: {} }, resourceApiVersion: ApiVersion.V3 },
      })),
      alpnProtocols: ["h2", "http/1.1"],
    },
  });
  return {
    name: "envoy.transport_sockets.tls",
    configType: { case: "typedConfig" as const, value: anyPack(DownstreamTlsContextSchema, tls) },
  };
}

/**
 * `filtersOf(chainName)` gives the HTTP filters of each filter chain (see filters/chain.ts); `networkFilters` run
 * before the HttpConnectionManager on every chain (L4 authorization).
 */
export function buildListener(
  l: ListenerIR,
  filtersOf: (chain: string) => HttpFilters,
  networkFilters: readonly NetworkFilter[] = [],
): Listener {
  return create(ListenerSchema, {
    name: l.name,
    address: {
      address: {
        case: "socketAddress",
        value: { address: l.address, portSpecifier: { case: "portValue", value: l.port } },
      },
    },
    // SNI is read before a chain is chosen.
    listenerFilters:
      l.protocol === "HTTPS"
        ? [
            {
              name: "envoy.filters.listener.tls_inspector",
              configType: { case: "typedConfig", value: anyPack(TlsInspectorSchema, create(TlsInspectorSchema)) },
            },
          ]
        : [],
    filterChains: l.filterChains.map((chain) => {
      const transportSocket = buildTransportSocket(chain);
      return {
        name: chain.name,
        ...(chain.serverNames.length > 0 ? { filterChainMatch: { serverNames: [...chain.serverNames] } } : {}),
        ...(transportSocket !== undefined ? { transportSocket } : {}),
        filters: [
          ...networkFilters,
          {
            name: "envoy.filters.network.http_connection_manager",
            configType: {
              case: "typedConfig" as const,
              value: anyPack(HttpConnectionManagerSchema, buildHcm(chain, filtersOf(chain.name))),
            },
          },
        ],
      };
    }),
  });
}
