// `frontend.tracing` and `frontend.accessLog` expressions Envoy cannot evaluate as the spec means them (basicAuth,
// extauthz, request.query as a map, the spec's IP functions, string functions, string conversion other than
// outermost), computed per request by Sluice's context ext_proc (src/extproc/context.ts) and read by the span through
// `metadata` custom tags, by an access log entry through `%DYNAMIC_METADATA(...)%` and by its filter through a
// metadata filter.
//
// One listener-wide ext_proc filter, `sluice.context.telemetry`, first in the listener's chain and enabled on every
// route (and for requests no route takes): it is sent the request headers, which it answers unchanged, and the
// response headers as the client gets them (first in the chain, it is the last filter the response passes), when it
// computes the values with the request, `source`, the identities authentication left in the dynamic metadata
// (forwarded with the response headers) and `response`, into dynamic metadata CONTEXT_NAMESPACE. The tracer's custom
// tags are set when the span finishes and access log entries are written when the stream ends, so they read those
// values; a tracing `filter` value is the span relay's FILTER_TAG.
//
// Expressions reading `llm` get what the LLM ext_proc left in dynamic metadata (forwarded to the stage): on an LLM
// request the stage overrides its response body mode at the response headers (`allow_mode_override`), is streamed
// the body (each chunk answered unchanged) and computes the values at its end, when the answer's models, provider and
// token counts are known; other requests are computed at their response headers as before.
//
// The filter fails open: telemetry never refuses a request, and a value that could not be had is left out (for a
// filter: the span is not exported, the entry not logged, as for a filter that fails).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { compileExpression } from "../../cel/index.js";
import { CONTEXT_METADATA, CONTEXT_STAGE, type ContextValue, encodeContext } from "../../extproc/context.js";
import { RESPONSE_ENVIRONMENT } from "../../extproc/transformation.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import type { HttpFilterSchema } from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import type { CustomTagSchema } from "../../gen/envoy/type/tracing/v3/custom_tag_pb.js";
import { LLM_METADATA_NAMESPACE } from "../llm/table.js";
import { CONTEXT_NAMESPACE } from "./filters/context.js";
import { sluiceStageProcessor } from "./filters/sluice-stage.js";
import { IDENTITY_NAMESPACES } from "./llm.js";

export const TELEMETRY_CONTEXT_FILTER = "sluice.context.telemetry";
const IDENTITY = new Set(["jwt", "apiKey", "basicAuth", "extauthz"]);

type CustomTagInit = MessageInitShape<typeof CustomTagSchema>;
type HttpFilterInit = MessageInitShape<typeof HttpFilterSchema>;

/** The metadata key of `attributes.add[i]`, or of the filter (`i` undefined). */
export const tracingContextKey = (i?: number): string =>
  i === undefined ? "tracing.filter" : `tracing.attributes.${i}`;

/** Whether Sluice can compute a tracing expression: it compiles (with `response`; `llm` included). */
export function sluiceComputes(expression: string): boolean {
  return "ok" in compileExpression(expression, RESPONSE_ENVIRONMENT);
}

/** The value Sluice computes for a tracing expression, as text (a span tag's value). */
export function tracingValue(expression: string, i?: number): ContextValue {
  return telemetryValue(expression, tracingContextKey(i));
}

/** A value Sluice computes for the telemetry at `key` of the context namespace, as text. */
export function telemetryValue(expression: string, key: string): ContextValue {
  return { namespace: CONTEXT_NAMESPACE, key, expression, as: "text" };
}

/** A span tag reading the value Sluice computed into the request's dynamic metadata. */
export function metadataTag(tag: string, i?: number): CustomTagInit {
  return {
    tag,
    type: {
      case: "metadata",
      value: {
        kind: { kind: { case: "request", value: {} } },
        metadataKey: { key: CONTEXT_NAMESPACE, path: [{ segment: { case: "key", value: tracingContextKey(i) } }] },
      },
    },
  };
}

/** The listener-wide filter computing the values (the tracer's and the access logs'), first in the chain. */
export function telemetryContextFilter(values: readonly ContextValue[]): HttpFilterInit {
  const variables = new Set<string>();
  for (const v of values) {
    const c = compileExpression(v.expression, RESPONSE_ENVIRONMENT);
    if ("ok" in c) for (const x of c.ok.variables) variables.add(x);
  }
  const llm = variables.has("llm");
  const forwarded = [
    ...([...variables].some((x) => IDENTITY.has(x)) ? IDENTITY_NAMESPACES : []),
    ...(llm ? [LLM_METADATA_NAMESPACE] : []),
  ];
  const spec = { values, requestBody: false, atResponse: true, ...(llm ? { untilEnd: true } : {}) };
  const config = create(ExternalProcessorSchema, {
    ...sluiceStageProcessor(
      CONTEXT_STAGE,
      {
        requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
        responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
        requestBodyMode: ProcessingMode_BodySendMode.NONE,
        responseBodyMode: ProcessingMode_BodySendMode.NONE,
      },
      [{ key: CONTEXT_METADATA, value: encodeContext(spec) }],
    ),
    // Telemetry never refuses a request: Sluice unreachable leaves the values out.
    failureModeAllow: true,
    // An LLM answer's body is streamed to the stage, asked for at its response headers (context.ts UNTIL_END).
    ...(llm ? { allowModeOverride: true } : {}),
    requestAttributes: ["source.address", "source.port"],
    metadataOptions: {
      ...(forwarded.length > 0 ? { forwardingNamespaces: { untyped: forwarded } } : {}),
      receivingNamespaces: { untyped: [CONTEXT_NAMESPACE] },
    },
    statPrefix: "sluice_context_telemetry",
  });
  return {
    name: TELEMETRY_CONTEXT_FILTER,
    configType: { case: "typedConfig", value: anyPack(ExternalProcessorSchema, config) },
  };
}
