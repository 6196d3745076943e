// `buffer.request.failureMode` / `buffer.response.failureMode: FailOpen`: hold a body, and pass a larger one on
// unbuffered instead of answering 413 (request) or 502 (response). Envoy's buffer filters only reject above their
// limit (buffer: 413; file_system_buffer's fully_buffer: 413 / 500), so the carrier is an ext_proc in BUFFERED_PARTIAL
// body mode, which holds the request (or response) until the body ends or the stream's buffer limit is reached and
// then lets the rest stream. That limit is the listener's (frontend `http.maxBufferSize`, Envoy's default 1Mi):
// neither `request_body_buffer_limit` nor `per_request_buffer_limit_bytes` on the route lowers it for the filters
// (tried with Envoy 1.40), so a `maxBytes` is reported (route-scoped.ts). The processor is Sluice's transformation
// stage with nothing to change: it answers the headers and the (whole or partial) bodies without a mutation.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import {
  encodeTransformation,
  TRANSFORMATION_METADATA,
  TRANSFORMATION_STAGE,
  type TransformationSpec,
} from "../../extproc/transformation.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { extProcOnRoute } from "./filters/ext-proc-route.js";
import { sluiceStageProcessor } from "./filters/sluice-stage.js";
import { type FilterInstance, FilterOrder } from "./filters/types.js";

const FILTER = "sluice.buffer_fail_open";

/** The filter instance holding a route's request and/or response body up to the stream's buffer limit. */
export function failOpenBuffer(request: boolean, response: boolean): FilterInstance {
  // Nothing to change: the bodies are only held. An (empty) response entry makes the processor wait for the response.
  const hold: TransformationSpec = {
    entries: response ? [{ response: {} }] : [],
    requestBody: request,
    responseBody: response,
  };
  return {
    // One instance per combination: the processing modes are listener-level here.
    name: `${FILTER}.${request ? "request" : ""}${request && response ? "_" : ""}${response ? "response" : ""}`,
    order: FilterOrder.buffer,
    config: anyPack(
      ExternalProcessorSchema,
      create(ExternalProcessorSchema, {
        ...sluiceStageProcessor(
          TRANSFORMATION_STAGE,
          {
            requestBodyMode: request ? ProcessingMode_BodySendMode.BUFFERED_PARTIAL : ProcessingMode_BodySendMode.NONE,
            responseHeaderMode: response ? ProcessingMode_HeaderSendMode.SEND : ProcessingMode_HeaderSendMode.SKIP,
            responseBodyMode: response
              ? ProcessingMode_BodySendMode.BUFFERED_PARTIAL
              : ProcessingMode_BodySendMode.NONE,
          },
          [{ key: TRANSFORMATION_METADATA, value: encodeTransformation(hold) }],
        ),
        statPrefix: "sluice_buffer_fail_open",
      }),
    ),
    perRoute: extProcOnRoute(),
  };
}
