// The one module that names Envoy resources. Names follow the IR path, so a name in an Envoy config dump leads
// straight back to the resource that produced it.

export function gatewayKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

export function listenerName(gateway: string, port: number): string {
  return `gateway/${gateway}/port/${port}`;
}

export function routeConfigName(gateway: string, port: number): string {
  return `gateway/${gateway}/port/${port}`;
}

/** HTTPS listeners get a filter chain and a route configuration each. */
export function listenerChainName(gateway: string, port: number, listener: string): string {
  return `gateway/${gateway}/port/${port}/listener/${listener}`;
}

/**
 * `<route configuration>/<hostname>`: over VHDS, Envoy takes everything before the last '/' of a VirtualHost's
 * resource name as the route configuration it belongs to (its namespace), and a hostname has no '/'.
 */
export function virtualHostName(routeConfig: string, hostname: string): string {
  return `${routeConfig}/${hostname}`;
}

export function secretName(namespace: string, name: string): string {
  return `secret/${namespace}/${name}`;
}

export function routeName(
  namespace: string,
  route: string,
  rule: number,
  match: number,
  kind: "httproute" | "grpcroute" = "httproute",
): string {
  return `${kind}/${namespace}/${route}/rule/${rule}/match/${match}`;
}

/** `h2`: the cluster of a Service port forced to HTTP/2 (GRPCRoute backends), beside its plain one. */
export function serviceClusterName(namespace: string, service: string, port: number, h2 = false): string {
  return `service/${namespace}/${service}/port/${port}${h2 ? "/h2" : ""}`;
}

export function backendClusterName(namespace: string, backend: string, h2 = false): string {
  return `backend/${namespace}/${backend}${h2 ? "/h2" : ""}`;
}

/** The HTTP/2 twin of a backend cluster, for a gRPC service (ext_authz, ext_proc, rate limit) on a plain backend. */
export function http2ClusterName(cluster: string): string {
  return `${cluster}/h2`;
}

/** A cluster with no endpoints standing for a policy backendRef that does not resolve: calls to it fail. */
export function unresolvedClusterName(path: string): string {
  return `unresolved/${path}`;
}

/** The name of one of several instances of an HTTP filter, e.g. `envoy.filters.http.ext_authz/3f2a9c01`. */
export function filterInstanceName(filter: string, key: string): string {
  return `${filter}/${key}`;
}

/** The bootstrap cluster of Sluice's unary gRPC server (ext_authz Check, on Envoy's hot path). */
/** A backend cluster for one set of backend policy connection settings (xds/backend-connection.ts). */
export function clusterVariantName(cluster: string, settingsHash: string): string {
  return `${cluster}~${settingsHash}`;
}

/** The cluster a variant was made from (itself when it is none): an AI cluster's variant shares its LLM table entry. */
export function clusterVariantBase(cluster: string): string {
  const i = cluster.indexOf("~");
  return i < 0 ? cluster : cluster.slice(0, i);
}

/** The internal listener and cluster by which AI cluster `cluster` reaches `provider` (xds/llm-provider-hop.ts). */
export function providerHopName(cluster: string, provider: string): string {
  return `llm-provider/${cluster}/${provider}`;
}

/** An InferencePool's endpoint picker (HTTP/2, gRPC). */
/** The cluster of an InferencePool an HTTPRoute sends to (its model servers, reached where the picker says). */
export function inferencePoolClusterName(namespace: string, pool: string): string {
  return `inferencepool/${namespace}/${pool}`;
}

export function pickerClusterName(namespace: string, pool: string): string {
  return `inferencepool/${namespace}/${pool}/picker`;
}

/** An OTLP collector of a frontend policy: its traces or its access logs. */
export function collectorClusterName(use: "tracing" | "accesslog", namespace: string, name: string): string {
  return `${use}/${namespace}/${name}`;
}

/** The SDS secret of a backend credential; `key` says where it is configured, never its value. */
export function credentialSecretName(key: string): string {
  return `sluice-credential/${key}`;
}

/** The SDS secret of a backend.tls client certificate (mTLS), from its Secret. */
export function clientCertificateSecretName(namespace: string, name: string): string {
  return `sluice-backend-tls/${namespace}/${name}`;
}

export const SLUICE_AUTHZ_CLUSTER = "sluice_authz";
/** Sluice's MCP service over HTTP/1.1 (deploy/envoy/bootstrap.yaml); routes to MCP GwBackends go there. */
export const SLUICE_MCP_CLUSTER = "sluice_mcp";
/**
 * The request header an MCP route sets (overwriting any copy the client sent) to tell Sluice's MCP service which
 * Gateway and GwBackend the request came through: the value of mcpClusterName.
 */
export const MCP_ROUTE_HEADER = "x-sluice-mcp-route";
/** The JWT payload jwt_authn verified, and the API key's metadata, as JSON, for MCP authorization (set likewise). */
export const MCP_JWT_HEADER = "x-sluice-mcp-jwt";
export const MCP_APIKEY_HEADER = "x-sluice-mcp-apikey";

/**
 * The IR cluster of an MCP GwBackend as one Gateway reaches it. Envoy has no such cluster: routes to it go to
 * SLUICE_MCP_CLUSTER with this name in MCP_ROUTE_HEADER (xds/route.ts), and the MCP table is keyed by it.
 */
export function mcpClusterName(gateway: string, namespace: string, backend: string): string {
  return `mcp/${gateway}/${namespace}/${backend}`;
}

export function isMcpClusterName(cluster: string): boolean {
  return cluster.startsWith("mcp/");
}
/** The same server over HTTP/1.1, for Envoy's HTTP ext_authz checks (deploy/envoy/bootstrap.yaml). */
export const SLUICE_AUTHZ_HTTP_CLUSTER = "sluice_authz_http";
/**
 * The request headers a guarded Realtime route's websocket upgrade carries to Sluice's Realtime relay over
 * SLUICE_AUTHZ_HTTP_CLUSTER (xds/realtime-relay.ts; set from the route's config, overwriting any a client sent): the
 * route's LLM table entry and the AI cluster the route forwards to (a route-level variant's name, whose providers the
 * relay dials; the entry names them under the cluster's own, clusterVariantBase).
 */
export const REALTIME_ENTRY_HEADER = "x-sluice-realtime-entry";
export const REALTIME_CLUSTER_HEADER = "x-sluice-realtime-cluster";
/**
 * And the client's connection as Envoy saw it (`%DOWNSTREAM_REMOTE_ADDRESS%`, `%DOWNSTREAM_LOCAL_ADDRESS%`), which the
 * relay's check of a provider's extAuth carries as `source` and `destination`.
 */
export const REALTIME_SOURCE_HEADER = "x-sluice-realtime-source";
export const REALTIME_DESTINATION_HEADER = "x-sluice-realtime-destination";
/**
 * And the request's identity as the route's filters left it in the dynamic metadata (as JSON: the JWT payload; the
 * ext_authz namespace with `apiKey`, `basicAuth` and the route's `extauthz`), which the relay's check reads in CEL.
 */
export const REALTIME_JWT_HEADER = "x-sluice-realtime-jwt";
export const REALTIME_AUTHZ_HEADER = "x-sluice-realtime-authz";

/** The cluster of a concrete GwModel (`namespace/name`), and of a failover virtual model Envoy fails over within. */
export function modelClusterName(model: string, strategy?: "failover" | "weighted"): string {
  return `gwmodel/${model}${strategy !== undefined ? `/${strategy}` : ""}`;
}

/** A GwModel route of a virtual host: `gwmodel/<virtual host>/<what>` (`models`, `default`, or a cluster). */
export function modelRouteName(virtualHost: string, what: string): string {
  return `gwmodel/${virtualHost}/${what}`;
}

/**
 * The request header the LLM ext_proc sets to the cluster of the model it selected (overwriting any copy the client
 * sent); the listener's GwModel routes match it.
 */
export const MODEL_CLUSTER_HEADER = "x-sluice-model-cluster";
