// `buffer.request.failureMode` / `buffer.response.failureMode: FailOpen`: hold a body up to `maxBytes`, and pass a
// larger one on unbuffered instead of answering 413 (request) or 502 (response). Envoy's buffer filters only reject
// above their limit, and its partial buffering (BUFFERED_PARTIAL) stops at the stream's buffer limit, which a route
// cannot lower, so Sluice holds the body itself: an ext_proc in FULL_DUPLEX_STREAMED body mode (Envoy sends the
// headers and every chunk without waiting), whose processor (src/extproc/buffer-hold.ts, reached through the context
// stage) answers the headers only once the body ends or `maxBytes` is reached, then sends the chunks back. Trailers
// are sent too (FULL_DUPLEX_STREAMED requires it) and answered unchanged.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { CONTEXT_METADATA, CONTEXT_STAGE, encodeContext } from "../../extproc/context.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { extProcOnRoute } from "./filters/ext-proc-route.js";
import { sluiceStageProcessor } from "./filters/sluice-stage.js";
import { type FilterInstance, FilterOrder } from "./filters/types.js";

const FILTER = "sluice.buffer_fail_open";

/** The filter instance holding a route's request and/or response body up to its maxBytes (in bytes). */
export function failOpenBuffer(hold: { readonly request?: number; readonly response?: number }): FilterInstance {
  const request = hold.request !== undefined;
  const response = hold.response !== undefined;
  const modes = {
    requestBodyMode: request ? ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED : ProcessingMode_BodySendMode.NONE,
    requestTrailerMode: request ? ProcessingMode_HeaderSendMode.SEND : ProcessingMode_HeaderSendMode.SKIP,
    responseHeaderMode: response ? ProcessingMode_HeaderSendMode.SEND : ProcessingMode_HeaderSendMode.SKIP,
    responseBodyMode: response ? ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED : ProcessingMode_BodySendMode.NONE,
    responseTrailerMode: response ? ProcessingMode_HeaderSendMode.SEND : ProcessingMode_HeaderSendMode.SKIP,
  };
  return {
    // One instance per combination: the processing modes are listener-level here; the sizes are the route's.
    name: `${FILTER}.${request ? "request" : ""}${request && response ? "_" : ""}${response ? "response" : ""}`,
    order: FilterOrder.buffer,
    config: anyPack(
      ExternalProcessorSchema,
      create(ExternalProcessorSchema, {
        ...sluiceStageProcessor(CONTEXT_STAGE, modes),
        statPrefix: "sluice_buffer_fail_open",
      }),
    ),
    perRoute: extProcOnRoute({
      grpcInitialMetadata: [{ key: CONTEXT_METADATA, value: encodeContext({ requestBody: false, hold }) }],
    }),
  };
}
