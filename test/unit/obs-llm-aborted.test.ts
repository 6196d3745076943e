// LLM requests that end without a response are counted (src/observability/llm.ts, llmAborted): the LLM ext_proc's
// Process handler, wrapped in a request context as src/cli/server.ts installs it, driven as Envoy drives it, then the
// stream reset (the client went away) or ended by Envoy before the response came; /metrics read with a Prometheus
// text parser. A complete exchange counts `ok` and nothing `aborted`.

import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { before, test } from "node:test";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import { LlmExtProcService } from "../../src/extproc/llm/service.js";
import { ProcessingRequestSchema } from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import type { BidiCall, BidiHandler } from "../../src/grpc/unary-server.js";
import { withStreamContext } from "../../src/observability/context.js";
import { updateLlmLabels } from "../../src/observability/llm.js";
import { series, setRequestMetrics } from "../../src/observability/metrics.js";
import type { TranslationResult } from "../../src/translate/translate.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { tempConfigDir } from "../helpers/processes.js";
import { parsePrometheusText, sampleSum, sampleValue } from "../helpers/prom-text.js";

const te = new TextEncoder();
const service = new LlmExtProcService();
let result: TranslationResult;
let handler: BidiHandler;
let entry: string;

before(async () => {
  const cfg = tempConfigDir();
  try {
    cfg.write(
      "config.yaml",
      `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: claude, namespace: default }
spec:
  ai: { provider: { providerD: { model: claude-sonnet-4 }, host: 127.0.0.1, port: 9 } }
  policies: { auth: { key: sk-test } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: claude }] }]
`,
    );
    result = (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
  service.update(result);
  updateLlmLabels(result.llm);
  const id = result.llm.routes.get("default/gw|httproute/default/llm/rule/0/match/0");
  assert.ok(id !== undefined, [...result.llm.routes.keys()].join(", "));
  entry = id;
  const plain = service.bidi.get("/envoy.service.ext_proc.v3.ExternalProcessor/Process");
  assert.ok(plain !== undefined);
  handler = withStreamContext("llm ext_proc", plain);
  setRequestMetrics(true);
});

const msg = (request: NonNullable<MessageInitShape<typeof ProcessingRequestSchema>["request"]>) =>
  toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, { request }));
const headers = (h: Record<string, string>) => ({
  headers: { headers: Object.entries(h).map(([key, v]) => ({ key, rawValue: te.encode(v) })) },
});
const requestHeaders = msg({
  case: "requestHeaders",
  value: headers({ ":path": "/v1/chat/completions", ":method": "POST", "content-type": "application/json" }),
});
const requestBody = msg({
  case: "requestBody",
  value: {
    endOfStream: true,
    body: te.encode(
      JSON.stringify({ model: "claude-sonnet-4", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    ),
  },
});
const responseHeaders = msg({
  case: "responseHeaders",
  value: headers({ ":status": "200", "content-type": "application/json" }),
});
const responseBody = msg({
  case: "responseBody",
  value: {
    endOfStream: true,
    body: te.encode(
      JSON.stringify({
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "claude-sonnet-4",
        content: [{ type: "text", text: "Hello" }],
        stop_reason: "end_turn",
        stop_sequence: null,
        usage: { input_tokens: 7, output_tokens: 3 },
      }),
    ),
  },
});

/** A Process call as the HTTP/2 server hands it over. */
function call(): EventEmitter & BidiCall & { written: number; ended: boolean } {
  const c = Object.assign(new EventEmitter(), {
    headers: { "x-sluice-llm-entry": entry },
    written: 0,
    ended: false,
    write(): void {
      c.written++;
    },
    end(): void {
      c.ended = true;
    },
  });
  handler(c);
  return c;
}

const LABELS = { gateway: "default/gw", route: "httproute/default/llm/rule/0/match/0" };

function counts() {
  const f = parsePrometheusText(series.text());
  return {
    aborted: sampleValue(f, "sluice_llm_requests_total", { ...LABELS, outcome: "aborted" }),
    ok: sampleValue(f, "sluice_llm_requests_total", { ...LABELS, outcome: "ok" }),
    abortedTimed: sampleSum(f, "gen_ai_client_operation_duration_seconds_count", {
      ...LABELS,
      error_type: "aborted",
    }),
  };
}

test("a complete exchange counts ok, not aborted", () => {
  const before = counts();
  const c = call();
  for (const m of [requestHeaders, requestBody, responseHeaders, responseBody]) c.emit("data", m);
  assert.equal(c.written, 4);
  assert.ok(c.ended, "the service ends its side after the last answer");
  const after = counts();
  assert.equal(after.ok - before.ok, 1);
  assert.equal(after.aborted - before.aborted, 0);
});

test("a stream reset after the request (the client went away): counted aborted once, and timed", () => {
  const before = counts();
  const c = call();
  c.emit("data", requestHeaders);
  c.emit("data", requestBody);
  c.emit("error", new Error("stream reset by the peer"));
  const after = counts();
  assert.equal(after.aborted - before.aborted, 1);
  assert.equal(after.abortedTimed - before.abortedTimed, 1);
  assert.equal(after.ok - before.ok, 0);
});

test("Envoy ends the stream while the response is still due: counted aborted", () => {
  const before = counts();
  const c = call();
  c.emit("data", requestHeaders);
  c.emit("data", requestBody);
  c.emit("data", responseHeaders);
  c.emit("end");
  assert.ok(c.ended);
  assert.equal(counts().aborted - before.aborted, 1);
});

test("a stream that never carried a request is not a request: nothing counted", () => {
  const before = counts();
  const c = call();
  c.emit("error", new Error("reset before any message"));
  const after = counts();
  assert.deepEqual(after, before);
});
