// MCP gateway overhead: the MCP SDK's client calling targets written with the SDK's server classes, directly and
// through Envoy + Sluice's MCP service, in the same run, one request at a time:
//   - tools/call on a backend of one target, against the same call straight to the target;
//   - tools/list aggregated over 8 targets, against one target's tools/list straight to it;
//   - a new session (initialize + notifications/initialized) over 8 targets, against one straight to a target.
// Prints p50 / p99 per setup and the p50 added by Sluice; calls and lists are measured in alternating pairs (direct,
// then via Sluice, then the other way round), which keeps a changing load out of the difference. Issue 20's targets: at
// most 2 ms added p50 for a call, 5 ms for a new session over 8 targets. A new session over 8 targets is also set
// against 8 direct sessions started at once, and against the floor of any gateway: the client's one SDK session with a
// target while the 7 other targets start a session each (initialize and notifications/initialized, sent raw, at once).
// The targets' own work for 8 sessions, which Sluice cannot save, is then in both columns. Sluice caches a session's
// lists once the targets' GET streams are open (docs/mcp.md, "List caching"): the tools/list row measures that, as a
// client with its GET stream open sees it.
//
// Each target runs in a process of its own, as real targets do (in one process, their work for 8 sessions would queue
// on one thread, and in the bench's own behind its client); the direct baselines reach the same processes.
// `--targets inproc` puts them all in the bench's process. `--cpu-prof DIR` has Sluice write a V8 CPU profile there
// when the bench stops it (node --cpu-prof).
//
// Spare target sessions (docs/mcp.md, "Spare target sessions started ahead") are on in Sluice by default: a new
// session is measured back to back (closed loop: the next client's initialize comes while the spare set started for
// it may still be starting) and with `--gap` ms between sessions, untimed (the realistic case, where a ready set is
// adopted). `--spares off` runs Sluice without them, against the same baselines. The CPU the Sluice process and the
// 8 target processes spend per new session is printed too (the spares move the targets' work off the client's wait,
// not away).
//
// Envoy's share is measured apart: the rows marked "Sluice alone" send the same requests to Sluice's MCP port itself
// (with the route header Envoy's route would set), so "added" there is Sluice's part and the difference to the row
// through Envoy is Envoy's.
//
//   node dist/bench/mcp.js [--calls 500] [--sessions 50] [--gap 100] [--spares on|off] [--targets child|inproc]
//                          [--cpu-prof DIR]

import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { MCP_ROUTE_HEADER, mcpClusterName } from "../src/translate/names.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { mcpYaml } from "../test/helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../test/helpers/mcp-targets.js";

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "500" },
    sessions: { type: "string", default: "50" },
    targets: { type: "string", default: "child" },
    gap: { type: "string", default: "100" },
    spares: { type: "string", default: "on" },
    "spare-check": { type: "string", default: "connect" },
    "cpu-prof": { type: "string" },
    "serve-target": { type: "string" },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  console.log(`node dist/bench/mcp.js [options]
  --calls N              tools/call and tools/list requests per setup (500)
  --sessions N           new sessions per setup (50)
  --gap MS               pause between new sessions in the "with a gap" rows (100), not timed
  --spares on|off        Sluice's spare target sessions (on: its default)
  --spare-check connect|session  what Sluice checks of a spare set at adoption (SLUICE_MCP_SPARE_CHECK)
  --targets child|inproc each target in a process of its own (default), or all in the bench's process
  --cpu-prof DIR         Sluice writes a V8 CPU profile into DIR when the bench stops it`);
  process.exit(0);
}

if (values["serve-target"] !== undefined) {
  // A child: one target, its port on one line, until the parent closes stdin.
  const t = await startSdkTarget(values["serve-target"]);
  console.log(JSON.stringify(t.port));
  process.stdin.resume();
  await once(process.stdin, "end");
  await t.kill();
  process.exit(0);
}
const CALLS = Number(values.calls);
const SESSIONS = Number(values.sessions);
const GAP_MS = Number(values.gap);

function quantile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

/** `pauseMs`: waited before each operation, outside its time (sessions that do not come back to back). */
async function timed(n: number, once: () => Promise<unknown>, pauseMs = 0): Promise<{ p50: number; p99: number }> {
  const pause = () => (pauseMs > 0 ? new Promise((r) => setTimeout(r, pauseMs)) : undefined);
  for (let i = 0; i < Math.min(20, n); i++) {
    await pause();
    await once(); // warm up
  }
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    await pause();
    const t = performance.now();
    await once();
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  return { p50: quantile(ms, 0.5), p99: quantile(ms, 0.99) };
}

/**
 * CPU time (user + system, ms) a process has used, from /proc (Linux). Unlike wall time it hardly depends on how busy
 * the machine is, so Sluice's own cost per operation can be read even on a loaded host.
 */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the line, in clock ticks (100 per second on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * `direct` and `via` run alternately, one of each per round, the order swapped every round: both see the same load as
 * it changes (other processes on a small host), which separate loops would not. Also gives the median of each
 * round's difference, the added time measured pair by pair. `pauseMs`: waited before each operation, untimed.
 */
async function timedPairs(
  n: number,
  direct: () => Promise<unknown>,
  via: () => Promise<unknown>,
  pauseMs = 0,
): Promise<{ direct: { p50: number; p99: number }; via: { p50: number; p99: number }; paired: number }> {
  for (let i = 0; i < Math.min(20, n); i++) {
    await direct();
    await via(); // warm up
  }
  const a: number[] = [];
  const b: number[] = [];
  const diff: number[] = [];
  const time = async (f: () => Promise<unknown>) => {
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
    const t = performance.now();
    await f();
    return performance.now() - t;
  };
  for (let i = 0; i < n; i++) {
    let x: number;
    let y: number;
    if (i % 2 === 0) {
      x = await time(direct);
      y = await time(via);
    } else {
      y = await time(via);
      x = await time(direct);
    }
    a.push(x);
    b.push(y);
    diff.push(y - x);
  }
  const stats = (ms: number[]) => {
    const sorted = [...ms].sort((p, q) => p - q);
    return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
  };
  return { direct: stats(a), via: stats(b), paired: stats(diff).p50 };
}

/** A target session started raw (initialize, then notifications/initialized), as a gateway starts one. */
async function rawSession(port: number): Promise<void> {
  const post = (body: unknown, sid?: string) =>
    new Promise<string | undefined>((resolve, reject) => {
      const req = httpRequest(
        {
          host: "127.0.0.1",
          port,
          path: "/mcp",
          method: "POST",
          agent: RAW_AGENT,
          headers: {
            "content-type": "application/json",
            accept: "application/json, text/event-stream",
            ...(sid !== undefined ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
          },
        },
        (res) => {
          res.resume();
          res.once("end", () => resolve(res.headers["mcp-session-id"] as string | undefined));
        },
      );
      req.once("error", reject);
      req.end(JSON.stringify(body));
    });
  const sid = await post({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench", version: "1" } },
  });
  await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sid);
}
const RAW_AGENT = new Agent({ keepAlive: true });

/**
 * An SDK client session; `headers`: sent with every request (the route header, to reach Sluice without Envoy);
 * `counted`: its initialize counts in the CPU inside the client's wait.
 */
async function connect(url: string, headers?: Record<string, string>, counted = true): Promise<Client> {
  const c = new Client({ name: "bench", version: "1" });
  await c.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      ...(headers !== undefined ? { requestInit: { headers } } : {}),
      // A direct baseline paired with a session via Sluice is not counted in the CPU inside the client's wait.
      fetch: counted ? waitFetch : fetch,
    }),
  );
  return c;
}

/**
 * CPU the Sluice process and the 8 targets spent while clients waited for their initialize answers, summed over the
 * sessions of the row being measured (`inWait` set): read from /proc when each initialize is sent and when its answer
 * arrives (the reads add about 0.1 ms to those sessions' time). Unlike the wall time it hardly depends on the load.
 */
let inWait: { sluice: number; targets: number; n: number } | undefined;
const waitFetch: typeof fetch = async (url, init) => {
  const acc = inWait;
  const initialize = acc !== undefined && typeof init?.body === "string" && init.body.includes('"method":"initialize"');
  const before = initialize ? [cpuMs(SLUICE_PID()), TARGETS_CPU()] : [];
  const res = await fetch(url, init);
  if (initialize && acc !== undefined) {
    acc.sluice += cpuMs(SLUICE_PID()) - (before[0] ?? 0);
    acc.targets += TARGETS_CPU() - (before[1] ?? 0);
    acc.n++;
  }
  return res;
};
let SLUICE_PID: () => number | undefined = () => undefined;
let TARGETS_CPU: () => number = () => 0;

type Target = Pick<SdkTarget, "name" | "port" | "kill"> & { readonly pid?: number | undefined };

async function childTarget(name: string): Promise<Target> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), "--serve-target", name], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const [line] = (await once(createInterface({ input: child.stdout }), "line")) as [string];
  const port = JSON.parse(line) as number;
  const exited = once(child, "exit");
  let killed = false;
  return {
    name,
    port,
    pid: child.pid,
    async kill() {
      if (killed) return;
      killed = true;
      child.stdin.end();
      await exited;
    },
  };
}

const targets: Target[] = await Promise.all(
  Array.from({ length: 8 }, (_, i) =>
    values.targets === "inproc" ? startSdkTarget(`t${i + 1}`) : childTarget(`t${i + 1}`),
  ),
);
const env = await startLlmEnv(
  mcpYaml([
    { name: "one", targets: [{ name: "t1", port: targets[0]?.port ?? 0 }] },
    { name: "eight", targets: targets.map((t) => ({ name: t.name, port: t.port })) },
  ]),
  "/one/mcp",
  {
    ...(values["cpu-prof"] !== undefined ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${values["cpu-prof"]}` } : {}),
    ...(values.spares === "off" ? { SLUICE_MCP_SPARE_SESSIONS: "off" } : {}),
    SLUICE_MCP_SPARE_CHECK: values["spare-check"] ?? "connect",
  },
);
const direct = `http://127.0.0.1:${targets[0]?.port}/mcp`;
/** Sluice's own MCP port, as Envoy's route reaches it (Gateway default/gw). */
const alone = (backend: string) => ({
  url: `http://127.0.0.1:${env.sluice.mcpPort}/${backend}/mcp`,
  headers: { [MCP_ROUTE_HEADER]: mcpClusterName("default/gw", "default", backend) },
});
const rows: [string, { p50: number; p99: number }, { p50: number; p99: number }, number?][] = [];
/** A row measured in pairs (timedPairs). */
const pairRow = (name: string, r: Awaited<ReturnType<typeof timedPairs>>) =>
  rows.push([name, r.direct, r.via, r.paired]);
const cpu: [string, number][] = [];
/** CPU of the 8 target processes together (child targets only). */
const targetsCpu = () => targets.reduce((n, t) => n + cpuMs(t.pid), 0);
SLUICE_PID = () => env.sluice.child.pid;
TARGETS_CPU = targetsCpu;
const waitCpu: [string, { sluice: number; targets: number; n: number }][] = [];
const targetCpu: [string, number][] = [];
/** Spare sets adopted per new session (Sluice's /metrics). */
const adoptedShare: [string, number][] = [];
async function adoptedSets(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${env.sluice.adminPort}/metrics`)).text();
  return Number(/^sluice_mcp_spare_sets_total\{outcome="adopted"\} (\d+)$/m.exec(text)?.[1] ?? 0);
}
try {
  const d = await connect(direct);
  const one = await connect(`${env.baseUrl}/one/mcp`);
  const eight = await connect(`${env.baseUrl}/eight/mcp`);
  const args = { name: "echo", arguments: { text: "hello" } };
  const pid = env.sluice.child.pid;
  const measured = async <T>(name: string, n: number, run: () => Promise<T>): Promise<T> => {
    const before = cpuMs(pid);
    const targetsBefore = targetsCpu();
    const adoptedBefore = await adoptedSets();
    const session = name.startsWith("new session");
    if (session) {
      inWait = { sluice: 0, targets: 0, n: 0 };
      waitCpu.push([name, inWait]);
    }
    const r = await run().finally(() => {
      inWait = undefined;
    });
    // Warm-up included: n + min(20, n) operations.
    cpu.push([name, (cpuMs(pid) - before) / (n + Math.min(20, n))]);
    if (session) {
      targetCpu.push([name, (targetsCpu() - targetsBefore) / (n + Math.min(20, n))]);
      adoptedShare.push([name, ((await adoptedSets()) - adoptedBefore) / (n + Math.min(20, n))]);
    }
    return r;
  };
  const oneAlone = await connect(alone("one").url, alone("one").headers);
  // Sluice's code compiled (JIT) on both paths before any row is measured: else the first row's CPU per operation
  // carries the compilation (about 1 ms per call more over 200 calls).
  for (let i = 0; i < 200; i++) await Promise.all([one.callTool(args), oneAlone.callTool(args)]);
  pairRow(
    "tools/call (1 target)",
    await measured("tools/call (1 target)", CALLS, () =>
      timedPairs(
        CALLS,
        () => d.callTool(args),
        () => one.callTool(args),
      ),
    ),
  );
  pairRow(
    "tools/call (1 target), Sluice alone",
    await measured("tools/call (1 target), Sluice alone", CALLS, () =>
      timedPairs(
        CALLS,
        () => d.callTool(args),
        () => oneAlone.callTool(args),
      ),
    ),
  );
  await oneAlone.close();
  pairRow(
    "tools/call (8 targets, prefixed)",
    await timedPairs(
      CALLS,
      () => d.callTool(args),
      () => eight.callTool({ ...args, name: "t3_echo" }),
    ),
  );
  pairRow(
    "tools/list (8 targets)",
    await measured("tools/list (8 targets)", CALLS, () =>
      timedPairs(
        CALLS,
        () => d.listTools(),
        () => eight.listTools(),
      ),
    ),
  );
  const viaSluice = await measured("new session (8 targets), back to back", SESSIONS, () =>
    timed(SESSIONS, async () => (await connect(`${env.baseUrl}/eight/mcp`)).close()),
  );
  const directSession = await timed(SESSIONS, async () => (await connect(direct)).close());
  rows.push(["new session (8 targets), back to back", directSession, viaSluice]);
  const directSessionOnce = async () => (await connect(direct, undefined, false)).close();
  const gapRow = await measured(`new session (8 targets), ${GAP_MS} ms apart`, SESSIONS, () =>
    timedPairs(SESSIONS, directSessionOnce, async () => (await connect(`${env.baseUrl}/eight/mcp`)).close(), GAP_MS),
  );
  pairRow(`new session (8 targets), ${GAP_MS} ms apart`, gapRow);
  const { url: eightAlone, headers: eightHeaders } = alone("eight");
  rows.push([
    "new session (8 targets), Sluice alone",
    directSession,
    await measured("new session (8 targets), Sluice alone", SESSIONS, () =>
      timed(SESSIONS, async () => (await connect(eightAlone, eightHeaders)).close()),
    ),
  ]);
  pairRow(
    `new session (8 targets), Sluice alone, ${GAP_MS} ms apart`,
    await measured(`new session (8 targets), Sluice alone, ${GAP_MS} ms apart`, SESSIONS, () =>
      timedPairs(SESSIONS, directSessionOnce, async () => (await connect(eightAlone, eightHeaders)).close(), GAP_MS),
    ),
  );
  rows.push([
    "new session (8 targets) vs 8 at once",
    await timed(SESSIONS, async () => {
      const cs = await Promise.all(targets.map((t) => connect(`http://127.0.0.1:${t.port}/mcp`)));
      await Promise.all(cs.map((c) => c.close()));
    }),
    viaSluice,
  ]);
  rows.push([
    "new session (8 targets) vs 1 + 7 raw at once",
    await timed(SESSIONS, async () => {
      const [c] = await Promise.all([connect(direct), ...targets.slice(1).map((t) => rawSession(t.port))]);
      await c.close();
    }),
    viaSluice,
  ]);
  for (const c of [d, one, eight]) await c.close();
} finally {
  await env.stop();
  for (const t of targets) await t.kill();
}
const f = (x: number) => x.toFixed(2).padStart(8);
console.log(`${"setup".padEnd(52)}  direct p50/p99 (ms)   via Sluice p50/p99 (ms)   added p50 (ms)   paired (ms)`);
for (const [name, a, b, paired] of rows) {
  console.log(
    `${name.padEnd(52)}  ${f(a.p50)} ${f(a.p99)}     ${f(b.p50)} ${f(b.p99)}          ${f(b.p50 - a.p50)}   ${paired !== undefined ? f(paired) : "       -"}`,
  );
}
console.log(
  "(paired: the median of each round's difference, direct and via Sluice run alternately; not for the back-to-back rows)",
);
console.log(`\n${"Sluice process CPU per operation".padEnd(52)}  ms (user + system, /proc; 10 ms ticks)`);
for (const [name, ms] of cpu) console.log(`${name.padEnd(52)}  ${f(ms)}`);
if (targetCpu.length > 0) {
  console.log(`\n${"8 target processes' CPU per operation".padEnd(52)}  ms (user + system, /proc; 10 ms ticks)`);
  for (const [name, ms] of targetCpu) console.log(`${name.padEnd(52)}  ${f(ms)}`);
  console.log("(the rows measured in pairs include the direct session's, on one target)");
}
console.log(
  `\n${"CPU inside the client's wait for initialize".padEnd(52)}  Sluice / 8 targets, ms per session (/proc)`,
);
for (const [name, w] of waitCpu) console.log(`${name.padEnd(52)}  ${f(w.sluice / w.n)} ${f(w.targets / w.n)}`);
console.log(`\n${"new sessions that adopted a spare set".padEnd(52)}  share (Sluice's /metrics)`);
for (const [name, share] of adoptedShare) console.log(`${name.padEnd(52)}  ${f(share)}`);
console.log(
  `spare target sessions: ${values.spares === "off" ? "off" : `on, checked at adoption: ${values["spare-check"]}`}`,
);
console.log(`\nload average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")} (at the end)`);
