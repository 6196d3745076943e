// What every ext_proc filter to Sluice's hot-path server has in common: the LLM router and upstream stages, the
// transformation (listener and upstream), context, a2a and buffer fail-open stages, and the credential service.

import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  ProcessingMode_HeaderSendMode,
  type ProcessingModeSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { durationFromMs } from "../../duration.js";
import { LLM_STAGE_METADATA } from "../../llm/table.js";
import { SLUICE_AUTHZ_CLUSTER } from "../../names.js";

type Modes = MessageInitShape<typeof ProcessingModeSchema>;
type Metadata = { key: string; value: string }[];

/**
 * ExternalProcessor fields of a filter to Sluice: its hot-path HTTP/2 server (src/grpc/unary-server.ts, not grpc-js:
 * several messages per request) told in the stream's metadata what to do, request headers sent and nothing else
 * unless `modes` widens it, 5 s per message (generous: the first request after a start warms the translators, and a
 * credential's own fetches stop at 4 s, so the client hears why).
 */
export function sluiceProcessor(metadata: Metadata, modes: Modes = {}) {
  return {
    grpcService: {
      targetSpecifier: { case: "envoyGrpc" as const, value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
      initialMetadata: metadata,
    },
    processingMode: {
      requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      responseHeaderMode: ProcessingMode_HeaderSendMode.SKIP,
      requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      ...modes,
    },
    messageTimeout: durationFromMs(5000),
  };
}

/** sluiceProcessor for a stage named in the stream's metadata (with more metadata after it when the stage needs it). */
export function sluiceStageProcessor(stage: string, modes: Modes = {}, metadata: Metadata = []) {
  return sluiceProcessor([{ key: LLM_STAGE_METADATA, value: stage }, ...metadata], modes);
}
