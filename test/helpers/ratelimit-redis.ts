// A real shared rate limit store for end-to-end tests: redis-server (Debian package, scripts/setup.d/redis.sh) on a
// port picked at run time without persistence, and envoyproxy/ratelimit (built by scripts/setup.d/ratelimit.sh)
// counting in it, its configuration read from the files of a directory it watches (RUNTIME_WATCH_ROOT=false).

import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, request, waitFor } from "./net.js";
import { tempConfigDir } from "./processes.js";

/** The envoyproxy/ratelimit binary under .cache/ratelimit-<commit>/, or undefined when setup has not built it. */
export function rateLimitBinary(): string | undefined {
  const cache = join(projectRoot(), ".cache");
  const dir = existsSync(cache) ? readdirSync(cache).find((d) => d.startsWith("ratelimit-")) : undefined;
  const bin = dir !== undefined ? join(cache, dir, "ratelimit") : undefined;
  return bin !== undefined && existsSync(bin) ? bin : undefined;
}

export interface Redis {
  readonly port: number;
  /** One command over RESP; integers and bulk strings come back as strings, arrays as arrays. */
  command(...args: string[]): Promise<unknown>;
  stop(): Promise<void>;
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Parses one RESP reply at the start of `buf`: [value, bytes used], or undefined when incomplete. */
function parseResp(buf: string, at = 0): [unknown, number] | undefined {
  const eol = buf.indexOf("\r\n", at);
  if (eol < 0) return undefined;
  const line = buf.slice(at + 1, eol);
  switch (buf[at]) {
    case "+":
    case ":":
      return [line, eol + 2];
    case "-":
      return [new Error(line), eol + 2];
    case "$": {
      const n = Number(line);
      if (n < 0) return [null, eol + 2];
      if (buf.length < eol + 2 + n + 2) return undefined;
      return [buf.slice(eol + 2, eol + 2 + n), eol + 2 + n + 2];
    }
    case "*": {
      const items: unknown[] = [];
      let pos = eol + 2;
      for (let i = 0; i < Number(line); i++) {
        const r = parseResp(buf, pos);
        if (r === undefined) return undefined;
        items.push(r[0]);
        pos = r[1];
      }
      return [items, pos];
    }
    default:
      throw new Error(`unexpected RESP reply ${JSON.stringify(buf.slice(at, at + 40))}`);
  }
}

function redisCommand(port: number, args: string[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let buf = "";
    socket.setEncoding("utf8");
    socket.setTimeout(3000, () => socket.destroy(new Error("redis command timed out")));
    socket.on("error", reject);
    socket.on("data", (d: string) => {
      buf += d;
      const r = parseResp(buf);
      if (r === undefined) return;
      socket.end();
      if (r[0] instanceof Error) reject(r[0]);
      else resolve(r[0]);
    });
    socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("")}`);
  });
}

/** Starts redis-server on a free loopback port, without persistence, and waits for PONG. */
export async function startRedis(port?: number): Promise<Redis> {
  const p = port ?? (await freePort());
  const output: string[] = [];
  if (spawnSync("redis-server", ["--version"]).error !== undefined) {
    throw new Error("redis-server is not installed: run scripts/setup.d/redis.sh");
  }
  const child = spawn(
    "redis-server",
    ["--port", String(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmpdir()],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  try {
    await waitFor(
      "redis-server to answer PING",
      async () => ((await redisCommand(p, ["PING"])) === "PONG" ? true : undefined),
      10_000,
    );
  } catch (e) {
    await stopChild(child);
    throw new Error(`${(e as Error).message}\n${output.join("")}`);
  }
  return { port: p, command: (...args) => redisCommand(p, args), stop: () => stopChild(child) };
}

export interface RateLimitService {
  readonly grpcPort: number;
  readonly output: string[];
  stop(): Promise<void>;
}

/** A runtime root for envoyproxy/ratelimit; `configDir` (<root>/ratelimit/config) is where its YAML files go. */
export function rateLimitRuntime(): { root: string; configDir: string; cleanup(): void } {
  const root = mkdtempSync(join(tmpdir(), "sluice-ratelimit-"));
  const configDir = join(root, "ratelimit", "config");
  mkdirSync(configDir, { recursive: true });
  return { root, configDir, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/**
 * Starts envoyproxy/ratelimit on the runtime `root` (see rateLimitRuntime; files written there by
 * `sluice ratelimit-config --out`), counting in Redis at `redisPort`; waits for its health check. It watches the
 * config directory and reloads when a file there changes. `grpcPort`: the RLS port, when the caller has named it.
 */
export async function startEnvoyRateLimit(
  root: string,
  redisPort: number,
  grpcPort?: number,
): Promise<RateLimitService> {
  const bin = rateLimitBinary();
  if (bin === undefined) throw new Error("envoyproxy/ratelimit is not built: run scripts/setup.d/ratelimit.sh");
  const [rlsPort, httpPort, debugPort] = [grpcPort ?? (await freePort()), await freePort(), await freePort()];
  const output: string[] = [];
  const child = spawn(bin, [], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env["PATH"] ?? "",
      RUNTIME_ROOT: root,
      RUNTIME_SUBDIRECTORY: "ratelimit",
      RUNTIME_WATCH_ROOT: "false",
      RUNTIME_IGNOREDOTFILES: "true",
      USE_STATSD: "false",
      LOG_LEVEL: "warn",
      REDIS_SOCKET_TYPE: "tcp",
      REDIS_URL: `127.0.0.1:${redisPort}`,
      // Fail fast when Redis is gone, well within Envoy's 2 s timeout to the service.
      REDIS_TIMEOUT: "500ms",
      HOST: "127.0.0.1",
      PORT: String(httpPort),
      GRPC_HOST: "127.0.0.1",
      GRPC_PORT: String(rlsPort),
      DEBUG_HOST: "127.0.0.1",
      DEBUG_PORT: String(debugPort),
    },
  });
  child.stdout?.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const stop = () => stopChild(child);
  try {
    await waitFor(
      "envoyproxy/ratelimit's health check",
      async () => {
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}`);
        return (await request(httpPort, "/healthcheck")).status === 200 ? true : undefined;
      },
      20_000,
    );
  } catch (e) {
    await stop();
    throw new Error(`${(e as Error).message}\n${output.join("")}`);
  }
  return { grpcPort: rlsPort, output, stop };
}

/** Redis and envoyproxy/ratelimit counting in it, configured by `sluice ratelimit-config` from a test's resources. */
export interface SharedRateLimit {
  readonly redis: Redis;
  readonly rls: RateLimitService;
  /** The resources, with the service's port in them, the configuration was written from. */
  readonly yaml: string;
  /** Writes the service's configuration again (it reloads) with these `--limit`s; the command's stderr. */
  writeConfig(limits: readonly string[]): Promise<string>;
  /** The counter kept in Redis for `<domain>_<key>_<value>_<window>` (undefined: no key yet; one window key at most). */
  counter(prefix: string): Promise<number | undefined>;
  /** Waits (up to 10 s) until the counter is `total`: a charge after a response is sent without waiting. */
  charged(prefix: string, total: number): Promise<unknown>;
  stop(): Promise<void>;
}

/**
 * Starts redis-server and envoyproxy/ratelimit on a port `resources` is given (for the Service the GwPolicies name),
 * configured by `sluice ratelimit-config` from those resources with `limits` (e.g. `llm/user=100/day`); fails when a
 * descriptor has no limit (the command's stderr).
 */
export async function startSharedRateLimit(
  resources: (rlsPort: number) => string,
  limits: readonly string[],
): Promise<SharedRateLimit> {
  const redis = await startRedis();
  const rlsPort = await freePort();
  const yaml = resources(rlsPort);
  const cfg = tempConfigDir();
  cfg.write("resources.yaml", yaml);
  const runtime = rateLimitRuntime();
  const cleanup = async (rls?: RateLimitService) => {
    await rls?.stop();
    await redis.stop();
    cfg.cleanup();
    runtime.cleanup();
  };
  const writeConfig = async (l: readonly string[]) => {
    const { stderr } = await promisify(execFile)(process.execPath, [
      join(projectRoot(), "bin", "sluice.js"),
      "ratelimit-config",
      "-f",
      join(cfg.dir, "resources.yaml"),
      ...l.flatMap((x) => ["--limit", x]),
      "--out",
      runtime.configDir,
    ]);
    return stderr;
  };
  let rls: RateLimitService;
  try {
    const stderr = await writeConfig(limits);
    if (stderr !== "") throw new Error(`sluice ratelimit-config: not every descriptor has its limit: ${stderr}`);
    rls = await startEnvoyRateLimit(runtime.root, redis.port, rlsPort);
  } catch (e) {
    await cleanup();
    throw e;
  }
  const counter = async (prefix: string): Promise<number | undefined> => {
    const keys = (await redis.command("KEYS", `${prefix}_*`)) as string[];
    if (keys.length > 1) throw new Error(`more than one window key for ${prefix}: ${keys.join(", ")}`);
    return keys[0] === undefined ? undefined : Number(await redis.command("GET", keys[0]));
  };
  return {
    redis,
    rls,
    yaml,
    writeConfig,
    counter,
    charged: (prefix, total) =>
      waitFor(`${prefix} at ${total}`, async () => ((await counter(prefix)) === total ? true : undefined), 10_000),
    stop: () => cleanup(rls),
  };
}
