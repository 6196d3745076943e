// traffic.transformation → an ext_proc filter to Sluice's hot-path gRPC server, which evaluates the CEL per request
// (src/extproc/transformation.ts). One instance for every route; each route enables it with its transformation in the
// stream's gRPC metadata and the processing modes it needs: the request headers always, a body only when an
// expression writes or reads it, the response only when some entry changes it. Expressions that do not compile are
// reported and left out; the rest applies.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { type CompiledExpr, compileExpression } from "../../../cel/index.js";
import {
  type DirectResponseSpec,
  encodeTransformation,
  hasResponseStage,
  RESPONSE_ENVIRONMENT,
  TRANSFORMATION_METADATA,
  TRANSFORMATION_METADATA_NAMESPACE,
  TRANSFORMATION_STAGE,
  type TransformationEntry,
  type TransformationSpec,
  type TransformSpec,
} from "../../../extproc/transformation.js";
import {
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { parseDurationMs } from "../../duration.js";
import { IDENTITY_NAMESPACES } from "../llm.js";
import { extProcOnRoute } from "./ext-proc-route.js";
import { celStringLiteral, phaseFields, phaseOrder } from "./policy-fields.js";
import { sluiceStageProcessor } from "./sluice-stage.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

const FILTER = "sluice.transformation";
export const IDENTITY = new Set(["jwt", "apiKey", "basicAuth", "extauthz"]);
/** `request.body` / `response.body` (or `['body']`) read by an expression. */
export const READS_BODY = {
  request: /\brequest\s*(\.\s*body\b|\[\s*['"]body['"]\s*\])/,
  response: /\bresponse\s*(\.\s*body\b|\[\s*['"]body['"]\s*\])/,
};

type TransformIn = {
  set?: { name: string; value: string }[];
  add?: { name: string; value: string }[];
  remove?: string[];
  body?: string;
  metadata?: Record<string, string>;
};
export type TransformationIn = {
  request?: TransformIn;
  response?: TransformIn;
  conditional?: { condition?: string; policy: { request?: TransformIn; response?: TransformIn } }[];
};

function listenerConfig() {
  return create(ExternalProcessorSchema, {
    ...sluiceStageProcessor(TRANSFORMATION_STAGE),
    // Each route sets its own modes; a route without a transformation has the filter disabled.
    // For `source`: Envoy sends request attributes from the listener-level list only (a route's override of it is
    // not read; test/e2e/traffic-context.test.ts), so every route of this filter has them sent.
    requestAttributes: ["source.address", "source.port"],
    // Its own counters: http.<listener>.ext_proc.sluice_transformation.*
    statPrefix: "sluice_transformation",
    metadataOptions: { receivingNamespaces: { untyped: [TRANSFORMATION_METADATA_NAMESPACE] } },
    // A new body comes with its length.
    allowContentLengthHeader: true,
    // The fault filter's delay header (x-envoy-fault-delay-request) for delay.duration as CEL, and
    // x-envoy-max-retries for retry.precondition.
    mutationRules: { allowEnvoy: true },
  });
}

type DirectIn = {
  status: number;
  body?: string;
  bodyExpression?: string;
  headers?: { name: string; value: string }[];
};

/** A direct response Envoy cannot give itself: a CEL body, or a header value other than a string literal. */
export function directNeedsSluice(d: DirectIn): boolean {
  return d.bodyExpression !== undefined || (d.headers ?? []).some((h) => celStringLiteral(h.value) === undefined);
}

/** The entries of a transformation (top-level form: one entry without a condition), with expressions compiled. */
export function transformationEntries(
  v: TransformationIn,
  cel: (path: string, text: string | undefined, response: boolean) => string | undefined,
): TransformationEntry[] {
  const transform = (path: string, t: TransformIn | undefined, response: boolean): TransformSpec | undefined => {
    if (t === undefined) return undefined;
    const headers = (kind: "set" | "add") =>
      (t[kind] ?? []).flatMap((h, i) => {
        const value = cel(`${path}.${kind}[${i}].value`, h.value, response);
        return value === undefined ? [] : [{ name: h.name, value }];
      });
    const set = headers("set");
    const add = headers("add");
    const body = cel(`${path}.body`, t.body, response);
    const metadata = Object.fromEntries(
      Object.entries(t.metadata ?? {}).flatMap(([k, x]) => {
        const value = cel(`${path}.metadata.${k}`, x, response);
        return value === undefined ? [] : [[k, value]];
      }),
    );
    return {
      ...(set.length > 0 ? { set } : {}),
      ...(add.length > 0 ? { add } : {}),
      ...(t.remove !== undefined && t.remove.length > 0 ? { remove: t.remove } : {}),
      ...(body !== undefined ? { body } : {}),
      ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
    };
  };
  const entries: TransformationEntry[] = [];
  if (v.conditional !== undefined) {
    v.conditional.forEach((c, i) => {
      const at = `conditional[${i}]`;
      const condition = c.condition === undefined ? undefined : cel(`${at}.condition`, c.condition, false);
      // An entry whose condition does not compile never applies.
      if (c.condition !== undefined && condition === undefined) return;
      const request = transform(`${at}.policy.request`, c.policy.request, false);
      const response = transform(`${at}.policy.response`, c.policy.response, true);
      entries.push({
        ...(condition !== undefined ? { condition } : {}),
        ...(request !== undefined ? { request } : {}),
        ...(response !== undefined ? { response } : {}),
      });
    });
  } else {
    const request = transform("request", v.request, false);
    const response = transform("response", v.response, true);
    entries.push({
      ...(request !== undefined ? { request } : {}),
      ...(response !== undefined ? { response } : {}),
    });
  }
  return entries;
}

export const transformationBuilder: HttpFilterBuilder = {
  id: "transformation",
  schemas: [ExternalProcessorSchema, ExtProcPerRouteSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const transformations = phaseFields<TransformationIn>(route, "transformation");
    const directs = phaseFields<DirectIn>(route, "directResponse").filter((d) => directNeedsSluice(d.value));
    // delay.duration as CEL (not a duration string): the fault filter reads what Sluice evaluates (route-scoped.ts).
    const delays = phaseFields<{ duration: string }>(route, "delay").filter(
      (x) => parseDurationMs(x.value.duration.trim()) === undefined,
    );
    // retry.precondition: Sluice evaluates it and, unless true, tells the router to make no retry (x-envoy-max-retries).
    // One that does not compile is reported by traffic-route.ts, which then turns the route's retries off.
    const preconditions = phaseFields<{ precondition?: string }>(route, "retry").flatMap((x) => {
      const c = x.value.precondition === undefined ? undefined : compileExpression(x.value.precondition);
      return c !== undefined && "ok" in c ? [{ ...x, compiled: c.ok }] : [];
    });
    for (const phase of ["preRouting", "traffic"] as const) {
      const t = transformations.find((x) => x.phase === phase);
      const d = directs.find((x) => x.phase === phase);
      const dl = delays.find((x) => x.phase === phase);
      const rp = preconditions.find((x) => x.phase === phase);
      const f = t ?? d ?? dl ?? rp;
      if (f === undefined) continue;
      const variables = new Set<string>();
      const texts: string[] = [];
      /** The expression when it compiles; reported and left out otherwise. */
      const compiled = (
        at: typeof f,
        field: string,
        path: string,
        text: string | undefined,
        response = false,
      ): string | undefined => {
        if (text === undefined) return undefined;
        const r = compileExpression(text, response ? RESPONSE_ENVIRONMENT : undefined);
        if ("errors" in r) {
          ctx.note(
            at.from,
            field,
            `${at.path}.${path}: ${r.errors.map((e) => e.message).join("; ")}; left out`,
            "Ignored",
          );
          return undefined;
        }
        for (const v of r.ok.variables) variables.add(v);
        texts.push(text);
        return text;
      };
      const entries =
        t === undefined
          ? []
          : transformationEntries(t.value, (path, text, response) =>
              compiled(t, "transformation", path, text, response),
            );
      let direct: DirectResponseSpec | undefined;
      if (d !== undefined) {
        const v = d.value;
        const headers = (v.headers ?? []).flatMap((h) => {
          const value = compiled(d, "directResponse", `headers.${h.name}`, h.value);
          return value === undefined ? [] : [{ name: h.name, value }];
        });
        const bodyExpression = compiled(d, "directResponse", "bodyExpression", v.bodyExpression);
        direct = {
          status: v.status,
          headers,
          ...(v.body !== undefined ? { body: v.body } : {}),
          ...(bodyExpression !== undefined ? { bodyExpression } : {}),
        };
      }
      /** An expression another builder reports when it does not compile: carried only when it does. */
      const carried = (c: CompiledExpr | undefined): string | undefined => {
        if (c === undefined) return undefined;
        for (const v of c.variables) variables.add(v);
        texts.push(c.source);
        return c.source;
      };
      // A delay that does not compile is reported by the fault filter's builder (route-scoped.ts).
      const dc = dl === undefined ? undefined : compileExpression(dl.value.duration);
      const delay = carried(dc !== undefined && "ok" in dc ? dc.ok : undefined);
      const retryPrecondition = carried(rp?.compiled);
      const spec: TransformationSpec = {
        entries,
        ...(direct !== undefined ? { direct } : {}),
        ...(delay !== undefined ? { delay } : {}),
        ...(retryPrecondition !== undefined ? { retryPrecondition } : {}),
        requestBody:
          entries.some((e) => e.request?.body !== undefined) || texts.some((x) => READS_BODY.request.test(x)),
        // A direct response never reaches an upstream: no response to process.
        responseBody:
          direct === undefined &&
          (entries.some((e) => e.response?.body !== undefined) || texts.some((x) => READS_BODY.response.test(x))),
      };
      const identity = [...variables].some((x) => IDENTITY.has(x));
      filters.push({
        // A PreRouting and a PostRouting transformation are two filters.
        name: f.phase === "preRouting" ? `${FILTER}.pre_routing` : FILTER,
        order: phaseOrder(FilterOrder.transformation, f.phase),
        config: anyPack(ExternalProcessorSchema, listenerConfig()),
        perRoute: extProcOnRoute({
          processingMode: {
            requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
            requestBodyMode: spec.requestBody ? ProcessingMode_BodySendMode.BUFFERED : ProcessingMode_BodySendMode.NONE,
            responseHeaderMode: hasResponseStage(spec)
              ? ProcessingMode_HeaderSendMode.SEND
              : ProcessingMode_HeaderSendMode.SKIP,
            responseBodyMode: spec.responseBody
              ? ProcessingMode_BodySendMode.BUFFERED
              : ProcessingMode_BodySendMode.NONE,
            requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
            responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
          },
          grpcInitialMetadata: [{ key: TRANSFORMATION_METADATA, value: encodeTransformation(spec) }],
          ...(identity
            ? {
                metadataOptions: {
                  forwardingNamespaces: { untyped: IDENTITY_NAMESPACES },
                },
              }
            : {}),
        }),
      });
    }
    return filters.length === 0 ? undefined : { filters };
  },
};
