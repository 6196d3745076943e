// RouteConfigurations serialized from the bytes of their routes, so that a change to one route re-serializes that
// route, not every route of the Gateway. The result equals toBinary() of the whole message: protobuf-es writes fields
// in field-number order, and a repeated message field is the concatenation of its elements, each tagged and
// length-prefixed. test/unit/route-bytes.test.ts checks the equality on every golden input.

import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { RouteSchema, VirtualHostSchema } from "../../gen/envoy/config/route/v3/route_components_pb.js";
import { RouteConfigurationSchema } from "../../gen/envoy/config/route/v3/route_pb.js";
import { ROUTE_CONFIGURATION_FIELDS } from "./route.js";

/** `VirtualHost.routes` and `RouteConfiguration.virtual_hosts`. */
const VIRTUAL_HOST_ROUTES = 3;
const ROUTE_CONFIGURATION_VIRTUAL_HOSTS = 2;

/** The bytes of one Envoy route. */
export function encodeRoute(route: MessageInitShape<typeof RouteSchema>): Uint8Array {
  return toBinary(RouteSchema, create(RouteSchema, route));
}

/** A virtual host: its name and domains (fields 1 and 2), then its routes (field 3). */
export function encodeVirtualHost(name: string, domains: readonly string[], routes: readonly Uint8Array[]): Uint8Array {
  const w = new BinaryWriter();
  w.raw(toBinary(VirtualHostSchema, create(VirtualHostSchema, { name, domains: [...domains] })));
  for (const r of routes) w.tag(VIRTUAL_HOST_ROUTES, WireType.LengthDelimited).bytes(r);
  return w.finish();
}

/** Bytes of the RouteConfiguration fields other than name and virtual hosts, all numbered above them. */
const TRAILER = toBinary(RouteConfigurationSchema, create(RouteConfigurationSchema, ROUTE_CONFIGURATION_FIELDS));

/**
 * A route configuration: its name (field 1), virtual hosts (field 2), then ROUTE_CONFIGURATION_FIELDS; in parts that
 * share the virtual hosts' bytes (each virtual host is preceded by its tag and length).
 */
export function encodeRouteConfiguration(name: string, virtualHosts: readonly Uint8Array[]): Uint8Array[] {
  const parts: Uint8Array[] = [toBinary(RouteConfigurationSchema, create(RouteConfigurationSchema, { name }))];
  for (const vh of virtualHosts) {
    parts.push(
      new BinaryWriter().tag(ROUTE_CONFIGURATION_VIRTUAL_HOSTS, WireType.LengthDelimited).uint32(vh.length).finish(),
    );
    parts.push(vh);
  }
  parts.push(TRAILER);
  return parts;
}

/**
 * The same route configuration for VHDS: no virtual hosts (Envoy fetches them over ADS, one resource each, named
 * `<name>/<hostname>`), the other fields as in encodeRouteConfiguration.
 */
export function encodeVhdsRouteConfiguration(name: string): Uint8Array {
  return toBinary(
    RouteConfigurationSchema,
    create(RouteConfigurationSchema, {
      name,
      vhds: { configSource: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 } },
      ...ROUTE_CONFIGURATION_FIELDS,
    }),
  );
}

/** The bytes of a resource given in parts. */
export function joinBytes(parts: readonly Uint8Array[]): Uint8Array {
  const w = new BinaryWriter();
  for (const p of parts) w.raw(p);
  return w.finish();
}
