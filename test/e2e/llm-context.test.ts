// `llm` in extProc request/response attributes and in tracing expressions, through a real Envoy, `sluice serve`, an AI
// GwBackend whose fake provider speaks the chat completions format, and the official OpenAI client:
// - request attributes reading llm: the user's processor runs before the LLM ext_proc has read the request, so
//   Sluice's request stage reads the request's model and streaming from its body; token counts are not sent;
// - response attributes, sent with the response headers: Envoy's CEL reads what the LLM ext_proc left in dynamic
//   metadata (a non-streamed answer is complete by then, so its token counts are there; a streamed answer's are not
//   yet), and an expression Envoy cannot evaluate (string conversion) is computed by the response stage from the same
//   metadata;
// - `metadataContext` reading llm: computed by the request stage as request attributes are;
// - span attributes and a span `filter` reading llm, one of each computed by Sluice's tracing stage, which waits for
//   the end of an LLM answer: token counts are known for streamed and non-streamed answers alike, and the span whose
//   filter is false is not exported.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import OpenAI from "openai";
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { addGrpcService } from "../../src/grpc/service.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { localService } from "../helpers/gateway.js";
import type { GrpcTestServer } from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp.js";
import { openRealtime } from "../helpers/realtime-client.js";

type Attributes = Record<string, unknown>;

/** A processor recording the attributes sent with each request's headers and its first response message. */
async function startRecordingProcessor(): Promise<
  GrpcTestServer & { readonly seen: { request: Attributes; metadata: Attributes; response?: Attributes }[] }
> {
  const seen: { request: Attributes; metadata: Attributes; response?: Attributes }[] = [];
  const ours = (req: ProcessingRequest): Attributes =>
    JSON.parse(JSON.stringify(req.attributes["envoy.filters.http.ext_proc"] ?? {})) as Attributes;
  const server = new grpc.Server();
  addGrpcService(server, ExternalProcessor, {
    process(call) {
      let mine: { request: Attributes; metadata: Attributes; response?: Attributes } | undefined;
      call.on("data", (req: ProcessingRequest) => {
        if (req.request.case === "requestHeaders") {
          const md = req.metadataContext?.filterMetadata["acme.llm"];
          mine = { request: ours(req), metadata: JSON.parse(JSON.stringify(md ?? {})) as Attributes };
          seen.push(mine);
        } else if (req.request.case === "responseHeaders" || req.request.case === "responseBody") {
          if (mine !== undefined && mine.response === undefined) mine.response = ours(req);
        } else return;
        call.write(create(ProcessingResponseSchema, { response: { case: req.request.case, value: {} } }));
      });
      call.on("end", () => call.end());
      call.on("error", () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, seen, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
}

const resources = (
  provider: number,
  proc: number,
  collector: number,
) => `${localService("inference", provider)}${localService(
  "proc",
  proc,
  "kubernetes.io/h2c",
)}${localService("collector", collector)}---
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
    - matches: [{ path: { type: PathPrefix, value: /selfhosted } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: selfhosted }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: atend, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /atend } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: selfhosted }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: processor-at-end, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: atend }]
  traffic:
    extProc:
      backendRef: { name: proc, port: 80 }
      processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: Buffered, requestTrailerMode: Skip, responseTrailerMode: Skip }
      requestAttributes: { model: llm.requestModel }
      responseAttributes:
        tokens: llm.totalTokens
        summary: "llm.requestModel + ':' + string(llm.outputTokens)"
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: processor, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm }]
  traffic:
    extProc:
      backendRef: { name: proc, port: 80 }
      processingOptions: { requestBodyMode: None, responseHeaderMode: Send, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
      requestAttributes:
        model: llm.requestModel
        upper: llm.requestModel.upperAscii()
        streaming: llm.streaming
        tokens: llm.totalTokens
      metadataContext:
        acme.llm: { model: llm.requestModel, stream: llm.streaming }
      responseAttributes:
        model: llm.requestModel
        tokens: llm.totalTokens
        provider: llm.provider
        summary: "llm.requestModel + ':' + string(llm.outputTokens)"
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
      randomSampling: "true"
      filter: "llm.requestModel.lowerAscii().startsWith('keep') && llm.totalTokens > 0"
      attributes:
        add:
          - { name: model, expression: "llm.requestModel" }
          - { name: tokens, expression: "llm.totalTokens" }
          - { name: usage, expression: "string(llm.inputTokens) + '+' + string(llm.outputTokens)" }
`;

describe("llm in extProc attributes and tracing expressions, through Envoy", { timeout: 120_000 }, () => {
  let provider: FakeProvider;
  let proc: Awaited<ReturnType<typeof startRecordingProcessor>>;
  let collector: OtlpReceiver;
  let env: LlmEnv;
  let client: OpenAI;

  before(async () => {
    provider = await startFakeProvider({ name: "pod-a", apiKey: "in-cluster-key" });
    proc = await startRecordingProcessor();
    collector = await startOtlpReceiver();
    env = await startLlmEnv(resources(provider.port, proc.port, collector.port), "/selfhosted/v1/chat/completions");
    client = new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/selfhosted/v1`, maxRetries: 0 });
  });
  after(async () => {
    await env?.stop();
    await provider?.close();
    await proc?.close();
    await collector?.close();
  });

  const seenFor = (model: string) => {
    const s = proc.seen.find((x) => x.request["model"] === model);
    assert.ok(s !== undefined, `the processor saw ${model}: ${JSON.stringify(proc.seen)}`);
    return s;
  };

  test("a non-streamed answer: request attributes from the request, response attributes with its token counts", async () => {
    const r = await client.chat.completions.create({
      model: "Keep-Plain",
      messages: [{ role: "user", content: "count my tokens" }],
    });
    assert.equal(r.usage?.total_tokens, 18, "the provider's usage");
    const s = seenFor("Keep-Plain");
    assert.deepEqual(s.request, { model: "Keep-Plain", upper: "KEEP-PLAIN", streaming: false });
    assert.deepEqual(s.metadata, { model: "Keep-Plain", stream: false }, "metadataContext reads them the same way");
    assert.ok(!("tokens" in s.request), "token counts are not known before the answer");
    const resp = s.response ?? {};
    assert.equal(resp["model"], "Keep-Plain");
    assert.equal(resp["tokens"], 18);
    assert.equal(typeof resp["provider"], "string");
    assert.ok(String(resp["provider"]).length > 0, JSON.stringify(resp));
    assert.equal(resp["summary"], "Keep-Plain:7", "computed by Sluice's response stage");
  });

  test("a streamed answer: sent with its headers, the response attributes have no token counts yet", async () => {
    const stream = await client.chat.completions.create({
      model: "keep-stream",
      messages: [{ role: "user", content: "stream my tokens" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let total: number | undefined;
    let text = "";
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) total = chunk.usage.total_tokens;
    }
    assert.match(text, /Hello from pod-a/);
    assert.equal(total, 18);
    const s = seenFor("keep-stream");
    assert.deepEqual(s.request, { model: "keep-stream", upper: "KEEP-STREAM", streaming: true });
    const resp = s.response ?? {};
    assert.equal(resp["model"], "keep-stream", "known since the request");
    assert.equal(
      resp["provider"],
      seenFor("Keep-Plain").response?.["provider"],
      "the provider, known with the headers",
    );
    for (const absent of ["tokens", "summary"]) {
      assert.ok(
        !(absent in resp),
        `${absent}: not sent with the headers of a streamed answer (${JSON.stringify(resp)})`,
      );
    }
  });

  test("headers skipped, body buffered: the attributes go with the complete answer, streamed too", async () => {
    const atEnd = new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/atend/v1`, maxRetries: 0 });
    const stream = await atEnd.chat.completions.create({
      model: "at-end-stream",
      messages: [{ role: "user", content: "stream to the end" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _ of stream) {
      // drained
    }
    const s = seenFor("at-end-stream");
    assert.deepEqual(s.response, { tokens: 18, summary: "at-end-stream:7" });
  });

  test("spans carry the answer's token counts, streamed or not; the filter reading llm drops the other span", async () => {
    const dropped = await client.chat.completions.create({
      model: "drop-me",
      messages: [{ role: "user", content: "not traced" }],
    });
    assert.equal(dropped.usage?.total_tokens, 18);
    const droppedStream = await client.chat.completions.create({
      model: "drop-stream",
      messages: [{ role: "user", content: "not traced either" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const _ of droppedStream) {
      // drained
    }
    const spans = await waitFor(
      "both kept spans",
      async () => {
        const kept = collector.spans.filter((x) => x.attributes["model"] !== undefined);
        const models = new Set(kept.map((x) => x.attributes["model"]));
        return models.has("Keep-Plain") && models.has("keep-stream") ? kept : undefined;
      },
      20_000,
    );
    // Envoy exports every 5 spans or every 5 s: one more flush for a span that should not be there.
    await new Promise((r) => setTimeout(r, 6000));
    const all = collector.spans.filter((x) => x.attributes["model"] !== undefined);
    assert.deepEqual(
      [...new Set(all.map((x) => x.attributes["model"]))].sort(),
      ["Keep-Plain", "keep-stream"],
      "the spans whose filter is false (streamed or not) are not exported",
    );
    for (const s of spans) {
      assert.equal(String(s.attributes["tokens"]), "18", `Envoy's tag (${JSON.stringify(s.attributes)})`);
      assert.equal(s.attributes["usage"], "11+7", `Sluice's tracing stage (${JSON.stringify(s.attributes)})`);
      assert.ok(!("sluice.span_filter" in s.attributes), "the filter tag is taken out");
    }
  });
});

describe("llm request attributes on a route that also takes Realtime websockets", { timeout: 90_000 }, () => {
  let rt: FakeRealtime;
  let proc: Awaited<ReturnType<typeof startRecordingProcessor>>;
  let env: LlmEnv;

  before(async () => {
    rt = await startFakeRealtime({ name: "realtime", apiKey: "sk-provider" });
    proc = await startRecordingProcessor();
    env = await startLlmEnv(
      `${localService("proc", proc.port, "kubernetes.io/h2c")}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: openai, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: realtime, providerA: {}, host: 127.0.0.1, port: ${rt.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes:
        /v1/realtime: Realtime
        /v1/chat/completions: Completions
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: processor, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm }]
  traffic:
    extProc:
      backendRef: { name: proc, port: 80 }
      processingOptions: { requestBodyMode: None, responseHeaderMode: Skip, responseBodyMode: None, requestTrailerMode: Skip, responseTrailerMode: Skip }
      requestAttributes: { model: llm.requestModel, path: request.path }
`,
      "/v1/chat/completions",
    );
  });
  after(async () => {
    await env?.stop();
    await rt?.close();
    await proc?.close();
  });

  test("a websocket upgrade is not held for a body: it opens, and its attributes have no llm", async () => {
    const client = await openRealtime(env.port, "/v1/realtime", "client-key");
    const session = await client.next();
    assert.equal(session.type, "session.created");
    client.ws.close(1000, "bye");
    const s = proc.seen.find((x) => x.request["path"] === "/v1/realtime");
    assert.deepEqual(s?.request, { path: "/v1/realtime" });
  });
});
