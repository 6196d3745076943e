// The kinds the controller watches, where the API server serves them, and which of them may be absent.

import { GATEWAY_API_GROUP, GATEWAY_API_X_GROUP, INFERENCE_GROUP } from "../../api/gateway-api.js";
import { SLUICE_GROUP, SLUICE_VERSION } from "../../api/sluice.js";

export interface WatchedKind {
  readonly kind: string;
  readonly group: string;
  /** Versions tried in order: the first one the API server serves is watched. */
  readonly versions: readonly string[];
  readonly plural: string;
  readonly namespaced: boolean;
  /**
   * Core kinds must be served; the others (CRDs) may be absent: that is logged once, the kind counts as synced with
   * no objects, and the API server is asked again every REDISCOVER_MS so a CRD installed later is picked up.
   */
  readonly optional: boolean;
  /** Field selector of the list and watch (what is not needed is never sent, nor kept). */
  readonly fieldSelector?: string;
  /**
   * The kind has a status subresource and Sluice never reads its status: a change of status alone (same generation,
   * labels and annotations) triggers no translation. Not so for core kinds (a Service's load balancer status is read).
   */
  readonly statusOnlyIgnored?: boolean;
}

/**
 * Secrets of these types are never read by Sluice (Helm releases, ServiceAccount tokens, image pull secrets,
 * bootstrap tokens): the API server filters them out, so neither their bytes nor their memory reach the controller.
 * Field selectors on `type` take only equality: one `!=` per type.
 */
export const IGNORED_SECRET_TYPES = [
  "helm.sh/release.v1",
  "kubernetes.io/service-account-token",
  "kubernetes.io/dockerconfigjson",
  "kubernetes.io/dockercfg",
  "bootstrap.kubernetes.io/token",
] as const;

const gw = (kind: string, plural: string, versions: readonly string[], namespaced = true): WatchedKind => ({
  kind,
  group: GATEWAY_API_GROUP,
  versions,
  plural,
  namespaced,
  optional: true,
  statusOnlyIgnored: true,
});

const sluice = (kind: string, plural: string): WatchedKind => ({
  kind,
  group: SLUICE_GROUP,
  versions: [SLUICE_VERSION],
  plural,
  namespaced: true,
  optional: true,
  statusOnlyIgnored: true,
});

export const WATCHED_KINDS: readonly WatchedKind[] = [
  gw("GatewayClass", "gatewayclasses", ["v1"], false),
  gw("Gateway", "gateways", ["v1"]),
  gw("HTTPRoute", "httproutes", ["v1"]),
  gw("GRPCRoute", "grpcroutes", ["v1"]),
  gw("ReferenceGrant", "referencegrants", ["v1", "v1beta1"]),
  gw("ListenerSet", "listenersets", ["v1"]),
  {
    kind: "XListenerSet",
    group: GATEWAY_API_X_GROUP,
    versions: ["v1alpha1"],
    plural: "xlistenersets",
    namespaced: true,
    optional: true,
    statusOnlyIgnored: true,
  },
  {
    kind: "InferencePool",
    group: INFERENCE_GROUP,
    versions: ["v1"],
    plural: "inferencepools",
    namespaced: true,
    optional: true,
    statusOnlyIgnored: true,
  },
  { kind: "Service", group: "", versions: ["v1"], plural: "services", namespaced: true, optional: false },
  {
    kind: "EndpointSlice",
    group: "discovery.k8s.io",
    versions: ["v1"],
    plural: "endpointslices",
    namespaced: true,
    optional: false,
  },
  {
    kind: "Secret",
    group: "",
    versions: ["v1"],
    plural: "secrets",
    namespaced: true,
    optional: false,
    fieldSelector: IGNORED_SECRET_TYPES.map((t) => `type!=${t}`).join(","),
  },
  {
    kind: "ConfigMap",
    group: "",
    versions: ["v1"],
    plural: "configmaps",
    namespaced: true,
    optional: false,
    // The API server's CA bundle, published into every namespace, is never referenced by a Sluice resource.
    fieldSelector: "metadata.name!=kube-root-ca.crt",
  },
  { kind: "Namespace", group: "", versions: ["v1"], plural: "namespaces", namespaced: false, optional: false },
  sluice("GwPolicy", "gwpolicies"),
  sluice("GwBackend", "gwbackends"),
  sluice("GwModel", "gwmodels"),
  sluice("GwParameters", "gwparameters"),
];

export function apiVersionOf(k: WatchedKind, version: string): string {
  return k.group === "" ? version : `${k.group}/${version}`;
}
