// The parts of `frontend.tracing` and `frontend.metrics` that are per-request CEL, served by Envoy natively:
//   sampling      the OpenTelemetry tracer's CEL sampler (envoy.tracers.opentelemetry.samplers.cel), asked when the
//                 span starts, with request attributes only: `randomSampling` for a request without `traceparent`,
//                 `clientSampling` for one with it, and a `filter` reading only the request ANDed in
//   resources     the static resource detector, with each expression evaluated here (a resource is the proxy's,
//                 not a request's: expressions that read a variable are reported)
//   metrics       the stats access logger (envoy.access_loggers.stats): a request counter and a duration histogram,
//                 each attribute a tag valued by `%CEL(...)%`, an empty value (a failed expression) becoming
//                 `unknown` through the tag's transform rules

import { type Expr, ExprSchema as SpecExprSchema } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { constValue } from "../../cel/ast.js";
import { compileExpression, createCelEnvironment, evaluate, fromCel, referencedVariables } from "../../cel/index.js";
import type { ContextValue } from "../../extproc/context.js";
import { ExprSchema } from "../../gen/cel/expr/syntax_pb.js";
import type { AccessLogSchema } from "../../gen/envoy/config/accesslog/v3/accesslog_pb.js";
import type { TypedExtensionConfigSchema } from "../../gen/envoy/config/core/v3/extension_pb.js";
import {
  Config_Histogram_Unit,
  type Config_TagSchema,
  ConfigSchema as StatsLoggerSchema,
} from "../../gen/envoy/extensions/access_loggers/stats/v3/stats_pb.js";
import { TransformStatSchema } from "../../gen/envoy/extensions/matching/actions/transform_stat/v3/transform_stat_pb.js";
import { StatTagValueInputSchema } from "../../gen/envoy/extensions/matching/common_inputs/stats/v3/stats_pb.js";
import { StaticConfigResourceDetectorConfigSchema } from "../../gen/envoy/extensions/tracers/opentelemetry/resource_detectors/v3/static_config_resource_detector_pb.js";
import { CELSamplerConfigSchema } from "../../gen/envoy/extensions/tracers/opentelemetry/samplers/v3/cel_sampler_pb.js";
import { endFormat, readsVariable, toDefaultEnvoyCel } from "./filters/envoy-cel.js";
import { sluiceComputes, telemetryValue } from "./tracing-context.js";

export const TELEMETRY_SCHEMAS = [
  CELSamplerConfigSchema,
  StaticConfigResourceDetectorConfigSchema,
  StatsLoggerSchema,
  StatTagValueInputSchema,
  TransformStatSchema,
] as const;

type Note = (field: string, message: string) => void;
type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
type ExtensionInit = MessageInitShape<typeof TypedExtensionConfigSchema>;

/** Envoy's CEL vocabulary, to parse an expression already rewritten into it (request.url_path, metadata ...). */
const ENVOY_ENVIRONMENT = createCelEnvironment({
  variables: ["request", "response", "source", "destination", "connection", "upstream", "metadata", "xds"],
});

/** A sampling setting: a constant percentage, or an expression (Envoy's CEL) giving a boolean. */
type Sampling = { readonly percent: number } | { readonly expr: string };

/** The spec's sampling value (a CEL float 0..1 or boolean): a constant, or Envoy CEL of the request. */
function sampling(text: unknown, field: string, note: Note): Sampling | undefined {
  if (typeof text !== "string") return undefined;
  const c = compileExpression(text);
  const v = "ok" in c ? constValue(c.ok.ast.expr) : undefined;
  if (typeof v === "boolean") return { percent: v ? 100 : 0 };
  if (typeof v === "number" && v >= 0 && v <= 1) return { percent: v * 100 };
  const branches = "ok" in c ? ternaryOfConstants(text, c.ok) : undefined;
  if (branches !== undefined) {
    const condition = requestCel(branches.condition);
    if (condition !== undefined) {
      return { expr: `(${condition}) == true ? (${asCel(branches.then)}) : (${asCel(branches.otherwise)})` };
    }
  } else if ("ok" in c && givesNumber(c.ok.ast.expr)) {
    note(
      field,
      "a number from a non-constant expression is applied only as `<condition> ? <number> : <number>`; not applied",
    );
    return undefined;
  }
  const expr = requestCel(text);
  if (expr === undefined) {
    note(
      field,
      "only a constant or an expression of the request (request.*) is applied: the decision is made when the span " +
        "starts, before authentication; not applied",
    );
    return undefined;
  }
  return { expr: `(${expr}) == true` };
}

type Compiled = Extract<ReturnType<typeof compileExpression>, { ok: unknown }>["ok"];

/** A sampling value as a percentage: a boolean or a number 0..1 literal. */
function constPercent(e: Expr): Sampling | undefined {
  const v = constValue(e);
  if (typeof v === "boolean") return { percent: v ? 100 : 0 };
  if (typeof v === "number" && v >= 0 && v <= 1) return { percent: v * 100 };
  return undefined;
}

/** `<condition> ? <constant> : <constant>`: the condition's text and both branches as percentages. */
function ternaryOfConstants(
  text: string,
  c: Compiled,
): { condition: string; then: Sampling; otherwise: Sampling } | undefined {
  const e = c.ast.expr;
  if (e.exprKind.case !== "callExpr" || e.exprKind.value.function !== "_?_:_") return undefined;
  const [cond, a, b] = e.exprKind.value.args;
  const then = a === undefined ? undefined : constPercent(a);
  const otherwise = b === undefined ? undefined : constPercent(b);
  if (cond === undefined || a === undefined || then === undefined || otherwise === undefined) return undefined;
  // The condition is the text before the `?` that precedes the first branch.
  const at = c.ast.sourceInfo?.positions[a.id.toString()];
  const head = at === undefined ? "" : text.slice(0, at).trimEnd();
  if (!head.endsWith("?")) return undefined;
  return { condition: head.slice(0, -1), then, otherwise };
}

/** Whether an expression evidently gives a number (a numeric literal in a branch, arithmetic, double()). */
function givesNumber(e: Expr): boolean {
  if (typeof constValue(e) === "number") return true;
  if (e.exprKind.case !== "callExpr") return false;
  const f = e.exprKind.value.function;
  if (f === "_?_:_") return e.exprKind.value.args.slice(1).some(givesNumber);
  return ["_+_", "_-_", "_*_", "_/_", "double", "int", "uint"].includes(f);
}

/** Envoy CEL of an expression that reads the request alone (what the sampler sees), else undefined. */
export function requestCel(text: string): string | undefined {
  if (readsVariable(text, "jwt") || readsVariable(text, "llm")) return undefined;
  return toDefaultEnvoyCel(text);
}

/**
 * A percentage as CEL: x-request-id, a random UUID Envoy gives each request, compared with the percentage's share
 * of its first 32 bits (lowercase hex sorts as its value).
 */
function percentCel(percent: number): string {
  if (percent >= 100) return "true";
  if (percent <= 0) return "false";
  const threshold = Math.floor((percent / 100) * 0x1_0000_0000);
  return `request.id < '${threshold.toString(16).padStart(8, "0")}'`;
}

const asCel = (s: Sampling) => ("percent" in s ? percentCel(s.percent) : s.expr);

export interface TracingSampling {
  /** HCM random_sampling / client_sampling (percent). */
  readonly random: number;
  readonly client: number;
  /** The OpenTelemetry tracer's sampler, when a setting is not a constant or a filter applies. */
  readonly sampler?: ExtensionInit;
}

/**
 * `randomSampling`, `clientSampling` and a `filter` of the request alone → Envoy's sampling. Constants alone stay
 * the HCM's percentages; otherwise one CEL sampler decides for every span (Envoy's tracer then ignores the HCM's
 * decision).
 */
export function tracingSampling(t: Rec, note: Note): TracingSampling {
  // Spec: random sampling unset disables it; client sampling unset is 100 %.
  const random = sampling(t.randomSampling, "randomSampling", note) ?? { percent: 0 };
  const client = sampling(t.clientSampling, "clientSampling", note) ?? { percent: 100 };
  // A filter reading more than the request is applied when the span finishes, by Sluice's span relay (frontend.ts).
  const filter = typeof t.filter === "string" ? requestCel(t.filter) : undefined;
  if ("percent" in random && "percent" in client && filter === undefined) {
    return { random: random.percent, client: client.percent };
  }
  const decision = `('traceparent' in request.headers) ? (${asCel(client)}) : (${asCel(random)})`;
  const text = filter === undefined ? decision : `(${decision}) && ((${filter}) == true)`;
  const parsed = envoyParsedExpr(text);
  if (parsed === undefined) {
    note("randomSampling", "the sampling expression could not be built for Envoy; not applied");
    return { random: 0, client: 100 };
  }
  return {
    random: 100,
    client: 100,
    sampler: {
      name: "envoy.tracers.opentelemetry.samplers.cel",
      typedConfig: anyPack(
        CELSamplerConfigSchema,
        create(CELSamplerConfigSchema, { expression: { celExprParsed: { expr: parsed } } }),
      ),
    },
  };
}

/** Envoy CEL text → its parsed AST as Envoy's API carries it (cel.expr.Expr). */
function envoyParsedExpr(text: string) {
  const c = compileExpression(text, ENVOY_ENVIRONMENT);
  if (!("ok" in c)) return undefined;
  return fromBinary(ExprSchema, toBinary(SpecExprSchema, c.ok.ast.expr));
}

/** `resources` → the static resource detector; each expression is evaluated here, once. */
export function tracingResources(resources: unknown, note: Note): ExtensionInit | undefined {
  const attributes: Record<string, string> = {};
  (Array.isArray(resources) ? resources : []).forEach((r, i) => {
    if (!isRec(r) || typeof r.name !== "string" || typeof r.expression !== "string") return;
    const c = compileExpression(r.expression);
    if (!("ok" in c)) return;
    if (referencedVariables(c.ok).size > 0) {
      note(
        `resources[${i}]`,
        "a resource attribute describes the proxy, not a request: only an expression that reads no variable is " +
          "applied; not applied",
      );
      return;
    }
    const v = evaluate(c.ok, {});
    if (!("value" in v)) {
      note(`resources[${i}]`, `the expression fails (${v.error}); not applied`);
      return;
    }
    const value = fromCel(v.value);
    attributes[r.name] = typeof value === "string" ? value : JSON.stringify(value);
  });
  if (Object.keys(attributes).length === 0) return undefined;
  return {
    name: "envoy.tracers.opentelemetry.resource_detectors.static_config",
    typedConfig: anyPack(
      StaticConfigResourceDetectorConfigSchema,
      create(StaticConfigResourceDetectorConfigSchema, { attributes }),
    ),
  };
}

/** The prefix of the metric names: `sluice_frontend.requests` (Prometheus: `envoy_sluice_frontend_requests`). */
export const METRICS_PREFIX = "sluice_frontend";

/**
 * `metrics.attributes.add` → a stats access logger on the HCM: a request counter and a duration histogram (ms) per
 * combination of the labels. Envoy's own stats cannot take per-request labels, so these two carry them.
 */
export function metricsLogger(
  m: Rec,
  note: Note,
  values: ContextValue[],
): MessageInitShape<typeof AccessLogSchema> | undefined {
  const attributes = isRec(m.attributes) ? m.attributes : {};
  const tags: MessageInitShape<typeof Config_TagSchema>[] = [];
  (Array.isArray(attributes.add) ? attributes.add : []).forEach((a, i) => {
    if (!isRec(a) || typeof a.name !== "string" || typeof a.expression !== "string") return;
    let format = endFormat(a.expression);
    if (format === undefined && sluiceComputes(a.expression)) {
      // Computed by Sluice's telemetry stage into dynamic metadata before the stats logger runs (tracing-context.ts).
      const v = telemetryValue(a.expression, `metrics.attributes.${i}`);
      values.push(v);
      format = `%DYNAMIC_METADATA(${v.namespace}:${v.key})%`;
    }
    if (format === undefined) {
      note(`attributes.add[${i}]`, "the expression does not compile; left out");
      return;
    }
    tags.push({ name: a.name, valueFormat: format, rules: unknownWhenEmpty() });
  });
  if (tags.length === 0) return undefined;
  const config = create(StatsLoggerSchema, {
    statsScope: { prefix: METRICS_PREFIX },
    counters: [{ stat: { name: "requests", tags }, valueFixed: 1n }],
    histograms: [
      { stat: { name: "request_duration", tags }, unit: Config_Histogram_Unit.Milliseconds, valueFormat: "%DURATION%" },
    ],
  });
  return {
    name: "envoy.access_loggers.stats",
    configType: { case: "typedConfig", value: anyPack(StatsLoggerSchema, config) },
  };
}

/** The spec: a failed expression yields the label value `unknown` (Envoy's CEL formatter gives an empty value). */
function unknownWhenEmpty() {
  const toUnknown = {
    onMatch: {
      case: "action" as const,
      value: {
        name: "unknown",
        typedConfig: anyPack(
          TransformStatSchema,
          create(TransformStatSchema, { updateTag: { newTagValue: "unknown" } }),
        ),
      },
    },
  };
  return {
    matcherType: {
      case: "matcherTree" as const,
      value: {
        input: {
          name: "stat_tag_value",
          typedConfig: anyPack(StatTagValueInputSchema, create(StatTagValueInputSchema)),
        },
        treeType: { case: "exactMatchMap" as const, value: { map: { "": toUnknown, "-": toUnknown } } },
      },
    },
  };
}
