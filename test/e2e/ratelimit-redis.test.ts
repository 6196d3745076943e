// Global limits on a real shared store: two gateways (each its own `sluice serve` and Envoy) send their rate limit
// descriptors to one envoyproxy/ratelimit counting in one redis-server. Its configuration is written by
// `sluice ratelimit-config` from the same GwPolicies. A request budget and a token budget (charged with the usage read
// from the LLM response, streamed or not) are shared exactly; a limit rewritten by the command is served without a
// restart; with Redis stopped, then the service, FailOpen lets requests through and FailClosed refuses them.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService, rulePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import { type SharedRateLimit, startSharedRateLimit } from "../helpers/ratelimit-redis.js";

function resources(fake: FakeProvider, echo: Upstream, rlsPort: number): string {
  const global = (domain: string, failureMode: string, unit = "Requests", entry = "client") => `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: ${domain}
    failureMode: ${failureMode}
    descriptors:
      - entries: [{ name: ${entry}, expression: "request.headers['x-client']" }]
        unit: ${unit}`;
  return `${localService("rls", rlsPort, "kubernetes.io/h2c")}${localService("echo", echo.port)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: openai, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${fake.port} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: tokens
      matches: [{ path: { type: PathPrefix, value: /tokens } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
    - name: req
      matches: [{ path: { type: PathPrefix, value: /req } }]
      backendRefs: [{ name: echo, port: 80 }]
    - name: open
      matches: [{ path: { type: PathPrefix, value: /open } }]
      backendRefs: [{ name: echo, port: 80 }]
    - name: closed
      matches: [{ path: { type: PathPrefix, value: /closed } }]
      backendRefs: [{ name: echo, port: 80 }]
${rulePolicy("tokens", global("llm", "FailClosed", "Tokens", "user"))}${rulePolicy(
  "req",
  global("shared", "FailClosed"),
)}${rulePolicy("open", global("open", "FailOpen"))}${rulePolicy("closed", global("closed", "FailClosed"))}`;
}

describe("global limits shared by two Envoys through envoyproxy/ratelimit and Redis", { timeout: 120_000 }, () => {
  let fake: FakeProvider;
  let echo: Upstream;
  let store: SharedRateLimit;
  let a: LlmEnv;
  let b: LlmEnv;
  const LIMITS = ["llm/user=30/day", "open/client=1000/day", "closed/client=1000/day"];
  const send = (env: LlmEnv, client: string) =>
    request(env.port, "/req", { headers: { "x-client": client } }).then((r) => r.status);

  const openai = (env: LlmEnv, user: string) =>
    new OpenAI({
      apiKey: "k",
      baseURL: `${env.baseUrl}/tokens/v1`,
      maxRetries: 0,
      defaultHeaders: { "x-client": user },
    });
  const ask = (env: LlmEnv, user: string) =>
    openai(env, user).chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] });
  const askStreaming = async (env: LlmEnv, user: string) => {
    const stream = await openai(env, user).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    return text;
  };
  before(async () => {
    fake = await startFakeProvider({ name: "openai" });
    echo = await startEchoUpstream("echo");
    // The service's configuration, written by Sluice from the same GwPolicies. A day's window, so that no window
    // boundary falls within the test. 5 requests per client; 30 tokens per user (each answer of the fake uses 18).
    store = await startSharedRateLimit((rlsPort) => resources(fake, echo, rlsPort), ["shared/client=5/day", ...LIMITS]);
    [a, b] = await Promise.all([
      startLlmEnv(store.yaml, "/tokens/v1/chat/completions"),
      startLlmEnv(store.yaml, "/tokens/v1/chat/completions"),
    ]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await store?.stop();
    await fake?.close();
    await echo?.close();
  });

  test("a request budget of 5 is shared: 5 requests spread over both Envoys pass, the 6th on either gets 429", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push(await send(i % 2 === 0 ? a : b, "c1"));
    assert.deepEqual(statuses, [200, 200, 200, 200, 200]);
    assert.equal(await send(a, "c1"), 429);
    assert.equal(await send(b, "c1"), 429);
    // Another client has its own budget, on both.
    assert.equal(await send(b, "c2"), 200);
    assert.equal(await send(a, "c2"), 200);
  });

  test("a token budget of 30 is shared: charged with each answer's 18 tokens, streamed or not, on either Envoy", async () => {
    const first = await ask(a, "alice");
    assert.ok(first.choices[0]?.message.content);
    await store.charged("llm_user_alice", 18);
    // 18 ≤ 30: the check (0 hits) on the other Envoy passes; the stream is charged when it ends.
    assert.equal(await askStreaming(b, "alice"), "Hello from openai: stream");
    await store.charged("llm_user_alice", 36);
    for (const env of [a, b]) {
      await assert.rejects(ask(env, "alice"), (e: unknown) => {
        assert.ok(e instanceof OpenAI.RateLimitError, String(e));
        assert.equal(e.status, 429);
        return true;
      });
    }
    await assert.rejects(askStreaming(b, "alice"), (e: unknown) => e instanceof OpenAI.RateLimitError);
    // Refused requests charge nothing; another user has their own budget.
    assert.equal(await store.counter("llm_user_alice"), 36);
    assert.ok((await ask(b, "bob")).choices[0]?.message.content);
    await store.charged("llm_user_bob", 18);
  });

  test("a limit changed by running sluice ratelimit-config again is served without a restart", async () => {
    assert.equal(await store.writeConfig(["shared/client=2/day", ...LIMITS]), "");
    // The service reloads when the file changes; each probe is a fresh client, so probes spend no one's budget.
    let probe = 0;
    await waitFor("the new limit of 2 served", async () => {
      const c = `probe${probe++}`;
      for (let i = 0; i < 2; i++) assert.equal(await send(a, c), 200);
      return (await send(a, c)) === 429 ? true : undefined;
    });
    const statuses = [await send(a, "c3"), await send(b, "c3"), await send(b, "c3"), await send(a, "c3")];
    assert.deepEqual(statuses, [200, 200, 429, 429]);
  });

  test("Redis stopped: FailOpen lets requests through, FailClosed refuses them", async () => {
    for (const env of [a, b]) {
      assert.equal((await request(env.port, "/open", { headers: { "x-client": "d" } })).status, 200);
      assert.equal((await request(env.port, "/closed", { headers: { "x-client": "d" } })).status, 200);
    }
    await store.redis.stop();
    for (const env of [a, b]) {
      assert.equal((await request(env.port, "/open", { headers: { "x-client": "d" } })).status, 200, "FailOpen");
      // Envoy answers a rate limit service error with 500 under failure_mode_deny.
      assert.equal((await request(env.port, "/closed", { headers: { "x-client": "d" } })).status, 500, "FailClosed");
      // The token budget is FailClosed (the default) too: an LLM request is refused, not served uncounted.
      await assert.rejects(ask(env, "erin"), (e: unknown) => e instanceof OpenAI.APIError && e.status === 500);
    }
  });

  test("the rate limit service stopped: the same", async () => {
    await store.rls.stop();
    for (const env of [a, b]) {
      assert.equal((await request(env.port, "/open", { headers: { "x-client": "d" } })).status, 200, "FailOpen");
      assert.equal((await request(env.port, "/closed", { headers: { "x-client": "d" } })).status, 500, "FailClosed");
    }
  });
});
