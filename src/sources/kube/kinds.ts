// The kinds the controller watches, where the API server serves them, and which of them may be absent.

import { SERVICE_NAME_LABEL } from "../../api/core.js";
import { GATEWAY_API_GROUP, GATEWAY_API_X_GROUP, INFERENCE_GROUP } from "../../api/gateway-api.js";
import { SLUICE_GROUP, SLUICE_VERSION } from "../../api/sluice.js";

/** What referencedBy reads of an object. */
export interface KubeObjectLike {
  readonly metadata: { readonly name: string; readonly labels?: Readonly<Record<string, string>> };
}

/** Its name and its label values (a Secret named by a policy, or picked by its secretSelector). */
const nameOrLabels = (o: KubeObjectLike): readonly string[] => [
  o.metadata.name,
  ...Object.values(o.metadata.labels ?? {}),
];

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
  /** Label selector of the list and watch (the provisioner watches only the objects it made). */
  readonly labelSelector?: string;
  /** What of each object is kept in memory, when less than all of it (see slimEndpointSlice). */
  readonly slim?: (o: Record<string, unknown>) => Record<string, unknown>;
  /**
   * Objects of this kind take part in translation only when one of these strings of theirs is mentioned by a
   * Gateway API or Sluice resource (see KubeSource's mentioned strings): their name, or label values a selector or
   * a lookup by label could match.
   */
  readonly referencedBy?: (o: KubeObjectLike) => readonly string[];
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

/** What a slimmed object keeps of its metadata: name, namespace, labels, uid, resourceVersion, deletion, and `extra`. */
function slimMetadata(m: Record<string, unknown>, extra: readonly string[] = []): Record<string, unknown> {
  const kept = ["labels", "uid", "resourceVersion", ...extra, "deletionTimestamp"];
  return {
    name: m["name"],
    namespace: m["namespace"],
    ...Object.fromEntries(kept.filter((k) => m[k] !== undefined).map((k) => [k, m[k]])),
  };
}

/**
 * An EndpointSlice as the translator reads it: the address type, the ports, and each endpoint's addresses,
 * conditions and zone. Pod references, node names, hostnames, topology hints, owner references and annotations
 * (endpoints.kubernetes.io/last-change-trigger-time) are dropped: with 10,000 slices they are most of the memory.
 */
export function slimEndpointSlice(o: Record<string, unknown>): Record<string, unknown> {
  const m = (o["metadata"] ?? {}) as Record<string, unknown>;
  const endpoints = Array.isArray(o["endpoints"]) ? (o["endpoints"] as Record<string, unknown>[]) : undefined;
  return {
    apiVersion: o["apiVersion"],
    kind: o["kind"],
    metadata: slimMetadata(m, ["generation"]),
    addressType: o["addressType"],
    ...(o["ports"] !== undefined ? { ports: o["ports"] } : {}),
    ...(endpoints !== undefined
      ? {
          endpoints: endpoints.map((e) => ({
            addresses: e["addresses"],
            ...(e["conditions"] !== undefined ? { conditions: e["conditions"] } : {}),
            ...(e["zone"] !== undefined ? { zone: e["zone"] } : {}),
          })),
        }
      : {}),
  };
}

/**
 * A Pod as the translator reads it (an InferencePool's model server with FailOpen: api/core.ts Pod): its labels, IP and
 * Ready condition. Its spec, the other conditions, container statuses and annotations are dropped.
 */
export function slimPod(o: Record<string, unknown>): Record<string, unknown> {
  const m = (o["metadata"] ?? {}) as Record<string, unknown>;
  const status = (o["status"] ?? {}) as Record<string, unknown>;
  const conditions = Array.isArray(status["conditions"]) ? (status["conditions"] as Record<string, unknown>[]) : [];
  const ready = conditions.filter((c) => c["type"] === "Ready").map((c) => ({ type: c["type"], status: c["status"] }));
  return {
    apiVersion: o["apiVersion"],
    kind: o["kind"],
    metadata: slimMetadata(m),
    status: {
      ...(typeof status["podIP"] === "string" ? { podIP: status["podIP"] } : {}),
      ...(ready.length > 0 ? { conditions: ready } : {}),
    },
  };
}

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
  {
    kind: "Service",
    group: "",
    versions: ["v1"],
    plural: "services",
    namespaced: true,
    optional: false,
    // Named by a backendRef, or found by its Gateway's label (gateway.networking.k8s.io/gateway-name: <gateway>).
    referencedBy: nameOrLabels,
  },
  {
    kind: "EndpointSlice",
    group: "discovery.k8s.io",
    versions: ["v1"],
    plural: "endpointslices",
    namespaced: true,
    optional: false,
    slim: slimEndpointSlice,
    // Read as the endpoints of its Service: only when that Service is named.
    referencedBy: (o) => [o.metadata.labels?.[SERVICE_NAME_LABEL] ?? ""],
  },
  {
    kind: "Pod",
    group: "",
    versions: ["v1"],
    plural: "pods",
    namespaced: true,
    optional: false,
    // Only a Running Pod can be Ready; Pending and finished ones are never listed.
    fieldSelector: "status.phase=Running",
    slim: slimPod,
    // Read as an InferencePool's model server: only when one of its label values is mentioned (a pool's matchLabels).
    referencedBy: (o) => Object.values(o.metadata.labels ?? {}),
  },
  {
    kind: "Secret",
    group: "",
    versions: ["v1"],
    plural: "secrets",
    namespaced: true,
    optional: false,
    fieldSelector: IGNORED_SECRET_TYPES.map((t) => `type!=${t}`).join(","),
    referencedBy: nameOrLabels,
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
    referencedBy: nameOrLabels,
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
