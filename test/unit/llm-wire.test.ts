// The LLM ext_proc's wire reader and writer (src/extproc/llm/wire.ts) against protobuf-es on the same messages: the
// reader yields what protobuf-es decodes for every field the service reads, the writer the same bytes as toBinary().

import assert from "node:assert/strict";
import { test } from "node:test";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { readProcessingRequest, writeProcessingResponse } from "../../src/extproc/llm/wire.js";
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
type ResponseInit = MessageInitShape<typeof ProcessingResponseSchema>;

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

const mutation = {
  setHeaders: [
    {
      header: { key: ":path", rawValue: te.encode("/v1/messages") },
      appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    },
    { header: { key: "x-ünïcode", rawValue: te.encode("✓") }, keepEmptyValue: true },
  ],
  removeHeaders: ["authorization", "accept-encoding"],
};

const RESPONSES: Record<string, ResponseInit> = {
  "request headers: a header mutation": {
    response: { case: "requestHeaders", value: { response: { headerMutation: mutation } } },
  },
  "request body: replaced (CONTINUE_AND_REPLACE), metadata of every JSON kind": {
    response: {
      case: "requestBody",
      value: {
        response: {
          status: CommonResponse_ResponseStatus.CONTINUE_AND_REPLACE,
          headerMutation: mutation,
          bodyMutation: { mutation: { case: "body", value: te.encode(JSON.stringify({ model: "m", text: "é" })) } },
        },
      },
    },
    dynamicMetadata: {
      "sluice.dev/llm": { request_model: "m", streaming: false, tokens: 12, costs: { a: 1.5 }, list: [null, "x"] },
    },
  },
  "response headers: a mode override": {
    response: { case: "responseHeaders", value: { response: { clearRouteCache: true } } },
    modeOverride: {
      requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      requestBodyMode: ProcessingMode_BodySendMode.BUFFERED,
      responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      responseBodyMode: ProcessingMode_BodySendMode.STREAMED,
      requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
    },
  },
  "response body: 3 MB replaced (lengths of 1 to 4 bytes)": {
    response: {
      case: "responseBody",
      value: { response: { bodyMutation: { mutation: { case: "body", value: new Uint8Array(3_000_000).fill(97) } } } },
    },
  },
  "response body: an empty body and an empty answer": {
    response: {
      case: "responseBody",
      value: { response: { bodyMutation: { mutation: { case: "body", value: new Uint8Array() } } } },
    },
  },
  "response body: cleared": {
    response: {
      case: "responseBody",
      value: { response: { bodyMutation: { mutation: { case: "clearBody", value: true } } } },
    },
  },
  "a headers answer without a common response": { response: { case: "responseHeaders", value: {} } },
  "immediate response": {
    response: {
      case: "immediateResponse",
      value: {
        status: { code: StatusCode.TooManyRequests },
        headers: { setHeaders: [{ header: { key: "content-type", rawValue: te.encode("application/json") } }] },
        body: te.encode('{"error":"slow down"}'),
        details: "sluice_llm",
      },
    },
  },
  "nothing set": {},
};

test("the writer's bytes equal protobuf-es's toBinary", () => {
  for (const [name, init] of Object.entries(RESPONSES)) {
    const message = create(ProcessingResponseSchema, init);
    const expected = Buffer.from(toBinary(ProcessingResponseSchema, message));
    const actual = Buffer.from(writeProcessingResponse(message));
    assert.ok(
      actual.equals(expected),
      `${name}: ${actual.toString("hex").slice(0, 200)} vs ${expected.toString("hex").slice(0, 200)}`,
    );
  }
});

test("a field the writer does not know is refused, not dropped", () => {
  const cases: ResponseInit[] = [
    { response: { case: "requestTrailers", value: {} } },
    { response: { case: "requestBody", value: { response: { trailers: {} } } } },
    { response: { case: "immediateResponse", value: { grpcStatus: { status: 1 } } } },
    { overrideMessageTimeout: { seconds: BigInt(1) } },
    { requestDrain: true },
  ];
  for (const init of cases) {
    assert.throws(() => writeProcessingResponse(create(ProcessingResponseSchema, init)), /not supported/);
  }
});
