// The xDS server's public API.
export { checkConsistency, type SnapshotError, type SnapshotErrorCode } from "./consistency.js";
export { type LogFields, stderrLogger, type XdsLogger } from "./logger.js";
export { GATEWAY_METADATA_KEY, nodeGroup } from "./node-group.js";
export { contentHash, joinParts, setVersion, type XdsResource, xdsResource } from "./resource.js";
export { type ListenOptions, XdsServer, type XdsServerOptions } from "./server.js";
export { buildSnapshot, resourcesOf, type Snapshot, type SnapshotInput, snapshotFromResources } from "./snapshot.js";
export { type SetSnapshotResult, SnapshotCache, type SnapshotWatcher } from "./snapshot-cache.js";
export type {
  NackRecord,
  RefusalRecord,
  StreamKind,
  StreamStatus,
  TypeStatus,
  XdsCounters,
  XdsServerStatus,
} from "./tracker.js";
export {
  CLUSTER_TYPE,
  ENDPOINT_TYPE,
  isWildcardType,
  LISTENER_TYPE,
  PUSH_ORDER,
  ROUTE_TYPE,
  SECRET_TYPE,
  shortTypeName,
  VIRTUAL_HOST_TYPE,
} from "./type-urls.js";
