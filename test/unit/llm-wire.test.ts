// The LLM ext_proc's wire reader and writer (src/extproc/llm/wire.ts) against protobuf-es on the same messages: the
// reader yields what protobuf-es decodes for every field the service reads, the writer the same bytes as toBinary() of
// the same answer built as a protobuf-es message.

import assert from "node:assert/strict";
import { test } from "node:test";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { type Reply, readProcessingRequest, replyMessage, writeReply } from "../../src/extproc/llm/wire.js";
import { HeaderValueOption_HeaderAppendAction } from "../../src/gen/envoy/config/core/v3/base_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import {
  CommonResponse_ResponseStatus,
  ProcessingRequestSchema,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { StatusCode } from "../../src/gen/envoy/type/v3/http_status_pb.js";

const te = new TextEncoder();

type RequestInit = MessageInitShape<typeof ProcessingRequestSchema>;

const headers = (h: Record<string, string>, raw = true) => ({
  headers: Object.entries(h).map(([key, v]) => (raw ? { key, rawValue: te.encode(v) } : { key, value: v })),
});

const REQUESTS: Record<string, RequestInit> = {
  "request headers (raw values), attributes of every JSON kind": {
    request: {
      case: "requestHeaders",
      value: { headers: headers({ ":path": "/v1/chat/completions", "x-ünïcode": "välue ✓", empty: "" }) },
    },
    attributes: {
      "envoy.filters.http.ext_proc": {
        "xds.cluster_name": "backend/default/claude",
        n: 42.5,
        neg: -1,
        yes: true,
        no: false,
        nothing: null,
        list: [1, "two", { three: [null] }],
        nested: { a: { b: "c" } },
      },
    },
  },
  "response headers (string values), end of stream": {
    request: { case: "responseHeaders", value: { headers: headers({ ":status": "200" }, false), endOfStream: true } },
  },
  "request body of 70 KB": {
    request: { case: "requestBody", value: { body: te.encode("x".repeat(70_000)), endOfStream: true } },
  },
  "response body chunk, not the end": {
    request: { case: "responseBody", value: { body: te.encode('data: {"a":1}\n\n') } },
  },
  "response trailers": { request: { case: "responseTrailers", value: { trailers: headers({ "grpc-status": "0" }) } } },
  "metadata context (the identity a route forwards), several namespaces": {
    request: { case: "requestHeaders", value: { headers: headers({ ":path": "/" }) } },
    metadataContext: {
      filterMetadata: {
        "envoy.filters.http.jwt_authn": { jwt_payload: { sub: "alice", groups: ["a", "b"], exp: 1.7e9 } },
        "envoy.filters.http.ext_authz": { apiKey: { user: "u-42" }, sluice_extauthz: {} },
      },
    },
  },
  "fields the service does not read (observability mode) are skipped": {
    request: { case: "requestBody", value: { body: te.encode("{}"), endOfStream: true } },
    observabilityMode: true,
  },
  "an empty message": {},
};

test("the reader yields what protobuf-es decodes, for every field the service reads", () => {
  for (const [name, init] of Object.entries(REQUESTS)) {
    const bytes = toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, init));
    const reference = fromBinary(ProcessingRequestSchema, bytes);
    const read = readProcessingRequest(bytes);
    assert.equal(read.request.case, reference.request.case, name);
    assert.deepEqual(read.attributes, reference.attributes, name);
    assert.deepEqual(read.metadataContext?.filterMetadata ?? {}, reference.metadataContext?.filterMetadata ?? {}, name);
    const r = reference.request;
    const w = read.request;
    if ((r.case === "requestHeaders" || r.case === "responseHeaders") && w.case === r.case) {
      assert.equal(w.value.endOfStream, r.value.endOfStream, name);
      assert.deepEqual(
        w.value.headers?.headers.map((h) => [h.key, h.value, Buffer.from(h.rawValue).toString("hex")]),
        r.value.headers?.headers.map((h) => [h.key, h.value, Buffer.from(h.rawValue).toString("hex")]),
        name,
      );
    } else if ((r.case === "requestBody" || r.case === "responseBody") && w.case === r.case) {
      assert.equal(w.value.endOfStream, r.value.endOfStream, name);
      assert.ok(Buffer.from(w.value.body).equals(Buffer.from(r.value.body)), name);
    }
  }
});

test("the reader refuses truncated bytes", () => {
  const init = REQUESTS["request body of 70 KB"];
  assert.ok(init !== undefined);
  const bytes = toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, init));
  assert.throws(() => readProcessingRequest(bytes.subarray(0, bytes.byteLength - 10)), /truncated/);
});

const headerChange = {
  set: { ":path": "/v1/messages", "x-ünïcode": "✓", empty: "" },
  add: [
    ["x-added", "one"],
    ["x-added", "two ✓"],
  ] as const,
  remove: ["authorization", "accept-encoding"],
};

const MODE = {
  requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  requestBodyMode: ProcessingMode_BodySendMode.BUFFERED,
  responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  responseBodyMode: ProcessingMode_BodySendMode.STREAMED,
  requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
  responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
};

const REPLIES: Record<string, Reply> = {
  "request headers: a header mutation": { phase: "requestHeaders", headers: headerChange },
  "request body: replaced (CONTINUE_AND_REPLACE) from a string, metadata of every JSON kind": {
    phase: "requestBody",
    replace: true,
    headers: headerChange,
    body: JSON.stringify({ model: "m", text: "é ✓ 😀" }),
    metadata: {
      "sluice.dev/llm": { request_model: "m", streaming: false, tokens: 12, costs: { a: 1.5 }, list: [null, "x"] },
    },
  },
  "response headers: a mode override, nothing else": { phase: "responseHeaders", modeOverride: MODE },
  "response body: 3 MB replaced from bytes (lengths of 1 to 4 bytes)": {
    phase: "responseBody",
    body: new Uint8Array(3_000_000).fill(97),
  },
  "response body: 200 KB of multi-byte text (more than the writer first allocates)": {
    phase: "responseBody",
    body: "ü✓".repeat(70_000),
  },
  "response body: an empty body": { phase: "responseBody", body: "" },
  "response body: continue unchanged": { phase: "responseBody" },
  "immediate response": {
    phase: "immediate",
    status: StatusCode.TooManyRequests,
    headers: { set: { "content-type": "application/json" } },
    body: '{"error":"slow down ✓"}',
    details: "sluice_llm",
  },
  "immediate response without a body": {
    phase: "immediate",
    status: 502,
    headers: { set: {}, remove: ["x"] },
    body: "",
    details: "",
  },
};

test("the writer's bytes equal protobuf-es's toBinary of the same answer", () => {
  for (const [name, reply] of Object.entries(REPLIES)) {
    const expected = Buffer.from(toBinary(ProcessingResponseSchema, replyMessage(reply)));
    const actual = Buffer.from(writeReply(reply));
    assert.ok(
      actual.equals(expected),
      `${name}: ${actual.toString("hex").slice(0, 200)} vs ${expected.toString("hex").slice(0, 200)}`,
    );
  }
});

test("an answer means what Envoy reads from it: decoded by protobuf-es", () => {
  const decode = (r: Reply) => fromBinary(ProcessingResponseSchema, writeReply(r));
  const body = decode(
    REPLIES["request body: replaced (CONTINUE_AND_REPLACE) from a string, metadata of every JSON kind"]!,
  );
  assert.equal(body.response.case, "requestBody");
  const common = body.response.case === "requestBody" ? body.response.value.response : undefined;
  assert.equal(common?.status, CommonResponse_ResponseStatus.CONTINUE_AND_REPLACE);
  assert.deepEqual(
    common?.headerMutation?.setHeaders.map((o) => [o.header?.key, Buffer.from(o.header?.rawValue ?? []).toString()]),
    [
      [":path", "/v1/messages"],
      ["x-ünïcode", "✓"],
      ["empty", ""],
      ["x-added", "one"],
      ["x-added", "two ✓"],
    ],
  );
  assert.deepEqual(
    common?.headerMutation?.setHeaders.map((o) => o.appendAction),
    [
      ...Array(3).fill(HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD),
      ...Array(2).fill(HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD),
    ],
  );
  assert.deepEqual(common?.headerMutation?.removeHeaders, ["authorization", "accept-encoding"]);
  const m = common?.bodyMutation?.mutation;
  assert.equal(m?.case, "body");
  assert.deepEqual(JSON.parse(Buffer.from(m?.case === "body" ? m.value : []).toString()), {
    model: "m",
    text: "é ✓ 😀",
  });
  assert.equal(body.dynamicMetadata?.["sluice.dev/llm"] !== undefined, true);

  const plain = decode({ phase: "responseBody", body: "x" });
  const c = plain.response.case === "responseBody" ? plain.response.value.response : undefined;
  assert.equal(c?.status, CommonResponse_ResponseStatus.CONTINUE, "a body phase's body replaces the body only");

  const imm = decode(REPLIES["immediate response"]!);
  assert.equal(imm.response.case, "immediateResponse");
  if (imm.response.case === "immediateResponse") {
    assert.equal(imm.response.value.status?.code, 429);
    assert.equal(Buffer.from(imm.response.value.body).toString(), '{"error":"slow down ✓"}');
    assert.equal(imm.response.value.details, "sluice_llm");
  }
  const mode = decode(REPLIES["response headers: a mode override, nothing else"]!);
  assert.equal(mode.modeOverride?.responseBodyMode, ProcessingMode_BodySendMode.STREAMED);
  assert.equal(mode.response.case, "responseHeaders");
});
