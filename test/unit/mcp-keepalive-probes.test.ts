// TCP keepalive on Sluice's sockets to MCP targets and remote guard services, as the kernel is asked for it: a pooled
// connection of a target's agent (src/mcp/target-connection.ts) and one of a guard's pool (undici,
// src/extproc/llm/guards/remote/http.ts) are opened by a child Node.js under strace, and the setsockopt calls on their
// sockets are read back. On Node.js 26 (scripts/setup.d/node-next.sh) the policy's idle time, probe interval and count
// are all set, and the translator reports nothing; on the Node.js that runs the suite (22) only the idle time is,
// libuv sets 1 s and 10, and the translator reports both parts with the runtime's version.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";
import { projectRoot } from "../../src/cli/paths.js";
import { KEEPALIVE_PROBES_SETTABLE } from "../../src/translate/keepalive.js";
import { mcpUnservedParts } from "../../src/translate/mcp/connection.js";
import { pinnedVersions } from "../helpers/kube.js";

const dist = join(projectRoot(), "dist", "src");
const nextNode = join(projectRoot(), ".cache", `node-${pinnedVersions()["NODE_NEXT_VERSION"]}`, "bin", "node");

/** Run in the child: one request through a target's pooled agent, then wait until the agent has kept the socket. */
const CHILD = `
const { agentsFor } = await import(${JSON.stringify(pathToFileURL(join(dist, "mcp", "target-connection.js")).href)});
const { KEEPALIVE_PROBES_SETTABLE } = await import(
  ${JSON.stringify(pathToFileURL(join(dist, "translate", "keepalive.js")).href)}
);
const { mcpUnservedParts } = await import(
  ${JSON.stringify(pathToFileURL(join(dist, "translate", "mcp", "connection.js")).href)}
);
const http = await import("node:http");
const connection = {
  keepaliveMs: 30_000,
  ...(KEEPALIVE_PROBES_SETTABLE ? { keepaliveProbes: { intervalMs: 7_000, count: 4 } } : {}),
};
const { pooled } = agentsFor("http:", connection);
await new Promise((resolve, reject) => {
  http.get({ host: "127.0.0.1", port: Number(process.argv[1]), path: "/mcp", agent: pooled }, (res) => {
    res.resume();
    res.on("end", () => setTimeout(resolve, 50));
  }).on("error", reject);
});
pooled.destroy();
// A remote guard's pool (undici) with other values, where the probes are the connector's.
const { dispatcherFor, sharedDispatcher } = await import(
  ${JSON.stringify(pathToFileURL(join(dist, "extproc", "llm", "guards", "remote", "http.js")).href)}
);
const { request } = await import("undici");
const guard = dispatcherFor(
  {
    keepAliveMs: 40_000,
    ...(KEEPALIVE_PROBES_SETTABLE ? { keepAliveProbes: { intervalMs: 8_000, count: 5 } } : {}),
  },
  sharedDispatcher(),
);
const answer = await request(\`http://127.0.0.1:\${process.argv[1]}/guard\`, { dispatcher: guard });
await answer.body.text();
await guard.close();
process.stdout.write(JSON.stringify({
  settable: KEEPALIVE_PROBES_SETTABLE,
  parts: mcpUnservedParts("tcp", { keepalive: { time: "30s", interval: "7s", retries: 4 } }),
}));
`;

interface Seen {
  readonly settable: boolean;
  readonly parts: readonly (readonly [string, string])[];
  /** The value each keepalive option was left with on each client socket (the MCP target's, the guard's), sorted. */
  readonly options: Readonly<Record<string, readonly number[]>>;
}

let server: Server;
let port: number;
let dir: string;

before(async () => {
  server = createServer((_req, res) => res.end("ok"));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), "sluice-keepalive-"));
});

after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

async function underStrace(node: string, name: string): Promise<Seen> {
  const trace = join(dir, `${name}.trace`);
  const child = spawn(
    "strace",
    ["-f", "-qq", "-e", "trace=setsockopt,close", "-o", trace, node, "--input-type=module", "-e", CHILD, String(port)],
    { stdio: ["ignore", "pipe", "pipe"], cwd: projectRoot() },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  assert.equal(code, 0, `${node} under strace failed: ${err}`);
  // The options each socket was left with (a connector may set libuv's first and Sluice's after): per descriptor,
  // the last value of each, a socket's values taken when its descriptor is closed (a descriptor number comes again).
  const open = new Map<string, Record<string, number>>();
  const left: Record<string, number>[] = [];
  for (const line of readFileSync(trace, "utf8").split("\n")) {
    const set = /setsockopt\((\d+), SOL_TCP, (TCP_KEEP\w+), \[(\d+)\]/.exec(line);
    if (set !== null) {
      const fd = set[1] as string;
      open.set(fd, { ...open.get(fd), [set[2] as string]: Number(set[3]) });
      continue;
    }
    const closed = /close\((\d+)\)/.exec(line);
    const values = closed === null ? undefined : open.get(closed[1] as string);
    if (closed !== null && values !== undefined) {
      left.push(values);
      open.delete(closed[1] as string);
    }
  }
  left.push(...open.values());
  const options: Record<string, number[]> = {};
  for (const values of left)
    for (const [k, v] of Object.entries(values)) options[k] = [...(options[k] ?? []), v].sort((a, b) => a - b);
  return { ...(JSON.parse(out) as Omit<Seen, "options">), options };
}

test("Node.js 26: the policy's idle time, probe interval and count on the pooled socket, nothing reported", async () => {
  assert.ok(existsSync(nextNode), `${nextNode} is missing: run \`npm run setup\` (scripts/setup.d/node-next.sh)`);
  const seen = await underStrace(nextNode, "next");
  assert.equal(seen.settable, true);
  assert.deepEqual(seen.parts, []);
  assert.deepEqual(seen.options, { TCP_KEEPIDLE: [30, 40], TCP_KEEPINTVL: [7, 8], TCP_KEEPCNT: [4, 5] });
});

test("this Node.js: only the idle time is Sluice's, and the translator says so with the runtime's version", async () => {
  const seen = await underStrace(process.execPath, "this");
  assert.equal(seen.settable, KEEPALIVE_PROBES_SETTABLE);
  if (KEEPALIVE_PROBES_SETTABLE) {
    // The suite runs on Node.js 22 (scripts/versions.sh); on a newer runtime this is the first test again.
    assert.deepEqual(seen.options, { TCP_KEEPIDLE: [30, 40], TCP_KEEPINTVL: [7, 8], TCP_KEEPCNT: [4, 5] });
    return;
  }
  assert.deepEqual(seen.options, { TCP_KEEPIDLE: [30, 40], TCP_KEEPINTVL: [1, 1], TCP_KEEPCNT: [10, 10] });
  assert.deepEqual(
    seen.parts.map(([part]) => part),
    ["keepalive.interval", "keepalive.retries"],
  );
  for (const [, why] of seen.parts) assert.match(why, new RegExp(`Node\\.js ${process.version.replace(/\./g, "\\.")}`));
  // Unset interval and retries differ from the spec's defaults all the same: said too.
  assert.deepEqual(
    mcpUnservedParts("tcp", { keepalive: { time: "30s" } }).map(([part, why]) => [part, /not the default/.test(why)]),
    [
      ["keepalive.interval", true],
      ["keepalive.retries", true],
    ],
  );
});
