// The names and labels of what Sluice provisions for a Gateway: the one place they are made.

import { createHash } from "node:crypto";
import { GATEWAY_NAME_LABEL } from "../api/gateway-api.js";

/** A Kubernetes object name of at most `max` characters: `prefix + name`, shortened with a hash when too long. */
function bounded(prefix: string, name: string, max: number): string {
  const full = `${prefix}${name}`;
  if (full.length <= max) return full;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 10);
  return `${full.slice(0, max - 11).replace(/[-.]+$/, "")}-${hash}`;
}

/**
 * The Deployment / DaemonSet, Service, ServiceAccount, ConfigMap, PodDisruptionBudget and HorizontalPodAutoscaler of
 * Gateway `name` (in its namespace). 63 characters at most: a Service name is a DNS label.
 */
export function proxyName(gateway: string): string {
  return bounded("sluice-", gateway, 63);
}

/** The Secret of the Gateway's MCP session key (created once, never rotated by reconcile). */
export function sessionKeySecretName(gateway: string): string {
  return bounded("sluice-session-", gateway, 253);
}

/** The key of the session key Secret the proxy's SESSION_KEY comes from. */
export const SESSION_KEY_KEY = "session-key";

export const MANAGED_BY = "sluice";

/** The labels of every provisioned object; the first three are also the pod selector (never changed later). */
export function proxyLabels(gateway: string): Record<string, string> {
  return {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": MANAGED_BY,
    [GATEWAY_NAME_LABEL]: labelValue(gateway),
  };
}

/** A label value (63 characters at most); Gateway names longer than that are shortened with a hash. */
export function labelValue(v: string): string {
  return v.length <= 63 ? v : bounded("", v, 63);
}

/** Where the pod mounts its bootstrap and the Gateway's xDS client certificate. */
export const BOOTSTRAP_DIR = "/etc/envoy";
export const BOOTSTRAP_FILE = "bootstrap.yaml";
export const XDS_CERT_DIR = "/var/run/secrets/sluice.dev/xds";
export const ENVOY_CONTAINER = "envoy";
