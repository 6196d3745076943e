// frontend.tracing through a real Envoy: its OpenTelemetry tracer exports the spans of sampled requests over OTLP/HTTP
// to the collector of the policy's backendRef (a collector written for the test, which keeps what it receives), with
// the span attributes the policy adds from a request header and a constant.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";

interface Export {
  readonly path: string;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

function resources(upstream: number, collector: number): string {
  return `${localService("echo", upstream)}${localService("collector", collector)}---
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
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "1.0"
      attributes:
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: stage, expression: "'e2e-stage'" }
`;
}

describe("frontend.tracing: spans over OTLP/HTTP", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;
  const exports: Export[] = [];
  const collector: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      exports.push({ path: req.url ?? "", contentType: req.headers["content-type"], body: Buffer.concat(chunks) });
      res.writeHead(200, { "content-type": "application/x-protobuf" });
      res.end();
    });
  });

  before(async () => {
    upstream = await startEchoUpstream("echo");
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()));
    const port = (collector.address() as AddressInfo).port;
    gw = await startTestGateway(
      () => resources(upstream.port, port),
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    collector.close();
  });

  test("sampled requests' spans reach the collector with the attributes the policy adds", async () => {
    // Envoy sends spans in batches (5 spans, or every 5 s).
    for (let i = 0; i < 6; i++)
      assert.equal((await request(gw.port, `/traced/${i}`, { headers: { "x-tenant": "acme-corp" } })).status, 200);
    const e = await waitFor(
      "an OTLP export with the spans",
      async () => exports.find((x) => x.body.includes("acme-corp")),
      20_000,
    );
    assert.equal(e.path, "/v1/traces");
    assert.equal(e.contentType, "application/x-protobuf");
    assert.ok(e.body.includes("e2e-stage"), "the constant attribute");
    assert.ok(e.body.includes("/traced/"), "the request's URL is in the span");
  });
});
