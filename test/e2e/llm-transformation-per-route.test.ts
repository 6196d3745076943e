// Per-route and per-provider transformations on AI backends through a real Envoy, with the official `openai` SDK
// (xds/llm-transformation.ts):
// - routes reaching one AI GwBackend with different route-level `backend.transformation` each get their own: a
//   variant of the AI cluster per distinct transformation (`<cluster>~<hash>`), shared by the routes that agree, and
//   a failover inside a variant is transformed for the next provider, and Sluice's health scoring of the GwBackend
//   is shared by its variants (they read the cluster's endpoints, evicted ones marked);
// - a provider's own `policies.transformation` replaces the GwBackend's for that provider (the spec's merge order,
//   per top-level field), applied to the attempt whose provider Envoy picked, across a failover; each attempt starts
//   from the request as the client sent it (the previous attempt's changes undone);
// - a `retry.condition` reading the response body, evaluated per attempt on the provider's response; the retry goes
//   where the failover would (the next provider);
// - the status reports none of these any more.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request, waitFor } from "../helpers/net.js";

interface Ports {
  t1: number;
  t2: number;
  o1: number;
  o2: number;
  o3: number;
  r: number;
  r2: number;
}

function resources(p: Ports): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: teams, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: t1, providerA: {}, host: 127.0.0.1, port: ${p.t1} }
      - providers:
          - { name: t2, providerD: { model: claude-t2 }, host: 127.0.0.1, port: ${p.t2} }
  policies:
    # Scored by Sluice (an EDS cluster whose evicted providers it marks): the variants read the cluster's marks.
    health: { unhealthyCondition: "response.code >= 500", eviction: { duration: 3s, consecutiveFailures: 1 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: owned, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: o1
            providerA: {}
            host: 127.0.0.1
            port: ${p.o1}
            policies:
              transformation:
                request:
                  set: [{ name: x-who, value: "'o1-own'" }]
                response:
                  set: [{ name: x-answered, value: "'o1 ' + string(response.code)" }]
      - providers:
          - name: o2
            providerD: { model: claude-o2 }
            host: 127.0.0.1
            port: ${p.o2}
            policies:
              transformation:
                request:
                  set: [{ name: x-who, value: "'o2-own ' + request.path" }]
                response:
                  set: [{ name: x-answered, value: "'o2'" }]
      - providers:
          - { name: o3, providerA: {}, host: 127.0.0.1, port: ${p.o3} }
  policies:
    health: { eviction: { duration: 1s } }
    transformation:
      request:
        set: [{ name: x-common, value: "'backend'" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: retry, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: r, providerA: {}, host: 127.0.0.1, port: ${p.r} }]
      - providers: [{ name: r2, providerA: {}, host: 127.0.0.1, port: ${p.r2} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: team-a
      matches: [{ path: { type: PathPrefix, value: /team-a } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: teams }]
    - name: team-a2
      matches: [{ path: { type: PathPrefix, value: /team-a2 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: teams }]
    - name: team-b
      matches: [{ path: { type: PathPrefix, value: /team-b } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: teams }]
    - name: team-none
      matches: [{ path: { type: PathPrefix, value: /team-none } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: teams }]
    - name: owned
      matches: [{ path: { type: PathPrefix, value: /owned } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: owned }]
    - name: retry
      matches: [{ path: { type: PathPrefix, value: /retry } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: retry }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: team-a, namespace: default }
spec:
  targetRefs:
    - { group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: team-a }
    - { group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: team-a2 }
  backend:
    transformation:
      request:
        set: [{ name: x-team, value: "'a'" }]
      response:
        set: [{ name: x-team-seen, value: "'a'" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: team-b, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: team-b }]
  backend:
    transformation:
      request:
        set: [{ name: x-team, value: "'b ' + request.path" }]
      response:
        set: [{ name: x-team-seen, value: "'b'" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: retry-condition, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: retry }]
  traffic:
    retry:
      attempts: 1
      condition: "response.code == 200 && response.body.contains('retry-me')"
`;
}

describe("AI backends: a transformation per route and per provider", { timeout: 120_000 }, () => {
  const fakes: Partial<Record<keyof Ports, FakeProvider>> = {};
  let env: LlmEnv;
  const fake = (k: keyof Ports): FakeProvider => fakes[k] as FakeProvider;
  const ask = (prefix: string, text: string, headers: Record<string, string> = {}) =>
    new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}${prefix}/v1`, maxRetries: 0 }).chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: text }], max_tokens: 20 }, { headers })
      .withResponse();
  /** Waits out the 1 s eviction of a provider made to fail, so the next test starts from healthy providers. */
  const settle = () => new Promise((r) => setTimeout(r, 2200));

  before(async () => {
    for (const k of ["t1", "t2", "o1", "o2", "o3", "r", "r2"] as const) fakes[k] = await startFakeProvider({ name: k });
    env = await startLlmEnv(
      resources({
        t1: fake("t1").port,
        t2: fake("t2").port,
        o1: fake("o1").port,
        o2: fake("o2").port,
        o3: fake("o3").port,
        r: fake("r").port,
        r2: fake("r2").port,
      }),
      "/team-a/v1/chat/completions",
    );
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f?.close();
  });

  test("two routes with different route-level transformations each get their own; a third gets none", async () => {
    const a = await ask("/team-a", "one");
    assert.equal(a.data.choices[0]?.message.content, "Hello from t1: one");
    assert.equal(fake("t1").requests.at(-1)?.headers["x-team"], "a");
    assert.equal(a.response.headers.get("x-team-seen"), "a");

    const b = await ask("/team-b", "two");
    assert.equal(b.data.choices[0]?.message.content, "Hello from t1: two");
    assert.equal(fake("t1").requests.at(-1)?.headers["x-team"], "b /v1/chat/completions");
    assert.equal(b.response.headers.get("x-team-seen"), "b");

    const none = await ask("/team-none", "three");
    assert.equal(none.data.choices[0]?.message.content, "Hello from t1: three");
    assert.equal(fake("t1").requests.at(-1)?.headers["x-team"], undefined);
    assert.equal(none.response.headers.get("x-team-seen"), null);

    // A route sharing team-a's policy shares its transformation.
    const a2 = await ask("/team-a2", "four");
    assert.equal(a2.data.choices[0]?.message.content, "Hello from t1: four");
    assert.equal(fake("t1").requests.at(-1)?.headers["x-team"], "a");
  });

  test("one variant of the AI cluster per distinct transformation, shared by the routes that agree", async () => {
    const text = (await request(env.envoy.adminPort, "/clusters")).body;
    const names = new Set(
      [...text.matchAll(/^(backend\/default\/teams[^:]*)::/gm)].map((m) => m[1] as string).filter(Boolean),
    );
    // The cluster itself (team-none) and one variant each for team-a (with team-a2) and team-b.
    assert.equal(names.size, 3, [...names].join(", "));
    assert.ok(names.has("backend/default/teams"));
    assert.equal([...names].filter((n) => /^backend\/default\/teams~[0-9a-f]{10}$/.test(n)).length, 2);
  });

  test("a failover inside a variant is transformed for the next provider; the eviction holds for every variant", async () => {
    fake("t1").failWith = 503;
    try {
      const before = fake("t2").requests.length;
      const b = await ask("/team-b", "five");
      assert.equal(b.data.choices[0]?.message.content, "Hello from t2: five");
      assert.equal(fake("t2").requests.length, before + 1);
      assert.equal(fake("t2").requests.at(-1)?.path, "/v1/messages");
      assert.equal(fake("t2").requests.at(-1)?.headers["x-team"], "b /v1/messages");
      assert.equal(fake("t1").requests.at(-1)?.headers["x-team"], "b /v1/chat/completions");
      assert.equal(b.response.headers.get("x-team-seen"), "b");
      // The 503 evicted t1 (Sluice's scoring): every variant reads the cluster's endpoints, its mark included.
      await waitFor(
        "t1 marked in every cluster of GwBackend teams",
        async () => {
          const text = (await request(env.envoy.adminPort, "/clusters")).body;
          const marks = [...text.matchAll(/^(backend\/default\/teams[^:]*)::[^:]+:(\d+)::health_flags::(.*)$/gm)]
            .filter((m) => m[2] === String(fake("t1").port))
            .map((m) => `${m[1]} ${m[3]}`);
          return marks.length === 3 && marks.every((m) => m.endsWith("/failed_eds_health")) ? true : undefined;
        },
        5_000,
      );
      // So team-a, on another variant, goes to t2 without trying t1.
      const t1Before = fake("t1").requests.length;
      const a = await ask("/team-a", "five-a");
      assert.equal(a.data.choices[0]?.message.content, "Hello from t2: five-a");
      assert.equal(fake("t1").requests.length, t1Before);
      assert.equal(fake("t2").requests.at(-1)?.headers["x-team"], "a");
    } finally {
      fake("t1").failWith = undefined;
    }
    // Until t1's eviction (3 s) ends.
    await new Promise((r) => setTimeout(r, 3500));
  });

  test("a provider's own transformation replaces the GwBackend's for that provider, attempt by attempt", async () => {
    const first = await ask("/owned", "six");
    assert.equal(first.data.choices[0]?.message.content, "Hello from o1: six");
    const o1 = fake("o1").requests.at(-1);
    assert.equal(o1?.headers["x-who"], "o1-own");
    // Replaced as a whole (per top-level field), not merged with the GwBackend's.
    assert.equal(o1?.headers["x-common"], undefined);
    assert.equal(first.response.headers.get("x-answered"), "o1 200");

    fake("o1").failWith = 503;
    try {
      const second = await ask("/owned", "seven");
      assert.equal(second.data.choices[0]?.message.content, "Hello from o2: seven");
      // The failed attempt to o1 got o1's; the next attempt, to o2 (another format), o2's.
      assert.equal(fake("o1").requests.at(-1)?.headers["x-who"], "o1-own");
      const o2 = fake("o2").requests.at(-1);
      assert.equal(o2?.path, "/v1/messages");
      assert.equal(o2?.headers["x-who"], "o2-own /v1/messages");
      assert.equal(o2?.headers["x-common"], undefined);
      assert.equal(second.response.headers.get("x-answered"), "o2");

      // A provider without its own gets the GwBackend's, and the request as the client sent it: Envoy's upstream
      // filters change the router's own headers, so each attempt first undoes the previous attempt's changes.
      fake("o2").failWith = 503;
      const third = await ask("/owned", "eight", { "x-who": "the client" });
      assert.equal(third.data.choices[0]?.message.content, "Hello from o3: eight");
      assert.equal(fake("o1").requests.at(-1)?.headers["x-who"], "o1-own");
      assert.equal(fake("o2").requests.at(-1)?.headers["x-who"], "o2-own /v1/messages");
      const o3 = fake("o3").requests.at(-1);
      assert.equal(o3?.headers["x-common"], "backend");
      assert.equal(o3?.headers["x-who"], "the client");
      assert.equal(third.response.headers.get("x-answered"), null);
    } finally {
      fake("o1").failWith = undefined;
      fake("o2").failWith = undefined;
    }
    await settle();
  });

  test("retry.condition reading the provider's response body retries that attempt, on the next provider", async () => {
    const [r, r2] = [fake("r"), fake("r2")];
    const [before, before2] = [r.requests.length, r2.requests.length];
    const plain = await ask("/retry", "plain");
    assert.equal(plain.data.choices[0]?.message.content, "Hello from r: plain");
    assert.equal(r.requests.length, before + 1);
    assert.equal(r2.requests.length, before2);

    const marked = await ask("/retry", "retry-me");
    // The condition is true for r's answer: the attempt is retried (attempts: 1) where the failover goes, the next
    // group; r2's answer is marked too, but no attempt is left, so it goes out.
    assert.equal(marked.data.choices[0]?.message.content, "Hello from r2: retry-me");
    assert.equal(r.requests.length, before + 2);
    assert.equal(r2.requests.length, before2 + 1);
    // The mark is the router's alone.
    assert.equal(marked.response.headers.get("x-sluice-retry-condition"), null);
  });

  test("status: none of these is reported as not applied", async () => {
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (kind: string, name: string) =>
      JSON.stringify(resources.find((r) => r.kind === kind && r.name === name)?.status ?? {});
    for (const name of ["team-a", "team-b", "retry-condition"]) {
      assert.match(status("GwPolicy", name), /Attached/);
      assert.doesNotMatch(status("GwPolicy", name), /Warning|not applied/, name);
    }
    assert.doesNotMatch(status("GwBackend", "owned"), /Warning|not applied/);
    assert.doesNotMatch(status("GwBackend", "teams"), /Warning|not applied/);
  });
});
