// An immutable set of resources for one node group, grouped by type URL, with versions derived from content.
import { create, type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { type Cluster, ClusterSchema } from "../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../gen/envoy/config/core/v3/config_source_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { type Listener, ListenerSchema } from "../gen/envoy/config/listener/v3/listener_pb.js";
import { VirtualHostSchema } from "../gen/envoy/config/route/v3/route_components_pb.js";
import {
  type RouteConfiguration,
  RouteConfigurationSchema,
  VhdsSchema,
} from "../gen/envoy/config/route/v3/route_pb.js";
import { type Secret, SecretSchema } from "../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import { contentHash, setVersion, type XdsResource, xdsResource } from "./resource.js";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE, VIRTUAL_HOST_TYPE } from "./type-urls.js";

export interface Snapshot {
  /** Hash of every type's version: equal snapshots have equal versions. */
  readonly version: string;
  /** Resources by type URL, then by name. */
  readonly resources: ReadonlyMap<string, ReadonlyMap<string, XdsResource>>;
  /** Version of each type's full set of resources (see setVersion). */
  readonly typeVersions: ReadonlyMap<string, string>;
  /**
   * RouteConfigurations as served to Envoys on delta ADS: without virtual hosts, which they fetch over VHDS (the
   * VIRTUAL_HOST_TYPE resources). A route configuration missing here is served whole to them too.
   */
  readonly vhdsRoutes: ReadonlyMap<string, XdsResource>;
  /** `type/name` of resources given more than once (the last one was kept); checkConsistency reports them. */
  readonly duplicates: readonly string[];
}

const EMPTY: ReadonlyMap<string, XdsResource> = new Map();

/** The resources of one type in a snapshot (empty when it has none). */
export function resourcesOf(snapshot: Snapshot, typeUrl: string): ReadonlyMap<string, XdsResource> {
  return snapshot.resources.get(typeUrl) ?? EMPTY;
}

/** A snapshot of already serialized resources (and the VHDS form of route configurations, see Snapshot). */
export function snapshotFromResources(
  resources: Iterable<XdsResource>,
  vhdsRoutes: Iterable<XdsResource> = [],
): Snapshot {
  const byType = new Map<string, Map<string, XdsResource>>();
  const duplicates: string[] = [];
  for (const resource of resources) {
    let named = byType.get(resource.typeUrl);
    if (!named) {
      named = new Map();
      byType.set(resource.typeUrl, named);
    }
    if (named.has(resource.name)) duplicates.push(`${resource.typeUrl}/${resource.name}`);
    named.set(resource.name, resource);
  }
  const typeVersions = new Map<string, string>();
  for (const [typeUrl, named] of byType) typeVersions.set(typeUrl, setVersion(named.values()));
  const summary = [...typeVersions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([t, v]) => `${t}=${v}`);
  const vhds = new Map([...vhdsRoutes].map((r) => [r.name, r]));
  if (vhds.size > 0) summary.push(`vhds=${setVersion(vhds.values())}`);
  return { version: contentHash(summary.join("\n")), resources: byType, vhdsRoutes: vhds, typeVersions, duplicates };
}

/** Envoy messages that make up a snapshot. Names come from the messages themselves. */
export interface SnapshotInput {
  readonly clusters?: readonly Cluster[];
  readonly endpoints?: readonly ClusterLoadAssignment[];
  readonly listeners?: readonly Listener[];
  readonly routes?: readonly RouteConfiguration[];
  readonly secrets?: readonly Secret[];
  /**
   * Route configurations already serialized (name and bytes, in parts); when given, `routes` is not read. With
   * their virtual hosts' bytes and the route configuration for VHDS (no virtual hosts, `vhds` set), Envoys on delta
   * ADS get those instead.
   */
  readonly encodedRoutes?: readonly EncodedRoutes[];
}

export interface EncodedRoutes {
  readonly name: string;
  readonly parts: readonly Uint8Array[];
  readonly virtualHosts?: readonly { readonly name: string; readonly value: Uint8Array }[];
  readonly vhds?: Uint8Array;
}

const VHDS_OVER_ADS = create(VhdsSchema, {
  configSource: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
});

/** Route configuration messages in the form of `encodedRoutes`, VHDS included. */
function encodeRoutes(routes: readonly RouteConfiguration[]): EncodedRoutes[] {
  return routes.map((rc) => ({
    name: rc.name,
    parts: [toBinary(RouteConfigurationSchema, rc)],
    virtualHosts: rc.virtualHosts.map((vh) => ({ name: vh.name, value: toBinary(VirtualHostSchema, vh) })),
    vhds: toBinary(RouteConfigurationSchema, { ...rc, virtualHosts: [], vhds: VHDS_OVER_ADS }),
  }));
}

function pack<Desc extends DescMessage>(
  typeUrl: string,
  schema: Desc,
  messages: readonly MessageShape<Desc>[] | undefined,
  name: (message: MessageShape<Desc>) => string,
): XdsResource[] {
  return (messages ?? []).map((message) => xdsResource(typeUrl, name(message), toBinary(schema, message)));
}

/** Serializes and versions protobuf-es messages into a snapshot. */
export function buildSnapshot(input: SnapshotInput): Snapshot {
  const routes = input.encodedRoutes ?? encodeRoutes(input.routes ?? []);
  const vhds = routes.filter((r) => r.vhds !== undefined && r.virtualHosts !== undefined);
  return snapshotFromResources(
    [
      ...pack(CLUSTER_TYPE, ClusterSchema, input.clusters, (m) => m.name),
      ...pack(ENDPOINT_TYPE, ClusterLoadAssignmentSchema, input.endpoints, (m) => m.clusterName),
      ...pack(LISTENER_TYPE, ListenerSchema, input.listeners, (m) => m.name),
      ...routes.map((r) => xdsResource(ROUTE_TYPE, r.name, r.parts)),
      ...vhds.flatMap((r) => (r.virtualHosts ?? []).map((vh) => xdsResource(VIRTUAL_HOST_TYPE, vh.name, vh.value))),
      ...pack(SECRET_TYPE, SecretSchema, input.secrets, (m) => m.name),
    ],
    vhds.map((r) => xdsResource(ROUTE_TYPE, r.name, r.vhds as Uint8Array)),
  );
}
