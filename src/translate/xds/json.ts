// xDS resources → plain JSON (proto3 JSON mapping, typed_config expanded), for printing and golden files.

import type { JsonValue } from "@bufbuild/protobuf";
import { type DescMessage, type MessageShape, toJson } from "@bufbuild/protobuf";
import { ClusterSchema } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ClusterLoadAssignmentSchema } from "../../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { RouteConfigurationSchema } from "../../gen/envoy/config/route/v3/route_pb.js";
import { SecretSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import { type XdsResources, xdsTypeRegistry } from "./resources.js";

function json<D extends DescMessage>(schema: D, m: MessageShape<D>): JsonValue {
  return toJson(schema, m, { registry: xdsTypeRegistry, useProtoFieldName: true });
}

export interface XdsJson {
  readonly clusters: JsonValue[];
  readonly endpoints: JsonValue[];
  readonly listeners: JsonValue[];
  readonly routes: JsonValue[];
  readonly secrets: JsonValue[];
}

/** With `redactSecrets`, private keys and backend credentials print as `[redacted]` (output a person may paste). */
export function xdsToJson(x: XdsResources, opts: { redactSecrets?: boolean } = {}): XdsJson {
  const secrets = x.secrets.map((m) => json(SecretSchema, m));
  if (opts.redactSecrets) {
    for (const s of secrets) {
      const key = (s as { tls_certificate?: { private_key?: unknown } }).tls_certificate;
      if (key?.private_key !== undefined) key.private_key = "[redacted]";
      // Backend credentials (credential_injector's SDS secrets).
      const generic = (s as { generic_secret?: { secret?: unknown } }).generic_secret;
      if (generic?.secret !== undefined) generic.secret = "[redacted]";
    }
  }
  return {
    clusters: x.clusters.map((m) => json(ClusterSchema, m)),
    endpoints: x.endpoints.map((m) => json(ClusterLoadAssignmentSchema, m)),
    listeners: x.listeners.map((m) => json(ListenerSchema, m)),
    routes: x.routes.map((m) => json(RouteConfigurationSchema, m)),
    secrets,
  };
}
