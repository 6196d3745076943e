// Traffic policies end to end through Envoy: local (429) and global rate limits (a real RLS server), CORS, CSRF,
// request timeout (504), request body limit (413), response body limit (502), delay, header modifiers and direct responses.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, startRateLimitService } from "../helpers/grpc-services.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const RULES = ["local", "global", "cors", "csrf", "slow", "buffer", "bufresp", "delay", "headers", "direct", "open"];

describe("traffic policies through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;
  let slow: Server;
  let rls: GrpcTestServer & { seen: string[] };

  before(async () => {
    up = await startEchoUpstream("app");
    slow = createServer((_req, res) => {
      setTimeout(() => res.end("late"), 2000).unref();
    });
    await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
    rls = await startRateLimitService(2);
    gw = await startTestGateway(
      () => `${localService("app", up.port)}${localService("slow", (slow.address() as AddressInfo).port)}${localService(
        "rls",
        rls.port,
        "kubernetes.io/h2c",
      )}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${RULES.map(
  (n) => `    - name: ${n}
      matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ name: ${n === "slow" ? "slow" : "app"}, port: 80 }]`,
).join("\n")}
${rulePolicy("local", "rateLimit: { local: [{ requests: 3, unit: Minutes }] }")}${rulePolicy(
  "global",
  `rateLimit:
  global:
    backendRef: { name: rls, port: 80 }
    domain: sluice-e2e
    descriptors: [{ entries: [{ name: user, expression: "request.headers['x-user']" }, { name: path, expression: request.path }] }]`,
)}${rulePolicy(
  "cors",
  `cors: { allowOrigins: ["https://app.test"], allowMethods: [GET, PUT], allowHeaders: [x-custom], exposeHeaders: [x-upstream], maxAge: 60 }`,
)}${rulePolicy("csrf", `csrf: { additionalOrigins: ["https://trusted.test"] }`)}${rulePolicy(
  "slow",
  "timeouts: { request: 300ms }",
)}${rulePolicy("buffer", "buffer: { request: { maxBytes: 1Ki } }")}${rulePolicy(
  "bufresp",
  "buffer: { request: { maxBytes: 4Ki }, response: { maxBytes: 2Ki } }",
)}${rulePolicy("delay", "delay: { duration: 400ms }")}${rulePolicy(
  "headers",
  `headerModifiers:
  request:
    set: [{ name: x-set, value: set-by-policy }]
    add: [{ name: x-add, value: added }]
    remove: [x-remove]
  response:
    set: [{ name: x-resp, value: yes }]
    remove: [x-upstream]`,
)}${rulePolicy(
  "direct",
  `directResponse: { status: 418, body: "short and stout", headers: [{ name: x-teapot, value: "'yes'" }] }`,
)}`,
      "/direct",
      (s) => s === 418,
    );
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
    await rls?.close();
    await new Promise<void>((r) => (slow ? slow.close(() => r()) : r()));
  });

  test("local rate limit: 429 after the configured count", async () => {
    const codes: number[] = [];
    for (let i = 0; i < 5; i++) codes.push((await request(gw.port, "/local")).status);
    assert.deepEqual(codes, [200, 200, 200, 429, 429]);
    assert.equal((await request(gw.port, "/open")).status, 200, "other routes are not limited");
  });

  test("global rate limit: the RLS sees the CEL descriptor and its answer is enforced", async () => {
    const as: number[] = [];
    // request.path is the path without the query (Envoy's url_path): a new query string is the same descriptor.
    for (let i = 0; i < 3; i++) {
      as.push((await request(gw.port, `/global?n=${i}`, { headers: { "x-user": "a" } })).status);
    }
    assert.deepEqual(as, [200, 200, 429], `${rls.seen.join(" ")} ${gw.envoy.output.slice(-5).join("\n")}`);
    assert.equal((await request(gw.port, "/global", { headers: { "x-user": "b" } })).status, 200);
    assert.ok(rls.seen.includes("sluice-e2e|user=a,path=/global"), rls.seen.join(" "));
  });

  test("CORS: preflight answered by Envoy, response headers on allowed origins only", async () => {
    const pre = await request(gw.port, "/cors", {
      method: "OPTIONS",
      headers: { origin: "https://app.test", "access-control-request-method": "PUT" },
    });
    assert.equal(pre.status, 200);
    assert.equal(pre.headers["access-control-allow-origin"], "https://app.test");
    assert.match(String(pre.headers["access-control-allow-methods"]), /PUT/);
    assert.equal(pre.headers["access-control-max-age"], "60");
    const get = await request(gw.port, "/cors", { headers: { origin: "https://app.test" } });
    assert.equal(get.headers["access-control-allow-origin"], "https://app.test");
    assert.equal(get.headers["access-control-expose-headers"], "x-upstream");
    const other = await request(gw.port, "/cors", { headers: { origin: "https://evil.test" } });
    assert.equal(other.headers["access-control-allow-origin"], undefined);
  });

  test("CSRF: cross-origin unsafe requests rejected, same and additional origins allowed", async () => {
    const post = (origin: string) => request(gw.port, "/csrf", { method: "POST", headers: { origin }, body: "x" });
    assert.equal((await post("https://evil.test")).status, 403);
    assert.equal((await post("https://trusted.test")).status, 200);
    assert.equal((await post(`http://127.0.0.1:${gw.port}`)).status, 200);
    assert.equal((await request(gw.port, "/csrf", { headers: { origin: "https://evil.test" } })).status, 200);
  });

  test("timeouts.request: 504 when the backend is slower", async () => {
    const t = Date.now();
    const r = await request(gw.port, "/slow");
    assert.equal(r.status, 504);
    assert.ok(Date.now() - t < 1500, `answered after ${Date.now() - t} ms`);
  });

  test("buffer.request.maxBytes: 413 above, forwarded below", async () => {
    assert.equal((await request(gw.port, "/buffer", { method: "POST", body: "x".repeat(2048) })).status, 413);
    const ok = await request(gw.port, "/buffer", { method: "POST", body: "x".repeat(100) });
    assert.equal(ok.status, 200);
    assert.equal((JSON.parse(ok.body) as EchoBody).body.length, 100);
  });

  test("buffer.response.maxBytes: 502 above, whole response below; the request limit still 413", async () => {
    // The echo upstream answers with the request body inside a JSON envelope (~300 bytes of headers and fields).
    const big = await request(gw.port, "/bufresp", { method: "POST", body: "y".repeat(3000) });
    assert.equal(big.status, 502, big.body);
    const ok = await request(gw.port, "/bufresp", { method: "POST", body: "y".repeat(1000) });
    assert.equal(ok.status, 200);
    assert.equal((JSON.parse(ok.body) as EchoBody).body.length, 1000);
    assert.equal((await request(gw.port, "/bufresp", { method: "POST", body: "y".repeat(5000) })).status, 413);
    // A response that is not buffered is never answered 502 (the mapping only applies to marked routes).
    assert.equal((await request(gw.port, "/open", { method: "POST", body: "y".repeat(3000) })).status, 200);
  });

  test("delay: the request is held for the duration", async () => {
    let t = performance.now();
    await request(gw.port, "/open");
    const base = performance.now() - t;
    t = performance.now();
    assert.equal((await request(gw.port, "/delay")).status, 200);
    const delayed = performance.now() - t;
    // Envoy arms its timers from the dispatcher's cached time, which can lag the clock by a few milliseconds (a run
    // measured 398 ms for the 400 ms delay).
    assert.ok(delayed >= 390, `delayed ${delayed.toFixed(1)} ms`);
    assert.ok(delayed < 400 + base + 600, `delayed ${delayed.toFixed(1)} ms`);
  });

  test("headerModifiers: set, add and remove on request and response", async () => {
    const r = await request(gw.port, "/headers", {
      headers: { "x-set": "client", "x-add": "client", "x-remove": "1" },
    });
    const h = (JSON.parse(r.body) as EchoBody).headers;
    assert.equal(h["x-set"], "set-by-policy");
    assert.equal(h["x-add"], "client, added");
    assert.equal(h["x-remove"], undefined);
    assert.equal(r.headers["x-resp"], "yes");
    assert.equal(r.headers["x-upstream"], undefined);
  });

  test("directResponse: status, body and headers without a backend", async () => {
    const before = up.requests.length;
    const r = await request(gw.port, "/direct");
    assert.equal(r.status, 418);
    assert.equal(r.body, "short and stout");
    assert.equal(r.headers["x-teapot"], "yes");
    assert.equal(up.requests.length, before);
  });
});
