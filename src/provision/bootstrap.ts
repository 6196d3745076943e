// The bootstrap ConfigMap of a provisioned Envoy: deploy/envoy/bootstrap.yaml (and its TLS part) as `sluice bootstrap`
// renders it, pointed at the controller's xDS Service, plus what the pod needs: DNS resolution of that Service, a
// readiness listener the kubelet can reach (the admin listener is loopback only), the JSON log format when asked,
// and `rawConfig` underneath (typed fields win).

import { isIP } from "node:net";
import { parse, stringify } from "yaml";
import { renderBootstrap } from "../cli/envoy.js";
import { BOOTSTRAP_DIR, XDS_CERT_DIR } from "./names.js";

export interface BootstrapSettings {
  /** Host name (the xDS Service's DNS name) or IP address Envoys reach Sluice at. */
  readonly xdsHost: string;
  readonly xdsPort: number;
  readonly authzPort: number;
  /** Sluice's MCP service (the sluice_mcp cluster); without it MCP routes answer 503. */
  readonly mcpPort?: number;
  readonly adminPort: number;
  /** Port of the readiness listener (`/ready`, answered by Envoy's health check filter; 503 once draining). */
  readonly readyPort: number;
  readonly delta: boolean;
  /** Mutual TLS to Sluice with the Gateway's client certificate (mounted at XDS_CERT_DIR). */
  readonly tls: boolean;
}

/** Clusters of the bootstrap that reach Sluice. */
const SLUICE_CLUSTERS = new Set(["sluice_xds", "sluice_services", "sluice_authz", "sluice_authz_http", "sluice_mcp"]);

/** Envoy's JSON application log (Envoy's own fields, one object per line). */
export const JSON_LOG_FORMAT = {
  time: "%Y-%m-%dT%T.%eZ",
  level: "%l",
  logger: "%n",
  thread: "%t",
  source: "%g:%#",
  message: "%j",
};

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

function isObject(v: unknown): v is { [k: string]: Json } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * `typed` over `raw`: objects merge key by key with `typed` winning; lists of named objects (clusters, listeners)
 * merge by name (a typed entry replaces a raw one of its name, raw entries of other names are kept after the typed
 * ones); any other list or value of `typed` replaces the raw one.
 */
export function mergeUnder(raw: Json | undefined, typed: Json): Json {
  if (raw === undefined) return typed;
  if (isObject(raw) && isObject(typed)) {
    const out: { [k: string]: Json } = { ...raw };
    for (const [k, v] of Object.entries(typed)) out[k] = mergeUnder(raw[k], v);
    return out;
  }
  if (Array.isArray(raw) && Array.isArray(typed)) {
    const named = (l: Json[]) => l.every((e) => isObject(e) && typeof e["name"] === "string");
    if (!named(raw) || !named(typed)) return typed;
    const names = new Set(typed.map((e) => (e as { name: string }).name));
    return [...typed, ...raw.filter((e) => !names.has((e as { name: string }).name))];
  }
  return typed;
}

function readinessListener(port: number): Json {
  return {
    name: "sluice_ready",
    address: { socket_address: { address: "0.0.0.0", port_value: port } },
    filter_chains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: {
              "@type":
                "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
              stat_prefix: "sluice_ready",
              route_config: { name: "sluice_ready", virtual_hosts: [] },
              http_filters: [
                {
                  name: "envoy.filters.http.health_check",
                  typed_config: {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck",
                    pass_through_mode: false,
                    headers: [{ name: ":path", string_match: { exact: "/ready" } }],
                  },
                },
                {
                  name: "envoy.filters.http.router",
                  typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" },
                },
              ],
            },
          },
        ],
      },
    ],
  };
}

/**
 * The bootstrap of Gateway `namespace/name`'s Envoys as YAML. The node id is each pod's name (`--service-node`), the
 * node cluster the Gateway.
 */
export function renderProxyBootstrap(
  gateway: { readonly namespace: string; readonly name: string },
  s: BootstrapSettings,
  opts: { readonly jsonLogs: boolean; readonly rawConfig?: Readonly<Record<string, unknown>> },
): string {
  const key = `${gateway.namespace}/${gateway.name}`;
  const text = renderBootstrap({
    nodeId: `envoy-${gateway.namespace}-${gateway.name}`,
    gateway: key,
    adminPort: s.adminPort,
    xdsHost: s.xdsHost,
    xdsPort: s.xdsPort,
    authzPort: s.authzPort,
    ...(s.mcpPort !== undefined ? { mcpPort: s.mcpPort } : {}),
    delta: s.delta,
    ...(s.tls
      ? {
          tls: {
            certFile: `${XDS_CERT_DIR}/tls.crt`,
            keyFile: `${XDS_CERT_DIR}/tls.key`,
            caFile: `${XDS_CERT_DIR}/ca.crt`,
            serverName: s.xdsHost,
          },
        }
      : {}),
  });
  const typed = parse(text) as { [k: string]: Json };
  // A Service name, not an address: resolved by DNS (and again when it changes).
  if (isIP(s.xdsHost) === 0) {
    const clusters = (typed["static_resources"] as { clusters?: { [k: string]: Json }[] }).clusters ?? [];
    for (const c of clusters)
      if (typeof c["name"] === "string" && SLUICE_CLUSTERS.has(c["name"])) c["type"] = "STRICT_DNS";
  }
  const statics = typed["static_resources"] as { [k: string]: Json };
  statics["listeners"] = [readinessListener(s.readyPort)];
  if (opts.jsonLogs) typed["application_log_config"] = { log_format: { json_format: JSON_LOG_FORMAT } };
  // log_format is a oneof: the typed JSON format replaces whatever format rawConfig chose, not merges with it.
  let raw = opts.rawConfig as Json | undefined;
  if (opts.jsonLogs && isObject(raw) && isObject(raw["application_log_config"])) {
    const { log_format: _, ...rest } = raw["application_log_config"];
    raw = { ...raw, application_log_config: rest };
  }
  const merged = mergeUnder(raw, typed);
  return `# Rendered by Sluice for Gateway ${key}; mounted at ${BOOTSTRAP_DIR}. Edits are reverted: use GwParameters.\n${stringify(merged, { lineWidth: 0 })}`;
}
