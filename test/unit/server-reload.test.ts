// Reloads of `sluice serve` on file changes: a save that arrives as several events (truncate, then write) is never
// published half written, and a change is published once the files are quiet.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Worker } from "node:worker_threads";
import { type ConfigSource, SluiceServer } from "../../src/cli/server.js";
import type { Snapshot } from "../../src/xds-server/snapshot.js";
import { resourcesOf } from "../../src/xds-server/snapshot.js";
import { VIRTUAL_HOST_TYPE } from "../../src/xds-server/type-urls.js";
import { sleep, waitFor } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";

const GATEWAY = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: t }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: b, namespace: t }
spec: { static: { host: 127.0.0.1, port: 9 } }
`;

/** `n` routes, each on its own host name `h<i>-<tag>.example.com`. */
function routes(n: number, tag: string): string {
  let text = "";
  for (let i = 0; i < n; i++) {
    text += `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r${i}, namespace: t }
spec:
  parentRefs: [{ name: gw }]
  hostnames: [h${i}-${tag}.example.com]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: b }] }]
`;
  }
  return text;
}

/** Host names of a published snapshot's virtual hosts. */
function hosts(s: Snapshot): string[] {
  return [...resourcesOf(s, VIRTUAL_HOST_TYPE).keys()].map((name) => name.slice(name.lastIndexOf("/") + 1)).sort();
}

/** Writes `first`, then `second` after `gapMs`, from another thread; resolves when both are written. */
function writeTwice(file: string, first: string, gapMs: number, second: string): Promise<void> {
  const code = `
    const { writeFileSync } = require("node:fs");
    const { workerData: d } = require("node:worker_threads");
    writeFileSync(d.file, d.first);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, d.gapMs);
    writeFileSync(d.file, d.second);`;
  const w = new Worker(code, { eval: true, workerData: { file, first, gapMs, second } });
  return new Promise((resolve, reject) => {
    w.once("error", reject);
    w.once("exit", () => resolve());
  });
}

/** A server on its own directory, with the routes of `routes(3, "old")`, and every snapshot it publishes. */
async function startServer(reloadSettleMs?: number) {
  const cfg = tempConfigDir();
  cfg.write("gateway.yaml", GATEWAY);
  cfg.write("routes.yaml", routes(3, "old"));
  const log: string[] = [];
  const server = new SluiceServer({
    paths: [cfg.dir],
    xdsHost: "127.0.0.1",
    xdsPort: 0,
    authzPort: 0,
    adminHost: "127.0.0.1",
    log: (l) => log.push(`${performance.now().toFixed(1)} ${l}`),
    ...(reloadSettleMs !== undefined ? { reloadSettleMs } : {}),
  });
  await server.start();
  const published: string[][] = [];
  server.xds.cache.watch("t/gw", (s) => published.push(hosts(s)));
  const metric = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(server.metrics())?.[1]);
  const stop = async () => {
    await server.stop();
    cfg.cleanup();
  };
  return { file: join(cfg.dir, "routes.yaml"), published, log, metric, stop };
}

test("a save in two writes 50 ms apart (truncated, then whole) publishes only the whole file", async () => {
  // A settle time of 200 ms (10 by default) keeps the test independent of how busy the host is.
  const s = await startServer(200);
  try {
    await writeTwice(s.file, "", 50, routes(3, "new"));
    const want = ["h0-new.example.com", "h1-new.example.com", "h2-new.example.com"];
    await waitFor("new routes", async () => (s.published.at(-1)?.join() === want.join() ? true : undefined), 5000, 2);
    await sleep(50);
    // Every publish is the whole new file: never the empty one read between the writes.
    assert.ok(s.published.length >= 1);
    for (const p of s.published) assert.deepEqual(p, want, `published ${JSON.stringify(s.published)}`);
    assert.ok(s.metric("sluice_reloads_discarded_total") >= 1);
  } finally {
    await s.stop();
  }
});

test("a file changed while a long reload reads it: that reload is thrown away, and the last content is published", async () => {
  const s = await startServer();
  try {
    // Enough routes that a reload takes longer than the gap between the writes below.
    writeFileSync(s.file, routes(2000, "a"));
    await waitFor("2,000 routes", async () => (s.published.at(-1)?.length === 2000 ? true : undefined), 20_000, 5);
    await sleep(50);
    const discarded = s.metric("sluice_reloads_discarded_total");
    // Whether a reload is reading when the second write lands depends on the machine's load (the watcher may see both
    // writes at once, and then there is nothing to throw away): up to five rounds, each held to the same rules.
    for (let round = 0; round < 5 && s.metric("sluice_reloads_discarded_total") === discarded; round++) {
      s.published.length = 0;
      const tag = `b${round}`;
      // Half the routes first (a valid file on its own), the rest a few milliseconds later, once the reload is
      // reading. The writer is a thread of its own: this thread is the server's, busy while it reloads.
      await writeTwice(s.file, routes(1000, tag), 8, routes(2000, tag));
      await waitFor(
        "2,000 new routes",
        async () =>
          s.published.at(-1)?.length === 2000 && s.published.at(-1)?.[0]?.endsWith(`-${tag}.example.com`)
            ? true
            : undefined,
        20_000,
        5,
      );
      await sleep(100);
      for (const p of s.published) {
        assert.equal(p.length, 2000, `a half-written file was published: ${s.log.slice(-6).join("\n")}`);
        assert.ok(p.every((h) => h.endsWith(`-${tag}.example.com`)));
      }
    }
    assert.ok(
      s.metric("sluice_reloads_discarded_total") > discarded,
      "in five rounds, no reload that read the first write was thrown away",
    );
  } finally {
    await s.stop();
  }
});

/** A source of no resources whose loads take `loadMs`; `same` hands back its last load (nothing changed). */
function slowSource(loadMs: number) {
  const state = { loads: 0, loadStarts: [] as number[], same: false };
  let last: Awaited<ReturnType<ConfigSource["load"]>> | undefined;
  let notify: (() => void) | undefined;
  const source: ConfigSource = {
    async load() {
      state.loads++;
      state.loadStarts.push(performance.now());
      await sleep(loadMs);
      if (state.same && last !== undefined) return last;
      last = { documents: 0, resources: [], sources: new Map(), problems: [], invalid: [] };
      return last;
    },
    async watch(onChange) {
      notify = onChange;
    },
    close() {},
  };
  return { source, state, change: () => notify?.() };
}

async function startWith(source: ConfigSource) {
  const server = new SluiceServer({
    source,
    xdsHost: "127.0.0.1",
    xdsPort: 0,
    authzPort: 0,
    adminHost: "127.0.0.1",
    log: () => {},
  });
  await server.start();
  return server;
}

test("a source whose changes keep coming is reloaded at most about half of the time; a lone change at once", async () => {
  const s = slowSource(20);
  const server = await startWith(s.source);
  try {
    await waitFor("the first load", async () => (server.reloads >= 1 ? true : undefined));
    await sleep(200);
    // A lone change: its reload starts without waiting.
    const before = s.state.loads;
    const at = performance.now();
    s.change();
    await waitFor("its load", async () => (s.state.loads > before ? true : undefined), 2000, 1);
    const waited = (s.state.loadStarts.at(-1) ?? Number.POSITIVE_INFINITY) - at;
    assert.ok(waited < 10, `a lone change waited ${waited} ms`);
    await sleep(100);
    // 600 ms of a change every millisecond: unpaced, a 20 ms reload would run about 30 times back to back.
    const burstLoads = s.state.loads;
    const end = performance.now() + 600;
    while (performance.now() < end) {
      s.change();
      await sleep(1);
    }
    await sleep(600);
    const during = s.state.loads - burstLoads;
    assert.ok(during >= 5 && during <= 20, `${during} loads for a 600 ms burst`);
  } finally {
    await server.stop();
  }
});

test("a source that hands back its last load is not translated or published again", async () => {
  const s = slowSource(1);
  const server = await startWith(s.source);
  try {
    await waitFor("the first load", async () => (server.reloads >= 1 ? true : undefined));
    await sleep(50);
    s.state.same = true;
    const unchanged = () => Number(/^sluice_reloads_unchanged_total (\d+)$/m.exec(server.metrics())?.[1]);
    const unchangedBefore = unchanged();
    const reloads = server.reloads;
    const loads = s.state.loads;
    s.change();
    await waitFor("the load", async () => (s.state.loads > loads ? true : undefined));
    await sleep(50);
    assert.equal(server.reloads, reloads);
    assert.equal(unchanged(), unchangedBefore + 1);
  } finally {
    await server.stop();
  }
});
