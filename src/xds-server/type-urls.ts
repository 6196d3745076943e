// The xDS resource types Sluice serves, by type URL. One module so streams, snapshots and tests agree on spelling.

const prefix = "type.googleapis.com/";

export const CLUSTER_TYPE = `${prefix}envoy.config.cluster.v3.Cluster`;
export const ENDPOINT_TYPE = `${prefix}envoy.config.endpoint.v3.ClusterLoadAssignment`;
export const LISTENER_TYPE = `${prefix}envoy.config.listener.v3.Listener`;
export const ROUTE_TYPE = `${prefix}envoy.config.route.v3.RouteConfiguration`;
export const SECRET_TYPE = `${prefix}envoy.extensions.transport_sockets.tls.v3.Secret`;
/** VHDS: served only to Envoys on delta ADS, whose RouteConfigurations then carry `vhds` instead of virtual hosts. */
export const VIRTUAL_HOST_TYPE = `${prefix}envoy.config.route.v3.VirtualHost`;

/**
 * The order in which a new snapshot is pushed: make-before-break per the xDS protocol (CDS, then EDS, then LDS, then
 * RDS, then VHDS). Secrets go with clusters: a cluster or listener that references one warms until it arrives.
 */
export const PUSH_ORDER: readonly string[] = [
  CLUSTER_TYPE,
  SECRET_TYPE,
  ENDPOINT_TYPE,
  LISTENER_TYPE,
  ROUTE_TYPE,
  VIRTUAL_HOST_TYPE,
];

const known = new Set(PUSH_ORDER);

export function isKnownType(typeUrl: string): boolean {
  return known.has(typeUrl);
}

/** Only Listener and Cluster support wildcard ("send me everything") subscriptions. */
export function isWildcardType(typeUrl: string): boolean {
  return typeUrl === LISTENER_TYPE || typeUrl === CLUSTER_TYPE;
}

/**
 * Types whose subscriptions name namespaces (VHDS: a route configuration's name subscribes to every virtual host
 * named `<route configuration>/<hostname>`), as Envoy's `use_namespace_matching` does.
 */
export function isNamespacedType(typeUrl: string): boolean {
  return typeUrl === VIRTUAL_HOST_TYPE;
}

/** The namespace of a resource name, as Envoy derives it: everything before the last '/' (watch_map.cc). */
export function namespaceOf(name: string): string {
  const at = name.lastIndexOf("/");
  return at < 0 ? "" : name.slice(0, at);
}

/** The short names used in logs and status: "CDS", "EDS", ... */
export function shortTypeName(typeUrl: string): string {
  switch (typeUrl) {
    case CLUSTER_TYPE:
      return "CDS";
    case ENDPOINT_TYPE:
      return "EDS";
    case LISTENER_TYPE:
      return "LDS";
    case ROUTE_TYPE:
      return "RDS";
    case SECRET_TYPE:
      return "SDS";
    case VIRTUAL_HOST_TYPE:
      return "VHDS";
    default:
      return typeUrl;
  }
}
