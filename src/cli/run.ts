// `sluice run -f <dir>`: the embedded default. `sluice serve` plus one Envoy per Gateway, started with the bootstrap
// from deploy/envoy/, and started or stopped as Gateways appear in or leave the files.

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { applyObservability, interactiveFormat, stopObservability } from "../observability/options.js";
import {
  type BootstrapTls,
  deltaXds,
  type EnvoyProcess,
  renderBootstrap,
  startEnvoy,
  XDS_MODE_OPTIONS,
} from "./envoy.js";
import type { CommandIO } from "./io.js";
import { parseAuthorizationPath, parsePort, SERVER_OPTIONS, untilSignal } from "./serve.js";
import { SluiceServer } from "./server.js";
import { writeGatewayCertificate, xdsTlsOf } from "./xds-tls.js";

export async function runRun(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...SERVER_OPTIONS,
      ...XDS_MODE_OPTIONS,
      "envoy-log-level": { type: "string", default: "warn" },
    },
  });
  if (!values.file?.length) {
    io.stderr("sluice run: -f <dir> is required\n");
    return 2;
  }
  const delta = deltaXds(values, "sluice run", io);
  if (delta === undefined) return 2;
  const log = applyObservability(values, interactiveFormat(), (t) => io.stderr(t));
  const workDir = mkdtempSync(join(tmpdir(), "sluice-run-"));
  const envoys = new Map<string, EnvoyProcess>();
  // However sluice ends (a crash, a closed pipe on its output), the Envoys it started must not outlive it.
  process.on("exit", () => {
    for (const e of envoys.values()) e.child.kill("SIGTERM");
  });
  let stopping = false;
  let server: SluiceServer | undefined;

  const xdsTls = await xdsTlsOf(values, log);
  const xdsHost = values["xds-host"] === "0.0.0.0" ? "127.0.0.1" : values["xds-host"];

  /** Gateways whose Envoy waits for its client certificate. */
  const issuing = new Set<string>();

  const startFor = async (gateway: string) => {
    if (server === undefined) return;
    const base = join(workDir, gateway.replace("/", "_"));
    const adminPath = `${base}.admin`;
    let tls: BootstrapTls | undefined;
    if (xdsTls !== undefined) {
      // Each Envoy gets a client certificate for its Gateway, next to its bootstrap.
      issuing.add(gateway);
      try {
        tls = { ...(await writeGatewayCertificate(xdsTls.ca, gateway, `${base}.tls`)), serverName: xdsHost };
      } finally {
        issuing.delete(gateway);
      }
      if (stopping || envoys.has(gateway) || !server.gateways.includes(gateway)) return;
    }
    const bootstrap = renderBootstrap({
      nodeId: `sluice-run-${process.pid}-${gateway}`,
      gateway,
      adminPort: 0,
      xdsHost,
      xdsPort: server.xdsPort,
      authzPort: server.authzPort,
      mcpPort: server.mcpPort,
      delta,
      ...(tls !== undefined ? { tls } : {}),
    });
    const envoy = startEnvoy(bootstrap, {
      logLevel: values["envoy-log-level"],
      adminAddressPath: adminPath,
      onOutput: (line) => log(`envoy[${gateway}] ${line}`),
    });
    envoys.set(gateway, envoy);
    log(
      `sluice: started Envoy (pid ${envoy.child.pid}) for Gateway ${gateway} (${delta ? "delta" : "state-of-the-world"} xDS)`,
    );
    setTimeout(() => {
      try {
        log(`sluice: Envoy admin for ${gateway} at http://${readFileSync(adminPath, "utf8").trim()}`);
      } catch {}
    }, 1000).unref();
    void envoy.exited.then((code) => {
      if (!stopping && envoys.get(gateway) === envoy) {
        envoys.delete(gateway);
        log(`sluice: Envoy for ${gateway} exited with code ${code}; restarting`);
        setTimeout(() => syncEnvoys(server?.gateways ?? []), 1000).unref();
      }
    });
  };

  const syncEnvoys = (gateways: readonly string[]) => {
    if (stopping || server === undefined || server.xdsPort === 0) return;
    for (const g of gateways) {
      if (envoys.has(g) || issuing.has(g)) continue;
      startFor(g).catch((e: unknown) => log(`sluice: cannot start Envoy for ${g}: ${(e as Error).message}`));
    }
    for (const [g, envoy] of envoys) {
      if (!gateways.includes(g)) {
        envoys.delete(g);
        log(`sluice: Gateway ${g} is gone; stopping its Envoy`);
        void envoy.stop();
      }
    }
  };

  server = new SluiceServer({
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
    onGateways: syncEnvoys,
    ...(xdsTls !== undefined ? { tls: xdsTls.tls } : {}),
  });
  await server.start();
  syncEnvoys(server.gateways);
  if (server.gateways.length === 0) log("sluice: no Gateway in the files yet; Envoy starts when one appears");

  const signal = await untilSignal();
  stopping = true;
  log(`sluice: ${signal}, stopping`);
  await Promise.all([...envoys.values()].map((e) => e.stop()));
  await server.stop();
  await stopObservability();
  rmSync(workDir, { recursive: true, force: true });
  return 0;
}
