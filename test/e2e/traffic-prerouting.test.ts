// phase: PreRouting acts before route selection: request headers set by a Gateway-level PreRouting policy are seen
// by HTTPRoute header matches (Envoy's early header mutation), while a PostRouting header change is not.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

describe("PreRouting headers steer routing through Envoy", () => {
  let gw: TestGateway;
  let gold: Upstream;
  let plain: Upstream;

  before(async () => {
    [gold, plain] = await Promise.all([startEchoUpstream("gold"), startEchoUpstream("plain")]);
    gw = await startTestGateway(
      () => `${localService("gold", gold.port)}${localService("plain", plain.port)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: gold
      matches: [{ path: { type: PathPrefix, value: / }, headers: [{ name: x-tier, value: gold }] }]
      backendRefs: [{ name: gold, port: 80 }]
    - name: rest
      matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs: [{ name: plain, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: pre, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    phase: PreRouting
    headerModifiers:
      request:
        set: [{ name: x-tier, value: gold }]
        remove: [x-secret]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: post, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: gold }]
  traffic:
    headerModifiers:
      request:
        set: [{ name: x-post, value: "1" }]
`,
      "/",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    await Promise.all([gold?.close(), plain?.close()]);
  });

  test("a request without x-tier is routed by the header the PreRouting policy set", async () => {
    const r = await request(gw.port, "/x", { headers: { "x-secret": "s", "x-tier": "bronze" } });
    assert.equal(r.status, 200);
    const echo = JSON.parse(r.body) as EchoBody;
    assert.equal(echo.upstream, "gold", "routed after the PreRouting header change");
    assert.equal(echo.headers["x-tier"], "gold");
    assert.equal(echo.headers["x-secret"], undefined, "removed before routing");
    assert.equal(echo.headers["x-post"], "1", "the PostRouting policy of the chosen rule still applies");
    assert.equal(plain.requests.length, 0);
  });
});
