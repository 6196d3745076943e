// Running `sluice` and Envoy as real processes in end-to-end tests.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BootstrapTls, type EnvoyProcess, renderBootstrap, startEnvoy } from "../../src/cli/envoy.js";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, request, waitFor } from "./net.js";

/**
 * The Node flags every launcher of Sluice gives it (bin/sluice.js's first line, deploy/Containerfile's ENTRYPOINT,
 * scripts/quickstart.sh; test/unit/node-flags.test.ts keeps them equal), so tests and benches run it as users do: a
 * young generation of 16 MiB per semi-space from the start. V8 otherwise starts it at 1 MiB and resizes it with the
 * allocation rate, up to those 16 MiB and back down (8 to 32 MiB reserved for the two semi-spaces in a soak), an RSS
 * swing of some 25 MiB with nothing more held (docs/faults.md#memory).
 */
export const SLUICE_NODE_FLAGS: readonly string[] = ["--min-semi-space-size=16", "--max-semi-space-size=16"];

export interface SluiceProcess {
  readonly child: ChildProcess;
  readonly output: string[];
  readonly xdsPort: number;
  readonly authzPort: number;
  /** Sluice's MCP service (0 for commands that serve none). */
  readonly mcpPort: number;
  readonly adminPort: number;
  stop(signal?: NodeJS.Signals): Promise<void>;
  status(): Promise<Record<string, unknown>>;
}

/** The status `sluice` reports for resource `kind` `name` (default namespace or not), as JSON; `{}` when it has none. */
export async function resourceStatus(sluice: SluiceProcess, kind: string, name: string): Promise<string> {
  const { resources } = (await sluice.status()) as { resources: { kind: string; name: string; status: unknown }[] };
  return JSON.stringify(resources.find((r) => r.kind === kind && r.name === name)?.status ?? {});
}

/**
 * Starts `sluice <command> -f <dir>` and waits until its admin endpoint answers. Ports not given are picked by sluice
 * itself (port 0) and read from its log, so parallel test files never race for a port.
 */
export async function startSluice(
  command: "serve" | "run",
  dir: string,
  opts: {
    xdsPort?: number;
    authzPort?: number;
    adminPort?: number;
    extraArgs?: string[];
    /** Extra environment variables for the sluice process. */
    env?: Readonly<Record<string, string>>;
    nodeArgs?: readonly string[];
    root?: string;
  } = {},
): Promise<SluiceProcess> {
  return startSluiceCommand(command, ["-f", dir], opts);
}

/** `sluice <command> <args>` with the port flags, as startSluice; for commands that take no -f (controller). */
export async function startSluiceCommand(
  command: string,
  args: readonly string[],
  opts: {
    xdsPort?: number;
    authzPort?: number;
    adminPort?: number;
    extraArgs?: string[];
    env?: Readonly<Record<string, string>>;
    /** Node / V8 flags for the sluice process, before the script (default SLUICE_NODE_FLAGS). */
    nodeArgs?: readonly string[];
    /** The checkout whose bin/sluice.js runs (default this one): another build, for a benchmark to set against. */
    root?: string;
    /** How long to wait for it to listen (the controller lists a whole cluster first). */
    listenTimeoutMs?: number;
  } = {},
): Promise<SluiceProcess> {
  const output: string[] = [];
  const child = spawn(
    process.execPath,
    [
      ...(opts.nodeArgs ?? SLUICE_NODE_FLAGS),
      join(opts.root ?? projectRoot(), "bin", "sluice.js"),
      command,
      ...args,
      "--xds-port",
      String(opts.xdsPort ?? 0),
      "--admin-port",
      String(opts.adminPort ?? 0),
      "--authz-port",
      String(opts.authzPort ?? 0),
      ...(command === "serve" || command === "run" || command === "controller" ? ["--mcp-port", "0"] : []),
      ...(opts.extraArgs ?? []),
    ],
    // Text logs (the controller's default is JSON): the lines below are read by their words.
    { stdio: ["ignore", "pipe", "pipe"], env: { SLUICE_LOG_FORMAT: "text", ...process.env, ...opts.env } },
  );
  for (const s of [child.stdout, child.stderr]) {
    s?.setEncoding("utf8");
    s?.on("data", (c: string) => output.push(...c.split("\n").filter((l) => l !== "")));
  }
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const portFrom = (what: RegExp): number | undefined => {
    for (const line of output) {
      // A JSON log line (--log-format json) is read by its message.
      const m = what.exec(line.startsWith("{") ? String((JSON.parse(line) as { msg?: unknown }).msg ?? "") : line);
      if (m?.[1] !== undefined) return Number(m[1]);
    }
    return undefined;
  };
  let ports: { xds: number; authz: number; admin: number } | undefined;
  try {
    ports = await waitFor(
      `sluice ${command} to listen`,
      async () => {
        if (child.exitCode !== null) throw new Error(`sluice exited: ${output.join("\n")}`);
        const xds = portFrom(/^sluice: ADS on [^ ]+:(\d+)/);
        const authz = portFrom(/^sluice: ext_authz on [^ ]+:(\d+)/);
        const admin = portFrom(/^sluice: admin on http:\/\/[^ ]+:(\d+)/);
        return xds && authz && admin ? { xds, authz, admin } : undefined;
      },
      // Generous: the suite runs several files at once, Kubernetes control planes among them, on two cores.
      opts.listenTimeoutMs ?? 60_000,
    );
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  }
  const { xds: xdsPort, authz: authzPort, admin: adminPort } = ports;
  // Printed before the admin line, so it is there once the ports are.
  const mcpPort = portFrom(/^sluice: mcp on [^ ]+:(\d+)/) ?? 0;
  const proc: SluiceProcess = {
    child,
    output,
    xdsPort,
    authzPort,
    mcpPort,
    adminPort,
    async stop(signal = "SIGTERM") {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const t = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    },
    async status() {
      const res = await fetch(`http://127.0.0.1:${adminPort}/status`);
      return (await res.json()) as Record<string, unknown>;
    },
  };
  try {
    await waitFor(`sluice ${command} admin endpoint`, async () => {
      if (child.exitCode !== null) throw new Error(`sluice exited: ${output.join("\n")}`);
      const r = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
      return r.ok ? true : undefined;
    });
  } catch (e) {
    await proc.stop("SIGKILL");
    throw e;
  }
  return proc;
}

export interface TestEnvoy {
  readonly process: EnvoyProcess;
  readonly adminPort: number;
  readonly output: string[];
  stop(): Promise<void>;
  /** Envoy's admin /config_dump as JSON. */
  configDump(): Promise<unknown>;
}

/** An Envoy booted from deploy/envoy/bootstrap.yaml, fetching its config from `sluice` (Gateway `default/gw` unless
 * told otherwise; delta xDS, as `sluice run` uses by default, unless `delta: false` or SLUICE_TEST_XDS=sotw, which runs
 * the suite over state-of-the-world xDS). `tls`: mutual TLS to Sluice. `ready: false` waits only for the admin
 * endpoint, not for the first configuration (an Envoy that Sluice refuses waits 15 s for it). */
export async function startTestEnvoy(
  sluice: Pick<SluiceProcess, "xdsPort" | "authzPort"> & { readonly mcpPort?: number },
  opts: { gateway?: string; delta?: boolean; tls?: BootstrapTls; ready?: boolean } = {},
): Promise<TestEnvoy> {
  const adminPort = await freePort();
  const output: string[] = [];
  const bootstrap = renderBootstrap({
    nodeId: `test-${process.pid}-${adminPort}`,
    gateway: opts.gateway ?? "default/gw",
    adminPort,
    xdsHost: "127.0.0.1",
    xdsPort: sluice.xdsPort,
    authzPort: sluice.authzPort,
    ...(sluice.mcpPort !== undefined && sluice.mcpPort !== 0 ? { mcpPort: sluice.mcpPort } : {}),
    delta: opts.delta ?? process.env["SLUICE_TEST_XDS"] !== "sotw",
    ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
  });
  const envoy = startEnvoy(bootstrap, {
    logLevel: process.env["SLUICE_TEST_ENVOY_LOG"] ?? "warn",
    onOutput: (l) => output.push(l),
  });
  await waitFor(
    "Envoy admin",
    async () => {
      if (envoy.child.exitCode !== null) throw new Error(`Envoy exited: ${output.join("\n")}`);
      const status = (await request(adminPort, "/ready")).status;
      return status === 200 || (opts.ready === false && status !== 0) ? true : undefined;
    },
    20_000,
  );
  return {
    process: envoy,
    adminPort,
    output,
    stop: () => envoy.stop(),
    configDump: async () => JSON.parse((await request(adminPort, "/config_dump")).body) as unknown,
  };
}

/** A temporary directory for a test's YAML files. */
export function tempConfigDir(): {
  dir: string;
  write(name: string, text: string): void;
  remove(name: string): void;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), "sluice-e2e-"));
  return {
    dir,
    // Atomically (a hidden temporary file renamed over it): Sluice never reads a half-written file, whatever the
    // host's load (docs/faults.md, "A configuration file saved in two steps"; server-reload.test.ts tests those).
    write: (name, text) => {
      const temporary = join(dir, `.${name.replace(/\//g, "_")}.${process.pid}.tmp`);
      writeFileSync(temporary, text);
      renameSync(temporary, join(dir, name));
    },
    remove: (name) => rmSync(join(dir, name), { force: true }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
