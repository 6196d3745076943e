// health.eviction and Envoy's panic threshold through a real Envoy (xds/cluster.ts EVICTION_PANIC_PERCENT): with
// Envoy's default (panic below 50 % healthy), two evicted endpoints of three would get traffic again while one is
// healthy; the spec returns evicted endpoints only when every endpoint is evicted. Three endpoints, two failing: once
// they are evicted every request reaches the healthy one; when all three fail, evicted endpoints are used rather than
// no endpoint at all (the spec's "in rotation (fallback)").

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";

interface Endpoint {
  readonly server: Server;
  hits: number;
  failing: boolean;
}

function endpoint(name: string, failing: boolean): Endpoint {
  const e: Endpoint = {
    hits: 0,
    failing,
    server: createServer((_req, res) => {
      e.hits++;
      res.statusCode = e.failing ? 503 : 200;
      res.end(name);
    }),
  };
  return e;
}

async function listen(s: Server): Promise<number> {
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  return (s.address() as AddressInfo).port;
}

function resources(ports: readonly number[]): string {
  return `${localService("trio", ports)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: trio, port: 80 }] }]
${servicePolicy("trio", "    health: { eviction: { consecutiveFailures: 1, duration: 30s } }", "evict")}`;
}

describe("health.eviction: evicted endpoints return only when every endpoint is evicted", { timeout: 60_000 }, () => {
  const good = endpoint("good", false);
  const bad = [endpoint("bad-1", true), endpoint("bad-2", true)];
  let gw: TestGateway;

  before(async () => {
    const ports = [await listen(good.server), ...(await Promise.all(bad.map((b) => listen(b.server))))];
    gw = await startTestGateway(
      () => resources(ports),
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const e of [good, ...bad]) e.server.close();
  });

  test("two of three evicted: every later request reaches the healthy one (Envoy's default would panic at 33 %)", async () => {
    // Until both failing endpoints have failed once (and are evicted).
    for (let i = 0; i < 40 && bad.some((b) => b.hits === 0); i++) await request(gw.port, "/");
    assert.ok(
      bad.every((b) => b.hits > 0),
      `both failing endpoints were tried: ${bad.map((b) => b.hits)}`,
    );
    // Outlier detection acts on its next interval (1 s here).
    await new Promise((r) => setTimeout(r, 1500));
    const hitsBefore = bad.map((b) => b.hits);
    const bodies: string[] = [];
    for (let i = 0; i < 30; i++) bodies.push((await request(gw.port, "/")).body);
    assert.deepEqual(bodies, Array(30).fill("good"));
    assert.deepEqual(
      bad.map((b) => b.hits),
      hitsBefore,
      "no traffic to the evicted endpoints",
    );
  });

  test("all three evicted: requests still go out, to the evicted endpoints (the fallback), not 'no healthy upstream'", async () => {
    good.failing = true;
    for (let i = 0; i < 10 && good.hits > 0; i++) {
      const r = await request(gw.port, "/");
      if (r.status === 503 && r.body === "good") break;
    }
    await new Promise((r) => setTimeout(r, 1500));
    const hitsBefore = [good, ...bad].map((e) => e.hits);
    const answers: string[] = [];
    for (let i = 0; i < 30; i++) answers.push((await request(gw.port, "/")).body);
    // Every answer is an endpoint's own (none is Envoy's "no healthy upstream"), and more than the last one evicted
    // is reached.
    assert.ok(
      answers.every((b) => ["good", "bad-1", "bad-2"].includes(b)),
      answers.join(","),
    );
    const reached = [good, ...bad].filter((e, i) => e.hits > (hitsBefore[i] ?? 0)).length;
    assert.ok(reached >= 2, `endpoints reached in fallback: ${reached}`);
  });
});
