// What serving `llm` in Sluice's context stages costs per LLM request (src/extproc/context.ts), through Envoy with an
// AI GwBackend and the fake chat completions provider (in this process, not counted):
// - `sluice.context.tracing` with a span attribute reading llm that Sluice computes
//   (`string(llm.inputTokens) + '+' + string(llm.outputTokens)`: the stage is streamed an LLM answer's body and
//   computes at its end) against one Envoy evaluates (`llm.totalTokens`), for non-streamed and streamed answers;
// - `sluice.context.main` computing a request attribute `llm.requestModel` from the buffered request body, against a
//   request attribute Envoy evaluates (`request.path`), same processor (in this process).
// Prints CPU time per request of Envoy and Sluice and wall p50; the difference within a pair is the stage. CPU from
// /proc (10 ms ticks): run enough requests (default 1500 per case).
//
//   node dist/bench/llm-context.js [requests]

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
import { startFakeProvider } from "../test/helpers/fake-providers.js";
import { localService } from "../test/helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../test/helpers/llm-env.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 1500);

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
const provider = await startFakeProvider({ name: "bench", apiKey: "in-cluster-key" });

const base = `${localService("inference", provider.port)}${localService("proc", procPort, "kubernetes.io/h2c")}${localService("collector", collectorPort)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: selfhosted, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { name: inference, port: 80 }
        formats: [{ type: Completions }]
  policies:
    auth: { key: in-cluster-key }
    ai:
      routes:
        /v1/chat/completions: Completions
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /llm } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: selfhosted }]
`;
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
const extProc = (expression: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: processor, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm }]
  traffic:
    extProc:
      backendRef: { name: proc, port: 80 }
      processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
      requestAttributes: { a: "${expression}" }
`;

const PATH = "/llm/v1/chat/completions";
const body = (stream: boolean) =>
  JSON.stringify({
    model: "bench-model",
    messages: [{ role: "user", content: "count these tokens for the bench" }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });

async function run(env: LlmEnv, label: string, stream: boolean) {
  const opts = {
    url: `${env.baseUrl}${PATH}`,
    connections: 4,
    method: "POST" as const,
    headers: { "content-type": "application/json", authorization: "Bearer client" },
    body: body(stream),
  };
  await autocannon({ ...opts, amount: 200 });
  const e0 = cpuMs(env.envoy.process.child.pid);
  const s0 = cpuMs(env.sluice.child.pid);
  const r = await autocannon({ ...opts, amount: N });
  const envoy = ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(env.sluice.child.pid) - s0) * 1000) / N;
  console.log(
    `${label.padEnd(28)} 2xx ${r["2xx"]} other ${r.non2xx + r.errors}  envoy ${envoy.toFixed(0)} µs/req  sluice ${sluice.toFixed(0)} µs/req  p50 ${r.latency.p50} ms`,
  );
}

try {
  for (const [label, extra] of [
    ["trace native", tracing("llm.totalTokens")],
    ["trace sluice", tracing("string(llm.inputTokens) + '+' + string(llm.outputTokens)")],
    ["req attr native", extProc("request.path")],
    ["req attr llm", extProc("llm.requestModel")],
  ] as const) {
    const env = await startLlmEnv(`${base}${extra}`, PATH);
    try {
      for (let i = 0; i < 2; i++) {
        await run(env, `${label} non-streamed`, false);
        await run(env, `${label} streamed`, true);
      }
    } finally {
      await env.stop();
    }
  }
} finally {
  await provider.close();
  collector.close();
  server.forceShutdown();
}
