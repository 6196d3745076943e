// An immutable set of resources for one node group, grouped by type URL, with versions derived from content.
import { type DescMessage, type MessageShape, toBinary } from "@bufbuild/protobuf";
import { type Cluster, ClusterSchema } from "../gen/envoy/config/cluster/v3/cluster_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { type Listener, ListenerSchema } from "../gen/envoy/config/listener/v3/listener_pb.js";
import { type RouteConfiguration, RouteConfigurationSchema } from "../gen/envoy/config/route/v3/route_pb.js";
import { type Secret, SecretSchema } from "../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import { contentHash, setVersion, type XdsResource, xdsResource } from "./resource.js";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, SECRET_TYPE } from "./type-urls.js";

export interface Snapshot {
  /** Hash of every type's version: equal snapshots have equal versions. */
  readonly version: string;
  /** Resources by type URL, then by name. */
  readonly resources: ReadonlyMap<string, ReadonlyMap<string, XdsResource>>;
  /** Version of each type's full set of resources (see setVersion). */
  readonly typeVersions: ReadonlyMap<string, string>;
  /** `type/name` of resources given more than once (the last one was kept); checkConsistency reports them. */
  readonly duplicates: readonly string[];
}

const EMPTY: ReadonlyMap<string, XdsResource> = new Map();

/** The resources of one type in a snapshot (empty when it has none). */
export function resourcesOf(snapshot: Snapshot, typeUrl: string): ReadonlyMap<string, XdsResource> {
  return snapshot.resources.get(typeUrl) ?? EMPTY;
}

/** A snapshot of already serialized resources. */
export function snapshotFromResources(resources: Iterable<XdsResource>): Snapshot {
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
  return { version: contentHash(summary.join("\n")), resources: byType, typeVersions, duplicates };
}

/** Envoy messages that make up a snapshot. Names come from the messages themselves. */
export interface SnapshotInput {
  readonly clusters?: readonly Cluster[];
  readonly endpoints?: readonly ClusterLoadAssignment[];
  readonly listeners?: readonly Listener[];
  readonly routes?: readonly RouteConfiguration[];
  readonly secrets?: readonly Secret[];
  /** Route configurations already serialized (name and bytes, in parts); when given, `routes` is not read. */
  readonly encodedRoutes?: readonly { readonly name: string; readonly parts: readonly Uint8Array[] }[];
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
  return snapshotFromResources([
    ...pack(CLUSTER_TYPE, ClusterSchema, input.clusters, (m) => m.name),
    ...pack(ENDPOINT_TYPE, ClusterLoadAssignmentSchema, input.endpoints, (m) => m.clusterName),
    ...pack(LISTENER_TYPE, ListenerSchema, input.listeners, (m) => m.name),
    ...(input.encodedRoutes !== undefined
      ? input.encodedRoutes.map((r) => xdsResource(ROUTE_TYPE, r.name, r.parts))
      : pack(ROUTE_TYPE, RouteConfigurationSchema, input.routes, (m) => m.name)),
    ...pack(SECRET_TYPE, SecretSchema, input.secrets, (m) => m.name),
  ]);
}
