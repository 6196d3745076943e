// The bounds of the spare target session pool (src/mcp/spare-pool.ts), against real SDK targets: one set per key, a
// few keys per backend and a few sets in all (the least recently wanted ready set makes room; sets still starting are
// never evicted), the idle age, a configuration change, a target that fails, shutdown; every set that leaves the pool
// unadopted is DELETEd at its targets without having been told notifications/initialized. The key: a hash of what the
// targets would see. And the Stateless initialize cache's age, refresh and bounds (src/mcp/initialize-cache.ts).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { InitializeCache, initializeCacheOptionsFromEnv } from "../../src/mcp/initialize-cache.js";
import {
  SPARE_DEFAULTS,
  SparePool,
  type SparePoolOptions,
  type SpareTemplate,
  spareKey,
  spareOptionsFromEnv,
} from "../../src/mcp/spare-pool.js";
import type { McpBackendEntry } from "../../src/translate/mcp/table.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { freePort, waitFor } from "../helpers/net.js";

function entry(key: string, ports: readonly number[], extra: Partial<McpBackendEntry> = {}): McpBackendEntry {
  return {
    key,
    gateway: "default/gw",
    backend: `default/${key}`,
    targets: ports.map((p, i) => ({
      name: `t${i}`,
      section: `t${i}`,
      protocol: "StreamableHTTP" as const,
      urls: [`http://127.0.0.1:${p}/mcp`],
    })),
    unresolved: [],
    sessionRouting: "Stateful",
    failureMode: "FailClosed",
    prefixMode: "Conditional",
    authorization: [],
    ...extra,
  };
}

function client(n: number): SpareTemplate {
  return { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: `c${n}`, version: "1" } };
}

const quiet = () => {};

describe("MCP spare session pool", () => {
  let a: SdkTarget;
  let b: SdkTarget;
  before(async () => {
    [a, b] = await Promise.all([startSdkTarget("a"), startSdkTarget("b")]);
  });
  after(async () => {
    await a.kill();
    await b.kill();
  });

  const pool = (o: Partial<SparePoolOptions>) => new SparePool({ ...SPARE_DEFAULTS, ...o }, quiet);
  const ready = (p: SparePool, n: number) =>
    waitFor(`${n} ready sets`, async () =>
      p.held().filter((s) => s.state === "ready").length === n ? true : undefined,
    );
  /** Sessions at a target started since `from` (its `seen.sessions` in order) that were DELETEd / told initialized. */
  const since = (t: SdkTarget, from: number) => [...t.seen.sessions.values()].slice(from);

  test("per backend: at most maxKeysPerBackend keys; the least recently wanted ready set is DELETEd for a new one", async () => {
    const p = pool({ maxKeysPerBackend: 2 });
    const e = entry("one", [a.port, b.port]);
    const from = a.seen.sessions.size;
    p.refill(e, client(1));
    await ready(p, 1);
    p.refill(e, client(2));
    await ready(p, 2);
    // Key 1 asked for again: key 2 is now the least recently wanted.
    p.refill(e, client(1));
    assert.equal(p.counters.started, 2, "a held key starts no second set");
    p.refill(e, client(3));
    await waitFor("key 3 ready", async () =>
      p.held().some((s) => s.key === spareKey(e, client(3)) && s.state === "ready") ? true : undefined,
    );
    assert.deepEqual(
      p
        .held()
        .map((s) => s.key)
        .sort(),
      [spareKey(e, client(1)), spareKey(e, client(3))].sort(),
    );
    assert.equal(await p.take(e, spareKey(e, client(2))), undefined);
    await waitFor("key 2's sessions DELETEd", async () => (since(a, from)[1]?.deleted ? true : undefined));
    assert.deepEqual(
      since(a, from).map((s) => [s.deleted, s.notified]),
      [
        [false, false],
        [true, false],
        [false, false],
      ],
    );
    const taken = await p.take(e, spareKey(e, client(3)));
    assert.ok(taken !== undefined);
    assert.deepEqual([...taken.connections.keys()], ["t0", "t1"]);
    assert.equal(await p.take(e, spareKey(e, client(3))), undefined, "a set is taken once");
    for (const c of taken.connections.values()) await c.discard();
    await p.close();
    assert.ok(since(a, from).every((s) => s.deleted));
  });

  test("sets still starting are never evicted: a key past the bound then gets no set", async () => {
    const p = pool({ maxKeysPerBackend: 1 });
    const e = entry("starting", [a.port]);
    p.refill(e, client(1));
    p.refill(e, client(2));
    assert.deepEqual(
      p.held().map((s) => [s.key, s.state]),
      [[spareKey(e, client(1)), "starting"]],
    );
    assert.equal(p.counters.started, 1);
    await p.close();
  });

  test("a set still starting is taken once it is up (no second start for the same client)", async () => {
    const p = pool({});
    const e = entry("claim", [a.port, b.port]);
    p.refill(e, client(1));
    assert.equal(p.held()[0]?.state, "starting");
    const taken = await p.take(e, spareKey(e, client(1)));
    assert.ok(taken !== undefined);
    assert.equal(p.size, 0, "taken: no longer the pool's");
    assert.equal(p.counters.started, 1);
    // The taken set is the caller's: shutdown does not DELETE it.
    await p.close();
    assert.ok([...taken.connections.values()].every((c) => !c.closed));
    for (const c of taken.connections.values()) await c.discard();
  });

  test("in all: at most maxSets, across backends", async () => {
    const p = pool({ maxSets: 2 });
    const e1 = entry("x", [a.port]);
    const e2 = entry("y", [b.port]);
    p.refill(e1, client(1));
    p.refill(e2, client(1));
    await ready(p, 2);
    p.refill(e1, client(2));
    await ready(p, 2);
    assert.equal(p.size, 2);
    // x's first set was the least recently wanted of all.
    assert.deepEqual(
      p
        .held()
        .map((s) => `${s.backend}:${s.key === spareKey(e1, client(2)) ? 2 : 1}`)
        .sort(),
      ["x:2", "y:1"],
    );
    await p.close();
    assert.equal(p.size, 0);
  });

  test("a ready set is DELETEd at its targets after the idle age, never told initialized", async () => {
    const p = pool({ idleMs: 300 });
    const e = entry("idle", [a.port, b.port]);
    const [fa, fb] = [a.seen.sessions.size, b.seen.sessions.size];
    p.refill(e, client(1));
    await ready(p, 1);
    await waitFor("the idle set dropped", async () => (p.size === 0 ? true : undefined), 5000);
    await waitFor("its sessions DELETEd", async () =>
      since(a, fa)[0]?.deleted && since(b, fb)[0]?.deleted ? true : undefined,
    );
    assert.equal(since(a, fa)[0]?.notified, false);
    assert.equal(p.counters.discarded, 1);
    await p.close();
  });

  test("a configuration change drops the sets it concerns; the same configuration keeps them", async () => {
    const p = pool({});
    const e = entry("cfg", [a.port]);
    p.refill(e, client(1));
    await ready(p, 1);
    // The same content in a new table (a new object): kept.
    p.retain(new Map([["cfg", entry("cfg", [a.port])]]));
    assert.equal(p.size, 1);
    const kept = await p.take(entry("cfg", [a.port]), spareKey(e, client(1)));
    assert.ok(kept !== undefined);
    for (const c of kept.connections.values()) await c.discard();
    p.refill(e, client(1));
    await ready(p, 1);
    // Another target list: dropped; and a set made under the old configuration is not taken under the new.
    const changed = entry("cfg", [a.port, b.port]);
    p.retain(new Map([["cfg", changed]]));
    assert.equal(p.size, 0);
    p.refill(e, client(2));
    await ready(p, 1);
    assert.equal(await p.take(changed, spareKey(changed, client(2))), undefined);
    assert.equal(p.size, 0, "taking under another configuration drops the set");
    // A backend no longer served, or turned Stateless: dropped.
    p.refill(e, client(3));
    await ready(p, 1);
    p.retain(new Map([["cfg", entry("cfg", [a.port], { sessionRouting: "Stateless" })]]));
    assert.equal(p.size, 0);
    await p.close();
  });

  test("a set with a target that fails to start is not kept, and its key waits before another try", async () => {
    const p = pool({});
    const dead = await freePort();
    const e = entry("dead", [a.port, dead]);
    const from = a.seen.sessions.size;
    p.refill(e, client(1));
    await waitFor("the set failed", async () => (p.counters.failed === 1 ? true : undefined), 10_000);
    assert.equal(p.size, 0);
    // The target that did start has its session DELETEd.
    await waitFor("a's session DELETEd", async () => (since(a, from)[0]?.deleted ? true : undefined));
    p.refill(e, client(1));
    assert.equal(p.counters.started, 1, "no second try within retryMs");
    await p.close();
  });

  test("a set starts after startDelayMs, at once when a client wants it first; one dropped before it began starts nothing", async () => {
    const p = pool({ startDelayMs: 60_000 });
    const e = entry("deferred", [a.port]);
    const from = a.seen.sessions.size;
    p.refill(e, client(1));
    assert.deepEqual(
      p.held().map((s) => s.state),
      ["starting"],
    );
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(since(a, from).length, 0, "nothing at the target before the delay");
    const taken = await p.take(e, spareKey(e, client(1)));
    assert.ok(taken !== undefined, "a client wanting the set starts it and gets it");
    assert.equal(since(a, from).length, 1);
    for (const c of taken.connections.values()) await c.discard();
    p.refill(e, client(2));
    await p.close();
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(since(a, from).length, 1, "a set dropped before it began opened no session");
    const q = pool({ startDelayMs: 50 });
    q.refill(e, client(3));
    await ready(q, 1);
    assert.equal(since(a, from).length, 2, "after the delay the set starts by itself");
    await q.close();
  });

  test("shutdown DELETEs every set, those still starting included", async () => {
    const p = pool({ startDelayMs: 0 });
    const e = entry("bye", [a.port, b.port]);
    const [fa, fb] = [a.seen.sessions.size, b.seen.sessions.size];
    p.refill(e, client(1));
    await p.close();
    assert.equal(p.size, 0);
    await waitFor("both sessions DELETEd", async () =>
      since(a, fa).length === 1 && since(a, fa).every((s) => s.deleted) && since(b, fb).every((s) => s.deleted)
        ? true
        : undefined,
    );
    p.refill(e, client(2));
    assert.equal(p.size, 0, "a closed pool starts nothing");
  });

  test("disabled, or a backend that cannot use spares: nothing is started", async () => {
    const off = new SparePool(spareOptionsFromEnv({ SLUICE_MCP_SPARE_SESSIONS: "off" }), quiet);
    off.refill(entry("off", [a.port]), client(1));
    assert.equal(off.size, 0);
    const p = pool({});
    p.refill(entry("sl", [a.port], { sessionRouting: "Stateless" }), client(1));
    const sse = entry("sse", [a.port]);
    p.refill({ ...sse, targets: sse.targets.map((t) => ({ ...t, protocol: "SSE" as const })) }, client(1));
    assert.equal(p.size, 0);
    assert.deepEqual(
      spareOptionsFromEnv({ SLUICE_MCP_SPARE_IDLE_MS: "1500", SLUICE_MCP_SPARE_KEYS: "2", SLUICE_MCP_SPARE_SETS: "x" }),
      { ...SPARE_DEFAULTS, idleMs: 1500, maxKeysPerBackend: 2 },
    );
  });

  test("the key: what the targets see; the client's token only where a credential is minted from it, hashed", () => {
    const e = entry("k", [1]);
    const base = client(1);
    const keys = new Set([
      spareKey(e, base),
      spareKey(e, { ...base, protocolVersion: "2025-06-18" }),
      spareKey(e, { ...base, capabilities: { roots: {} } }),
      spareKey(e, { ...base, clientInfo: { name: "c1", version: "2" } }),
    ]);
    assert.equal(keys.size, 4);
    const token = "Bearer secret-token-value";
    const withToken = { ...base, headers: new Map([["authorization", token]]) };
    assert.equal(spareKey(e, withToken), spareKey(e, base), "no minted credential: the token is not part of it");
    const minting = entry("k", [1]);
    const m: McpBackendEntry = {
      ...minting,
      targets: minting.targets.map((t) => ({ ...t, connection: { minted: {} } as never })),
    };
    assert.notEqual(spareKey(m, withToken), spareKey(m, base));
    assert.ok(!spareKey(m, withToken).includes("secret"));
  });
});

describe("Stateless initialize cache", () => {
  const e = entry("stateless", [1], { sessionRouting: "Stateless" });
  const params = { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "c", version: "1" } };

  test("answers from the cache within its age, refreshes in the background past half of it", async () => {
    let computed = 0;
    const cache = new InitializeCache(
      { maxAgeMs: 400, maxEntries: 8 },
      async () => ({ result: { n: ++computed }, complete: true }),
      quiet,
    );
    assert.deepEqual(await cache.result(e, params), { n: 1 });
    assert.deepEqual(await cache.result(e, params), { n: 1 });
    assert.equal(computed, 1);
    // Another client kind is another key.
    assert.deepEqual(await cache.result(e, { ...params, clientInfo: { name: "d", version: "1" } }), { n: 2 });
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(await cache.result(e, params), { n: 1 }, "still served past half its age");
    await waitFor("the background refresh", async () => (computed === 3 ? true : undefined));
    assert.deepEqual(await cache.result(e, params), { n: 3 });
    await new Promise((r) => setTimeout(r, 450));
    assert.deepEqual(await cache.result(e, params), { n: 4 }, "past its age: computed while the client waits");
  });

  test("an answer missing a target is not cached; nor is one for a backend minting from the client's token", async () => {
    let computed = 0;
    const cache = new InitializeCache(
      { maxAgeMs: 10_000, maxEntries: 8 },
      async () => ({ result: { n: ++computed }, complete: false }),
      quiet,
    );
    await cache.result(e, params);
    await cache.result(e, params);
    assert.equal(computed, 2);
    const full = new InitializeCache(
      { maxAgeMs: 10_000, maxEntries: 8 },
      async () => ({ result: { n: ++computed }, complete: true }),
      quiet,
    );
    const m: McpBackendEntry = { ...e, targets: e.targets.map((t) => ({ ...t, connection: { minted: {} } as never })) };
    await full.result(m, params);
    await full.result(m, params);
    assert.equal(computed, 4);
    assert.equal(full.size, 0);
  });

  test("bounded in entries (least recently used dropped), dropped with its backend's configuration", async () => {
    const cache = new InitializeCache(
      { maxAgeMs: 10_000, maxEntries: 2 },
      async () => ({ result: {}, complete: true }),
      quiet,
    );
    for (const n of ["a", "b", "c"]) await cache.result(e, { ...params, clientInfo: { name: n, version: "1" } });
    assert.equal(cache.size, 2);
    cache.retain(new Map([["stateless", entry("stateless", [2], { sessionRouting: "Stateless" })]]));
    assert.equal(cache.size, 0);
    assert.equal(initializeCacheOptionsFromEnv({ SLUICE_MCP_INITIALIZE_CACHE_MS: "off" }).maxAgeMs, 0);
    assert.equal(initializeCacheOptionsFromEnv({ SLUICE_MCP_INITIALIZE_CACHE_MS: "5000" }).maxAgeMs, 5000);
  });
});
