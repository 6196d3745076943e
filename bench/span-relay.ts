// The span relay's export to a collector over TLS (src/otlp/relay.ts with the collector's backend policy TLS) against
// the same export in cleartext, measured in the same run: Sluice CPU (process.cpuUsage, the collectors included, as
// they run in this process too) and wall time per export of a 5-span batch (Envoy's default), sequential exports over
// one kept-alive connection per collector, for OTLP/gRPC and OTLP/HTTP; with mTLS (a client certificate) as a hosted
// collector asks. Run: node dist/bench/span-relay.js [--exports N] [--rounds R]

import { parseArgs } from "node:util";
import { SpanRelay } from "../src/otlp/relay.js";
import { encodeRelaySpec, RELAY_METADATA } from "../src/otlp/spans.js";
import type { BackendTlsIR } from "../src/translate/ir.js";
import { buildCluster } from "../src/translate/xds/cluster.js";
import { startOtlpGrpcCollector, startOtlpReceiver } from "../test/helpers/otlp.js";
import { tlsFixture } from "../test/helpers/tls.js";

const { values } = parseArgs({ options: { exports: { type: "string" }, rounds: { type: "string" } } });
const EXPORTS = Number(values.exports ?? 2000);
const ROUNDS = Number(values.rounds ?? 3);

/** An ExportTraceServiceRequest of `n` spans with Envoy's default attributes (hand-encoded protobuf). */
function exportOf(n: number): Uint8Array {
  const bytes = (v: Buffer | string) => (typeof v === "string" ? Buffer.from(v) : v);
  const varint = (x: number) => {
    const out: number[] = [];
    while (x > 127) {
      out.push((x & 127) | 128);
      x >>>= 7;
    }
    out.push(x);
    return Buffer.from(out);
  };
  const field = (no: number, v: Buffer | string) => {
    const b = bytes(v);
    return Buffer.concat([varint((no << 3) | 2), varint(b.length), b]);
  };
  const kv = (k: string, v: string) => field(1, Buffer.concat([field(1, k), field(2, field(1, v))]));
  const attrs = [
    ["component", "proxy"],
    ["http.url", "http://example.com/some/path?with=query"],
    ["http.method", "GET"],
    ["http.protocol", "HTTP/1.1"],
    ["user_agent", "bench/1.0"],
    ["peer.address", "127.0.0.1"],
    ["http.status_code", "200"],
    ["upstream_cluster", "service/default/app/port/80"],
  ];
  const span = (i: number) =>
    Buffer.concat([
      field(1, Buffer.alloc(16, i + 1)),
      field(2, Buffer.alloc(8, i + 1)),
      field(5, `ingress ${i}`),
      ...attrs.map(([k, v]) => field(9, kv(k as string, v as string))),
    ]);
  const scope = Buffer.concat(Array.from({ length: n }, (_, i) => field(2, span(i))));
  const resource = field(1, kv("service.name", "gateway/default/gw/8080"));
  return field(1, Buffer.concat([resource, field(2, scope)]));
}

const server = {
  cert: tlsFixture("example.com.crt"),
  key: tlsFixture("example.com.key"),
  clientCa: tlsFixture("foo.example.com.crt"),
};
const tls: BackendTlsIR = {
  sni: "example.com",
  sans: ["example.com"],
  ca: tlsFixture("example.com.crt"),
  clientCert: { secret: "bench", chain: tlsFixture("foo.example.com.crt"), key: tlsFixture("foo.example.com.key") },
};

const collectors = {
  grpc: await startOtlpGrpcCollector(),
  grpcTls: await startOtlpGrpcCollector(server),
  http: await startOtlpReceiver(),
  httpTls: await startOtlpReceiver(server),
};
const cases = [
  { name: "gRPC", port: collectors.grpc.port, protocol: "GRPC" as const, tls: undefined },
  { name: "gRPC over mTLS", port: collectors.grpcTls.port, protocol: "GRPC" as const, tls },
  { name: "HTTP", port: collectors.http.port, protocol: "HTTP" as const, tls: undefined },
  { name: "HTTPS with mTLS", port: collectors.httpTls.port, protocol: "HTTP" as const, tls },
];
const relay = new SpanRelay({ log: (l) => console.error(l) });
relay.update({
  gateways: [
    {
      xds: {
        clusters: cases.map((c, i) =>
          buildCluster({
            kind: "static",
            name: `tracing/bench/c${i}`,
            endpoints: [{ address: "127.0.0.1", port: c.port, ready: true }],
            http2: c.protocol === "GRPC",
          }),
        ),
      },
      collectorTls: new Map(cases.flatMap((c, i) => (c.tls !== undefined ? [[`tracing/bench/c${i}`, c.tls]] : []))),
    },
  ],
} as never);
const body = exportOf(5);
const headers = cases.map((c, i) => ({
  [RELAY_METADATA]: encodeRelaySpec({
    cluster: `tracing/bench/c${i}`,
    protocol: c.protocol,
    path: "/v1/traces",
    authority: "collector",
    remove: ["http.url", "user_agent"],
    filter: false,
  }),
}));

async function run(i: number, n: number): Promise<{ cpuUs: number; wallUs: number }> {
  const h = headers[i] as Record<string, string>;
  const t0 = process.cpuUsage();
  const w0 = process.hrtime.bigint();
  for (let k = 0; k < n; k++) await relay.handle(body, h);
  const cpu = process.cpuUsage(t0);
  return { cpuUs: (cpu.user + cpu.system) / n, wallUs: Number(process.hrtime.bigint() - w0) / 1000 / n };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
// Warm each (connection, handshake, JIT) before measuring.
for (let i = 0; i < cases.length; i++) await run(i, 200);
const results = cases.map(() => ({ cpu: [] as number[], wall: [] as number[] }));
for (let r = 0; r < ROUNDS; r++) {
  for (let i = 0; i < cases.length; i++) {
    const m = await run(i, EXPORTS);
    results[i]?.cpu.push(m.cpuUs);
    results[i]?.wall.push(m.wallUs);
  }
}
console.log(`${EXPORTS} exports of 5 spans (${body.byteLength} bytes) per case, median of ${ROUNDS} rounds`);
console.log(
  `${"case".padEnd(18)} ${"CPU µs/export".padStart(14)} ${"wall µs/export".padStart(15)} ${"CPU vs clear".padStart(13)}`,
);
cases.forEach((c, i) => {
  const cpu = median(results[i]?.cpu ?? []);
  const wall = median(results[i]?.wall ?? []);
  const clear = median(results[c.protocol === "GRPC" ? 0 : 2]?.cpu ?? []);
  console.log(
    `${c.name.padEnd(18)} ${cpu.toFixed(1).padStart(14)} ${wall.toFixed(1).padStart(15)} ${(cpu / clear).toFixed(2).padStart(12)}x`,
  );
});
relay.close();
for (const c of Object.values(collectors)) await c.close();
