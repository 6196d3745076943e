import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CelActivation } from "../../src/cel/index.js";
import { DecisionCache, parseDuration } from "../../src/extauthz/decision-cache.js";
import { LruCache } from "../../src/extauthz/lru.js";

const act = (headers: Record<string, string>, extra: Record<string, unknown> = {}): CelActivation => ({
  request: {
    method: "GET",
    path: "/",
    host: "h",
    scheme: "http",
    headers: new Map(Object.entries(headers)),
    query: new Map(),
  },
  ...extra,
});

describe("LRU", () => {
  it("evicts the least recently used entry and expires entries", () => {
    const c = new LruCache<string, number>(2);
    c.set("a", 1);
    c.set("b", 2);
    assert.equal(c.get("a"), 1); // a is now most recent
    c.set("c", 3); // evicts b
    assert.equal(c.get("b"), undefined);
    assert.equal(c.get("a"), 1);
    c.set("d", 4, 1000);
    assert.equal(c.get("d", 999), 4);
    assert.equal(c.get("d", 1000), undefined);
    assert.equal(c.size, 1); // the expired entry was dropped
  });
});

describe("extAuth decision cache", () => {
  it("parses durations", () => {
    assert.equal(parseDuration("1h30m"), 5.4e6);
    assert.equal(parseDuration("500ms"), 500);
    assert.equal(parseDuration("1.5s"), 1500);
    assert.equal(parseDuration("5"), undefined);
  });

  it("caches by the key expressions until the ttl", () => {
    const { cache } = DecisionCache.compile<string>(
      { key: ["request.headers['authorization']", "request.method"], ttl: "10s" },
      "p",
    );
    assert.ok(cache);
    const a = act({ authorization: "A" });
    const k = cache.keyFor(a)!;
    assert.equal(k, 's"A",s"GET"');
    assert.equal(cache.set(k, "allow", a, 0), true);
    assert.equal(cache.get(k, 9999), "allow");
    assert.equal(cache.get(k, 10000), undefined);
    assert.notEqual(cache.keyFor(act({ authorization: "B" })), k);
  });

  it("a failing key expression means don't cache", () => {
    const { cache } = DecisionCache.compile<string>({ key: ["request.headers['authorization']"], ttl: "10s" }, "p");
    assert.equal(cache!.keyFor(act({})), undefined);
  });

  it("a CEL ttl: duration, string, seconds, timestamp; failing means don't cache", () => {
    const mk = (ttl: string) => DecisionCache.compile<string>({ key: ["1"], ttl }, "p").cache!;
    const a = act({}, { extauthz: { ttl: "2s" } });
    const expiryOf = (ttl: string) => {
      const c = mk(ttl);
      if (!c.set("k", "v", a, 1000)) return undefined;
      let lo = 1000;
      while (c.get("k", lo) !== undefined) lo += 500;
      return lo;
    };
    assert.equal(expiryOf("duration('3s')"), 4000);
    assert.equal(expiryOf("extauthz.ttl"), 3000);
    assert.equal(expiryOf("60 / 60"), 2000);
    assert.equal(expiryOf("timestamp('1970-01-01T00:00:05Z')"), 5000);
    assert.equal(expiryOf("extauthz.missing"), undefined);
  });

  it("a timestamp ttl is an absolute expiry, as text or from CEL", () => {
    const at = DecisionCache.compile<string>({ key: ["1"], ttl: "1970-01-01T00:00:05Z" }, "p").cache!;
    assert.equal(at.set("k", "v", act({}), 1000), true);
    assert.equal(at.get("k", 4999), "v");
    assert.equal(at.get("k", 5000), undefined);
    assert.equal(at.set("k", "v", act({}), 6000), false, "already past: not cached");
    const cel = DecisionCache.compile<string>({ key: ["1"], ttl: "extauthz.until" }, "p").cache!;
    assert.equal(cel.set("k", "v", act({}, { extauthz: { until: "1970-01-01T00:00:03Z" } }), 1000), true);
    assert.equal(cel.get("k", 2999), "v");
    assert.equal(cel.get("k", 3000), undefined);
  });

  it("bounds the number of entries", () => {
    const { cache } = DecisionCache.compile<number>({ key: ["request.headers.k"], ttl: "1h", maxEntries: 2 }, "p");
    for (const k of ["a", "b", "c"]) cache!.set(cache!.keyFor(act({ k }))!, 1, act({}));
    assert.equal(cache!.size, 2);
  });

  it("reports configuration problems", () => {
    const r = DecisionCache.compile({ key: [], ttl: "request.(", maxEntries: 0 }, "spec.backend.extAuth.cache");
    assert.deepEqual(
      r.problems.map((p) => p.path),
      ["spec.backend.extAuth.cache.key", "spec.backend.extAuth.cache.ttl", "spec.backend.extAuth.cache.maxEntries"],
    );
  });
});
