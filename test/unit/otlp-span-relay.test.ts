// The span relay's rewrite (src/otlp/spans.ts) on exports the OpenTelemetry SDK's own OTLP/HTTP exporter encodes, and
// the relay (src/otlp/relay.ts) in process: the collector only as a cluster of the current translation, the export
// sent on rewritten.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { SpanRelay } from "../../src/otlp/relay.js";
import { decodeRelaySpec, encodeRelaySpec, FILTER_TAG, RELAY_METADATA, rewriteExport } from "../../src/otlp/spans.js";
import { buildCluster } from "../../src/translate/xds/cluster.js";
import { decodeTraceExport, startOtlpGrpcCollector } from "../helpers/otlp.js";
import { tlsFixture } from "../helpers/tls.js";

/** A receiver keeping each POST body. */
async function receiver(): Promise<{ server: Server; port: number; bodies: Buffer[] }> {
  const bodies: Buffer[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      bodies.push(Buffer.concat(chunks));
      res.writeHead(200, { "content-type": "application/x-protobuf" });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { server, port: (server.address() as AddressInfo).port, bodies };
}

describe("OTLP span relay", () => {
  let sdkExport: Buffer;
  let rx: Awaited<ReturnType<typeof receiver>>;

  before(async () => {
    rx = await receiver();
    // Four spans from the SDK: filter tag "true", "false", a boolean true, and none.
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": "unit-svc" }),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ url: `http://127.0.0.1:${rx.port}/v1/traces` }),
        }),
      ],
    });
    const tracer = provider.getTracer("unit");
    const span = (name: string, attrs: Record<string, string | boolean | number>) => {
      const s = tracer.startSpan(name, { attributes: attrs });
      s.end();
    };
    span("kept", { [FILTER_TAG]: "true", "http.url": "http://x/secret", "http.method": "GET", n: 7 });
    span("dropped", { [FILTER_TAG]: "false", "http.url": "http://x/a" });
    span("kept-bool", { [FILTER_TAG]: true, "peer.address": "10.0.0.1" });
    span("untagged", { "http.url": "http://x/b" });
    await provider.forceFlush();
    await provider.shutdown();
    assert.equal(rx.bodies.length, 1, "one export");
    sdkExport = rx.bodies[0] as Buffer;
    rx.bodies.length = 0;
  });
  after(() => rx.server.close());

  test("filter: only spans whose tag is true are kept; removed attributes and the tag are taken out", () => {
    const out = rewriteExport(sdkExport, { remove: ["http.url", "peer.address"], filter: true });
    assert.equal(out.spans, 4);
    assert.equal(out.dropped, 2);
    const spans = decodeTraceExport(out.bytes);
    assert.deepEqual(spans.map((s) => s.name).sort(), ["kept", "kept-bool"]);
    const kept = spans.find((s) => s.name === "kept");
    assert.deepEqual(kept?.attributes, { "http.method": "GET", n: 7 });
    assert.deepEqual(spans.find((s) => s.name === "kept-bool")?.attributes, {});
    assert.equal(kept?.service, "unit-svc", "the resource is copied as it came");
    const before = decodeTraceExport(sdkExport).find((s) => s.name === "kept");
    assert.equal(kept?.traceId, before?.traceId);
    assert.equal(kept?.spanId, before?.spanId);
  });

  test("without a filter every span is kept; a rewrite that removes nothing leaves the bytes as they were", () => {
    const out = rewriteExport(sdkExport, { remove: ["http.url"], filter: false });
    assert.equal(out.dropped, 0);
    const spans = decodeTraceExport(out.bytes);
    assert.equal(spans.length, 4);
    for (const s of spans) assert.ok(!("http.url" in s.attributes) && !(FILTER_TAG in s.attributes));
    // The filter tag is always taken out; an export without it and nothing to remove is unchanged.
    const clean = rewriteExport(out.bytes, { remove: [], filter: false });
    assert.deepEqual(Buffer.from(clean.bytes), Buffer.from(out.bytes));
  });

  test("every span dropped: a valid, empty export", () => {
    const none = rewriteExport(sdkExport, { remove: [], filter: true });
    assert.equal(none.dropped, 2);
    const onlyFalse = rewriteExport(
      rewriteExport(sdkExport, { remove: [], filter: true }).bytes,
      { remove: [], filter: true }, // the tags are gone now: every span fails the filter
    );
    assert.equal(onlyFalse.bytes.byteLength, 0);
    assert.deepEqual(decodeTraceExport(onlyFalse.bytes), []);
  });

  test("relay spec: round trip, and clear errors for what is not one", () => {
    const spec = {
      cluster: "tracing/ns/c",
      protocol: "HTTP" as const,
      path: "/v1/traces",
      authority: "c",
      remove: ["a"],
      filter: true,
    };
    assert.deepEqual(decodeRelaySpec(encodeRelaySpec(spec)), spec);
    assert.match(JSON.stringify(decodeRelaySpec(undefined)), /no x-sluice-span-relay/);
    assert.match(JSON.stringify(decodeRelaySpec("!!!")), /not base64url JSON|not a relay spec/);
    assert.match(
      JSON.stringify(decodeRelaySpec(Buffer.from('{"cluster":1}').toString("base64url"))),
      /not a relay spec/,
    );
  });

  test("relay: sends to the cluster's endpoints from the translation, and refuses a cluster it does not have", async () => {
    const logs: string[] = [];
    const relay = new SpanRelay({ log: (l) => logs.push(l) });
    const cluster = buildCluster({
      kind: "static",
      name: "tracing/obs/collector",
      endpoints: [{ address: "127.0.0.1", port: rx.port, ready: true }],
      http2: false,
    });
    relay.update({ gateways: [{ xds: { clusters: [cluster] } }] } as never);
    const headers = (c: string) => ({
      [RELAY_METADATA]: encodeRelaySpec({
        cluster: c,
        protocol: "HTTP",
        path: "/v1/traces",
        authority: "collector",
        remove: ["http.url"],
        filter: true,
      }),
    });
    const answer = await relay.handle(sdkExport, headers("tracing/obs/collector"));
    assert.equal(answer.byteLength, 0, "an empty ExportTraceServiceResponse");
    assert.equal(rx.bodies.length, 1);
    assert.deepEqual(
      decodeTraceExport(rx.bodies[0] as Buffer)
        .map((s) => s.name)
        .sort(),
      ["kept", "kept-bool"],
    );
    await assert.rejects(relay.handle(sdkExport, headers("tracing/obs/elsewhere")), /has no endpoints/);
    await assert.rejects(relay.handle(sdkExport, {}), /no x-sluice-span-relay/);
    assert.equal(rx.bodies.length, 1, "nothing sent for a refused call");
    assert.equal(logs.length, 1, "failures are logged once per interval");
    relay.close();
  });

  test("relay: exports over gRPC with the collector cluster's TLS (mTLS), and fails without it", async () => {
    const collector = await startOtlpGrpcCollector({
      cert: tlsFixture("example.com.crt"),
      key: tlsFixture("example.com.key"),
      clientCa: tlsFixture("foo.example.com.crt"),
    });
    const relay = new SpanRelay({ log: () => {} });
    try {
      const name = "tracing/obs/tls-collector";
      const cluster = buildCluster({
        kind: "static",
        name,
        endpoints: [{ address: "127.0.0.1", port: collector.port, ready: true }],
        http2: true,
      });
      const tls = {
        sni: "example.com",
        sans: ["example.com"],
        ca: tlsFixture("example.com.crt"),
        clientCert: { secret: "s", chain: tlsFixture("foo.example.com.crt"), key: tlsFixture("foo.example.com.key") },
      };
      const headers = {
        [RELAY_METADATA]: encodeRelaySpec({
          cluster: name,
          protocol: "GRPC",
          path: "/v1/traces",
          authority: "tls-collector",
          remove: ["http.url"],
          filter: false,
        }),
      };
      relay.update({ gateways: [{ xds: { clusters: [cluster] }, collectorTls: new Map([[name, tls]]) }] } as never);
      assert.equal((await relay.handle(sdkExport, headers)).byteLength, 0);
      assert.equal(collector.spans.length, 4);
      assert.ok(collector.spans.every((s) => !("http.url" in s.attributes)));
      // The same cluster without its TLS: cleartext to a TLS-only collector fails.
      const plain = new SpanRelay({ log: () => {} });
      plain.update({ gateways: [{ xds: { clusters: [cluster] } }] } as never);
      await assert.rejects(plain.handle(sdkExport, headers), /export to collector tracing\/obs\/tls-collector failed/);
      plain.close();
      assert.equal(collector.spans.length, 4);
    } finally {
      relay.close();
      await collector.close();
    }
  });
});
