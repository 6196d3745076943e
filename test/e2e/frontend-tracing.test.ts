// OTLP export through a real Envoy, to the collector of the policy's backendRef in another namespace, allowed by a
// ReferenceGrant there (a collector written for the test, which keeps what it receives): frontend.tracing's spans of
// sampled requests, with the span attributes the policy adds from a request header and a constant; accessLog.otlp's
// log records, with a CEL attribute, for the requests its filter keeps.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp.js";

function resources(upstream: number, collector: number): string {
  // The collector lives in namespace obs (backendRef.namespace), allowed by a ReferenceGrant there.
  const inObs = localService("collector", collector).replaceAll("namespace: default", "namespace: obs");
  return `${localService("echo", upstream)}${inObs}---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: { name: policies-may-export, namespace: obs }
spec:
  from: [{ group: sluice.dev, kind: GwPolicy, namespace: default }]
  to: [{ group: "", kind: Service }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: echo, port: 80 }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: collector, namespace: obs, port: 80 }
      protocol: HTTP
      randomSampling: "1.0"
      attributes:
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: stage, expression: "'e2e-stage'" }
    accessLog:
      attributes:
        add: [{ name: log_tenant, expression: "'log-' + request.headers['x-tenant']" }]
      otlp:
        backendRef: { name: collector, namespace: obs, port: 80 }
        protocol: HTTP
        filter: "request.path.startsWith('/logged')"
`;
}

describe("frontend tracing and access logs over OTLP/HTTP", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;
  let otlp: OtlpReceiver;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    otlp = await startOtlpReceiver();
    gw = await startTestGateway(
      () => resources(upstream.port, otlp.port),
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await otlp?.close();
  });

  test("sampled requests' spans reach the collector with the attributes the policy adds", async () => {
    // Envoy sends spans in batches (5 spans, or every 5 s).
    for (let i = 0; i < 6; i++)
      assert.equal((await request(gw.port, `/traced/${i}`, { headers: { "x-tenant": "acme-corp" } })).status, 200);
    const e = await waitFor(
      "an OTLP export with the spans",
      async () => otlp.exports.find((x) => x.path === "/v1/traces" && x.body.includes("acme-corp")),
      20_000,
    );
    assert.equal(e.path, "/v1/traces");
    assert.equal(e.contentType, "application/x-protobuf");
    assert.ok(e.body.includes("e2e-stage"), "the constant attribute");
    assert.ok(e.body.includes("/traced/"), "the request's URL is in the span");
  });

  test("access log records over OTLP/HTTP: the CEL attribute, only for requests the OTLP filter keeps", async () => {
    await request(gw.port, "/unlogged", { headers: { "x-tenant": "hidden-one" } });
    await request(gw.port, "/logged/x", { headers: { "x-tenant": "shown-one" } });
    const e = await waitFor(
      "an OTLP log export",
      async () => otlp.exports.find((x) => x.path === "/v1/logs" && x.body.includes("log-shown-one")),
      20_000,
    );
    assert.equal(e.contentType, "application/x-protobuf");
    assert.ok(!otlp.exports.some((x) => x.path === "/v1/logs" && x.body.includes("log-hidden-one")));
  });
});
