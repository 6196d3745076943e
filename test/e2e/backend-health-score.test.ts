// Backend policy health scoring through a real Envoy (xds/backend-health.ts, src/health/): Envoy's upstream ext_proc
// reports each response and its endpoint to Sluice, which keeps the EWMA score and evicts by marking the endpoint
// UNHEALTHY in the cluster's EDS. A 429 that `unhealthyCondition` calls unhealthy (Envoy's outlier detection would never
// count it) evicts its endpoint, which returns after the duration with restoreHealth; healthThreshold lets single
// failures pass and evicts a mixed-failure endpoint once its score falls below; every endpoint evicted → traffic goes
// to them all (the spec's fallback); a policy whose condition does not compile is refused naming the field, the rest
// served.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, prefixRoute, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, waitFor } from "../helpers/net.js";

interface Endpoint {
  readonly name: string;
  readonly server: Server;
  hits: number;
  /** Status of the n-th request (0-based). */
  status: (n: number) => number;
}

function endpoint(name: string, status: (n: number) => number): Endpoint {
  const e: Endpoint = {
    name,
    hits: 0,
    status,
    server: createServer((_req, res) => {
      res.statusCode = e.status(e.hits++);
      res.end(name);
    }),
  };
  return e;
}

async function listen(s: Server): Promise<number> {
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  return (s.address() as AddressInfo).port;
}

function service(name: string, ports: readonly number[], health: string): string {
  return `${localService(name, ports)}${servicePolicy(name, `    health: ${health}`, `${name}-health`)}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Endpoints of Service `name`'s scored cluster that Envoy holds as marked unhealthy by EDS (its admin /clusters). */
async function edsUnhealthy(gw: TestGateway, name: string): Promise<number> {
  const text = (await request(gw.envoy.adminPort, "/clusters")).body;
  return text
    .split("\n")
    .filter((l) => l.startsWith(`service/default/${name}/port/80~`) && /::health_flags::.*failed_eds_health/.test(l))
    .length;
}

describe("health scoring by Sluice: unhealthyCondition, healthThreshold, restoreHealth", { timeout: 120_000 }, () => {
  const good = endpoint("good", () => 200);
  const limited = endpoint("limited", () => 429);
  const steady = endpoint("steady", () => 200);
  // Fails, succeeds, then fails from then on: 100 → 70 → 79 → 55.3 → 38.7, below 50 on its fourth response.
  const mixed = endpoint("mixed", (n) => (n === 1 ? 200 : 503));
  const both = [endpoint("both-1", () => 429), endpoint("both-2", () => 429)];
  const plain = endpoint("plain", () => 200);
  let gw: TestGateway;

  before(async () => {
    const [g, l, s, m, b1, b2, p] = await Promise.all(
      [good, limited, steady, mixed, ...both, plain].map((e) => listen(e.server)),
    );
    const route = prefixRoute(["duo", "mixed", "both", "plain"]);
    const config = [
      route,
      service(
        "duo",
        [g, l] as number[],
        "{ unhealthyCondition: 'response.code == 429', eviction: { duration: 3s, restoreHealth: 100 } }",
      ),
      service("mixed", [s, m] as number[], "{ eviction: { healthThreshold: 50, duration: 60s } }"),
      // Reads the body: Envoy streams it to Sluice in observability mode.
      service(
        "both",
        [b1, b2] as number[],
        `{ unhealthyCondition: 'response.code == 429 && response.body.startsWith("both-")', eviction: { duration: 60s } }`,
      ),
      service("plain", [p] as number[], "{ unhealthyCondition: 'response.code ==' }"),
    ].join("");
    gw = await startTestGateway(
      () => config,
      "/plain",
      (st) => st === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const e of [good, limited, steady, mixed, ...both, plain]) e.server.close();
  });

  test("a 429 the condition calls unhealthy evicts its endpoint; it returns after the duration", async () => {
    // The 429 reaches the client as it is: the condition judges, it does not rewrite.
    let saw429 = false;
    for (let i = 0; i < 20 && limited.hits === 0; i++) saw429 = (await request(gw.port, "/duo")).status === 429;
    assert.ok(saw429 && limited.hits === 1, `the limited endpoint answered once: ${limited.hits}`);
    // Evicted by Sluice's EDS (not by outlier detection, which never counts a 429).
    await waitFor(
      "the endpoint marked by EDS",
      async () => ((await edsUnhealthy(gw, "duo")) === 1 ? true : undefined),
      5000,
    );
    const hitsBefore = limited.hits;
    const bodies: string[] = [];
    for (let i = 0; i < 20; i++) bodies.push((await request(gw.port, "/duo")).body);
    assert.deepEqual(bodies, Array(20).fill("good"));
    assert.equal(limited.hits, hitsBefore, "no traffic to the evicted endpoint");
    // It recovers meanwhile: its answers are 200 from now on (another 429 would evict it again, for 2 × duration,
    // racing the check below).
    limited.status = () => 200;
    // Back in rotation after 3 s (first eviction: 1 × duration).
    await waitFor(
      "the evicted endpoint to return",
      async () => ((await request(gw.port, "/duo")).body === "limited" ? true : undefined),
      10_000,
    );
    assert.ok(limited.hits > hitsBefore);
    assert.equal(await edsUnhealthy(gw, "duo"), 0);
  });

  test("healthThreshold: single failures pass, a mixed-failure endpoint is evicted once its score is below", async () => {
    for (let i = 0; i < 60 && mixed.hits < 4; i++) {
      await request(gw.port, "/mixed");
      // Give each report time to arrive, so the count of requests to it is the score's.
      await sleep(30);
    }
    assert.ok(mixed.hits >= 4, `the failing endpoint stayed in rotation after single failures: ${mixed.hits}`);
    await waitFor(
      "the endpoint marked by EDS",
      async () => ((await edsUnhealthy(gw, "mixed")) === 1 ? true : undefined),
      5000,
    );
    const hitsBefore = mixed.hits;
    const bodies: string[] = [];
    for (let i = 0; i < 20; i++) bodies.push((await request(gw.port, "/mixed")).body);
    assert.deepEqual(bodies, Array(20).fill("steady"));
    assert.equal(mixed.hits, hitsBefore);
    assert.equal(hitsBefore, 4, "evicted on its fourth response (EWMA 38.7 < 50), not before");
  });

  test("every endpoint evicted: requests go to the evicted endpoints (fallback), not 'no healthy upstream'", async () => {
    for (let i = 0; i < 20 && both.some((b) => b.hits === 0); i++) await request(gw.port, "/both");
    assert.ok(both.every((b) => b.hits > 0));
    await waitFor(
      "both endpoints marked by EDS",
      async () => ((await edsUnhealthy(gw, "both")) === 2 ? true : undefined),
      5000,
    );
    const before = both.map((b) => b.hits);
    const answers: string[] = [];
    for (let i = 0; i < 20; i++) answers.push((await request(gw.port, "/both")).body);
    assert.ok(
      answers.every((a) => a === "both-1" || a === "both-2"),
      answers.join(","),
    );
    assert.ok(
      both.every((b, i) => b.hits > (before[i] ?? 0)),
      "both evicted endpoints still get traffic",
    );
  });

  test("a condition that does not compile: the policy is refused naming the field; the other policies are served", async () => {
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (name: string) =>
      JSON.stringify(resources.find((r) => r.kind === "GwPolicy" && r.name === name)?.status ?? {});
    assert.match(status("plain-health"), /backend\.health\.unhealthyCondition/);
    for (const name of ["duo-health", "mixed-health", "both-health"]) {
      assert.doesNotMatch(status(name), /not applied|unhealthyCondition|healthThreshold|restoreHealth/, name);
    }
    const r = await request(gw.port, "/plain");
    assert.equal(r.status, 200);
    assert.equal(r.body, "plain");
  });
});
