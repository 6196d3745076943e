// Realtime sessions charged to a global `Tokens` descriptor on the real rate limit service (envoyproxy/ratelimit
// counting in redis-server, both started by the test; scripts/setup.d/ratelimit.sh, redis.sh; its configuration
// written by `sluice ratelimit-config`): Node's WebSocket client → Envoy (the upgrade checked with 0 hits) → Sluice's
// Realtime relay (the route goes through it for the descriptor alone) → a fake Realtime provider whose response.done
// reports 40 tokens. The relay sends each response's tokens under the descriptor's entry (the client's x-user
// header); the response that takes alice past her 100 ends the session (Realtime's error event, 1008), her next
// upgrade is refused 429 by Envoy's check, and bob has his own budget.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, realtimeBackendYaml, startFakeRealtime } from "../helpers/fake-realtime.js";
import { gwBackendRoute, localService, rulePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { type SharedRateLimit, startSharedRateLimit } from "../helpers/ratelimit-redis.js";
import { closeOf, openRealtime, refusedUpgrade, untilEvent } from "../helpers/realtime-client.js";

function resources(rt: FakeRealtime, rlsPort: number): string {
  return `${localService("rls", rlsPort, "kubernetes.io/h2c")}${realtimeBackendYaml(rt)}${gwBackendRoute(
    "shared",
    "realtime",
    {
      rewrite: "/v1",
      rule: "shared",
    },
  )}${rulePolicy(
    "shared",
    `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: llm
    descriptors:
      - entries: [{ name: user, expression: "request.headers['x-user']" }]
        unit: Tokens`,
    "shared",
  )}`;
}

describe("Realtime sessions charged to a global Tokens descriptor", { timeout: 120_000 }, () => {
  let rt: FakeRealtime;
  let store: SharedRateLimit;
  let env: LlmEnv;

  before(async () => {
    rt = await startFakeRealtime({
      name: "rt",
      apiKey: "sk-provider",
      usage: { total_tokens: 40, input_tokens: 30, output_tokens: 10 },
    });
    // 100 tokens per user for a day (no window boundary within the test).
    store = await startSharedRateLimit((rlsPort) => resources(rt, rlsPort), ["llm/user=100/day"]);
    env = await startLlmEnv(store.yaml, "/shared/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await store?.stop();
    await rt?.close();
  });

  test("each response.done is charged with its tokens; the one over the budget ends the session; 429 after", async () => {
    const { ws, next } = await openRealtime(env.port, "/shared/v1/realtime", "client-key", { "x-user": "alice" });
    const closed = closeOf(ws);
    assert.equal((await next()).type, "session.created");
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    await store.charged("llm_user_alice", 40);
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    await store.charged("llm_user_alice", 80);
    // 120 > 100: the service answers OVER_LIMIT to this charge.
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    const error = await next();
    assert.equal(error.type, "error");
    assert.equal((error.error as { code?: unknown }).code, "token_rate_limit_exceeded");
    assert.deepEqual(await closed, { code: 1008, reason: "token rate limit exceeded" });
    assert.ok(((await store.counter("llm_user_alice")) ?? 0) >= 120);
    // Envoy's check of the next upgrade (0 hits) finds the budget spent; the provider is not called.
    const handshakes = rt.handshakes.length;
    const r = await refusedUpgrade(env.port, "/shared/v1/realtime?model=gpt-realtime", ["x-user: alice"]);
    assert.equal(r.status, 429);
    assert.equal(rt.handshakes.length, handshakes);
    // Another user has their own budget.
    const bob = await openRealtime(env.port, "/shared/v1/realtime", "client-key", { "x-user": "bob" });
    assert.equal((await bob.next()).type, "session.created");
    bob.ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(bob.next, "response.done");
    await store.charged("llm_user_bob", 40);
    bob.ws.close();
  });
});
