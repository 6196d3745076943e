// Backend policy `health.unhealthyCondition`, `eviction.restoreHealth` and `eviction.healthThreshold` on Service and
// static IP backends → Sluice's health ext_proc (src/health/service.ts) as an upstream filter of the backend's cluster
// variant, in observability mode (Envoy does not wait for it: no latency on the request). It sees each attempt's
// response headers, the body only when the condition reads it, and the endpoint (`upstream.address`); Sluice keeps
// the score and evicts by marking the endpoint UNHEALTHY in the variant's own ClusterLoadAssignment
// (src/health/endpoint-health.ts). UNHEALTHY rather than DEGRADED: Envoy sends a share of the traffic to degraded hosts
// as soon as healthy ones are below its overprovisioning (1 of 2 healthy = 70 %), which is not an eviction.
//
// Connection failures, resets and timeouts never reach an upstream filter as a response: Envoy's outlier detection
// keeps evicting for those alone (local-origin errors, `consecutiveFailures` in a row, default 1), and does not count
// the status codes Sluice judges (xds/cluster.ts).

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import { compileExpression } from "../../cel/index.js";
import { RESPONSE_ENVIRONMENT } from "../../extproc/transformation.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import {
  encodeHealthScore,
  HEALTH_CLUSTER_METADATA,
  HEALTH_SPEC_METADATA,
  HEALTH_STAGE,
} from "../../health/endpoint-health.js";
import { durationFromMs, parseDurationMs } from "../duration.js";
import type { BackendProblemIR, EffectivePolicyIR, HealthScoreIR } from "../ir.js";
import { LLM_PROVIDER_ATTRIBUTE, LLM_STAGE_METADATA } from "../llm/table.js";
import { SLUICE_AUTHZ_CLUSTER } from "../names.js";
import { READS_BODY } from "./filters/transformation.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** The parts of `health` only Sluice's scoring serves (Envoy's outlier detection serves the rest). */
export function healthScoreParts(v: Rec): string[] {
  const eviction = isRec(v.eviction) ? v.eviction : {};
  return [
    ...(v.unhealthyCondition !== undefined ? ["unhealthyCondition"] : []),
    ...(eviction.restoreHealth !== undefined ? ["eviction.restoreHealth"] : []),
    ...(eviction.healthThreshold !== undefined ? ["eviction.healthThreshold"] : []),
  ];
}

/**
 * The health scoring of a backend's effective policy: undefined unless it sets one of the three fields. A condition
 * that does not compile is reported with its path and left out (the default, any 5xx, applies).
 */
export function backendHealthScore(p: EffectivePolicyIR): {
  readonly ir?: HealthScoreIR;
  readonly problems: BackendProblemIR[];
} {
  const f = p["health"];
  if (f === undefined || "combined" in f || !isRec(f.value) || healthScoreParts(f.value).length === 0) {
    return { problems: [] };
  }
  return healthScoreOf(f.value, f.from);
}

/** The scoring a `health` value asks for, whatever fields it sets (an AI provider's own `health`: llm-health.ts). */
export function healthScoreOf(
  v: Rec,
  from: BackendProblemIR["from"],
): { readonly ir: HealthScoreIR; readonly problems: BackendProblemIR[] } {
  const eviction = isRec(v.eviction) ? v.eviction : {};
  const problems: BackendProblemIR[] = [];
  let condition: string | undefined;
  if (typeof v.unhealthyCondition === "string") {
    const c = compileExpression(v.unhealthyCondition, RESPONSE_ENVIRONMENT);
    if ("errors" in c) {
      problems.push({
        from,
        field: "backend.health.unhealthyCondition",
        message: `backend.health.unhealthyCondition: ${c.errors.map((e) => e.message).join("; ")}; left out, the default (any 5xx) applies`,
        fatal: false,
      });
    } else condition = v.unhealthyCondition;
  }
  const num = (x: unknown) => (typeof x === "number" ? x : undefined);
  const cf = num(eviction.consecutiveFailures);
  const threshold = num(eviction.healthThreshold);
  const restore = num(eviction.restoreHealth);
  const duration = typeof eviction.duration === "string" ? parseDurationMs(eviction.duration) : undefined;
  return {
    ir: {
      ...(condition !== undefined ? { condition } : {}),
      responseBody: condition !== undefined && READS_BODY.response.test(condition),
      ...(cf !== undefined && cf > 0 ? { consecutiveFailures: cf } : {}),
      ...(threshold !== undefined ? { healthThreshold: threshold } : {}),
      ...(restore !== undefined ? { restoreHealth: restore } : {}),
      durationMs: duration ?? 3000,
    },
    problems,
  };
}

/**
 * Outlier detection beside Sluice's health scoring: local-origin errors only (connect failures, resets, timeouts,
 * which no filter sees as a response), `consecutiveFailures` of them in a row; the status codes are Sluice's to judge,
 * so neither 5xx counter nor the success rate ejects. The caller adds the panic threshold (llm.ts).
 */
export function localOriginOutlierDetection(consecutiveFailures: number, durationMs: number) {
  return {
    splitExternalLocalOriginErrors: true,
    consecutiveLocalOriginFailure: consecutiveFailures,
    enforcingConsecutiveLocalOriginFailure: 100,
    enforcingConsecutive5xx: 0,
    enforcingConsecutiveGatewayFailure: 0,
    enforcingSuccessRate: 0,
    enforcingLocalOriginSuccessRate: 0,
    baseEjectionTime: durationFromMs(durationMs),
    interval: durationFromMs(Math.min(1000, durationMs)),
    maxEjectionPercent: 100,
  };
}

/** Name of the upstream filter (health/service.ts finds scored clusters by it). */
export const HEALTH_FILTER_NAME = "sluice.backend_health";

/**
 * The upstream ext_proc filter config reporting `cluster`'s responses to Sluice. `provider`: an AI cluster, whose
 * responses are scored per provider (the endpoint metadata naming it), not per address.
 */
export function backendHealthFilter(cluster: string, h: HealthScoreIR, provider = false): Any {
  return anyPack(
    ExternalProcessorSchema,
    create(ExternalProcessorSchema, {
      grpcService: {
        targetSpecifier: { case: "envoyGrpc", value: { clusterName: SLUICE_AUTHZ_CLUSTER } },
        initialMetadata: [
          { key: LLM_STAGE_METADATA, value: HEALTH_STAGE },
          { key: HEALTH_CLUSTER_METADATA, value: cluster },
          // Sluice reads the scoring back from the cluster it publishes (health/service.ts), not from each stream.
          { key: HEALTH_SPEC_METADATA, value: encodeHealthScore(h) },
        ],
      },
      processingMode: {
        requestHeaderMode: ProcessingMode_HeaderSendMode.SKIP,
        responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
        // Observability mode takes bodies streamed only.
        responseBodyMode: h.responseBody ? ProcessingMode_BodySendMode.STREAMED : ProcessingMode_BodySendMode.NONE,
        requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
        responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      },
      observabilityMode: true,
      // Scoring never fails a request: Sluice unreachable, the response goes on unscored.
      failureModeAllow: true,
      responseAttributes: provider ? ["upstream.address", LLM_PROVIDER_ATTRIBUTE] : ["upstream.address"],
      // Its own counters: cluster.<cluster>.ext_proc.sluice_backend_health.*.
      statPrefix: "sluice_backend_health",
    }),
  );
}
