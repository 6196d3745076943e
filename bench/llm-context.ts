// What serving `llm` in Sluice's context stages costs per LLM request (src/extproc/context.ts), through Envoy with an
// AI GwBackend and the fake chat completions provider (in this process, not counted):
// - `sluice.context.telemetry` with a span attribute reading llm that Sluice computes
//   (`string(llm.inputTokens) + '+' + string(llm.outputTokens)`: the stage is streamed an LLM answer's body and
//   computes at its end) against one Envoy evaluates (`llm.totalTokens`), for non-streamed and streamed answers;
// - `sluice.context.main` computing a request attribute `llm.requestModel` from the buffered request body, against a
//   request attribute Envoy evaluates (`request.path`), same processor (in this process).
// Prints CPU time per request of Envoy and Sluice, wall p50 and the messages per request Envoy sent Sluice's context
// stages (its ext_proc stats); the difference within a pair is the stage. CPU from /proc (10 ms ticks): run enough
// requests (default 1500 per case). WORDS=<n> makes the prompt, and so the fake's answer, n words long (one SSE event
// per word when streamed; the fake writes them at once, so Envoy mostly reads them as one chunk). PACED=<n> answers
// from a paced chat completions server in this process instead: a streamed answer of n content events 1 ms apart, so
// Envoy passes them on as separate chunks (the tracing stage's cost per chunk).
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
const WORDS = Number(process.env["WORDS"] ?? "5");

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
const PACED = Number(process.env["PACED"] ?? "0");
const provider =
  PACED > 0 ? await startPacedProvider(PACED) : await startFakeProvider({ name: "bench", apiKey: "in-cluster-key" });

/** Chat completions: non-streamed at once; streamed as `n` content events 1 ms apart, then usage and [DONE]. */
async function startPacedProvider(n: number): Promise<{ port: number; close(): Promise<void> }> {
  const usage = { prompt_tokens: 11, completion_tokens: n, total_tokens: 11 + n };
  const base = { id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1700000000, model: "paced" };
  const srv = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const b = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { stream?: boolean };
      if (b.stream !== true) {
        res.writeHead(200, { "content-type": "application/json" });
        const message = { role: "assistant", content: "paced" };
        res.end(
          JSON.stringify({
            ...base,
            object: "chat.completion",
            choices: [{ index: 0, message, finish_reason: "stop" }],
            usage,
          }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const event = (d: unknown) => res.write(`data: ${JSON.stringify(d)}\n\n`);
      let i = 0;
      const next = () => {
        if (i < n) {
          event({ ...base, choices: [{ index: 0, delta: { content: `w${i++} ` }, finish_reason: null }] });
          setTimeout(next, 1);
          return;
        }
        event({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
        event({ ...base, choices: [], usage });
        res.end("data: [DONE]\n\n");
      };
      next();
    });
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", () => r()));
  return {
    port: (srv.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => srv.close(() => r())),
  };
}

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
    messages: [{ role: "user", content: Array.from({ length: WORDS }, (_, i) => `w${i}`).join(" ") }],
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });

/** Messages Envoy has sent Sluice's context stages so far (every `sluice_context_*` ext_proc's stream_msgs_sent). */
async function contextMessages(env: LlmEnv): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${env.envoy.adminPort}/stats?filter=sluice_context_.*stream_msgs_sent`);
  let n = 0;
  for (const m of (await r.text()).matchAll(/: (\d+)$/gm)) n += Number(m[1]);
  return n;
}

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
  const m0 = await contextMessages(env);
  const r = await autocannon({ ...opts, amount: N });
  const msgs = ((await contextMessages(env)) - m0) / N;
  const envoy = ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(env.sluice.child.pid) - s0) * 1000) / N;
  console.log(
    `${label.padEnd(28)} 2xx ${r["2xx"]} other ${r.non2xx + r.errors}  envoy ${envoy.toFixed(0)} µs/req  sluice ${sluice.toFixed(0)} µs/req  p50 ${r.latency.p50} ms  stage msgs ${msgs.toFixed(1)}/req`,
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
