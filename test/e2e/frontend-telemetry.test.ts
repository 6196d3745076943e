// The per-request CEL of frontend tracing, metrics and access logs through a real Envoy and `sluice serve` (with its
// ext_authz checking API keys): spans sampled by a request expression and kept by a request filter (Envoy's CEL
// sampler), span attributes from the response, the peer and the API key's metadata, resource attributes from
// constant expressions; metric labels on Envoy's stats (the stats access logger), one computed by Sluice's telemetry
// stage, `unknown` for one that fails;
// access log attributes and a filter reading response.*, source.*, apiKey.* and request.query.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { frontendPolicy, localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp.js";
import { parsePrometheusText, sampleValue } from "../helpers/prom-text.js";

const KEY = "sk-frontend-telemetry-0123456789";

function resources(upstream: number, collector: number): string {
  return `${localService("echo", upstream)}${localService("collector", collector)}---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData:
  one: ${JSON.stringify(JSON.stringify({ key: KEY, metadata: { tier: "gold" } }))}
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
metadata: { name: keys, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: keys } }
${frontendPolicy(`    tracing:
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "request.headers['x-debug'] == 'on'"
      clientSampling: "request.headers['x-keep'] == 'yes' ? 1.0 : 0.0"
      filter: "!request.path.startsWith('/health')"
      attributes:
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: status, expression: "string(response.code)" }
          - { name: client, expression: "source.address" }
          - { name: tier, expression: "apiKey.tier" }
      resources:
        - { name: deployment.environment, expression: "'e2e-' + 'prod'" }
    metrics:
      attributes:
        add:
          - { name: tenant, expression: "request.headers['x-tenant']" }
          - { name: class, expression: "response.code / 100" }
          - { name: up, expression: "request.headers['x-tenant'].upperAscii()" }
    accessLog:
      filter: "response.code == 200 && apiKey.tier == 'gold'"
      attributes:
        add:
          - { name: code, expression: "response.code" }
          - { name: tier, expression: "apiKey.tier" }
          - { name: peer, expression: "source.address" }
          - { name: peer_port, expression: "source.port" }
          - { name: page, expression: "request.query['page']" }
          - { name: sort, expression: "request.query['sort']" }
`)}`;
}

describe("frontend tracing, metrics and access logs with per-request CEL", { timeout: 90_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;
  let otlp: OtlpReceiver;
  const auth = { authorization: `Bearer ${KEY}` };

  before(async () => {
    upstream = await startEchoUpstream("echo");
    otlp = await startOtlpReceiver();
    gw = await startTestGateway(
      () => resources(upstream.port, otlp.port),
      "/",
      (s) => s === 401,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await otlp?.close();
  });

  test("spans: sampled by the request expression, kept by the filter, with attributes from the response and identity", async () => {
    const spans = otlp.spans;
    const get = (path: string, headers: Record<string, string>) =>
      request(gw.port, path, { headers: { ...auth, ...headers } });
    for (let i = 0; i < 3; i++)
      assert.equal((await get(`/on/${i}`, { "x-debug": "on", "x-tenant": "t-on" })).status, 200);
    for (let i = 0; i < 3; i++) assert.equal((await get(`/off/${i}`, { "x-tenant": "t-off" })).status, 200);
    // The filter drops these although the sampling expression holds.
    for (let i = 0; i < 2; i++)
      assert.equal((await get(`/health/${i}`, { "x-debug": "on", "x-tenant": "t-health" })).status, 200);
    // Requests with a trace of their own: clientSampling decides (randomSampling would sample both).
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert.equal((await get("/parent", { "x-debug": "on", "x-tenant": "t-parent", traceparent })).status, 200);
    assert.equal(
      (await get("/kept", { "x-debug": "on", "x-keep": "yes", "x-tenant": "t-kept", traceparent })).status,
      200,
    );
    // Envoy exports every 5 spans or every 5 s: wait for all three, then one more flush for any stray span.
    await waitFor(
      "the three sampled spans",
      async () => (spans.filter((s) => s.attributes.tenant === "t-on").length === 3 ? true : undefined),
      20_000,
    );
    await new Promise((r) => setTimeout(r, 6000));
    const tenants = new Set(spans.map((s) => s.attributes.tenant));
    assert.deepEqual([...tenants].sort(), ["t-kept", "t-on"], "only the requests the sampler and the filter keep");
    const s = spans.find((x) => x.attributes.tenant === "t-on");
    assert.equal(s?.attributes.status, "200", "response.code, set when the span finishes");
    assert.equal(s?.attributes.client, "127.0.0.1", "source.address: the peer's IP without its port");
    assert.equal(s?.attributes.tier, "gold", "apiKey.tier from the metadata Sluice's ext_authz left");
    assert.ok(
      otlp.exports.some(
        (e) => e.path === "/v1/traces" && e.body.includes("deployment.environment") && e.body.includes("e2e-prod"),
      ),
      "the resource attribute, evaluated once",
    );
  });

  test("metric labels from CEL on Envoy's stats; a label whose expression fails is `unknown`", async () => {
    for (let i = 0; i < 4; i++) await request(gw.port, `/m/${i}`, { headers: { ...auth, "x-tenant": "m-one" } });
    await request(gw.port, "/m/none", { headers: auth });
    // No API key: 401 from ext_authz, counted with its class too.
    await request(gw.port, "/m/denied", { headers: { "x-tenant": "m-one" } });
    const stats = await waitFor(
      "the labelled counters",
      async () => {
        const res = await fetch(`http://127.0.0.1:${gw.envoy.adminPort}/stats/prometheus`);
        const families = parsePrometheusText(await res.text());
        // Histograms reach the admin output at Envoy's stats flush (every 5 s).
        const labels = { tenant: "m-one", class: "2" };
        return sampleValue(families, "envoy_sluice_frontend_requests", labels) >= 4 &&
          sampleValue(families, "envoy_sluice_frontend_request_duration_count", labels) >= 4
          ? families
          : undefined;
      },
      15_000,
    );
    assert.equal(sampleValue(stats, "envoy_sluice_frontend_requests", { tenant: "m-one", class: "2" }), 4);
    assert.equal(sampleValue(stats, "envoy_sluice_frontend_requests", { tenant: "m-one", class: "4" }), 1);
    assert.equal(sampleValue(stats, "envoy_sluice_frontend_requests", { tenant: "unknown", class: "2" }), 1);
    // A label Envoy's stats tags cannot evaluate (a string function): computed by Sluice's telemetry stage.
    assert.equal(sampleValue(stats, "envoy_sluice_frontend_requests", { tenant: "m-one", class: "2", up: "M-ONE" }), 4);
    assert.equal(
      sampleValue(stats, "envoy_sluice_frontend_requests", { tenant: "unknown", class: "2", up: "unknown" }),
      1,
    );
    assert.ok(
      sampleValue(stats, "envoy_sluice_frontend_request_duration_count", { tenant: "m-one", class: "2" }) >= 4,
      "the duration histogram carries the same labels",
    );
  });

  test("access log: attributes and filter reading response.*, source.* and apiKey.*", async () => {
    await request(gw.port, "/logged?x=1&page=7&pages=9", { headers: { ...auth, "x-tenant": "log-me" } });
    await request(gw.port, "/denied-unlogged", { headers: { "x-tenant": "log-me" } });
    const line = await waitFor(
      "the access log entry",
      async () => gw.envoy.output.find((l) => l.includes('"/logged?')),
      10_000,
    );
    const entry = JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>;
    assert.equal(String(entry.code), "200");
    assert.equal(entry.tier, "gold");
    assert.equal(entry.peer, "127.0.0.1");
    assert.match(String(entry.peer_port), /^\d+$/);
    assert.equal(entry.page, "7", "request.query['page'], cut from Envoy's raw query string");
    assert.ok(!("sort" in entry), "a parameter the query lacks: the attribute fails and is left out");
    assert.ok(!gw.envoy.output.some((l) => l.includes("/denied-unlogged")), "the 401 without a key is filtered out");
  });
});
