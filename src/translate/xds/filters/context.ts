// Per-request values other filters read, computed with the spec's CEL by Sluice's ext_proc service
// (src/extproc/context.ts) where Envoy's own CEL cannot: an ext_proc filter `sluice.context`, one instance per slot,
// enabled on a route with the values to compute in the stream's gRPC metadata (as a transformation is).
//
// - Slot `jwt`, just before jwt_authn: `jwtAuthentication.location.expression` gives the token, set as request
//   header JWT_EXPRESSION_HEADER (removed when the expression fails, so a client cannot set it), which the JWT
//   providers read (jwt-authn.ts; jwt_authn removes it once the token verifies).
// - Slot `response`, just after the user's ext_proc (so the response reaches it first): that processor's response
//   attributes reading the response that Envoy's default CEL cannot evaluate as the spec means them (string
//   conversion, string functions, ...), computed on the response headers into CONTEXT_NAMESPACE, which the
//   processor's attribute mapper reads (ext-proc.ts).
// - Slot `main`, after authentication and authorization (so `jwt`, `apiKey`, `basicAuth`, `extauthz` are known),
//   before the global rate limit and the user's ext_proc: rate limit descriptor entries Envoy's CEL cannot evaluate
//   and non-constant Requests costs, written to dynamic metadata namespace CONTEXT_NAMESPACE (global-ratelimit.ts
//   reads them with `metadata` descriptor actions and a `hits_addend` format), and `extProc.metadataContext`, written
//   to the user's namespaces, which that processor's filter forwards (ext-proc.ts).
//
// The filter fails closed: Sluice unreachable answers 500 (values the route's limits and processors depend on are
// never silently missing).

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { compileExpression } from "../../../cel/index.js";
import {
  CONTEXT_METADATA,
  CONTEXT_STAGE,
  type ContextChoice,
  type ContextSpec,
  type ContextValue,
  encodeContext,
} from "../../../extproc/context.js";
import { RESPONSE_ENVIRONMENT } from "../../../extproc/transformation.js";
import {
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import type { RouteIR } from "../../ir.js";
import { LLM_METADATA_NAMESPACE } from "../../llm/table.js";
import { IDENTITY_NAMESPACES } from "../llm.js";
import { needsCelConfig, readsLlm, toEnvoyCel } from "./envoy-cel.js";
import { extProcOnRoute } from "./ext-proc-route.js";
import { type Phase, phaseFields, phaseOrder } from "./policy-fields.js";
import { sluiceStageProcessor } from "./sluice-stage.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./types.js";

const FILTER = "sluice.context";
/** Dynamic metadata namespace of the rate limit values. */
export const CONTEXT_NAMESPACE = "sluice.context";
/** The request header carrying the token `jwtAuthentication.location.expression` found. */
export const JWT_EXPRESSION_HEADER = "x-sluice-jwt-token";
const IDENTITY = new Set(["jwt", "apiKey", "basicAuth", "extauthz"]);
const READS_REQUEST_BODY = /\brequest\s*(\.\s*body\b|\[\s*['"]body['"]\s*\])/;

/** The metadata key of descriptor `i`'s entry `j` of a phase's global rate limit. */
export const rateLimitEntryKey = (phase: Phase, i: number, j: number): string => `${phase}.ratelimit.${i}.${j}`;
/** The metadata key of descriptor `i`'s cost. */
export const rateLimitCostKey = (phase: Phase, i: number): string => `${phase}.ratelimit.${i}.cost`;

/** Whether Sluice computes a rate limit descriptor entry: it compiles, Envoy's CEL cannot read it, and no `llm`. */
export function entryNeedsSluice(expression: string): boolean {
  const c = compileExpression(expression);
  return "ok" in c && !readsLlm(expression) && toEnvoyCel(expression) === undefined;
}

/** A Requests cost that is not a constant integer (and compiles): Sluice computes it. */
export function costNeedsSluice(cost: string | undefined): boolean {
  if (cost === undefined || /^\s*\d+\s*$/.test(cost)) return false;
  return "ok" in compileExpression(cost) && !readsLlm(cost);
}

type Descriptor = {
  entries: { name: string; expression: string }[];
  unit?: "Requests" | "Tokens";
  cost?: string;
};
type RateLimitIn = { global?: { descriptors: Descriptor[] } };
type ExtProcIn = {
  processingOptions?: { responseHeaderMode?: string; responseBodyMode?: string };
  metadataContext?: Record<string, Record<string, string>>;
  requestAttributes?: Record<string, string>;
  responseAttributes?: Record<string, string>;
  conditional?: { condition?: string; policy: ExtProcIn }[];
};

/** The ext_proc entry that runs natively (the top level, or a conditional list's unconditional first entry). */
export function nativeExtProc<P extends { conditional?: { condition?: string; policy: P }[] }>(v: P): P | undefined {
  if (v.conditional === undefined) return v;
  const first = v.conditional[0];
  return first !== undefined && (first.condition === undefined || first.condition.trim() === "true")
    ? first.policy
    : undefined;
}

/** The metadataContext values of an ext_proc policy that compile (the others are reported by ext-proc.ts). */
export function metadataContextValues(m: Record<string, Record<string, string>> | undefined): ContextValue[] {
  const out: ContextValue[] = [];
  for (const [namespace, keys] of Object.entries(m ?? {})) {
    for (const [key, expression] of Object.entries(keys)) {
      if ("ok" in compileExpression(expression)) out.push({ namespace, key, expression, as: "json" });
    }
  }
  return out;
}

/**
 * `llm` fields the LLM ext_proc writes only once the answer is done (completion.ts); `provider` it writes with a
 * streamed answer's response headers too (service.ts).
 */
const LLM_END_ONLY =
  /\bllm\s*\.\s*(responseModel|inputTokens|outputTokens|totalTokens|cachedInputTokens|cacheCreationInputTokens|countTokens)\b/;
const LLM_COUNT_KEYS =
  /metadata\.filter_metadata\['sluice\.dev\/llm'\]\['(input_tokens|output_tokens|total_tokens|cached_input_tokens|cache_creation_input_tokens|count_tokens)'\]/g;

/**
 * Whether a response attribute reads what the LLM ext_proc knows only at the end of the answer while it is sent before
 * that end may have passed it: with the response headers (or the first chunk of a streamed body). A non-streamed
 * answer is complete then (the LLM ext_proc holds its headers until it has translated the body); a streamed one is
 * not, and whether a short one has already passed depends on timing, so such an attribute is sent for a non-streamed
 * answer only. With the headers skipped and the body buffered, the attributes go with the complete body.
 */
function endOfAnswerBeforeEnd(p: ExtProcIn, expr: string): boolean {
  const o = p.processingOptions ?? {};
  const atEnd = o.responseHeaderMode === "Skip" && o.responseBodyMode === "Buffered";
  return !atEnd && LLM_END_ONLY.test(expr.replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, "''"));
}

/** Envoy CEL of a response attribute reading the LLM ext_proc's metadata: counts as integers (the metadata holds
 * doubles, which ext_proc would send as text), and, when `guard`, left out (a failing lookup) unless not streamed. */
function llmEnvoyAttribute(envoy: string, guard: boolean): string {
  const counted = envoy.replace(LLM_COUNT_KEYS, (m) => `int(${m})`);
  return guard
    ? `(metadata.filter_metadata['${LLM_METADATA_NAMESPACE}']['streaming'] == false ? (${counted}) : {}['streamed'])`
    : counted;
}

/**
 * Expressions giving a map that Envoy's CEL would read natively: Envoy's attribute conversion sends a map as the text
 * `CelMap value`, so Sluice computes them (as JSON text).
 */
const WHOLE_MAP = /^(request|response)(\s*\.\s*headers)?$/;

/** A plain attribute path (`response.code`), which Envoy evaluates with the spec's meaning. */
const ATTRIBUTE = /^[a-z_]+(\.[a-z_]+)+$/;

/** How an ext_proc policy's request and response attributes are sent to its processor. */
export interface AttributePlan {
  /** Every attribute is an Envoy attribute sent under its own text: Envoy's request/response_attributes do it. */
  readonly native: boolean;
  /** Name → Envoy CEL, for the MappedAttributeBuilder (values Sluice computes are read from dynamic metadata). */
  readonly request: Readonly<Record<string, string>>;
  /** Name → Envoy CEL of the response attributes (response_attributes when each is a path under its own text). */
  readonly response: Readonly<Record<string, string>>;
  /** Some response attribute is sent under a name other than its text: the mapper's response map sends them all. */
  readonly responseMapped: boolean;
  /** What Sluice computes for them (context filter, before the processor runs). */
  readonly values: readonly ContextValue[];
  /** Response attributes Sluice computes on the response (the response stage, which has it before the processor). */
  readonly responseValues: readonly ContextValue[];
  /** Attributes that cannot be sent: field (under `requestAttributes` / `responseAttributes`) and why. */
  readonly unsent: readonly (readonly [string, string])[];
}

/**
 * Each request attribute (and response attribute, above) is sent under the policy's name: what Envoy's CEL evaluates with the spec's meaning
 * (envoy-cel.ts) as that expression, anything else (source.address, request.query, apiKey, ...) computed by Sluice on
 * the request into dynamic metadata and read from there, through Envoy's MappedAttributeBuilder.
 */
export function extProcAttributes(p: ExtProcIn, phase: Phase, entry?: number): AttributePlan {
  const out = { request: {} as Record<string, string>, response: {} as Record<string, string> };
  const values: ContextValue[] = [];
  const responseValues: ContextValue[] = [];
  const unsent: [string, string][] = [];
  let native = true;
  let responseMapped = false;
  // Response attributes, sent when the response headers are processed. Under its own text
  // (`response.code: response.code`) Envoy's own response_attributes send one; otherwise the MappedAttributeBuilder's
  // response map sends them all: what Envoy's CEL evaluates with the spec's meaning then (the end-of-stream
  // vocabulary without the LLM fields, which the LLM ext_proc leaves later), or, for an expression of the request
  // Envoy cannot evaluate (`source.address` as an IP, `request.query['k']`, ...), the value Sluice computed on the
  // request, read from dynamic metadata; what reads the response and Envoy cannot evaluate, the value the response
  // stage computed (slot `response`, which gets the response before this processor). A whole map goes through Sluice
  // too (as JSON text), as Envoy would send `CelMap value`.
  for (const [name, raw] of Object.entries(p.responseAttributes ?? {})) {
    const expr = raw.trim();
    const field = `responseAttributes.${name}`;
    // ext_proc evaluates attributes with Envoy's default CEL: no string conversion or string functions. `llm.<field>`
    // reads what the LLM ext_proc has left in dynamic metadata by then (before the user's processor on the response).
    const atEnd = WHOLE_MAP.test(expr) ? undefined : toEnvoyCel(expr, { atEnd: true });
    const guard = endOfAnswerBeforeEnd(p, expr);
    const plain = atEnd !== undefined && !needsCelConfig(atEnd) ? atEnd : undefined;
    const envoy = plain !== undefined && readsLlm(expr) ? llmEnvoyAttribute(plain, guard) : plain;
    if (envoy !== undefined) {
      out.response[name] = envoy;
      if (name !== expr || envoy !== expr || !ATTRIBUTE.test(expr)) responseMapped = true;
      continue;
    }
    if (!("ok" in compileExpression(expr, RESPONSE_ENVIRONMENT))) {
      unsent.push([field, "does not compile; not sent"]);
      continue;
    }
    responseMapped = true;
    const key = `${phase}.extproc${entry === undefined ? "" : `.${entry}`}.response.${name}`;
    // One of the request alone: computed with the request's values; one reading the response or `llm`: by the response
    // stage (after this processor in the chain, so it has the response first, once the LLM ext_proc has seen it).
    const onResponse = !("ok" in compileExpression(expr)) || readsLlm(expr);
    (onResponse ? responseValues : values).push({
      namespace: CONTEXT_NAMESPACE,
      key,
      expression: expr,
      as: "attribute",
      ...(guard ? { unlessStreamed: true } : {}),
    });
    out.response[name] = `metadata.filter_metadata[${JSON.stringify(CONTEXT_NAMESPACE)}][${JSON.stringify(key)}]`;
  }
  for (const [name, raw] of Object.entries(p.requestAttributes ?? {})) {
    const expr = raw.trim();
    const field = `requestAttributes.${name}`;
    const envoy = WHOLE_MAP.test(expr) ? undefined : toEnvoyCel(expr);
    if (envoy !== undefined) {
      out.request[name] = envoy;
      if (name !== expr || envoy !== expr) native = false;
      continue;
    }
    native = false;
    if (!("ok" in compileExpression(expr))) {
      unsent.push([field, "does not compile; not sent"]);
      continue;
    }
    const key = `${phase}.extproc${entry === undefined ? "" : `.${entry}`}.request.${name}`;
    values.push({ namespace: CONTEXT_NAMESPACE, key, expression: expr, as: "attribute" });
    out.request[name] = `metadata.filter_metadata[${JSON.stringify(CONTEXT_NAMESPACE)}][${JSON.stringify(key)}]`;
  }
  return { native: native && !responseMapped, responseMapped, ...out, values, responseValues, unsent };
}

/** The request header naming the entry of a conditional ext_proc chosen for the request. */
export const extProcEntryHeader = (phase: Phase): string =>
  phase === "preRouting" ? "x-sluice-ext-proc-entry-pre" : "x-sluice-ext-proc-entry";

function mainValues(
  route: RouteIR,
  phase: Phase,
  llmRoute: boolean,
): { values: ContextValue[]; choose: ContextChoice[]; atResponse: ContextValue[] } {
  const values: ContextValue[] = [];
  const atResponse: ContextValue[] = [];
  const choose: ContextChoice[] = [];
  for (const f of phaseFields<RateLimitIn>(route, "rateLimit")) {
    if (f.phase !== phase) continue;
    f.value.global?.descriptors.forEach((d, i) => {
      const tokens = (d.unit ?? "Requests") === "Tokens";
      // A descriptor for the LLM rate limit on a route without an AI backend is not sent (global-ratelimit.ts).
      if ((tokens || d.entries.some((e) => readsLlm(e.expression))) && !llmRoute) return;
      d.entries.forEach((e, j) => {
        if (entryNeedsSluice(e.expression)) {
          values.push({
            namespace: CONTEXT_NAMESPACE,
            key: rateLimitEntryKey(phase, i, j),
            expression: e.expression,
            as: "text",
          });
        }
      });
      if (!tokens && d.cost !== undefined && costNeedsSluice(d.cost)) {
        values.push({
          namespace: CONTEXT_NAMESPACE,
          key: rateLimitCostKey(phase, i),
          expression: d.cost,
          as: "count",
          fallback: 1,
        });
      }
    });
  }
  for (const f of phaseFields<ExtProcIn>(route, "extProc")) {
    if (f.phase !== phase) continue;
    const p = nativeExtProc(f.value);
    if (p !== undefined) {
      const plan = extProcAttributes(p, phase);
      values.push(...metadataContextValues(p.metadataContext), ...plan.values);
      atResponse.push(...plan.responseValues);
    } else if (f.value.conditional !== undefined) {
      // Entries chosen by CEL: Sluice names the entry in a header its filter matches (ext-proc.ts), and computes
      // only that entry's values.
      const choice = choose.length;
      choose.push({
        header: extProcEntryHeader(phase),
        conditions: f.value.conditional.map((c) => c.condition ?? null),
      });
      f.value.conditional.forEach((c, entry) => {
        const plan = extProcAttributes(c.policy, phase, entry);
        for (const v of [...metadataContextValues(c.policy.metadataContext), ...plan.values]) {
          values.push({ ...v, onlyFor: { choice, entry } });
        }
        for (const v of plan.responseValues) atResponse.push({ ...v, onlyFor: { choice, entry } });
      });
    }
  }
  return { values, choose, atResponse };
}

function listenerConfig(slot: string) {
  return create(ExternalProcessorSchema, {
    ...sluiceStageProcessor(CONTEXT_STAGE),
    // For `source`: Envoy evaluates request attributes from the listener-level list only (a route's override of
    // it is not read), so every route of this filter has them sent.
    requestAttributes: ["source.address", "source.port"],
    // Its own counters: http.<listener>.ext_proc.sluice_context_<slot>.*
    statPrefix: `sluice_context_${slot}`,
  });
}

const SLOT_ORDER = {
  jwt: FilterOrder.jwtContext,
  main: FilterOrder.context,
  response: FilterOrder.responseContext,
} as const;

function instance(slot: keyof typeof SLOT_ORDER, phase: Phase, spec: ContextSpec): FilterInstance {
  const texts = [
    ...(spec.headers ?? []).map((h) => h.expression),
    ...(spec.values ?? []).map((v) => v.expression),
    ...(spec.choose ?? []).flatMap((c) => c.conditions.filter((x): x is string => x !== null)),
  ];
  const variables = new Set<string>();
  for (const t of texts) {
    const c = compileExpression(t, spec.atResponse === true ? RESPONSE_ENVIRONMENT : undefined);
    if ("ok" in c) for (const v of c.ok.variables) variables.add(v);
  }
  const namespaces = [...new Set((spec.values ?? []).map((v) => v.namespace))].sort();
  // What the LLM ext_proc left in dynamic metadata is forwarded where an expression reads `llm`.
  const forwarded = [
    ...([...variables].some((v) => IDENTITY.has(v)) ? IDENTITY_NAMESPACES : []),
    ...(variables.has("llm") ? [LLM_METADATA_NAMESPACE] : []),
  ];
  return {
    name: `${FILTER}.${slot}${phase === "preRouting" ? ".pre_routing" : ""}`,
    order: phaseOrder(SLOT_ORDER[slot], phase),
    config: anyPack(ExternalProcessorSchema, listenerConfig(slot)),
    perRoute: extProcOnRoute({
      processingMode: {
        requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
        requestBodyMode: spec.requestBody ? ProcessingMode_BodySendMode.BUFFERED : ProcessingMode_BodySendMode.NONE,
        responseHeaderMode:
          spec.atResponse === true ? ProcessingMode_HeaderSendMode.SEND : ProcessingMode_HeaderSendMode.SKIP,
        responseBodyMode: ProcessingMode_BodySendMode.NONE,
        requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
        responseTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
      },
      grpcInitialMetadata: [{ key: CONTEXT_METADATA, value: encodeContext(spec) }],
      ...(forwarded.length > 0 || namespaces.length > 0
        ? {
            metadataOptions: {
              ...(forwarded.length > 0 ? { forwardingNamespaces: { untyped: forwarded } } : {}),
              ...(namespaces.length > 0 ? { receivingNamespaces: { untyped: namespaces } } : {}),
            },
          }
        : {}),
    }),
  };
}

/**
 * The request headers Sluice sets on this route for later filters only (a JWT from location.expression, the chosen
 * conditional extProc entry): the route removes them before the backend (traffic-route.ts).
 */
export function internalRequestHeaders(route: RouteIR): string[] {
  const out = new Set<string>();
  for (const f of phaseFields<{ location?: { expression?: string } }>(route, "jwtAuthentication")) {
    if (f.value.location?.expression !== undefined) out.add(JWT_EXPRESSION_HEADER);
  }
  for (const f of phaseFields<ExtProcIn>(route, "extProc")) {
    if (f.value.conditional !== undefined && nativeExtProc(f.value) === undefined) out.add(extProcEntryHeader(f.phase));
  }
  return [...out].sort();
}

export const contextBuilder: HttpFilterBuilder = {
  id: "context",
  schemas: [ExternalProcessorSchema, ExtProcPerRouteSchema],
  forRoute(route, ctx) {
    const filters: FilterInstance[] = [];
    const llmRoute = ctx.llmEntry?.(route.name) !== undefined;
    for (const phase of ["preRouting", "traffic"] as const) {
      const jwt = phaseFields<{ location?: { expression?: string } }>(route, "jwtAuthentication").find(
        (f) => f.phase === phase,
      );
      const expression = jwt?.value.location?.expression;
      // One that does not compile is reported by jwt-authn.ts; the filter still runs, removing a client's header.
      if (expression !== undefined) {
        filters.push(
          instance("jwt", phase, {
            headers: [{ name: JWT_EXPRESSION_HEADER, expression }],
            requestBody: READS_REQUEST_BODY.test(expression),
          }),
        );
      }
      const { values, choose, atResponse } = mainValues(route, phase, llmRoute);
      if (values.length > 0 || choose.length > 0) {
        const texts = [
          ...values.map((v) => v.expression),
          ...choose.flatMap((c) => c.conditions.filter((x): x is string => x !== null)),
        ];
        // The user's processor runs before the LLM ext_proc has read the request: the request's model and streaming
        // are read from its body here (the LLM ext_proc's other values are not known before the answer).
        const llmBody = llmRoute && values.some((v) => readsLlm(v.expression));
        filters.push(
          instance("main", phase, {
            values,
            ...(choose.length > 0 ? { choose } : {}),
            requestBody: llmBody || texts.some((t) => READS_REQUEST_BODY.test(t)),
            ...(llmBody ? { llmBody } : {}),
          }),
        );
      }
      // Response attributes of the user's processor that read the response: computed by a stage after it in the
      // chain, which the response reaches first, into the metadata its attribute mapper reads.
      if (atResponse.length > 0) {
        filters.push(
          instance("response", phase, {
            values: atResponse,
            ...(choose.length > 0 ? { choose } : {}),
            requestBody: atResponse.some((v) => READS_REQUEST_BODY.test(v.expression)),
            atResponse: true,
          }),
        );
      }
    }
    return filters.length === 0 ? undefined : { filters };
  },
};
