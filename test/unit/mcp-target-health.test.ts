// Health of MCP targets (src/mcp/target-health.ts): the spec's eviction table per target, scored from the outcomes
// of requests: a single failure evicts when neither consecutiveFailures nor healthThreshold is set; the EWMA score
// below healthThreshold evicts; the n-th eviction lasts n × duration; the return takes restoreHealth; the /metrics
// lines say all of it. With an unhealthyCondition, the HTTP layer judges each answer, once.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import { recordTarget, targetEvicted, targetHealthLines, unhealthyAnswer } from "../../src/mcp/target-health.js";
import { TargetConnection } from "../../src/mcp/upstream.js";
import type { McpTargetHealth } from "../../src/translate/mcp/connection.js";
import { startSseTarget } from "../helpers/mcp-target-protocols.js";
import { startSdkTarget } from "../helpers/mcp-targets.js";

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

// `unhealthyCondition` (target-request.ts): exactly one outcome per HTTP exchange with the target, none at the request
// level. The condition `true` makes every answer unhealthy, and the EWMA score (100 × 0.7 per failure) counts them.
describe("MCP target health with an unhealthyCondition", () => {
  const hooks = { onRequest: async () => ({}), onNotification: () => {}, log: () => {} };

  test("the verdict on status and headers; a non-boolean result counts healthy", () => {
    const h = health("judge", {});
    assert.equal(unhealthyAnswer(h, "response.code == 429", 429, {}), true);
    assert.equal(unhealthyAnswer(h, "response.code == 429", 503, {}), false);
    const head = { ":status": "200", "x-overloaded": "1", "set-cookie": ["a=1", "b=2"] };
    assert.equal(unhealthyAnswer(h, "response.headers['x-overloaded'] == '1'", 200, head), true);
    assert.equal(unhealthyAnswer(h, "response.headers['set-cookie'] == 'a=1,b=2'", 200, head), true);
    assert.equal(unhealthyAnswer(h, "':status' in response.headers", 200, head), false);
    // A missing header fails the expression: healthy, as for Service backends.
    assert.equal(unhealthyAnswer(h, "response.headers['absent'] == '1'", 200, {}), false);
    assert.equal(unhealthyAnswer(h, "response.code", 500, {}), false);
  });

  test("one outcome per HTTP answer: initialize, notifications/initialized and a call are three", async () => {
    const target = await startSdkTarget("t");
    const h = health("three", { healthThreshold: 1, durationMs: 60_000, condition: "true" });
    try {
      const conn = await TargetConnection.connect(
        {
          name: "t",
          url: `http://127.0.0.1:${target.port}/mcp`,
          protocol: "StreamableHTTP",
          connection: { health: h },
        },
        hooks,
      );
      await conn.request("tools/list", undefined);
      // An SSE answer is scored at its end, which may follow the message it carried by a tick.
      await sleep(50);
      assert.equal(line("sluice_mcp_target_health", "three"), 34.3);
      await conn.close();
    } finally {
      await target.kill();
    }
  });

  test("an SSE-protocol target: the GET stream's opening answer and each POST judged through targetFetch", async () => {
    const target = await startSseTarget("s");
    // The POSTs of an SSE target are answered 202 (their answers come on the stream): unhealthy here; the GET's 200
    // healthy. initialize, notifications/initialized and tools/list: 100 × 0.7³.
    const h = health("sse", { healthThreshold: 1, durationMs: 60_000, condition: "response.code == 202" });
    try {
      const conn = await TargetConnection.connect(
        { name: "s", url: `http://127.0.0.1:${target.port}/sse`, protocol: "SSE", connection: { health: h } },
        hooks,
      );
      assert.equal(line("sluice_mcp_target_health", "sse"), 70);
      const tools = await conn.request("tools/list", undefined);
      assert.ok(Array.isArray(tools["tools"]));
      assert.equal(line("sluice_mcp_target_health", "sse"), 34.3);
      await conn.close();
    } finally {
      await target.close();
    }
  });

  test("no answer within http.requestTimeout is one unhealthy outcome; a refused connection one too", async () => {
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", () => r()));
    const port = (silent.address() as AddressInfo).port;
    const h = health("silent", { healthThreshold: 1, durationMs: 60_000, condition: "false" });
    try {
      await assert.rejects(
        TargetConnection.connect(
          {
            name: "t",
            url: `http://127.0.0.1:${port}/mcp`,
            protocol: "StreamableHTTP",
            connection: { health: h, requestTimeoutMs: 200 },
          },
          hooks,
        ),
        /timed out/i,
      );
      await sleep(100);
      assert.equal(line("sluice_mcp_target_health", "silent"), 70);
    } finally {
      silent.closeAllConnections();
      await new Promise((r) => silent.close(r));
    }
    await assert.rejects(
      TargetConnection.connect(
        { name: "t", url: `http://127.0.0.1:${port}/mcp`, protocol: "StreamableHTTP", connection: { health: h } },
        hooks,
      ),
      /ECONNREFUSED/,
    );
    assert.equal(line("sluice_mcp_target_health", "silent"), 49);
  });

  test("a call not answered within http.requestTimeout is one outcome; its late answer is not judged", async () => {
    // A target answering in JSON that answers tools/call after 700 ms whatever it was told meanwhile (an SDK server
    // drops the answer to a cancelled request).
    const late = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const m = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id?: unknown; method: string };
      if (m.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const result =
        m.method === "initialize"
          ? { protocolVersion: "2025-06-18", capabilities: {}, serverInfo: { name: "late", version: "1" } }
          : { content: [] };
      if (m.method !== "initialize") await sleep(700);
      res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s1" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: m.id, result }));
    });
    await new Promise<void>((r) => late.listen(0, "127.0.0.1", () => r()));
    const target = {
      port: (late.address() as AddressInfo).port,
      kill: () => {
        late.closeAllConnections();
        return new Promise((r) => late.close(r));
      },
    };
    // 202 (notifications) unhealthy, 200 healthy: initialize healthy, notifications/initialized unhealthy (70), the
    // call's timeout unhealthy (49), the notifications/cancelled Sluice then sends unhealthy (34.3), in any order.
    const h = health("late", { healthThreshold: 1, durationMs: 60_000, condition: "response.code == 202" });
    try {
      const conn = await TargetConnection.connect(
        {
          name: "t",
          url: `http://127.0.0.1:${target.port}/mcp`,
          protocol: "StreamableHTTP",
          connection: { health: h, requestTimeoutMs: 300 },
        },
        hooks,
      );
      await assert.rejects(
        conn.request("tools/call", { name: "slow", arguments: { steps: 1, ms: 700 } }),
        /did not answer tools\/call within 300 ms/,
      );
      await sleep(100);
      assert.equal(line("sluice_mcp_target_health", "late"), 34.3);
      // The answer comes at 700 ms: the request was given up, it is not scored again (a healthy one would make 54.01).
      await sleep(700);
      assert.equal(line("sluice_mcp_target_health", "late"), 34.3);
      await conn.close();
    } finally {
      await target.kill();
    }
  });
});
