// `backend.transformation` and a `retry.condition` that reads more than the status code → Sluice's transformation
// ext_proc (src/extproc/transformation.ts) as an upstream HTTP filter of the backend's cluster variant
// (backend-connection.ts), as the credential ext_proc is. An upstream filter runs once per attempt, after the route is
// chosen, so each backendRef of a route gets its own transformation, and each attempt's response is seen before the
// router decides whether to retry it: the processor marks a response the condition is true for with
// RETRY_CONDITION_HEADER, which the route's retry policy matches (`retriable_headers`, traffic-route.ts).
//
// The spec travels in the gRPC initial metadata of the filter (no table to keep in step with Envoy). An upstream filter
// shares the request's stream info, so `source` and the identity filters' metadata (`jwt`, `apiKey`, ...) are forwarded
// to it as to the route-level instance.

import { create } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import { compileExpression } from "../../cel/index.js";
import { ATTEMPT_METADATA_NAMESPACE } from "../../extproc/attempt-journal.js";
import {
  encodeTransformation,
  hasResponseStage,
  PROVIDER_ATTRIBUTE,
  RESPONSE_ENVIRONMENT,
  RETRY_CONDITION_HEADER,
  TRANSFORMATION_METADATA,
  TRANSFORMATION_METADATA_NAMESPACE,
  TRANSFORMATION_STAGE,
  type TransformationEntry,
  type TransformationSpec,
} from "../../extproc/transformation.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import type { BackendProblemIR, EffectivePolicyIR, PolicySourceIR, RouteIR, UpstreamTransformationIR } from "../ir.js";
import { sluiceStageProcessor } from "./filters/sluice-stage.js";
import { IDENTITY, READS_BODY, type TransformationIn, transformationEntries } from "./filters/transformation.js";
import { IDENTITY_NAMESPACES } from "./llm.js";
import { retryConditionCodes } from "./retry-condition.js";

export { RETRY_CONDITION_HEADER };

/** The route's `retry.condition` when Sluice evaluates it (it compiles, but reads more than `response.code`). */
export function sluiceRetryCondition(r: RouteIR): { readonly text: string; readonly from: PolicySourceIR } | undefined {
  let last: { text: string; from: PolicySourceIR } | undefined;
  for (const phase of ["preRouting", "traffic"] as const) {
    const f = r.policy?.[phase]?.["retry"];
    if (f === undefined || "combined" in f) continue;
    const condition = (f.value as { condition?: unknown } | undefined)?.condition;
    // The PostRouting retry is applied over the PreRouting one (traffic-route.ts).
    last = undefined;
    if (typeof condition !== "string" || retryConditionCodes(condition).ok) continue;
    if ("errors" in compileExpression(condition, RESPONSE_ENVIRONMENT)) continue;
    last = { text: condition, from: f.from };
  }
  return last;
}

/**
 * The upstream transformation of one backend of `r`: its `backend.transformation` (from its effective policy `p`)
 * and the route's Sluice-evaluated `retry.condition`. Expressions that do not compile are reported with their path and
 * left out (not fatal: the rest applies).
 */
export function upstreamTransformation(
  r: RouteIR,
  p: EffectivePolicyIR | undefined,
  // False for what a GwBackend's levels alone give an AI cluster (llm-transformation.ts): the condition is the route's.
  withRetry = true,
): { readonly ir?: UpstreamTransformationIR; readonly problems: BackendProblemIR[] } {
  const problems: BackendProblemIR[] = [];
  const variables = new Set<string>();
  const texts: string[] = [];
  const f = p?.["transformation"];
  let entries: TransformationEntry[] = [];
  if (f !== undefined && !("combined" in f)) {
    const from = f.from;
    entries = transformationEntries(f.value as TransformationIn, (path, text, response) => {
      if (text === undefined) return undefined;
      const c = compileExpression(text, response ? RESPONSE_ENVIRONMENT : undefined);
      if ("errors" in c) {
        problems.push({
          from,
          field: "backend.transformation",
          message: `backend.transformation.${path}: ${c.errors.map((e) => e.message).join("; ")}; left out`,
          fatal: false,
        });
        return undefined;
      }
      for (const v of c.ok.variables) variables.add(v);
      texts.push(text);
      return text;
    });
  }
  const retry = withRetry ? sluiceRetryCondition(r) : undefined;
  if (retry !== undefined) {
    const c = compileExpression(retry.text, RESPONSE_ENVIRONMENT);
    if ("ok" in c) for (const v of c.ok.variables) variables.add(v);
    texts.push(retry.text);
  }
  if (entries.length === 0 && retry === undefined) return { problems };
  const spec: TransformationSpec = {
    entries,
    ...(retry !== undefined ? { retryCondition: retry.text } : {}),
    requestBody: entries.some((e) => e.request?.body !== undefined) || texts.some((x) => READS_BODY.request.test(x)),
    responseBody: entries.some((e) => e.response?.body !== undefined) || texts.some((x) => READS_BODY.response.test(x)),
  };
  return {
    ir: { spec, source: variables.has("source"), identity: [...variables].some((v) => IDENTITY.has(v)) },
    problems,
  };
}

/**
 * A Service or static backend's upstream transformation: each attempt undoes the previous one's request header changes
 * (Envoy's upstream filters change the router's own headers), through the journal the previous attempt left in the
 * request's dynamic metadata. An AI cluster's finds its journal through its LLM request (llm-transformation.ts).
 */
export function serviceTransformation(
  r: RouteIR,
  p: EffectivePolicyIR | undefined,
): { readonly ir?: UpstreamTransformationIR; readonly problems: BackendProblemIR[] } {
  const ut = upstreamTransformation(r, p);
  if (ut.ir === undefined || !ut.ir.spec.entries.some((e) => e.request !== undefined)) return ut;
  return { ...ut, ir: { ...ut.ir, spec: { ...ut.ir.spec, journal: true } } };
}

/** The upstream ext_proc filter config of a cluster's transformation. */
export function upstreamTransformationFilter(u: UpstreamTransformationIR): Any {
  const { spec } = u;
  // A Service backend's journal of the previous attempt, in the request's dynamic metadata.
  const journal = spec.journal === true ? [ATTEMPT_METADATA_NAMESPACE] : [];
  const forwarding = [...(u.identity ? IDENTITY_NAMESPACES : []), ...journal];
  return anyPack(
    ExternalProcessorSchema,
    create(ExternalProcessorSchema, {
      ...sluiceStageProcessor(
        TRANSFORMATION_STAGE,
        {
          requestBodyMode: spec.requestBody ? ProcessingMode_BodySendMode.BUFFERED : ProcessingMode_BodySendMode.NONE,
          responseHeaderMode: hasResponseStage(spec)
            ? ProcessingMode_HeaderSendMode.SEND
            : ProcessingMode_HeaderSendMode.SKIP,
          responseBodyMode: spec.responseBody ? ProcessingMode_BodySendMode.BUFFERED : ProcessingMode_BodySendMode.NONE,
        },
        [{ key: TRANSFORMATION_METADATA, value: encodeTransformation(spec) }],
      ),
      // Its own counters: cluster.<cluster>.ext_proc.sluice_backend_transformation.* (upstream filters count there).
      statPrefix: "sluice_backend_transformation",
      metadataOptions: {
        receivingNamespaces: { untyped: [TRANSFORMATION_METADATA_NAMESPACE, ...journal] },
        ...(forwarding.length > 0 ? { forwardingNamespaces: { untyped: forwarding } } : {}),
      },
      // An AI cluster's providers with transformations of their own: the attempt's provider (llm-transformation.ts).
      ...(u.source || spec.providers !== undefined
        ? {
            requestAttributes: [
              ...(u.source ? ["source.address", "source.port"] : []),
              ...(spec.providers !== undefined ? [PROVIDER_ATTRIBUTE] : []),
            ],
          }
        : {}),
      // A new body comes with its length. Pseudo-headers and host keep Envoy's default mutation rules, as downstream.
      allowContentLengthHeader: true,
    }),
  );
}
