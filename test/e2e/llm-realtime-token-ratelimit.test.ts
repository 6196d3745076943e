// Realtime sessions charged to a global `Tokens` descriptor on the real rate limit service (envoyproxy/ratelimit
// counting in redis-server, both started by the test; scripts/setup.d/ratelimit.sh, redis.sh; its configuration
// written by `sluice ratelimit-config`): Node's WebSocket client → Envoy (the upgrade checked with 0 hits) → Sluice's
// Realtime relay (the route goes through it for the descriptor alone) → a fake Realtime provider whose response.done
// reports 40 tokens. The relay sends each response's tokens under the descriptor's entry (the client's x-user
// header); the response that takes alice past her 100 ends the session (Realtime's error event, 1008), her next
// upgrade is refused 429 by Envoy's check, and bob has his own budget.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { projectRoot } from "../../src/cli/paths.js";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { localService, rulePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, waitFor } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";
import {
  type RateLimitService,
  type Redis,
  rateLimitRuntime,
  startEnvoyRateLimit,
  startRedis,
} from "../helpers/ratelimit-redis.js";
import { openRealtime, type RealtimeEvent, refusedUpgrade } from "../helpers/realtime-client.js";

const run = promisify(execFile);

function resources(rt: FakeRealtime, rlsPort: number): string {
  return `${localService("rls", rlsPort, "kubernetes.io/h2c")}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: realtime, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${rt.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/realtime: Realtime }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: shared
      matches: [{ path: { type: PathPrefix, value: /shared/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: realtime }]
${rulePolicy(
  "shared",
  `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: llm
    descriptors:
      - entries: [{ name: user, expression: "request.headers['x-user']" }]
        unit: Tokens`,
)}`;
}

/** Events until one of `type`, inclusive. */
async function until(next: () => Promise<RealtimeEvent>, type: string): Promise<RealtimeEvent[]> {
  const out: RealtimeEvent[] = [];
  for (;;) {
    const e = await next();
    out.push(e);
    if (e.type === type) return out;
  }
}

describe("Realtime sessions charged to a global Tokens descriptor", { timeout: 120_000 }, () => {
  let rt: FakeRealtime;
  let redis: Redis;
  let rls: RateLimitService;
  let env: LlmEnv;
  let cfg: ReturnType<typeof tempConfigDir>;
  let runtime: ReturnType<typeof rateLimitRuntime>;
  /** The counter envoyproxy/ratelimit keeps in Redis for `<domain>_<key>_<value>_<window>` (undefined: no key yet). */
  const counter = async (prefix: string): Promise<number | undefined> => {
    const keys = (await redis.command("KEYS", `${prefix}_*`)) as string[];
    return keys[0] === undefined ? undefined : Number(await redis.command("GET", keys[0]));
  };
  const charged = (prefix: string, total: number) =>
    waitFor(`${prefix} at ${total}`, async () => ((await counter(prefix)) === total ? true : undefined), 10_000);

  before(async () => {
    rt = await startFakeRealtime({
      name: "rt",
      apiKey: "sk-provider",
      usage: { total_tokens: 40, input_tokens: 30, output_tokens: 10 },
    });
    redis = await startRedis();
    const rlsPort = await freePort();
    const yaml = resources(rt, rlsPort);
    cfg = tempConfigDir();
    cfg.write("resources.yaml", yaml);
    runtime = rateLimitRuntime();
    // 100 tokens per user for a day (no window boundary within the test).
    const { stderr } = await run(process.execPath, [
      join(projectRoot(), "bin", "sluice.js"),
      "ratelimit-config",
      "-f",
      join(cfg.dir, "resources.yaml"),
      "--limit",
      "llm/user=100/day",
      "--out",
      runtime.configDir,
    ]);
    assert.equal(stderr, "", "every descriptor has its limit");
    rls = await startEnvoyRateLimit(runtime.root, redis.port, rlsPort);
    env = await startLlmEnv(yaml, "/shared/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await rls?.stop();
    await redis?.stop();
    await rt?.close();
    cfg?.cleanup();
    runtime?.cleanup();
  });

  test("each response.done is charged with its tokens; the one over the budget ends the session; 429 after", async () => {
    const { ws, next } = await openRealtime(env.port, "/shared/v1/realtime", "client-key", { "x-user": "alice" });
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      ws.addEventListener("close", (e) => r({ code: e.code, reason: e.reason })),
    );
    assert.equal((await next()).type, "session.created");
    ws.send(JSON.stringify({ type: "response.create" }));
    await until(next, "response.done");
    await charged("llm_user_alice", 40);
    ws.send(JSON.stringify({ type: "response.create" }));
    await until(next, "response.done");
    await charged("llm_user_alice", 80);
    // 120 > 100: the service answers OVER_LIMIT to this charge.
    ws.send(JSON.stringify({ type: "response.create" }));
    await until(next, "response.done");
    const error = await next();
    assert.equal(error.type, "error");
    assert.equal((error.error as { code?: unknown }).code, "token_rate_limit_exceeded");
    assert.deepEqual(await closed, { code: 1008, reason: "token rate limit exceeded" });
    assert.ok(((await counter("llm_user_alice")) ?? 0) >= 120);
    // Envoy's check of the next upgrade (0 hits) finds the budget spent; the provider is not called.
    const handshakes = rt.handshakes.length;
    const r = await refusedUpgrade(env.port, "/shared/v1/realtime?model=gpt-realtime", ["x-user: alice"]);
    assert.equal(r.status, 429);
    assert.equal(rt.handshakes.length, handshakes);
    // Another user has their own budget.
    const bob = await openRealtime(env.port, "/shared/v1/realtime", "client-key", { "x-user": "bob" });
    assert.equal((await bob.next()).type, "session.created");
    bob.ws.send(JSON.stringify({ type: "response.create" }));
    await until(bob.next, "response.done");
    await charged("llm_user_bob", 40);
    bob.ws.close();
  });
});
