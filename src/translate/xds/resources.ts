// The xDS resources of one Gateway, as protobuf-es messages, and the type registry for printing them.

import { createRegistry } from "@bufbuild/protobuf";
import type { Cluster } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ClusterSchema } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import type { ClusterLoadAssignment } from "../../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { ClusterLoadAssignmentSchema } from "../../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import type { Listener } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { FilterConfigSchema } from "../../gen/envoy/config/route/v3/route_components_pb.js";
import type { RouteConfiguration } from "../../gen/envoy/config/route/v3/route_pb.js";
import { RouteConfigurationSchema } from "../../gen/envoy/config/route/v3/route_pb.js";
import { ExpressionFilterSchema } from "../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb.js";
import { RouterSchema } from "../../gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import { UpstreamCodecSchema } from "../../gen/envoy/extensions/filters/http/upstream_codec/v3/upstream_codec_pb.js";
import { TlsInspectorSchema } from "../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb.js";
import { HttpConnectionManagerSchema } from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { Http11ProxyUpstreamTransportSchema } from "../../gen/envoy/extensions/transport_sockets/http_11_proxy/v3/upstream_http_11_connect_pb.js";
import type { Secret } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import { SecretSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import { DownstreamTlsContextSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import { HttpProtocolOptionsSchema } from "../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { CREDENTIAL_SCHEMAS } from "./backend-credential.js";
import { EARLY_HEADER_MUTATION_SCHEMAS } from "./early-headers.js";
import { HTTP_FILTER_BUILDERS } from "./filters/registry.js";
import { FRONTEND_SCHEMAS } from "./frontend.js";
import { NETWORK_AUTHZ_SCHEMAS } from "./network-authz.js";

export interface XdsResources {
  readonly clusters: readonly Cluster[];
  readonly endpoints: readonly ClusterLoadAssignment[];
  readonly listeners: readonly Listener[];
  readonly routes: readonly RouteConfiguration[];
  readonly secrets: readonly Secret[];
  /** The route configurations already serialized, in `routes` order; snapshots use these bytes as they are. */
  readonly encodedRoutes?: readonly EncodedRouteConfiguration[];
}

/** A serialized xDS resource and its name; the bytes are the concatenation of `parts`. */
export interface EncodedResource {
  readonly name: string;
  readonly parts: readonly Uint8Array[];
}

/** A serialized route configuration, with what VHDS serves instead of it (see xds-server/snapshot.ts). */
export interface EncodedRouteConfiguration extends EncodedResource {
  /** Its virtual hosts' bytes (shared with `parts`), by name. */
  readonly virtualHosts: readonly { readonly name: string; readonly value: Uint8Array }[];
  /** The route configuration without virtual hosts, fetching them over VHDS. */
  readonly vhds: Uint8Array;
}

/** Every message type Sluice packs into an Any, so JSON/YAML output can print typed_config. */
export const xdsTypeRegistry = createRegistry(
  FilterConfigSchema,
  ...HTTP_FILTER_BUILDERS.flatMap((b) => b.schemas),
  ...NETWORK_AUTHZ_SCHEMAS,
  ...FRONTEND_SCHEMAS,
  ...CREDENTIAL_SCHEMAS,
  UpstreamCodecSchema,
  ClusterSchema,
  ClusterLoadAssignmentSchema,
  ListenerSchema,
  RouteConfigurationSchema,
  SecretSchema,
  HttpConnectionManagerSchema,
  RouterSchema,
  HttpProtocolOptionsSchema,
  TlsInspectorSchema,
  DownstreamTlsContextSchema,
  ExpressionFilterSchema,
  ...EARLY_HEADER_MUTATION_SCHEMAS,
  Http11ProxyUpstreamTransportSchema,
);
