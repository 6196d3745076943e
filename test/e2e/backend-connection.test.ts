// Backend policy connection settings on Service backends through a real Envoy (xds/backend-connection.ts):
// `http.version: HTTP2` makes Envoy speak HTTP/2 to a server that speaks nothing else (h2c), and `health.eviction`
// ejects the endpoint that keeps failing, so the requests after it all reach the healthy one; `http.requestTimeout`
// is the route's deadline. The route uses a cluster
// made for the policy, reading the same endpoints (EDS) as the Service's own.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { createServer as createH2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";

function resources(h2: number, good: number, bad: number, slow: number): string {
  return `${localService("h2only", h2)}${localService("pair", [good, bad])}${localService("slow", slow)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /h2 } }]
      backendRefs: [{ name: h2only, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /pair } }]
      backendRefs: [{ name: pair, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /slow } }]
      backendRefs: [{ name: slow, port: 80 }]
${servicePolicy("h2only", "    http: { version: HTTP2 }\n    tcp: { connectTimeout: 2s, keepalive: { time: 30s } }", "h2")}${servicePolicy(
  "pair",
  "    health: { eviction: { consecutiveFailures: 2, duration: 60s } }",
  "eviction",
)}${servicePolicy("slow", "    http: { requestTimeout: 300ms }", "deadline")}`;
}

async function listen(server: Server | ReturnType<typeof createH2Server>): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as AddressInfo).port;
}

describe("backend policy connection settings on Service backends", { timeout: 60_000 }, () => {
  const h2 = createH2Server((req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(`http ${req.httpVersion}`);
  });
  const good = createServer((_req, res) => res.end("good"));
  const bad = createServer((_req, res) => {
    res.writeHead(500);
    res.end("bad");
  });
  const slow = createServer((_req, res) => {
    setTimeout(() => res.end("late"), 2000);
  });
  let gw: TestGateway;

  before(async () => {
    const [h2Port, goodPort, badPort, slowPort] = [
      await listen(h2),
      await listen(good),
      await listen(bad),
      await listen(slow),
    ];
    gw = await startTestGateway(
      () => resources(h2Port, goodPort, badPort, slowPort),
      "/h2",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    h2.close();
    good.close();
    bad.close();
    slow.closeAllConnections();
    slow.close();
  });

  test("http.version HTTP2: Envoy speaks HTTP/2 to an h2c-only server; the cluster carries the TCP settings", async () => {
    const r = await request(gw.port, "/h2");
    assert.equal(r.status, 200);
    assert.equal(r.body, "http 2.0");
    const dump = JSON.stringify(await gw.envoy.configDump());
    assert.match(dump, /"name":"service\/default\/h2only\/port\/80~[0-9a-f]{10}"/);
    assert.match(dump, /"connect_timeout":"2s"/);
    assert.match(dump, /"keepalive_time":30/);
  });

  test("health.eviction: the failing endpoint is ejected; the requests after it reach the healthy one", async () => {
    const first: number[] = [];
    for (let i = 0; i < 8; i++) first.push((await request(gw.port, "/pair")).status);
    assert.ok(first.includes(500), `the bad endpoint answered at first: ${first}`);
    const later: string[] = [];
    for (let i = 0; i < 10; i++) later.push((await request(gw.port, "/pair")).body);
    assert.deepEqual(later, Array(10).fill("good"));
  });

  test("http.requestTimeout: the route's deadline; a slower backend is answered 504", async () => {
    const t0 = performance.now();
    const r = await request(gw.port, "/slow");
    assert.equal(r.status, 504);
    assert.ok(performance.now() - t0 < 1500, `answered after ${performance.now() - t0} ms`);
  });
});
