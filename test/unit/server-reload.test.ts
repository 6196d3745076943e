// Reloads of `sluice serve` on file changes: a save that arrives as several events (truncate, then write) is never
// published half written, and a change is published once the files are quiet.

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Worker } from "node:worker_threads";
import { SluiceServer } from "../../src/cli/server.js";
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

const cfg = tempConfigDir();
const published: string[][] = [];
let server: SluiceServer;
const log: string[] = [];

before(async () => {
  cfg.write("gateway.yaml", GATEWAY);
  cfg.write("routes.yaml", routes(3, "old"));
  server = new SluiceServer({
    paths: [cfg.dir],
    xdsHost: "127.0.0.1",
    xdsPort: 0,
    authzPort: 0,
    adminHost: "127.0.0.1",
    log: (l) => log.push(`${performance.now().toFixed(1)} ${l}`),
  });
  await server.start();
  server.xds.cache.watch("t/gw", (s) => published.push(hosts(s)));
});

after(async () => {
  await server.stop();
  cfg.cleanup();
});

const metric = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, "m").exec(server.metrics())?.[1]);

test("a save in two writes 5 ms apart (truncated, then whole) publishes only the whole file", async () => {
  published.length = 0;
  const file = join(cfg.dir, "routes.yaml");
  writeFileSync(file, "");
  await sleep(5);
  writeFileSync(file, routes(3, "new"));
  const want = ["h0-new.example.com", "h1-new.example.com", "h2-new.example.com"];
  await waitFor("new routes", async () => (published.at(-1)?.join() === want.join() ? true : undefined), 5000, 2);
  await sleep(50);
  // Every publish is the whole new file: never the empty one read between the writes.
  assert.ok(published.length >= 1);
  for (const p of published) assert.deepEqual(p, want, `published ${JSON.stringify(published)}`);
});

test("a file changed while a long reload reads it: that reload is thrown away, and the last content is published", async () => {
  // Enough routes that a reload takes longer than the gap between the writes below.
  writeFileSync(join(cfg.dir, "routes.yaml"), routes(2000, "a"));
  await waitFor("2,000 routes", async () => (published.at(-1)?.length === 2000 ? true : undefined), 20_000, 5);
  await sleep(50);
  published.length = 0;
  const discarded = metric("sluice_reloads_discarded_total");
  const file = join(cfg.dir, "routes.yaml");
  // Half the routes first (a valid file on its own), the rest a few milliseconds later, once the reload is reading.
  // The writer is a thread of its own: this thread is the server's, busy while it reloads.
  await writeTwice(file, routes(1000, "b"), 8, routes(2000, "b"));
  await waitFor(
    "2,000 new routes",
    async () =>
      published.at(-1)?.length === 2000 && published.at(-1)?.[0]?.endsWith("-b.example.com") ? true : undefined,
    20_000,
    5,
  );
  await sleep(100);
  for (const p of published) {
    assert.equal(p.length, 2000, `a half-written file was published: ${log.slice(-6).join("\n")}`);
    assert.ok(p.every((h) => h.endsWith("-b.example.com")));
  }
  assert.ok(metric("sluice_reloads_discarded_total") > discarded, "the reload that read the first write was kept");
});
