// An OTLP collector's Service (or static GwBackend) backend policy reaches its cluster (xds/frontend-collector.ts):
// TLS with the policy's CA, SNI and client certificate (served by SDS), tcp and http.version; the GwPolicy is Attached
// ("applies backend.tls") and each other backend field gets a Warning. A TLS that cannot be had leaves the collector
// out, reported on both policies. The traffic-field counterpart: a remote JWKS Service whose TLS names a missing CA.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { collectorTargets } from "../../src/otlp/relay.js";
import { xdsToJson } from "../../src/translate/xds/json.js";
import {
  frontendPolicy,
  gatewayYaml,
  localService,
  prefixRoute,
  routeTrafficPolicy,
  servicePolicy,
} from "../helpers/gateway.js";
import { caConfigMapYaml, tlsSecretYaml } from "../helpers/tls.js";

const COLLECTOR_TLS = `    tls:
      sni: example.com
      caCertificateRefs: [{ group: "", kind: ConfigMap, name: example-ca }]
      mtlsCertificateRef: [{ name: client-cert }]
    tcp: { connectTimeout: 3s }
    http: { version: HTTP2 }`;

const telemetry = (tracing: string) =>
  frontendPolicy(`    tracing:
      backendRef: { name: collector, port: 80 }
      randomSampling: "true"
${tracing}    accessLog:
      otlp: { backendRef: { name: collector, port: 80 } }
`);

async function translate(yaml: string) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-collector-tls-"));
  try {
    writeFileSync(join(dir, "all.yaml"), yaml);
    const out = await loadAndTranslate([join(dir, "all.yaml")]);
    assert.deepEqual(out.load.problems, []);
    const xds = xdsToJson(out.result.gateways[0]?.xds as Parameters<typeof xdsToJson>[0]) as unknown as {
      clusters: { name: string }[];
      secrets?: { name: string }[];
    };
    const status = (name: string) =>
      JSON.stringify(out.result.statuses.find((s) => s.kind === "GwPolicy" && s.name === name));
    return { ...out, xds, status };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const base = `${gatewayYaml(8080)}${localService("app", 8081)}${localService("collector", 4317)}${prefixRoute(["app"])}`;

test("the collector's Service TLS, tcp and http.version reach the tracing and access log clusters", async () => {
  const { xds, status, result } = await translate(
    `${base}${caConfigMapYaml()}${tlsSecretYaml()}${servicePolicy("collector", `${COLLECTOR_TLS}\n    auth: { key: not-sent }`, "collector-tls")}${telemetry("")}`,
  );
  for (const name of ["tracing/default/collector", "accesslog/default/collector"]) {
    const c = JSON.stringify(xds.clusters.find((x) => x.name === name));
    assert.match(c, /"sni":"example\.com"/, name);
    assert.match(c, /"explicit_http_config":\{"http2_protocol_options"/, name);
    assert.match(c, /"tls_certificate_sds_secret_configs":\[\{"name":"sluice-backend-tls\/default\/client-cert"/, name);
    assert.match(c, /BEGIN CERTIFICATE/, `${name}: the ConfigMap's CA`);
    assert.match(c, /"connect_timeout":"3s"/, name);
  }
  assert.ok(
    (xds.secrets ?? []).some((s) => s.name === "sluice-backend-tls/default/client-cert"),
    "the client certificate is served over SDS",
  );
  const s = status("collector-tls");
  assert.match(s, /"reason":"Attached","message":"applies backend\.http, backend\.tcp, backend\.tls"/);
  assert.match(
    s,
    /backend\.auth: not applied to Envoy's exports to Service default\/collector port 80 as the collector of frontend\.tracing: only tls, tcp and http\.version apply there/,
  );
  assert.match(s, /as the collector of frontend\.accessLog\.otlp/);
  // The span relay's targets carry the same TLS.
  const targets = collectorTargets(result).get("tracing/default/collector");
  assert.equal(targets?.[0]?.tls?.sni, "example.com");
  assert.match(targets?.[0]?.tls?.clientCert?.chain ?? "", /BEGIN CERTIFICATE/);
});

test("without the policy the collector's cluster is plain, and its URI http", async () => {
  const { xds } = await translate(`${base}${telemetry("      protocol: HTTP\n")}`);
  const c = JSON.stringify(xds.clusters.find((x) => x.name === "tracing/default/collector"));
  assert.doesNotMatch(c, /transport_socket/);
  assert.match(JSON.stringify(xds), /"uri":"http:\/\/collector\.default\.svc\.cluster\.local\/v1\/traces"/);
});

test("an OTLP/HTTP collector over TLS: https URI; http.version HTTP1 on a gRPC collector is reported", async () => {
  const { xds, status } = await translate(
    `${base}${caConfigMapYaml()}${tlsSecretYaml()}${servicePolicy("collector", COLLECTOR_TLS.replace("{ version: HTTP2 }", "{ version: HTTP1, requestTimeout: 2s }"), "collector-tls")}${telemetry("      protocol: HTTP\n")}`,
  );
  assert.match(JSON.stringify(xds), /"uri":"https:\/\/collector\.default\.svc\.cluster\.local\/v1\/traces"/);
  const s = status("collector-tls");
  assert.match(
    s,
    /backend\.http\.version: not applied to Envoy's exports to .* frontend\.accessLog\.otlp: OTLP\/gRPC is HTTP\/2/,
  );
  assert.match(s, /backend\.http\.requestTimeout: not applied to .* the exporter's own \(5s\)/);
  const grpcLog = JSON.stringify(xds.clusters.find((x) => x.name === "accesslog/default/collector"));
  assert.match(grpcLog, /"explicit_http_config":\{"http2_protocol_options"/, "the gRPC log export stays HTTP/2");
  const httpTraces = JSON.stringify(xds.clusters.find((x) => x.name === "tracing/default/collector"));
  assert.doesNotMatch(httpTraces, /http2_protocol_options|auto_config/, "OTLP/HTTP takes the HTTP1 version");
});

test("a collector TLS that cannot be had: the collector is left out, both policies say why", async () => {
  const { xds, status } = await translate(
    `${base}${servicePolicy("collector", COLLECTOR_TLS.replace(/\n {6}mtlsCertificateRef.*/, ""), "collector-tls")}${telemetry("")}`,
  );
  assert.ok(!xds.clusters.some((c) => c.name.startsWith("tracing/") || c.name.startsWith("accesslog/")));
  assert.doesNotMatch(JSON.stringify(xds), /envoy\.tracers\.opentelemetry|open_telemetry/);
  assert.match(JSON.stringify(xds), /envoy\.access_loggers\.stdout/, "the stdout log stays");
  assert.match(
    status("collector-tls"),
    /backend\.tls\.caCertificateRefs: [^;"]*example-ca[^;"]*; Envoy's exports to Service default\/collector port 80 as the collector of frontend\.tracing are not sent until it is/,
  );
  assert.match(
    status("telemetry"),
    /tracing\.backendRef: the TLS of Service default\/collector port 80 \(backend\.tls\.caCertificateRefs of GwPolicy default\/collector-tls\) cannot be had; not applied/,
  );
  assert.match(status("telemetry"), /accessLog\.otlp\.backendRef: the TLS of Service default\/collector port 80/);
});

test("a static GwBackend collector: its own spec.policies.tls reaches the cluster", async () => {
  const { xds } = await translate(`${base}${caConfigMapYaml()}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hosted, namespace: default }
spec:
  static: { host: otlp.example.com, port: 4317 }
  policies:
    tls: { caCertificateRefs: [{ group: "", kind: ConfigMap, name: example-ca }] }
${frontendPolicy(`    tracing: { backendRef: { kind: GwBackend, name: hosted }, randomSampling: "true" }\n`)}`);
  const c = JSON.stringify(xds.clusters.find((x) => x.name === "tracing/default/hosted"));
  assert.match(c, /"sni":"otlp\.example\.com"/, "SNI defaults to the static host");
  assert.match(c, /"exact":"otlp\.example\.com"/, "and the name the certificate must carry");
});

test("a remote JWKS Service whose TLS names a missing CA ConfigMap: reported naming the field; the provider fails closed", async () => {
  const { xds, status } = await translate(
    `${base}${localService("idp", 8443)}${servicePolicy(
      "idp",
      `    tls: { sni: example.com, caCertificateRefs: [{ group: "", kind: ConfigMap, name: missing-ca }] }`,
      "idp-tls",
    )}${routeTrafficPolicy(
      "jwt",
      "r",
      `    jwtAuthentication:
      providers: [{ issuer: "https://idp", jwks: { remote: { jwksPath: /keys, backendRef: { name: idp, port: 80 } } } }]
`,
    )}`,
  );
  const jwt = status("jwt");
  assert.match(
    jwt,
    /jwks\.remote\.backendRef: backend\.tls\.caCertificateRefs of Service default\/idp port 80: ConfigMap default\/missing-ca key ca\.crt not found; calls to this service fail/,
    "the JWT policy's status names the Service's TLS field",
  );
  assert.match(
    status("idp-tls"),
    /backend\.tls\.caCertificateRefs: ConfigMap default\/missing-ca key ca\.crt not found; Envoy's calls to Service default\/idp port 80 as the service of traffic\.jwtAuthentication\.providers\[0\]\.jwks\.remote\.backendRef fail until it is/,
    "the Service's GwPolicy names its own field",
  );
  // Never fetched in plain HTTP instead: the keys come from an endpoint-less cluster, so no token is accepted.
  const uri = /"http_uri":\{[^}]*\}/.exec(JSON.stringify(xds))?.[0] ?? "";
  assert.match(uri, /"cluster":"unresolved\//, uri);
});
