// The options of `sluice controller`, apart from the command: `sluice --help` and the help of every command read them,
// and the command itself loads the Kubernetes client (main.ts loads a command's module only when it runs).

import { OBSERVABILITY_OPTIONS } from "../observability/options.js";
import { DEFAULT_ENVOY_ADMIN_PORT, DEFAULT_ENVOY_READY_PORT } from "../provision/defaults.js";

export const CONTROLLER_OPTIONS = {
  ...OBSERVABILITY_OPTIONS,
  kubeconfig: { type: "string" },
  // Where the Lease (and the xDS CA Secret) live: the controller's own namespace.
  namespace: { type: "string" },
  // This replica's name in the Lease (the pod name in a cluster).
  identity: { type: "string" },
  "lease-name": { type: "string", default: "sluice-controller" },
  "lease-duration": { type: "string", default: "15" },
  "leader-elect": { type: "boolean", default: true },
  "no-leader-elect": { type: "boolean", default: false },
  "status-concurrency": { type: "string", default: "4" },
  "xds-host": { type: "string", default: "0.0.0.0" },
  "xds-port": { type: "string", default: "18000" },
  "authz-port": { type: "string", default: "18002" },
  "mcp-port": { type: "string", default: "18003" },
  "admin-host": { type: "string", default: "0.0.0.0" },
  "admin-port": { type: "string", default: "18001" },
  "authorization-path": { type: "string", default: "auto" },
  "no-vhds": { type: "boolean", default: false },
  // Authenticated xDS (on by default): Envoys need their Gateway's client certificate (docs/xds-security.md).
  "no-xds-tls": { type: "boolean", default: false },
  // DNS names Envoys reach Sluice by (the xDS Service's), for Sluice's serving certificate.
  "xds-server-name": { type: "string", multiple: true },
  // Provisioning (by the Lease holder): an Envoy Deployment, Service, ... per Gateway (docs/kubernetes.md).
  "no-provision": { type: "boolean", default: false },
  // What provisioned Envoys dial: the xDS Service (default sluice-xds.<namespace>.svc) and its ports (default: the
  // ports this replica serves on).
  "proxy-xds-host": { type: "string" },
  "proxy-xds-port": { type: "string" },
  "proxy-authz-port": { type: "string" },
  "proxy-mcp-port": { type: "string" },
  // Envoy's admin port (loopback, in the pod) and readiness port.
  "proxy-admin-port": { type: "string", default: String(DEFAULT_ENVOY_ADMIN_PORT) },
  "proxy-ready-port": { type: "string", default: String(DEFAULT_ENVOY_READY_PORT) },
  // The Envoy image and log level when GwParameters names none.
  "proxy-image": { type: "string" },
  "proxy-log-level": { type: "string", default: "info" },
  // Seconds between re-applies of every provisioned object, a backstop to the watch of those objects that puts a hand
  // edit right at once; 0: only on changes.
  "provision-resync": { type: "string", default: "60" },
} as const;
