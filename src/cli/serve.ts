// `sluice serve -f <file|dir>`: serve xDS for the Gateways in the files, watching them for changes.

import { parseArgs } from "node:util";
import {
  applyObservability,
  interactiveFormat,
  OBSERVABILITY_OPTIONS,
  stopObservability,
} from "../observability/options.js";
import type { AuthorizationPath } from "../translate/authz/plan.js";
import type { CommandIO } from "./io.js";
import { SluiceServer } from "./server.js";
import { XDS_TLS_OPTIONS, xdsTlsOf } from "./xds-tls.js";

export const SERVER_OPTIONS = {
  file: { type: "string", short: "f", multiple: true },
  "xds-host": { type: "string", default: "127.0.0.1" },
  "xds-port": { type: "string", default: "18000" },
  // Sluice's unary gRPC server (ext_authz), on the xds host.
  "authz-port": { type: "string", default: "18002" },
  // Sluice's MCP service (HTTP; Envoy's MCP routes go to it), on the xds host.
  "mcp-port": { type: "string", default: "18003" },
  "admin-host": { type: "string", default: "127.0.0.1" },
  "admin-port": { type: "string", default: "18001" },
  // auto: authorization rules that compile to Envoy RBAC run natively; sluice: all of them in Sluice's ext_authz;
  // sluice-grpc: the same, always over gRPC (not the HTTP check where it would do).
  "authorization-path": { type: "string", default: "auto" },
  // Envoys on delta ADS get virtual hosts over VHDS unless this is set (then whole RouteConfigurations, as on SotW).
  "no-vhds": { type: "boolean", default: false },
  ...XDS_TLS_OPTIONS,
  ...OBSERVABILITY_OPTIONS,
} as const;

export function parseAuthorizationPath(value: string): AuthorizationPath {
  if (value !== "auto" && value !== "sluice" && value !== "sluice-grpc")
    throw new Error(`--authorization-path must be auto, sluice or sluice-grpc, got "${value}"`);
  return value;
}

export function parsePort(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new Error(`--${flag} must be a port number (0 picks one), got "${value}"`);
  return n;
}

/** Resolves when SIGINT or SIGTERM arrives. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(s);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}

export async function runServe(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({ args: argv, options: SERVER_OPTIONS });
  if (!values.file?.length) {
    io.stderr("sluice serve: -f <file|dir> is required\n");
    return 2;
  }
  const log = applyObservability(values, interactiveFormat(), (t) => io.stderr(t));
  const xdsTls = await xdsTlsOf(values, log);
  const server = new SluiceServer({
    paths: values.file,
    xdsHost: values["xds-host"],
    xdsPort: parsePort("xds-port", values["xds-port"]),
    authzPort: parsePort("authz-port", values["authz-port"]),
    mcpPort: parsePort("mcp-port", values["mcp-port"]),
    adminHost: values["admin-host"],
    adminPort: parsePort("admin-port", values["admin-port"]),
    authorizationPath: parseAuthorizationPath(values["authorization-path"]),
    vhds: !values["no-vhds"],
    log,
    ...(xdsTls !== undefined ? { tls: xdsTls.tls } : {}),
  });
  await server.start();
  const signal = await untilSignal();
  log(`sluice: ${signal}, stopping`);
  await server.stop();
  await stopObservability();
  return 0;
}
