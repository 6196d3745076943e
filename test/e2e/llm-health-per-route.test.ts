// Route-level health scoring of one AI GwBackend (xds/llm-health.ts: a variant of the AI cluster per distinct scoring,
// with an EDS resource and a scoring of its own), through a real Envoy with the `openai` client. GwBackend `shared` has
// two priority groups (primary, backup) and no health of its own; HTTPRoute `a`'s GwPolicy calls a 429 unhealthy
// (evicting for 8 s), HTTPRoute `b`'s a 503 (60 s):
// - each route reaches a variant of its own, whose EDS resource and health filter name that variant;
// - the primary answering 429 is evicted for route `a` only: a's traffic fails over to the backup while b keeps
//   sending to the primary, and the eviction ends after its duration;
// - and the other way round: a 503 evicts the primary for `b` only;
// - the status reports nothing not applied.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { gwBackendRoute, routeBackendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request, sleep, waitFor } from "../helpers/net.js";
import { resourceStatus } from "../helpers/processes.js";

const A_DURATION_MS = 8000;

function resources(primary: number, backup: number): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: shared, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: localhost, port: ${primary} }]
      - providers: [{ name: backup, providerA: {}, host: 127.0.0.1, port: ${backup} }]
${gwBackendRoute("a", "shared")}${gwBackendRoute("b", "shared")}${routeBackendPolicy(
  "a-health",
  "a",
  `    health:
      unhealthyCondition: "response.code == 429"
      eviction: { duration: ${A_DURATION_MS / 1000}s }
`,
)}${routeBackendPolicy(
  "b-health",
  "b",
  `    health:
      unhealthyCondition: "response.code == 503"
      eviction: { duration: 60s }
`,
)}`;
}

describe("health scoring per route of one AI GwBackend", { timeout: 120_000 }, () => {
  let primary: FakeProvider;
  let backup: FakeProvider;
  let env: LlmEnv;
  /** The AI cluster each route reaches (a variant of backend/default/shared). */
  const clusterOf = new Map<string, string>();
  const ask = (route: string, text: string) =>
    new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/${route}/v1`, maxRetries: 0 }).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: text }],
      max_tokens: 20,
    });
  /** Whether EDS marks the primary unhealthy in the cluster route `route` reaches. */
  const primaryEvicted = async (route: string) => {
    const text = (await request(env.envoy.adminPort, "/clusters")).body;
    const prefix = `${clusterOf.get(route)}::127.0.0.1:${primary.port}::health_flags::`;
    const line = text.split("\n").find((l) => l.startsWith(prefix));
    return line === undefined ? undefined : /failed_eds_health/.test(line);
  };
  /** Asks `route` and returns who answered and how many requests the primary got meanwhile. */
  const served = async (route: string, text: string) => {
    const before = primary.requests.length;
    const r = await ask(route, text);
    return { content: r.choices[0]?.message.content, primaryRequests: primary.requests.length - before };
  };

  before(async () => {
    primary = await startFakeProvider({ name: "primary" });
    backup = await startFakeProvider({ name: "backup" });
    env = await startLlmEnv(resources(primary.port, backup.port), "/a/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await primary?.close();
    await backup?.close();
  });

  test("each route reaches a variant of its own, with its own EDS resource and scoring key", async () => {
    const routes = JSON.parse((await request(env.envoy.adminPort, "/config_dump?resource=dynamic_route_configs")).body);
    const text = JSON.stringify(routes);
    for (const route of ["a", "b"]) {
      const m = new RegExp(
        `"path_separated_prefix":"/${route}"[^]*?"cluster":"(backend/default/shared~[0-9a-f]{10})"`,
      ).exec(text);
      assert.ok(m?.[1] !== undefined, `route ${route} to a variant: ${text.slice(0, 400)}`);
      clusterOf.set(route, m[1]);
    }
    assert.notEqual(clusterOf.get("a"), clusterOf.get("b"));
    const dump = JSON.parse((await request(env.envoy.adminPort, "/config_dump?resource=dynamic_active_clusters")).body);
    const clusters = (dump.configs as { cluster: Record<string, unknown> }[]).map((c) => c.cluster);
    for (const route of ["a", "b"]) {
      const c = clusters.find((x) => x.name === clusterOf.get(route));
      assert.equal(c?.type, "EDS");
      assert.equal((c?.eds_cluster_config as { service_name?: string })?.service_name, clusterOf.get(route));
      // The health filter reports to the variant's scoring.
      assert.match(JSON.stringify(c), new RegExp(`"x-sluice-health-cluster","value":"${clusterOf.get(route)}"`));
    }
    for (const route of ["a", "b"]) {
      assert.deepEqual(await served(route, `hi ${route}`), {
        content: `Hello from primary: hi ${route}`,
        primaryRequests: 1,
      });
      assert.equal(await primaryEvicted(route), false);
    }
  });

  test("a 429 evicts the primary for route a alone: a fails over to the backup, b keeps sending to the primary", async () => {
    primary.failWith = 429;
    // a's condition: unhealthy; the failover retry takes the 429 to the backup.
    assert.deepEqual(await served("a", "limited"), { content: "Hello from backup: limited", primaryRequests: 1 });
    await waitFor("the primary evicted in route a's variant", async () =>
      (await primaryEvicted("a")) === true ? true : undefined,
    );
    const evictedAt = Date.now();
    // b's condition calls a 429 healthy: b still tries the primary first (then the backup, by the retry).
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await served("b", `b ${i}`), { content: `Hello from backup: b ${i}`, primaryRequests: 1 });
    }
    assert.equal(await primaryEvicted("b"), false, "not evicted for route b");
    primary.failWith = undefined;
    assert.deepEqual(await served("b", "healed"), { content: "Hello from primary: healed", primaryRequests: 1 });
    // a's eviction holds: its traffic goes to the backup, none to the primary.
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(await served("a", `a ${i}`), { content: `Hello from backup: a ${i}`, primaryRequests: 0 });
    }
    assert.ok(Date.now() - evictedAt < A_DURATION_MS, "checked while the eviction lasts");
  });

  test("route a's eviction ends after its duration: the primary serves a again", async () => {
    await waitFor(
      "the primary back in route a's variant",
      async () => ((await primaryEvicted("a")) === false ? true : undefined),
      A_DURATION_MS + 10_000,
    );
    assert.deepEqual(await served("a", "back"), { content: "Hello from primary: back", primaryRequests: 1 });
  });

  test("and the other way round: a 503 evicts the primary for route b alone", async () => {
    primary.failWith = 503;
    assert.deepEqual(await served("b", "down"), { content: "Hello from backup: down", primaryRequests: 1 });
    await waitFor("the primary evicted in route b's variant", async () =>
      (await primaryEvicted("b")) === true ? true : undefined,
    );
    // a's condition calls a 503 healthy: a keeps trying the primary.
    assert.deepEqual(await served("a", "still"), { content: "Hello from backup: still", primaryRequests: 1 });
    await sleep(200);
    assert.equal(await primaryEvicted("a"), false, "not evicted for route a");
    primary.failWith = undefined;
    assert.deepEqual(await served("a", "fine"), { content: "Hello from primary: fine", primaryRequests: 1 });
    assert.deepEqual(await served("b", "skipped"), { content: "Hello from backup: skipped", primaryRequests: 0 });
  });

  test("status: neither GwPolicy is reported as not applied", async () => {
    for (const name of ["a-health", "b-health"]) {
      const status = await resourceStatus(env.sluice, "GwPolicy", name);
      assert.match(status, /Attached/);
      assert.doesNotMatch(status, /Warning|not applied/, name);
    }
  });
});
