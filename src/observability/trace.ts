// Sluice's spans over OTLP (HTTP, protobuf), off unless an endpoint is configured. A span is only ever a child of the
// one Envoy sent with its call (W3C traceparent): Sluice starts no trace of its own on the request path, and follows
// Envoy's sampling decision (parent based).

import { ROOT_CONTEXT, type Span, SpanKind, type Tracer, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

export interface TracingConfig {
  /** OTLP/HTTP traces endpoint, e.g. http://collector:4318/v1/traces. */
  readonly endpoint: string;
  readonly serviceName?: string;
  /** How long spans wait to be sent in a batch (default 1000 ms). */
  readonly scheduledDelayMs?: number;
}

let provider: TracerProvider | undefined;
let tracer: Tracer | undefined;
const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (c: Record<string, string>) => Object.keys(c),
  get: (c: Record<string, string>, k: string) => c[k],
};

/** The endpoint the flags and the OTEL_* environment variables name, or undefined (tracing off). */
export function tracingEndpoint(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (flag !== undefined && flag !== "") return flag;
  const traces = env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"];
  if (traces !== undefined && traces !== "") return traces;
  const base = env["OTEL_EXPORTER_OTLP_ENDPOINT"];
  if (base !== undefined && base !== "") return `${base.replace(/\/$/, "")}/v1/traces`;
  return undefined;
}

export function configureTracing(c: TracingConfig): void {
  const exporter = new OTLPTraceExporter({ url: c.endpoint });
  provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": c.serviceName ?? "sluice" }),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: c.scheduledDelayMs ?? 1000 })],
  });
  tracer = provider.getTracer("sluice");
}

export function tracingOn(): boolean {
  return tracer !== undefined;
}

/** Sends the spans still waiting and stops exporting. */
export async function shutdownTracing(): Promise<void> {
  const p = provider;
  provider = undefined;
  tracer = undefined;
  await p?.shutdown();
}

/** A client span of work already done (`ms` long, ending now) under `parent`. */
export function recordChildSpan(
  parent: Span,
  name: string,
  ms: number,
  attributes: Readonly<Record<string, string | number | boolean>>,
  failed: boolean,
): void {
  if (tracer === undefined) return;
  const end = Date.now();
  const span = tracer.startSpan(
    name,
    { kind: SpanKind.CLIENT, startTime: end - ms, attributes },
    trace.setSpan(ROOT_CONTEXT, parent),
  );
  if (failed) span.setStatus({ code: 2 });
  span.end(end);
}

/** A server span, child of the remote span `traceparent` names; undefined when tracing is off or there is none. */
export function startChildSpan(name: string, traceparent: string | undefined): Span | undefined {
  if (tracer === undefined || traceparent === undefined) return undefined;
  const parent = propagator.extract(ROOT_CONTEXT, { traceparent }, getter);
  if (trace.getSpanContext(parent) === undefined) return undefined;
  return tracer.startSpan(name, { kind: SpanKind.SERVER }, parent);
}
