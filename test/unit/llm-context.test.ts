// The `llm` variable in Sluice's context stages (src/extproc/context.ts): read from what the LLM ext_proc left in
// dynamic metadata (forwarded to the stage), or from the request body ahead of the LLM ext_proc; the tracing stage
// waiting for the end of an LLM answer; and how the translator asks for them (forwarded namespace, buffered body,
// mode override). test/e2e/llm-context.test.ts shows the same through Envoy with an OpenAI client.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { JsonObject } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import {
  type ContextSpec,
  computeContext,
  llmFromBody,
  llmFromMetadata,
  serveContext,
} from "../../src/extproc/context.js";
import { requestVariable } from "../../src/extproc/llm/cel.js";
import type { ExtProcRequest, Reply } from "../../src/extproc/llm/wire.js";
import { LLM_METADATA_FIELDS, LLM_NAMESPACE } from "../../src/extproc/llm-metadata.js";
import type { TransformationCall } from "../../src/extproc/transformation.js";
import { ExternalProcessorSchema } from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { ProcessingMode_BodySendMode } from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { LLM_METADATA_KEYS, LLM_METADATA_NAMESPACE } from "../../src/translate/llm/table.js";
import { telemetryContextFilter, tracingValue } from "../../src/translate/xds/tracing-context.js";

const DONE = {
  request_model: "gpt-x",
  streaming: true,
  model: "gpt-x-2024",
  provider: "openai",
  input_tokens: 7,
  output_tokens: 5,
  total_tokens: 12,
} satisfies JsonObject;

test("the leaf module's namespace and keys are the LLM table's", () => {
  assert.equal(LLM_NAMESPACE, LLM_METADATA_NAMESPACE);
  assert.equal(LLM_METADATA_FIELDS["requestModel"], LLM_METADATA_KEYS.requestModel);
  assert.equal(LLM_METADATA_FIELDS["streaming"], LLM_METADATA_KEYS.streaming);
  assert.equal(LLM_METADATA_FIELDS["totalTokens"], LLM_METADATA_KEYS.totalTokens);
});

test("llm from metadata: the fields present, integers as CEL ints, cache counts 0 once the usage is known", () => {
  assert.equal(llmFromMetadata(undefined), undefined);
  assert.equal(llmFromMetadata({ unrelated: 1 }), undefined);
  const early = llmFromMetadata({ request_model: "m", streaming: false }) as unknown as Map<string, unknown>;
  assert.deepEqual(
    [...early.entries()],
    [
      ["requestModel", "m"],
      ["streaming", false],
    ],
  );
  const done = llmFromMetadata(DONE) as unknown as Map<string, unknown>;
  assert.equal(done.get("inputTokens"), 7n);
  assert.equal(done.get("totalTokens"), 12n);
  assert.equal(done.get("responseModel"), "gpt-x-2024");
  assert.equal(done.get("cachedInputTokens"), 0n);
  assert.equal(done.get("countTokens"), undefined);
});

test("llm from the request body: model and stream, a Google client's path, nothing for a body that is no object", () => {
  const m = (v: ReturnType<typeof llmFromBody>) => (v === undefined ? undefined : Object.fromEntries(v as never));
  assert.deepEqual(m(llmFromBody("/v1/chat/completions", '{"model":"a","stream":true}')), {
    streaming: true,
    requestModel: "a",
  });
  assert.deepEqual(m(llmFromBody("/v1/chat/completions", '{"messages":[]}')), { streaming: false });
  assert.deepEqual(m(llmFromBody("/v1beta/models/gemini-x:streamGenerateContent?alt=sse", "{}")), {
    streaming: true,
    requestModel: "gemini-x",
  });
  assert.equal(llmFromBody("/v1/chat/completions", "[1]"), undefined);
  assert.equal(llmFromBody("/v1/chat/completions", "not json"), undefined);
});

test("computed values read llm; one whose field is not known yet is left out", () => {
  const spec: ContextSpec = {
    values: [
      { namespace: "c", key: "model", expression: "llm.requestModel.upperAscii()", as: "attribute" },
      { namespace: "c", key: "tokens", expression: "string(llm.totalTokens) + ' tokens'", as: "text" },
    ],
    requestBody: false,
  };
  const request = requestVariable({ ":path": "/v1/chat/completions" });
  const early = computeContext(spec, { request, llm: llmFromBody("/", '{"model":"gpt-x"}') }, () => undefined);
  assert.deepEqual(early.phase === "requestHeaders" && early.metadata, { c: { model: "GPT-X" } });
  const done = computeContext(spec, { request, llm: llmFromMetadata(DONE) }, () => undefined);
  assert.deepEqual(done.phase === "requestHeaders" && done.metadata, { c: { model: "GPT-X", tokens: "12 tokens" } });
});

/** Drives serveContext with the messages given, as Envoy would send them; returns what it answered. */
function drive(spec: ContextSpec, messages: ExtProcRequest[]): { replies: Reply[]; ended: boolean } {
  const handlers: { data?: (r: ExtProcRequest) => void } = {};
  const out = { replies: [] as Reply[], ended: false };
  const call: TransformationCall = {
    on(event: string, fn: (x: never) => void) {
      if (event === "data") handlers.data = fn as (r: ExtProcRequest) => void;
    },
    write: (r) => out.replies.push(r),
    end: () => {
      out.ended = true;
    },
  } as TransformationCall;
  serveContext(call, spec, () => undefined);
  for (const m of messages) if (!out.ended) handlers.data?.(m);
  return out;
}

const headers = (
  kind: "requestHeaders" | "responseHeaders",
  h: Record<string, string>,
  endOfStream: boolean,
  llm?: JsonObject,
): ExtProcRequest => ({
  request: {
    case: kind,
    value: {
      headers: { headers: Object.entries(h).map(([key, value]) => ({ key, value, rawValue: new Uint8Array() })) },
      endOfStream,
    },
  },
  attributes: {},
  ...(llm !== undefined ? { metadataContext: { filterMetadata: { [LLM_NAMESPACE]: llm } } } : {}),
});
const body = (
  kind: "requestBody" | "responseBody",
  text: string,
  endOfStream: boolean,
  llm?: JsonObject,
): ExtProcRequest => ({
  request: { case: kind, value: { body: new TextEncoder().encode(text), endOfStream } },
  attributes: {},
  ...(llm !== undefined ? { metadataContext: { filterMetadata: { [LLM_NAMESPACE]: llm } } } : {}),
});

const TRACING: ContextSpec = {
  values: [tracingValue("llm.requestModel + ' ' + string(llm.totalTokens)", 0)],
  requestBody: false,
  atResponse: true,
  untilEnd: true,
};
const REQ = headers("requestHeaders", { ":path": "/v1/chat/completions", ":method": "POST" }, false);

test("tracing stage: an LLM answer is streamed to the stage and its values are computed at its end", () => {
  const early = { request_model: "gpt-x", streaming: true };
  const { replies, ended } = drive(TRACING, [
    REQ,
    headers("responseHeaders", { ":status": "200" }, false, early),
    body("responseBody", "data: {}\n\n", false, early),
    body("responseBody", "data: [DONE]\n\n", true, DONE),
  ]);
  assert.equal(ended, true);
  assert.deepEqual(
    replies.map((r) => r.phase),
    ["requestHeaders", "responseHeaders", "responseBody", "responseBody"],
  );
  const atHeaders = replies[1];
  assert.equal(
    atHeaders?.phase === "responseHeaders" && atHeaders.modeOverride?.responseBodyMode,
    ProcessingMode_BodySendMode.STREAMED,
  );
  assert.equal(atHeaders?.phase === "responseHeaders" && atHeaders.metadata, undefined, "nothing yet");
  assert.equal(replies[2]?.phase === "responseBody" && replies[2].metadata, undefined, "a chunk: unchanged");
  assert.deepEqual(replies[3]?.phase === "responseBody" && replies[3].metadata, {
    "sluice.context": { "tracing.attributes.0": "gpt-x 12" },
  });
});

test("tracing stage: a request the LLM ext_proc did not see, or an answer without a body, is computed at its headers", () => {
  const plain = drive(TRACING, [REQ, headers("responseHeaders", { ":status": "404" }, false)]);
  assert.equal(plain.ended, true);
  assert.deepEqual(
    plain.replies.map((r) => r.phase),
    ["requestHeaders", "responseHeaders"],
  );
  assert.equal(plain.replies[1]?.phase === "responseHeaders" && plain.replies[1].modeOverride, undefined);
  const headOnly = drive(TRACING, [REQ, headers("responseHeaders", { ":status": "200" }, true, DONE)]);
  assert.deepEqual(headOnly.replies[1]?.phase === "responseHeaders" && headOnly.replies[1].metadata, {
    "sluice.context": { "tracing.attributes.0": "gpt-x 12" },
  });
});

test("request stage ahead of the LLM ext_proc: the request's model from its body", () => {
  const spec: ContextSpec = {
    values: [{ namespace: "sluice.context", key: "m", expression: "llm.requestModel", as: "attribute" }],
    requestBody: true,
    llmBody: true,
  };
  const { replies, ended } = drive(spec, [REQ, body("requestBody", '{"model":"llama-3","stream":false}', true)]);
  assert.equal(ended, true);
  const last = replies.at(-1);
  assert.deepEqual(last?.phase === "requestBody" && last.metadata, {
    "sluice.context": { m: "llama-3" },
  });
});

test("the tracing filter forwards the LLM namespace and allows the mode override only when an expression reads llm", () => {
  const config = (values: Parameters<typeof telemetryContextFilter>[0]) => {
    const f = telemetryContextFilter(values);
    const any = f.configType?.case === "typedConfig" ? f.configType.value : undefined;
    const c = any === undefined ? undefined : anyUnpack(any as never, ExternalProcessorSchema);
    assert.ok(c !== undefined);
    return c;
  };
  const llm = config([tracingValue("string(llm.totalTokens)", 0)]);
  assert.equal(llm.allowModeOverride, true);
  assert.deepEqual(llm.metadataOptions?.forwardingNamespaces?.untyped, [LLM_NAMESPACE]);
  const plain = config([tracingValue("request.headers['x'].upperAscii()", 0)]);
  assert.equal(plain.allowModeOverride, false);
  assert.equal(plain.metadataOptions?.forwardingNamespaces, undefined);
});

const TRANSLATE_YAML = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: proc, namespace: default }
spec: { static: { host: 10.0.0.9, port: 9000 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: app, namespace: default }
spec: { static: { host: 10.0.0.8, port: 8000 } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ai, namespace: default }
spec:
  ai:
    provider: { providerA: { model: gpt-4o } }
  policies:
    auth: { key: sk-test }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: plain, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /plain } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: app }] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /llm } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ai }] }]
${["plain", "llm"]
  .map(
    (r) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: proc-${r}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${r} }]
  traffic:
    extProc:
      backendRef: { group: sluice.dev, kind: GwBackend, name: proc }
      requestAttributes: { model: llm.requestModel }
      responseAttributes: { tokens: "string(llm.totalTokens)" }
      metadataContext: { acme: { stream: llm.streaming } }
`,
  )
  .join("")}`;

test("translation: llm attributes are served on a route to an AI backend, and reported Ignored on any other", async () => {
  const { mkdtempSync, rmSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const { loadAndTranslate } = await import("../../src/cli/load.js");
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-context-"));
  try {
    writeFileSync(join(dir, "all.yaml"), TRANSLATE_YAML);
    const { load, result } = await loadAndTranslate([join(dir, "all.yaml")]);
    assert.deepEqual(load.problems, [], "the file loads");
    const status = (name: string) =>
      JSON.stringify(result.statuses.find((s) => s.kind === "GwPolicy" && s.name === name));
    const plain = status("proc-plain");
    assert.match(plain, /requestAttributes\.model: reads llm, and this route sends to no AI backend/);
    assert.match(plain, /responseAttributes\.tokens: reads llm, and this route sends to no AI backend/);
    assert.match(plain, /metadataContext\.acme\.stream: reads llm, and this route sends to no AI backend/);
    const llm = status("proc-llm");
    assert.doesNotMatch(llm, /reads llm/, "served: nothing said about llm");
    assert.doesNotMatch(`${plain}${llm}`, /NotYetSupported/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("request stage: an upgrade (a websocket) is computed at its headers and the stream closed, never held for a body", () => {
  const spec: ContextSpec = {
    values: [{ namespace: "sluice.context", key: "m", expression: "llm.requestModel", as: "attribute" }],
    requestBody: true,
    llmBody: true,
  };
  const upgrade = headers(
    "requestHeaders",
    { ":path": "/v1/realtime?model=gpt-realtime", ":method": "GET", upgrade: "websocket", connection: "Upgrade" },
    false,
  );
  const { replies, ended } = drive(spec, [upgrade]);
  assert.equal(ended, true);
  assert.deepEqual(
    replies.map((r) => r.phase),
    ["requestHeaders"],
  );
  const plain = drive(spec, [REQ]);
  assert.equal(plain.ended, false, "a request with a body waits for it");
});
