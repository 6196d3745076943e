// Health of MCP targets (src/mcp/target-health.ts): the spec's eviction table per target, scored from the outcomes
// of requests: a single failure evicts when neither consecutiveFailures nor healthThreshold is set; the EWMA score
// below healthThreshold evicts; the n-th eviction lasts n × duration; the return takes restoreHealth; the /metrics
// lines say all of it.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { recordTarget, targetEvicted, targetHealthLines } from "../../src/mcp/target-health.js";
import type { McpTargetHealth } from "../../src/translate/mcp/connection.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function health(target: string, h: Partial<McpTargetHealth>): McpTargetHealth {
  return { key: `mcp/default/gw/default/b|${target}`, backend: "default/b", target, durationMs: 80, ...h };
}

function line(name: string, target: string): number | undefined {
  const l = targetHealthLines().find((x) => x.startsWith(`${name}{backend="default/b",target="${target}"}`));
  return l === undefined ? undefined : Number(l.split(" ").at(-1));
}

describe("MCP target health", () => {
  test("neither consecutiveFailures nor healthThreshold: one failure evicts, for duration, then back", async () => {
    const h = health("one", {});
    assert.equal(targetEvicted(h), undefined);
    recordTarget(h, true);
    assert.equal(targetEvicted(h), undefined);
    recordTarget(h, false);
    assert.match(targetEvicted(h) ?? "", /^evicted by its health policy \(eviction 1; back in \d+ ms\)$/);
    assert.equal(line("sluice_mcp_target_evicted", "one"), 1);
    assert.equal(line("sluice_mcp_target_evictions_total", "one"), 1);
    // Outcomes while evicted (requests already under way) change nothing.
    recordTarget(h, false);
    assert.equal(line("sluice_mcp_target_evictions_total", "one"), 1);
    await sleep(130);
    assert.equal(targetEvicted(h), undefined);
    assert.equal(line("sluice_mcp_target_evicted", "one"), 0);
  });

  test("healthThreshold: the EWMA score, not the run of failures, evicts", () => {
    const h = health("score", { healthThreshold: 50, durationMs: 60_000 });
    recordTarget(h, false); // 70
    recordTarget(h, true); // 79
    recordTarget(h, false); // 55.3
    assert.equal(targetEvicted(h), undefined);
    assert.equal(line("sluice_mcp_target_health", "score"), 55.3);
    recordTarget(h, false); // 38.71: below 50
    assert.ok(targetEvicted(h) !== undefined);
  });

  test("consecutiveFailures: a success in between starts the count again", () => {
    const h = health("run", { consecutiveFailures: 3, durationMs: 60_000 });
    recordTarget(h, false);
    recordTarget(h, false);
    recordTarget(h, true);
    recordTarget(h, false);
    recordTarget(h, false);
    assert.equal(targetEvicted(h), undefined);
    recordTarget(h, false);
    assert.ok(targetEvicted(h) !== undefined);
  });

  test("the second eviction lasts twice the duration; the return takes restoreHealth", async () => {
    const h = health("again", { durationMs: 300, restoreHealth: 90 });
    recordTarget(h, false);
    await sleep(400);
    assert.equal(targetEvicted(h), undefined);
    assert.equal(line("sluice_mcp_target_health", "again"), 90);
    recordTarget(h, false);
    const left = Number(/back in (\d+) ms/.exec(targetEvicted(h) ?? "")?.[1]);
    assert.ok(left > 300 && left <= 600, `${left} ms left`);
    assert.match(targetEvicted(h) ?? "", /eviction 2;/);
    await sleep(350);
    assert.ok(targetEvicted(h) !== undefined, "still evicted after one duration");
    await sleep(400);
    assert.equal(targetEvicted(h), undefined);
  });

  test("a target without health is never evicted, and has no series", () => {
    recordTarget(undefined, false);
    assert.equal(targetEvicted(undefined), undefined);
    assert.ok(targetHealthLines().every((l) => !l.includes('target="none"')));
  });
});
