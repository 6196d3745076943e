// Health scoring of AI providers through a real Envoy with the `openai` client (xds/llm-health.ts, src/health/): the
// AI cluster becomes EDS, Sluice resolves the providers' host names (`localhost` here) and marks a provider it evicts
// UNHEALTHY there, so its group's traffic fails over to the next group until the eviction ends.
// - a 429 the GwBackend's `unhealthyCondition` calls unhealthy (Envoy's outlier detection never counts a 429) evicts
//   the primary; the backup, always healthy, is never evicted; the primary returns after `duration`;
// - a provider's own `health` (consecutiveFailures 2) replaces the GwBackend's for that provider;
// - every provider evicted: Envoy's panic mode (threshold 1 %) still sends to them, as for a Service;
// - a GwPolicy's `backend.health` targeting the GwBackend is served too.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request, sleep, waitFor } from "../helpers/net.js";

interface Ports {
  readonly primary: number;
  readonly backup: number;
  readonly ownPrimary: number;
  readonly ownBackup: number;
  readonly policyPrimary: number;
  readonly policyBackup: number;
}

function resources(p: Ports): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: scored, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: localhost, port: ${p.primary} }
      - providers:
          - { name: backup, providerD: { model: claude-backup }, host: 127.0.0.1, port: ${p.backup} }
  policies:
    health:
      unhealthyCondition: "response.code == 429"
      eviction: { duration: 2s, restoreHealth: 100 }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: own, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: primary
            providerA: {}
            host: 127.0.0.1
            port: ${p.ownPrimary}
            policies:
              health: { eviction: { consecutiveFailures: 2, duration: 60s } }
      - providers:
          - { name: backup, providerA: {}, host: 127.0.0.1, port: ${p.ownBackup} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: by-policy, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: 127.0.0.1, port: ${p.policyPrimary} }
      - providers:
          - { name: backup, providerA: {}, host: 127.0.0.1, port: ${p.policyBackup} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: by-policy-health, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: by-policy }]
  backend:
    health:
      unhealthyCondition: "response.code == 429 || response.code >= 500"
      eviction: { duration: 60s }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /own } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: own }]
    - matches: [{ path: { type: PathPrefix, value: /policy } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: by-policy }]
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: scored }]
`;
}

describe("AI provider health scored by Sluice, failing over by EDS", { timeout: 120_000 }, () => {
  const fakes: Record<keyof Ports, FakeProvider | undefined> = {
    primary: undefined,
    backup: undefined,
    ownPrimary: undefined,
    ownBackup: undefined,
    policyPrimary: undefined,
    policyBackup: undefined,
  };
  const fake = (k: keyof Ports) => fakes[k] as FakeProvider;
  let env: LlmEnv;
  const client = (prefix: string) => new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}${prefix}/v1`, maxRetries: 0 });
  const ask = (prefix: string, text: string) =>
    client(prefix).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: text }],
      max_tokens: 20,
    });
  /** Endpoints of the AI cluster of GwBackend `name` that Envoy holds, with whether EDS marked each unhealthy. */
  const hosts = async (name: string) => {
    const text = (await request(env.envoy.adminPort, "/clusters")).body;
    const out = new Map<string, boolean>();
    for (const line of text.split("\n")) {
      const m = new RegExp(`^backend/default/${name}::([^:]+:\\d+)::health_flags::(.*)$`).exec(line);
      if (m?.[1] !== undefined) out.set(m[1], /failed_eds_health/.test(m[2] ?? ""));
    }
    return out;
  };
  const evicted = async (name: string, port: number) => (await hosts(name)).get(`127.0.0.1:${port}`);

  before(async () => {
    for (const k of Object.keys(fakes) as (keyof Ports)[]) fakes[k] = await startFakeProvider({ name: k });
    const ports = Object.fromEntries(Object.entries(fakes).map(([k, f]) => [k, f?.port])) as unknown as Ports;
    env = await startLlmEnv(resources(ports));
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f?.close();
  });

  test("the cluster is EDS with `localhost` resolved by Sluice to an address; healthy providers serve", async () => {
    const dump = JSON.parse((await request(env.envoy.adminPort, "/config_dump?resource=dynamic_active_clusters")).body);
    const cluster = (dump.configs as { cluster: { name: string; type: string } }[])
      .map((c) => c.cluster)
      .find((c) => c.name === "backend/default/scored");
    assert.equal(cluster?.type, "EDS");
    for (let i = 0; i < 4; i++) {
      const r = await ask("", `hi ${i}`);
      assert.equal(r.choices[0]?.message.content, `Hello from primary: hi ${i}`);
    }
    const h = await hosts("scored");
    assert.deepEqual(
      [...h].sort(),
      [
        [`127.0.0.1:${fake("backup").port}`, false],
        [`127.0.0.1:${fake("primary").port}`, false],
      ].sort(),
    );
  });

  test("a 429 the unhealthyCondition marks evicts the primary: traffic fails over; the backup is never evicted", async () => {
    fake("primary").failWith = 429;
    const r = await ask("", "limited");
    // The failover retry moved the 429 to the next group, translated for it.
    assert.equal(r.choices[0]?.message.content, "Hello from backup: limited");
    await waitFor("the primary marked unhealthy in EDS", async () =>
      (await evicted("scored", fake("primary").port)) === true ? true : undefined,
    );
    const seen = fake("primary").requests.length;
    for (let i = 0; i < 5; i++) {
      const a = await ask("", `after ${i}`);
      assert.equal(a.choices[0]?.message.content, `Hello from backup: after ${i}`);
    }
    assert.equal(fake("primary").requests.length, seen, "an evicted provider gets no traffic");
    assert.equal(await evicted("scored", fake("backup").port), false, "the healthy backup is never evicted");
  });

  test("the primary returns after its eviction (restoreHealth) and serves again", async () => {
    fake("primary").failWith = undefined;
    await waitFor("the primary back in EDS", async () =>
      (await evicted("scored", fake("primary").port)) === false ? true : undefined,
    );
    const r = await ask("", "back");
    assert.equal(r.choices[0]?.message.content, "Hello from primary: back");
  });

  test("a provider's own health: two 503s in a row evict it, one does not", async () => {
    const primary = fake("ownPrimary");
    primary.failWith = 503;
    const one = await ask("/own", "first");
    assert.equal(one.choices[0]?.message.content, "Hello from ownBackup: first");
    assert.equal(primary.requests.length, 1);
    await sleep(300);
    assert.equal(await evicted("own", primary.port), false, "one failure of two does not evict");
    const two = await ask("/own", "second");
    assert.equal(two.choices[0]?.message.content, "Hello from ownBackup: second");
    assert.equal(primary.requests.length, 2, "still in rotation for its second request");
    await waitFor("the provider evicted on its second failure", async () =>
      (await evicted("own", primary.port)) === true ? true : undefined,
    );
    const three = await ask("/own", "third");
    assert.equal(three.choices[0]?.message.content, "Hello from ownBackup: third");
    assert.equal(primary.requests.length, 2, "evicted: not tried");
  });

  test("every provider evicted: Envoy's panic mode still sends to them (the spec's fallback), no 503", async () => {
    // The primary of `own` is evicted for 60 s (above); its backup has the cluster's default scoring (a 5xx, 3 s).
    const primary = fake("ownPrimary");
    const backup = fake("ownBackup");
    backup.failWith = 500;
    await assert.rejects(ask("/own", "both down"), (e: unknown) => e instanceof OpenAI.InternalServerError);
    await waitFor("the backup evicted too", async () =>
      (await evicted("own", backup.port)) === true ? true : undefined,
    );
    assert.equal(await evicted("own", primary.port), true);
    primary.failWith = undefined;
    backup.failWith = undefined;
    const r = await ask("/own", "fallback");
    assert.match(r.choices[0]?.message.content ?? "", /^Hello from own(Primary|Backup): fallback$/);
  });

  test("a GwPolicy's backend.health reaching the AI backend is served", async () => {
    const primary = fake("policyPrimary");
    primary.failWith = 429;
    const r = await ask("/policy", "one");
    assert.equal(r.choices[0]?.message.content, "Hello from policyBackup: one");
    await waitFor("the provider evicted by the GwPolicy's condition", async () =>
      (await evicted("by-policy", primary.port)) === true ? true : undefined,
    );
    const seen = primary.requests.length;
    await ask("/policy", "two");
    assert.equal(primary.requests.length, seen);
  });
});
