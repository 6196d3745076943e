// Soak: the mixed load of the fault tests (test/helpers/mixed-load.ts: plain routing, native JWT authorization and its
// denial, Sluice's ext_authz CEL rule and its denial, LLM buffered and streamed through the LLM ext_proc with the
// official `openai` client, MCP tool calls on one session with the MCP SDK) through a real Envoy and `sluice serve`,
// plus one configuration change per second (the watched YAML of an HTTPRoute rewritten: a new response header value,
// which a probe reads back to show the change is served), for --duration (default 30 minutes).
//
//   node dist/bench/soak.js [--duration 30m] [--rate 40] [--concurrency 8] [--warmup 60s] [--heap-snapshots DIR]
//     [--samples FILE]   (every 10 s sample, RSS and Sluice's heap figures in KiB, written there as JSON lines)
//
// Prints a table: requests and unexpected errors per kind (every kind checks its answer, the denials too; there must
// be none), the configuration changes written and how far the served generation lagged, the RSS of Sluice and Envoy
// after warm-up and at the end, their file descriptors and sockets (counted from /proc/<pid>/fd) at both points, and
// CPU ms per request; then RSS sampled every 10 s: its range, and the median of the first and the last tenth of the
// samples after warm-up, whose growth must stay under 10 % (a single sample swings with garbage collection). Sluice's
// V8 heap in use (its /metrics) is sampled alongside and reported the same way: RSS that grows while the heap does not
// is the allocator or V8 keeping pages, a heap that grows is something held. --heap-snapshots DIR has Sluice write a
// V8 heap snapshot there after warm-up and at the end (compare them in Chrome DevTools' Memory tab). Exits 1 when an
// error was unexpected or a bound was broken.

import { readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { churnYaml, KINDS, type Kind, mixedClient, mixedYaml, startMixedPeers } from "../test/helpers/mixed-load.js";
import { freePort, request, sleep, waitFor } from "../test/helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../test/helpers/processes.js";
import { cpuMs } from "./proc.js";

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "30m" },
    rate: { type: "string", default: "40" },
    concurrency: { type: "string", default: "8" },
    warmup: { type: "string", default: "" },
    "heap-snapshots": { type: "string", default: "" },
    samples: { type: "string", default: "" },
    "sluice-node-args": { type: "string", default: "" },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  console.log(
    "node dist/bench/soak.js [--duration 30m] [--rate 40] [--concurrency 8] [--warmup 60s] [--heap-snapshots DIR] [--samples FILE]",
  );
  process.exit(0);
}

/** "90s", "5m", "1h" or plain seconds. */
function seconds(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text.trim());
  if (m === null) throw new Error(`--duration/--warmup: "${text}" is not a duration like 90s, 5m or 1h`);
  return Number(m[1]) * ({ s: 1, m: 60, h: 3600 }[m[2] ?? "s"] ?? 1);
}

const durationS = seconds(values.duration);
const warmupS = values.warmup !== "" ? seconds(values.warmup) : Math.min(60, durationS / 10);
const rate = Number(values.rate);
const concurrency = Number(values.concurrency);

interface Snapshot {
  rssKb: number;
  fds: number;
  sockets: number;
  cpuMs: number;
}

function snapshot(pid: number | undefined): Snapshot {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? "0");
  let fds = 0;
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    fds++;
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) sockets++;
    } catch {
      // closed between the listing and the read
    }
  }
  return { rssKb, fds, sockets, cpuMs: cpuMs(pid) };
}

const peers = await startMixedPeers();
const cfg = tempConfigDir();
const port = await freePort();
cfg.write("mixed.yaml", mixedYaml(port, peers));
let generation = 0;
cfg.write("churn.yaml", churnYaml(generation));
const snapshotDir = values["heap-snapshots"];
const sluice = await startSluice("serve", cfg.dir, {
  // Without the flag, the launcher's own flags (SLUICE_NODE_FLAGS), as users run Sluice.
  ...(values["sluice-node-args"] !== ""
    ? { nodeArgs: values["sluice-node-args"].split(" ").filter((x) => x !== "") }
    : {}),
  env: {
    SESSION_KEY: "soak-session-key",
    ...(snapshotDir !== ""
      ? { NODE_OPTIONS: `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${resolve(snapshotDir)}` }
      : {}),
  },
});
/** Asks Sluice for a heap snapshot and waits until its file is complete (V8 writes it while the process stands). */
async function heapSnapshot(label: string): Promise<void> {
  if (snapshotDir === "") return;
  const before = new Set(readdirSync(snapshotDir));
  sluice.child.kill("SIGUSR2");
  const file = await waitFor(
    `Sluice's ${label} heap snapshot`,
    async () => readdirSync(snapshotDir).find((f) => f.endsWith(".heapsnapshot") && !before.has(f)),
    120_000,
    200,
  );
  // The file appears when writing starts; its size stops changing when it ends.
  let size = -1;
  await waitFor(
    "the heap snapshot to be written",
    async () => {
      const now = statSync(join(snapshotDir, file)).size;
      const done = now > 0 && now === size;
      size = now;
      return done ? true : undefined;
    },
    120_000,
    1000,
  );
  console.log(`heap snapshot ${label}: ${join(snapshotDir, file)} (${(size / 1048576).toFixed(1)} MiB)`);
}
interface Memory {
  /** V8 heap in use, V8 heap reserved, memory outside the heap that V8 knows of (Buffers), KiB. */
  readonly heap: number;
  readonly heapTotal: number;
  readonly external: number;
  /** Each V8 space's reserved size (prom-client's `nodejs_heap_space_size_total_bytes`), KiB. */
  readonly spaces: Readonly<Record<string, number>>;
}
/** Sluice's memory as Node sees it, from its own metrics (prom-client's default `nodejs_*` series). */
async function memoryKb(): Promise<Memory> {
  const r = await request(sluice.adminPort, "/metrics", { timeoutMs: 5000 });
  const read = (name: string) => {
    const m = new RegExp(`^${name} (\\S+)$`, "m").exec(r.body);
    return m === null ? 0 : Number(m[1]) / 1024;
  };
  const spaces: Record<string, number> = {};
  for (const m of r.body.matchAll(/^nodejs_heap_space_size_total_bytes\{space="([^"]+)"\} (\S+)$/gm)) {
    spaces[m[1]!] = Number(m[2]) / 1024;
  }
  return {
    spaces,
    heap: read("nodejs_heap_size_used_bytes"),
    heapTotal: read("nodejs_heap_size_total_bytes"),
    external: read("nodejs_external_memory_bytes"),
  };
}
const envoy = await startTestEnvoy(sluice);
const baseUrl = `http://127.0.0.1:${port}`;
const client = await waitFor(
  "every kind to be served",
  async () => {
    const c = await mixedClient(baseUrl, port, peers);
    const os = await Promise.all(KINDS.map((k) => c.run(k)));
    if (os.every((o) => o.ok)) return c;
    await c.close();
    return undefined;
  },
  60_000,
  500,
);

const counts = new Map<Kind, { n: number; errors: number; msSum: number; msMax: number }>(
  KINDS.map((k) => [k, { n: 0, errors: 0, msSum: 0, msMax: 0 }]),
);
const examples: string[] = [];
let inFlight = 0;
let next = 0;
const startedAt = performance.now();
const elapsedS = () => (performance.now() - startedAt) / 1000;

// One configuration change per second; a probe every second reads the generation Envoy serves.
let maxLag = 0;
let probes = 0;
let probeErrors = 0;
const churn = setInterval(() => {
  generation++;
  cfg.write("churn.yaml", churnYaml(generation));
}, 1000);
const probe = setInterval(() => {
  const written = generation;
  request(port, "/churn", { timeoutMs: 10_000 })
    .then((r) => {
      probes++;
      const served = Number(r.headers["x-generation"]);
      if (r.status !== 200 || !Number.isFinite(served)) {
        probeErrors++;
        if (examples.length < 20) examples.push(`churn probe: ${r.status} x-generation=${r.headers["x-generation"]}`);
        return;
      }
      maxLag = Math.max(maxLag, written - served);
    })
    .catch((e: unknown) => {
      probeErrors++;
      if (examples.length < 20) examples.push(`churn probe: ${(e as Error).message}`);
    });
}, 1000);

let warm: { sluice: Snapshot; envoy: Snapshot; requests: number } | undefined;
type Series = "sluice" | "envoy" | "heap" | "heapTotal" | "external" | `space:${string}`;
const rssSamples: ({ t: number } & Partial<Record<Series, number>>)[] = [];
let warmSnapshot: Promise<void> = Promise.resolve();
const sampler = setInterval(() => {
  const s = snapshot(sluice.child.pid);
  const e = snapshot(envoy.process.child.pid);
  const t = elapsedS();
  memoryKb()
    .catch((): Memory => ({ heap: 0, heapTotal: 0, external: 0, spaces: {} }))
    .then(({ spaces, ...m }) =>
      rssSamples.push({
        t,
        sluice: s.rssKb,
        envoy: e.rssKb,
        ...m,
        ...Object.fromEntries(Object.entries(spaces).map(([k, v]) => [`space:${k}`, v])),
      }),
    );
  if (warm === undefined && t >= warmupS) {
    warm = { sluice: s, envoy: e, requests: total() };
    warmSnapshot = heapSnapshot("after warm-up");
  }
}, 10_000);
const total = () => [...counts.values()].reduce((a, c) => a + c.n, 0);

console.log(
  `soak: ${durationS} s (warm-up ${warmupS} s), ${rate} requests/s over ${KINDS.length} kinds, at most ${concurrency} at once, one configuration change per second`,
);
const tickMs = 50;
const perTick = (rate * tickMs) / 1000;
let credit = 0;
while (elapsedS() < durationS) {
  credit += perTick;
  while (credit >= 1 && inFlight < concurrency) {
    credit--;
    const kind = KINDS[next++ % KINDS.length] as Kind;
    inFlight++;
    client
      .run(kind)
      .then((o) => {
        const c = counts.get(kind);
        if (c === undefined) return;
        c.n++;
        c.msSum += o.ms;
        c.msMax = Math.max(c.msMax, o.ms);
        if (!o.ok) {
          c.errors++;
          if (examples.length < 20) examples.push(`${elapsedS().toFixed(0)} s ${kind}: ${o.got}`);
        }
      })
      .finally(() => inFlight--);
  }
  credit = Math.min(credit, concurrency);
  await sleep(tickMs);
}
const endUnderLoad = {
  sluice: snapshot(sluice.child.pid),
  envoy: snapshot(envoy.process.child.pid),
  requests: total(),
};
clearInterval(churn);
clearInterval(probe);
clearInterval(sampler);
await warmSnapshot;
await heapSnapshot("at the end");
await waitFor("the last requests", async () => (inFlight === 0 ? true : undefined), 30_000, 20);
// The last generation written is served.
const lastWritten = generation;
const settled = await waitFor(
  "the last configuration to be served",
  async () => (Number((await request(port, "/churn")).headers["x-generation"]) === lastWritten ? true : undefined),
  15_000,
  100,
).catch(() => false);

const w = warm ?? endUnderLoad;
const growth = (a: number, b: number) => (a === 0 ? 0 : ((b - a) / a) * 100);
const rows: string[] = [];
rows.push("| kind | requests | unexpected errors | mean ms | max ms |", "|---|---:|---:|---:|---:|");
for (const [k, c] of counts) {
  rows.push(`| ${k} | ${c.n} | ${c.errors} | ${c.n ? (c.msSum / c.n).toFixed(1) : "-"} | ${c.msMax.toFixed(0)} |`);
}
const errors = [...counts.values()].reduce((a, c) => a + c.errors, 0) + probeErrors;
rows.push(
  `| configuration changes | ${lastWritten} written, ${probes} probes | ${probeErrors} | max lag ${maxLag} generation(s) | last served: ${settled ? "yes" : "NO"} |`,
);
const proc = (name: string, a: Snapshot, b: Snapshot) =>
  `| ${name} | ${(a.rssKb / 1024).toFixed(1)} → ${(b.rssKb / 1024).toFixed(1)} MiB (${growth(a.rssKb, b.rssKb).toFixed(1)} %) | ${a.fds} → ${b.fds} | ${a.sockets} → ${b.sockets} | ${((b.cpuMs - a.cpuMs) / Math.max(1, endUnderLoad.requests - w.requests)).toFixed(2)} |`;
rows.push(
  "",
  "| process | RSS after warm-up → end | fds | sockets | CPU ms per request (after warm-up) |",
  "|---|---|---:|---:|---:|",
  proc("sluice", w.sluice, endUnderLoad.sluice),
  proc("envoy", w.envoy, endUnderLoad.envoy),
);
/** RSS (MiB) of the first and the last tenth of the samples after warm-up (at least 3 each), as medians: one sample
 * can sit before or after a garbage collection, a median of several cannot swing with it. */
const rssTrend = (key: Series): { first: number; last: number; growth: number } => {
  const after = rssSamples.filter((s) => s.t >= warmupS).map((s) => (s[key] ?? 0) / 1024);
  const n = Math.max(3, Math.ceil(after.length / 10));
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0;
  const first = median(after.slice(0, n));
  const last = median(after.slice(-n));
  return { first, last, growth: growth(first, last) };
};
const rssRange = (key: Series) => {
  const after = rssSamples.filter((s) => s.t >= warmupS).map((s) => (s[key] ?? 0) / 1024);
  return after.length ? `${Math.min(...after).toFixed(1)}–${Math.max(...after).toFixed(1)} MiB` : "-";
};
console.log(rows.join("\n"));
console.log(
  `RSS range after warm-up (10 s samples): sluice ${rssRange("sluice")}, envoy ${rssRange("envoy")}; Sluice's V8 heap in use ${rssRange("heap")}`,
);
for (const key of ["sluice", "envoy"] as const) {
  const t = rssTrend(key);
  console.log(
    `RSS median, first → last tenth after warm-up: ${key} ${t.first.toFixed(1)} → ${t.last.toFixed(1)} MiB (${t.growth.toFixed(1)} %)`,
  );
}
for (const [key, what] of [
  ["heap", "V8 heap in use"],
  ["heapTotal", "V8 heap reserved"],
  ["external", "external (Buffers)"],
] as const) {
  const t = rssTrend(key);
  console.log(
    `Sluice's ${what}, median of the first → last tenth after warm-up: ${t.first.toFixed(1)} → ${t.last.toFixed(1)} MiB (${t.growth.toFixed(1)} %)`,
  );
}
if (values.samples !== "") writeFileSync(values.samples, rssSamples.map((x) => `${JSON.stringify(x)}\n`).join(""));
const spaceKeys = [...new Set(rssSamples.flatMap((x) => Object.keys(x).filter((k) => k.startsWith("space:"))))];
console.log(
  `Sluice's V8 spaces reserved, MiB (same medians): ${spaceKeys
    .map((k) => {
      const t = rssTrend(k as Series);
      return `${k.slice(6)} ${t.first.toFixed(1)} → ${t.last.toFixed(1)}`;
    })
    .join(", ")}`,
);
if (examples.length > 0) console.log(`errors (first ${examples.length}):\n${examples.join("\n")}`);

const broken: string[] = [];
if (errors > 0) broken.push(`${errors} unexpected errors`);
if (!settled) broken.push("the last configuration change was not served");
for (const [name, a, b] of [
  ["sluice", w.sluice, endUnderLoad.sluice],
  ["envoy", w.envoy, endUnderLoad.envoy],
] as const) {
  const trend = rssTrend(name);
  if (trend.growth >= 10) broken.push(`${name} RSS grew ${trend.growth.toFixed(1)} % (medians)`);
  // Connections come and go with the load: more than the load can hold open at once is a leak.
  const slack = 2 * concurrency + 16;
  if (b.fds > a.fds + slack) broken.push(`${name} fds grew ${a.fds} → ${b.fds}`);
  if (b.sockets > a.sockets + slack) broken.push(`${name} sockets grew ${a.sockets} → ${b.sockets}`);
}
await client.close();
await envoy.stop();
await sluice.stop();
await peers.close();
cfg.cleanup();
if (broken.length > 0) {
  console.log(`FAILED: ${broken.join("; ")}`);
  process.exit(1);
}
console.log("ok");
