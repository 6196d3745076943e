// GwBackend dynamicForwardProxy through a real Envoy: a request goes to the host and port its Host header names (an
// IP literal and `localhost`, resolved by Envoy's DNS cache), with no endpoint configured anywhere; a Host naming a
// port where nothing listens is 503; other routes are not affected.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, freePort, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

describe("GwBackend dynamicForwardProxy", { timeout: 60_000 }, () => {
  let a: Upstream;
  let b: Upstream;
  let gw: TestGateway;

  before(async () => {
    a = await startEchoUpstream("a");
    b = await startEchoUpstream("b");
    gw = await startTestGateway(
      () => `${localService("app", a.port)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: anywhere, namespace: default }
spec: { dynamicForwardProxy: {} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /out } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: anywhere }]
    - matches: [{ path: { type: PathPrefix, value: /app } }]
      backendRefs: [{ name: app, port: 80 }]
`,
      "/app",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await a?.close();
    await b?.close();
  });

  test("each request reaches the host and port of its Host header", async () => {
    for (const [up, host] of [
      [a, `127.0.0.1:${a.port}`],
      [b, `127.0.0.1:${b.port}`],
      [b, `localhost:${b.port}`],
    ] as const) {
      const r = await request(gw.port, "/out/x", { headers: { host } });
      assert.equal(r.status, 200, `${host}: ${r.body}`);
      const seen = JSON.parse(r.body) as EchoBody;
      assert.equal(seen.upstream, up === a ? "a" : "b", host);
      assert.equal(seen.path, "/out/x");
    }
  });

  test("a Host where nothing listens is 503; a route to a Service is not affected", async () => {
    const closed = await freePort();
    assert.equal((await request(gw.port, "/out", { headers: { host: `127.0.0.1:${closed}` } })).status, 503);
    const app = await request(gw.port, "/app", { headers: { host: `127.0.0.1:${b.port}` } });
    assert.equal(app.status, 200);
    assert.equal((JSON.parse(app.body) as EchoBody).upstream, "a");
  });
});
