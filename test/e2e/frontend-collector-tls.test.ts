// OTLP collectors reached over TLS only, through a real Envoy and `sluice serve`: the collector Service's GwPolicy
// backend.tls (the example.com test certificate, checked against the CA of a ConfigMap, SNI example.com, and the
// client certificate of a Secret) reaches Envoy's tracing and OTLP access log clusters (xds/frontend-collector.ts;
// the client certificate over SDS). The collector is a grpc-js OTLP server that speaks mTLS only: with the policy it
// receives the spans and log records; the same server named by a Service without it (Envoy speaks cleartext HTTP/2 to
// it) receives nothing, while Envoy's cluster shows it tried. Sluice's span relay (attributes.remove) exports to an
// OTLP/HTTP collector over HTTPS that requires a client certificate (the same policy's).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  frontendPolicy,
  localService,
  prefixRoute,
  servicePolicy,
  startTestGateway,
  type TestGateway,
} from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type OtlpGrpcCollector,
  type OtlpReceiver,
  startOtlpGrpcCollector,
  startOtlpReceiver,
} from "../helpers/otlp.js";
import { resourceStatus } from "../helpers/processes.js";
import { parsePrometheusText, sampleValue } from "../helpers/prom-text.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

/** The collectors' certificate (example.com), and the CA of the client certificates they require (mTLS). */
const SERVER = {
  cert: tlsFixture("example.com.crt"),
  key: tlsFixture("example.com.key"),
  clientCa: tlsFixture("foo.example.com.crt"),
};
const CA = `    tls: { sni: example.com, caCertificateRefs: [{ group: "", kind: ConfigMap, name: example-ca }] }`;

/** The policy's CA and SNI, and the client certificate of the Secret `client-cert` (foo.example.com). */
const MTLS = `${CA.slice(0, -2)}, mtlsCertificateRef: [{ name: client-cert }] }`;

/**
 * Tracing and the OTLP access log over gRPC to the TLS-only collector (which asks for a client certificate), through a
 * Service with the mTLS policy: Envoy's client certificate comes over SDS.
 */
const secured = (echo: number, collector: number) =>
  `${localService("ok", echo)}${prefixRoute(["ok"])}${localService("collector", collector)}${caConfigMapYaml()}${tlsSecretYaml("client-cert", "foo.example.com")}${servicePolicy("collector", MTLS, "collector-tls")}${frontendPolicy(`    tracing:
      backendRef: { name: collector, port: 80 }
      randomSampling: "true"
    accessLog:
      otlp: { backendRef: { name: collector, port: 80 } }
`)}`;

/**
 * Tracing through the span relay (attributes.remove) over OTLP/HTTP to an HTTPS collector requiring a client
 * certificate; the OTLP access log to the TLS-only gRPC collector through a Service without a policy.
 */
const relayed = (echo: number, https: number, grpcCollector: number) =>
  `${localService("ok", echo)}${prefixRoute(["ok"])}${localService("https-collector", https)}${localService("plain-collector", grpcCollector)}${caConfigMapYaml()}${tlsSecretYaml("client-cert", "foo.example.com")}${servicePolicy("https-collector", MTLS, "https-collector-tls")}${frontendPolicy(`    tracing:
      backendRef: { name: https-collector, port: 80 }
      protocol: HTTP
      randomSampling: "true"
      attributes:
        remove: [http.url, user_agent]
        add: [{ name: tenant, expression: "request.headers['x-tenant']" }]
    accessLog:
      otlp: { backendRef: { name: plain-collector, port: 80 } }
`)}`;

let collector: OtlpGrpcCollector;
before(async () => {
  collector = await startOtlpGrpcCollector(SERVER);
});
after(async () => {
  await collector?.close();
});

describe("an OTLP/gRPC collector over TLS, its Service's GwPolicy giving the CA and SNI", { timeout: 90_000 }, () => {
  let echo: Upstream;
  let gw: TestGateway;

  before(async () => {
    echo = await startEchoUpstream("ok");
    gw = await startTestGateway(
      () => secured(echo.port, collector.port),
      "/ok",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await echo?.close();
  });

  test("Envoy's spans and access log records reach it over TLS", async () => {
    for (let i = 0; i < 5; i++) {
      assert.equal((await request(gw.port, `/ok/secure${i}`, { headers: { "x-tenant": "tls" } })).status, 200);
    }
    await waitFor(
      "the five spans and log records",
      async () =>
        collector.spans.filter((s) => String(s.attributes["http.url"]).includes("/ok/secure")).length >= 5 &&
        collector.logs.filter((l) => /^GET \/ok\/secure\d 200$/.test(l.body)).length >= 5
          ? true
          : undefined,
      20_000,
    );
    assert.ok(collector.authorities.includes("collector"), collector.authorities.join());
  });

  test("the Service's GwPolicy says backend.tls applies", async () => {
    const status = await resourceStatus(gw.sluice, "GwPolicy", "collector-tls");
    assert.match(status, /"reason":"Attached","message":"applies backend\.tls"/);
  });
});

describe("the span relay to an HTTPS collector with mTLS; a TLS-only collector without a policy gets nothing", {
  timeout: 90_000,
}, () => {
  let echo: Upstream;
  let https: OtlpReceiver;
  let gw: TestGateway;

  before(async () => {
    echo = await startEchoUpstream("ok");
    https = await startOtlpReceiver(SERVER);
    gw = await startTestGateway(
      () => relayed(echo.port, https.port, collector.port),
      "/ok",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await echo?.close();
    await https?.close();
  });

  test("the relay exports over HTTPS with the client certificate; removed attributes are gone", async () => {
    for (let i = 0; i < 5; i++) {
      assert.equal((await request(gw.port, `/ok/relay${i}`, { headers: { "x-tenant": "relayed" } })).status, 200);
    }
    await waitFor(
      "the five relayed spans",
      async () => (https.spans.filter((s) => s.attributes.tenant === "relayed").length >= 5 ? true : undefined),
      20_000,
    );
    for (const s of https.spans) {
      assert.ok(!("http.url" in s.attributes) && !("user_agent" in s.attributes), JSON.stringify(s.attributes));
    }
    const traces = https.exports.filter((e) => e.path === "/v1/traces");
    assert.ok(traces.length > 0 && traces.every((e) => e.clientCertificate === "foo.example.com"));
  });

  test("the access log to the TLS-only collector through a Service without a policy: nothing arrives", async () => {
    for (let i = 0; i < 3; i++) assert.equal((await request(gw.port, `/ok/cleartext${i}`)).status, 200);
    // Envoy tried: its collector cluster opened connections (cleartext HTTP/2, which the TLS server drops).
    await waitFor(
      "Envoy's connections to the collector",
      async () => {
        const res = await fetch(`http://127.0.0.1:${gw.envoy.adminPort}/stats/prometheus`);
        const families = parsePrometheusText(await res.text());
        const opened = sampleValue(families, "envoy_cluster_upstream_cx_total", {
          envoy_cluster_name: "accesslog/default/plain-collector",
        });
        return opened > 0 ? true : undefined;
      },
      15_000,
    );
    // OTLP access logs are flushed every second; give them a few.
    await new Promise((r) => setTimeout(r, 3000));
    assert.deepEqual(
      collector.logs.filter((l) => l.body.includes("/ok/cleartext")),
      [],
      "no record reached the TLS-only collector",
    );
  });
});
