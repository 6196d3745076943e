// ListenerIR → Envoy Listener with one HttpConnectionManager whose routes come over RDS (ADS).

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { type Listener, ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { RouterSchema } from "../../gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManagerSchema,
} from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import type { ListenerIR } from "../ir.js";

export function buildListener(l: ListenerIR): Listener {
  const hcm = create(HttpConnectionManagerSchema, {
    statPrefix: l.name,
    codecType: HttpConnectionManager_CodecType.AUTO,
    routeSpecifier: {
      case: "rds",
      value: {
        routeConfigName: l.routeConfigName,
        configSource: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
      },
    },
    normalizePath: true,
    mergeSlashes: true,
    useRemoteAddress: true,
    httpFilters: [
      {
        name: "envoy.filters.http.router",
        configType: { case: "typedConfig", value: anyPack(RouterSchema, create(RouterSchema)) },
      },
    ],
  });
  return create(ListenerSchema, {
    name: l.name,
    address: {
      address: {
        case: "socketAddress",
        value: { address: l.address, portSpecifier: { case: "portValue", value: l.port } },
      },
    },
    filterChains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            configType: { case: "typedConfig", value: anyPack(HttpConnectionManagerSchema, hcm) },
          },
        ],
      },
    ],
  });
}
