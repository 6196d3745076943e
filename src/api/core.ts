// Core Kubernetes kinds Sluice reads (v1 Service, Secret, ConfigMap, Namespace, Pod; discovery.k8s.io/v1 EndpointSlice).

import type { ObjectMeta } from "./resource.js";

export interface ServicePort {
  readonly name?: string;
  readonly port: number;
  readonly targetPort?: number | string;
  readonly protocol?: "TCP" | "UDP" | "SCTP";
  readonly appProtocol?: string;
}

export interface Service {
  readonly apiVersion: string;
  readonly kind: "Service";
  readonly metadata: ObjectMeta;
  readonly spec: {
    readonly ports?: readonly ServicePort[];
    readonly clusterIP?: string;
    readonly type?: string;
    readonly externalName?: string;
    readonly selector?: Readonly<Record<string, string>>;
  };
}

export interface EndpointSlice {
  readonly apiVersion: string;
  readonly kind: "EndpointSlice";
  readonly metadata: ObjectMeta;
  readonly addressType: "IPv4" | "IPv6" | "FQDN";
  readonly endpoints?: readonly {
    readonly addresses: readonly string[];
    readonly conditions?: { readonly ready?: boolean; readonly serving?: boolean; readonly terminating?: boolean };
    readonly zone?: string;
  }[];
  readonly ports?: readonly {
    readonly name?: string;
    readonly port?: number;
    readonly protocol?: string;
    readonly appProtocol?: string;
  }[];
}

/**
 * A Pod as Sluice reads it: the model servers of an InferencePool with `failureMode: FailOpen`, where a request goes
 * when the pool's endpoint picker does not answer (its labels, its IP, whether it is Ready).
 */
export interface Pod {
  readonly apiVersion: string;
  readonly kind: "Pod";
  readonly metadata: ObjectMeta & { readonly deletionTimestamp?: string };
  readonly status?: {
    readonly podIP?: string;
    readonly conditions?: readonly { readonly type?: string; readonly status?: string }[];
  };
}

/**
 * Whether a Pod has an IP and its `Ready` condition is `True`, and is not terminating (deleted, its containers told to
 * stop: the EndpointSlice controller takes such an endpoint out of the ready ones at once too).
 */
export function podReady(pod: Pod): boolean {
  if (pod.metadata.deletionTimestamp !== undefined) return false;
  const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
  return ready && typeof pod.status?.podIP === "string" && pod.status.podIP !== "";
}

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

export interface Secret {
  readonly apiVersion: string;
  readonly kind: "Secret";
  readonly metadata: ObjectMeta;
  readonly type?: string;
  /** base64-encoded values */
  readonly data?: Readonly<Record<string, string>>;
  readonly stringData?: Readonly<Record<string, string>>;
}

export interface ConfigMap {
  readonly apiVersion: string;
  readonly kind: "ConfigMap";
  readonly metadata: ObjectMeta;
  readonly data?: Readonly<Record<string, string>>;
  readonly binaryData?: Readonly<Record<string, string>>;
}

export interface Namespace {
  readonly apiVersion: string;
  readonly kind: "Namespace";
  readonly metadata: ObjectMeta;
}

/** Decoded value of a Secret key (stringData wins over data, as the API server does on write). */
export function secretValue(secret: Secret, key: string): string | undefined {
  const plain = secret.stringData?.[key];
  if (plain !== undefined) return plain;
  const encoded = secret.data?.[key];
  return encoded === undefined ? undefined : Buffer.from(encoded, "base64").toString("utf8");
}
