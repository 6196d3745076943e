// What every listener-level ext_proc filter to a Sluice stage (transformation, context, a2a) has in common.

import { ProcessingMode_HeaderSendMode } from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { durationFromMs } from "../../duration.js";
import { LLM_STAGE_METADATA } from "../../llm/table.js";
import { SLUICE_AUTHZ_CLUSTER } from "../../names.js";

/**
 * ExternalProcessor fields of a Sluice stage: Sluice's hot-path server with the stage named in the stream's metadata,
 * request headers sent and nothing else (routes widen the modes they need), 5 s per message.
 */
export function sluiceStageProcessor(stage: string) {
  return {
    grpcService: {
      targetSpecifier: { case: "envoyGrpc" as const, value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
      initialMetadata: [{ key: LLM_STAGE_METADATA, value: stage }],
    },
    processingMode: {
      requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      responseHeaderMode: ProcessingMode_HeaderSendMode.SKIP,
      requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
    },
    messageTimeout: durationFromMs(5000),
  };
}
