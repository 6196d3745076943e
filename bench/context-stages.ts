// What Sluice's response-side context stages cost per request (src/extproc/context.ts `atResponse`):
// - `sluice.context.response`: a user ext_proc's response attribute Envoy evaluates (`/native`: `response.code`)
//   against one Sluice computes on the response (`/sluice`: `string(response.code)`), same processor, same run;
// - `sluice.context.telemetry`: the same Gateway route with a span attribute Envoy evaluates, then with one Sluice
//   computes (`request.headers['x-t'].upperAscii()`), two Gateways in turn;
// - `sluice.buffer_fail_open` (src/extproc/buffer-hold.ts): a 64 KiB POST on a route without a buffer policy
//   (`/plain`) against one with `buffer.request.failureMode: FailOpen` (`/held`, held whole in Sluice).
// Prints CPU time per request of Envoy and Sluice and wall p50; the difference between the pairs is the stage. CPU
// from /proc (10 ms ticks): run enough requests (default 3000 per case). The processor and the collector run in this
// process and are not counted.
//
//   node dist/bench/context-stages.js [requests]

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import autocannon from "autocannon";
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingResponseSchema,
} from "../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { addGrpcService } from "../src/grpc/service.js";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../test/helpers/gateway.js";
import { startEchoUpstream } from "../test/helpers/net.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 3000);

// A processor that lets everything through.
const server = new grpc.Server();
addGrpcService(server, ExternalProcessor, {
  process(call) {
    call.on("data", (req: ProcessingRequest) => {
      const c = req.request.case;
      if (c === "requestHeaders" || c === "responseHeaders") {
        call.write(create(ProcessingResponseSchema, { response: { case: c, value: {} } }));
      }
    });
    call.on("end", () => call.end());
    call.on("error", () => undefined);
  },
});
const procPort = await new Promise<number>((resolve, reject) =>
  server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
);
const collector = createServer((req, res) => {
  req.resume();
  req.on("end", () => res.end());
});
await new Promise<void>((r) => collector.listen(0, "127.0.0.1", () => r()));
const collectorPort = (collector.address() as AddressInfo).port;
const up = await startEchoUpstream("app");

const routes = (names: readonly string[]) => `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${names
  .map(
    (n) => `    - name: ${n}
      matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ name: app, port: 80 }]`,
  )
  .join("\n")}
`;
const extProc = (attribute: string) => `extProc:
  backendRef: { name: proc, port: 80 }
  processingOptions: { requestBodyMode: None, responseHeaderMode: Send, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
  responseAttributes: { status: "${attribute}" }`;
const tracing = (expression: string) => `---
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
      attributes: { add: [{ name: t, expression: "${expression}" }] }
`;

async function run(gw: TestGateway, label: string, path: string, body?: string) {
  const opts = {
    url: `http://127.0.0.1:${gw.port}${path}`,
    connections: 4,
    headers: { "x-t": "bench" },
    ...(body !== undefined ? { method: "POST" as const, body } : {}),
  };
  await autocannon({ ...opts, amount: 300 });
  const e0 = cpuMs(gw.envoy.process.child.pid);
  const s0 = cpuMs(gw.sluice.child.pid);
  const r = await autocannon({ ...opts, amount: N });
  const envoy = ((cpuMs(gw.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(gw.sluice.child.pid) - s0) * 1000) / N;
  console.log(
    `${label.padEnd(16)} 2xx ${r["2xx"]} other ${r.non2xx + r.errors}  envoy ${envoy.toFixed(0)} µs/req  sluice ${sluice.toFixed(0)} µs/req  p50 ${r.latency.p50} ms`,
  );
}

const services = `${localService("app", up.port)}${localService("proc", procPort, "kubernetes.io/h2c")}${localService("collector", collectorPort)}`;
try {
  const gw = await startTestGateway(
    () =>
      `${services}${routes(["native", "sluice", "plain", "held", "open"])}${rulePolicy("native", extProc("response.code"))}${rulePolicy(
        "sluice",
        extProc("string(response.code)"),
      )}${rulePolicy("held", "buffer: { request: { failureMode: FailOpen } }")}`,
    "/open",
    (s) => s === 200,
  );
  try {
    for (const p of ["/native", "/sluice", "/native", "/sluice"]) await run(gw, `attrs ${p}`, p);
    const body = "x".repeat(64 * 1024);
    for (const p of ["/plain", "/held", "/plain", "/held"]) await run(gw, `buffer ${p}`, p, body);
  } finally {
    await gw.stop();
  }
  for (const [label, expression] of [
    ["trace native", "request.headers['x-t']"],
    ["trace sluice", "request.headers['x-t'].upperAscii()"],
  ] as const) {
    const t = await startTestGateway(
      () => `${services}${routes(["open"])}${tracing(expression)}`,
      "/open",
      (s) => s === 200,
    );
    try {
      for (let i = 0; i < 2; i++) await run(t, label, "/open");
    } finally {
      await t.stop();
    }
  }
} finally {
  await up.close();
  collector.close();
  server.forceShutdown();
}
