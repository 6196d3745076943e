// frontend.tracing's `attributes.remove` and a `filter` reading the response, through a real Envoy and `sluice serve`:
// Envoy's tracer exports to Sluice's span relay (src/otlp/relay.ts), which drops the spans whose filter did not hold
// when they finished and the default attributes the policy removes, then sends the export on to the user's collector.
// Two Gateways in turn: one exports to an OTLP/HTTP collector (remove and filter), the other to an OTLP/gRPC
// collector (a grpc-js server, test/helpers/otlp.ts; remove only). The collectors are written for the test and keep
// what they receive.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type OtlpGrpcCollector,
  type OtlpReceiver,
  type OtlpSpan,
  startOtlpGrpcCollector,
  startOtlpReceiver,
} from "../helpers/otlp.js";

const route = (upstream: number) => `${localService("echo", upstream)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /ok } }]
      backendRefs: [{ name: echo, port: 80 }]
`;

/** Remove and a filter reading the response, to an OTLP/HTTP collector. */
const httpResources = (
  upstream: number,
  collector: number,
) => `${route(upstream)}${localService("collector", collector)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "true"
      filter: "response.code == 200 && request.headers['x-tenant'] != 'hidden'"
      attributes:
        remove: [http.url, peer.address, user_agent, tenant]
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: status, expression: "string(response.code)" }
`;

/** Remove only, to an OTLP/gRPC collector. */
const grpcResources = (
  upstream: number,
  collector: number,
) => `${route(upstream)}${localService("grpc-collector", collector)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing-grpc, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: grpc-collector, port: 80 }
      randomSampling: "true"
      attributes:
        remove: [http.url, http.method]
        add: [{ name: tenant, expression: "request.headers['x-tenant']" }]
`;

/**
 * For one describe: an echo upstream, an OTLP/HTTP collector (the helpers' receiver) and a Gateway from
 * `resources(upstream, collector)`, started before its tests and stopped after them.
 */
function relayStack(resources: (upstream: number, collector: number) => string): {
  readonly gw: TestGateway;
  readonly spans: OtlpSpan[];
} {
  let upstream: Upstream | undefined;
  let collector: OtlpReceiver | undefined;
  let gw: TestGateway | undefined;
  before(async () => {
    upstream = await startEchoUpstream("echo");
    collector = await startOtlpReceiver();
    const [u, c] = [upstream.port, collector.port];
    gw = await startTestGateway(
      () => resources(u, c),
      "/ok",
      (st) => st === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await collector?.close();
  });
  return {
    get gw() {
      return gw as TestGateway;
    },
    get spans() {
      return collector?.spans ?? [];
    },
  };
}

describe("span relay to an OTLP/HTTP collector: remove and a filter reading the response", { timeout: 90_000 }, () => {
  const stack = relayStack(httpResources);

  test("spans whose filter failed when they finished are dropped; removed attributes are gone", async () => {
    const get = (path: string, tenant: string) =>
      request(stack.gw.port, path, { headers: { "x-tenant": tenant, "user-agent": "relay-test" } });
    for (let i = 0; i < 3; i++) assert.equal((await get(`/ok/${i}`, "shown")).status, 200);
    // No route: 404, so `response.code == 200` is false when the span finishes.
    for (let i = 0; i < 2; i++) assert.equal((await get(`/missing/${i}`, "not-found")).status, 404);
    // 200, but the request part of the filter fails.
    assert.equal((await get("/ok/hidden", "hidden")).status, 200);
    await waitFor(
      "the three kept spans",
      async () => (stack.spans.filter((s) => s.attributes.tenant === "shown").length === 3 ? true : undefined),
      20_000,
    );
    // Envoy exports every 5 spans or every 5 s: one more flush for any span that should not be there.
    await new Promise((r) => setTimeout(r, 6000));
    assert.deepEqual(
      [...new Set(stack.spans.map((s) => s.attributes.tenant))],
      ["shown"],
      "only spans whose filter held reach the collector",
    );
    for (const s of stack.spans) {
      for (const gone of ["http.url", "peer.address", "user_agent", "sluice.span_filter"]) {
        assert.ok(!(gone in s.attributes), `${gone} is removed (${JSON.stringify(s.attributes)})`);
      }
      assert.equal(s.attributes.status, "200", "an added attribute from the response stays");
      assert.equal(s.attributes["http.method"], "GET", "a default attribute not removed stays");
      assert.match(s.service, /^gateway\/default\/gw\//, "the resource is Envoy's, unchanged");
    }
  });
});

describe("span relay to an OTLP/gRPC collector", { timeout: 90_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;
  let collector: OtlpGrpcCollector;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    collector = await startOtlpGrpcCollector();
    gw = await startTestGateway(
      () => grpcResources(upstream.port, collector.port),
      "/ok",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await collector?.close();
  });

  test("the export goes on over gRPC with the removed attributes gone and the others kept", async () => {
    for (let i = 0; i < 5; i++) {
      assert.equal((await request(gw.port, `/ok/g${i}`, { headers: { "x-tenant": "grpc-tenant" } })).status, 200);
    }
    await waitFor(
      "the five spans over gRPC",
      async () =>
        collector.spans.filter((s) => s.attributes.tenant === "grpc-tenant").length === 5 ? true : undefined,
      20_000,
    );
    for (const s of collector.spans) {
      assert.ok(!("http.url" in s.attributes) && !("http.method" in s.attributes), JSON.stringify(s.attributes));
      assert.equal(s.attributes["http.status_code"], "200", "Envoy's other default attributes stay");
    }
    assert.ok(
      collector.authorities.includes("grpc-collector"),
      `the collector's name as :authority (${collector.authorities.join()})`,
    );
  });
});

/** Attributes and a filter Envoy cannot evaluate as the spec means them: Sluice's tracing stage computes them. */
const sluiceResources = (
  upstream: number,
  collector: number,
) => `${route(upstream)}${localService("collector", collector)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing-sluice, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "true"
      filter: "'keep' in request.query && response.code < 500"
      attributes:
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: tenant.upper, expression: "request.headers['x-tenant'].upperAscii()" }
          - { name: params, expression: "request.query" }
          - { name: loopback, expression: "source.address.isLoopback()" }
          - { name: outcome, expression: "'status ' + string(response.code)" }
          - { name: user, expression: "basicAuth.username" }
    accessLog:
      filter: "'log' in request.query"
      attributes:
        add:
          - { name: params, expression: "request.query" }
          - { name: user, expression: "basicAuth.username" }
          - { name: loopback, expression: "source.address.isLoopback()" }
          - { name: tenant_upper, expression: "request.headers['x-tenant'].upperAscii()" }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: auth, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /auth } }]
      backendRefs: [{ name: echo, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: auth, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: auth }]
  traffic:
    basicAuthentication:
      users: ["gina:{SHA}${createHash("sha1").update("g-pass").digest("base64")}"]
`;

describe("tracing expressions Envoy cannot evaluate, computed by Sluice's tracing stage", { timeout: 90_000 }, () => {
  const stack = relayStack(sluiceResources);

  test("span attributes carry the spec's values; the filter reading request.query as a map keeps or drops", async () => {
    const get = (path: string, tenant: string) => request(stack.gw.port, path, { headers: { "x-tenant": tenant } });
    assert.equal((await get("/ok/a?keep=1&page=2", "acme")).status, 200);
    // No route: 404, still kept (the filter reads the query and `response.code < 500`).
    assert.equal((await get("/missing?keep=yes", "gone")).status, 404);
    // basicAuth (an identity Envoy's CEL does not read): what Sluice's authentication left, read with the response.
    const basic = `Basic ${Buffer.from("gina:g-pass").toString("base64")}`;
    const authed = await request(stack.gw.port, "/auth/x?keep=1", {
      headers: { "x-tenant": "authed", authorization: basic },
    });
    assert.equal(authed.status, 200);
    // No `keep` in the query: the filter is false and the span is dropped.
    for (let i = 0; i < 3; i++) assert.equal((await get(`/ok/drop${i}?page=${i}`, "dropped")).status, 200);
    await waitFor(
      "the three kept spans",
      async () => (stack.spans.filter((s) => s.attributes.tenant !== undefined).length >= 3 ? true : undefined),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 6000));
    const byTenant = new Map(stack.spans.map((s) => [s.attributes.tenant, s.attributes]));
    assert.deepEqual([...byTenant.keys()].sort(), ["acme", "authed", "gone"], "only spans whose filter held go out");
    assert.equal(byTenant.get("authed")?.["user"], "gina");
    assert.equal(byTenant.get("acme")?.["user"], undefined, "no basicAuth on that route: left out");
    const acme = byTenant.get("acme") ?? {};
    assert.deepEqual(
      [acme["tenant.upper"], acme["params"], acme["loopback"], acme["outcome"]],
      ["ACME", '{"keep":"1","page":"2"}', "true", "status 200"],
      JSON.stringify(acme),
    );
    assert.equal(byTenant.get("gone")?.outcome, "status 404", "computed on the response the client got");
    assert.equal(byTenant.get("gone")?.["tenant.upper"], "GONE");
    for (const s of stack.spans) assert.ok(!("sluice.span_filter" in s.attributes), "the filter tag is taken out");
  });

  test("access log attributes and a filter Envoy cannot evaluate: computed by the same stage", async () => {
    const basic = `Basic ${Buffer.from("gina:g-pass").toString("base64")}`;
    const get = (path: string, headers: Record<string, string>) => request(stack.gw.port, path, { headers });
    assert.equal((await get("/auth/logged?log=1&page=3", { "x-tenant": "acme", authorization: basic })).status, 200);
    assert.equal((await get("/ok/plain?log=yes", { "x-tenant": "plain" })).status, 200);
    // The filter reads request.query as a map: no `log` parameter, no entry.
    assert.equal((await get("/ok/quiet?page=1", { "x-tenant": "quiet" })).status, 200);
    const entryOf = async (marker: string) => {
      const line = await waitFor(
        `the access log entry of ${marker}`,
        async () => stack.gw.envoy.output.find((l) => l.includes(marker) && l.includes("{")),
        10_000,
      );
      return JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>;
    };
    const authed = await entryOf('"/auth/logged?');
    assert.equal(authed.user, "gina", "basicAuth, left by Sluice's authentication");
    assert.equal(authed.params, '{"log":"1","page":"3"}', "request.query as the spec's map");
    assert.equal(authed.loopback, "true", "an IP function");
    assert.equal(authed.tenant_upper, "ACME");
    const plain = await entryOf('"/ok/plain?');
    assert.ok(!("user" in plain), "no basicAuth on that route: left out");
    await new Promise((r) => setTimeout(r, 1000));
    assert.ok(!stack.gw.envoy.output.some((l) => l.includes("/ok/quiet")), "filtered out by the computed filter");
  });
});
