// The command-line flags of logs, request metrics and traces, shared by `sluice serve`, `run` and `controller`, and
// the one place that applies them.

import { configureLogging, LOG_FORMATS, type LogFormat, lineLogger, logConfig, parseLevelSpec } from "./log.js";
import { requestMetricsOn, setRequestMetrics } from "./metrics.js";
import { configureTracing, shutdownTracing, tracingEndpoint, tracingOn } from "./trace.js";

export const OBSERVABILITY_OPTIONS = {
  // `info`, or per module: `info,xds=debug` (docs/observability.md). Default: $SLUICE_LOG_LEVEL, else info.
  "log-level": { type: "string" },
  // json, pretty or text. Default: $SLUICE_LOG_FORMAT, else the command's (json in a cluster, pretty on a terminal).
  "log-format": { type: "string" },
  // OTLP/HTTP traces endpoint; tracing is off without it (or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT).
  "otlp-endpoint": { type: "string" },
  "otlp-service-name": { type: "string" },
  // on or off: the request-path series (ext_authz, LLM, guards); off measures what they cost.
  "request-metrics": { type: "string", default: "on" },
} as const;

export interface ObservabilityValues {
  readonly "log-level"?: string | undefined;
  readonly "log-format"?: string | undefined;
  readonly "otlp-endpoint"?: string | undefined;
  readonly "otlp-service-name"?: string | undefined;
  readonly "request-metrics"?: string | undefined;
}

/**
 * Applies the flags: logs to `write` in the format asked for (`defaultFormat` when none), request metrics, tracing.
 * Returns the `log(line)` callback the servers take, or throws a message naming the flag and what is valid.
 */
export function applyObservability(
  values: ObservabilityValues,
  defaultFormat: LogFormat,
  write: (text: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): (line: string) => void {
  const levels = parseLevelSpec(values["log-level"] ?? env["SLUICE_LOG_LEVEL"] ?? "info");
  if (typeof levels === "string") throw new Error(levels);
  const format = values["log-format"] ?? env["SLUICE_LOG_FORMAT"] ?? defaultFormat;
  if (!LOG_FORMATS.includes(format as LogFormat))
    throw new Error(`--log-format must be ${LOG_FORMATS.join(", ")}, got "${format}"`);
  configureLogging({ levels, format: format as LogFormat, write });
  const metrics = values["request-metrics"] ?? "on";
  if (metrics !== "on" && metrics !== "off") throw new Error(`--request-metrics must be on or off, got "${metrics}"`);
  setRequestMetrics(metrics === "on");
  const endpoint = tracingEndpoint(values["otlp-endpoint"], env);
  if (endpoint !== undefined) {
    try {
      new URL(endpoint);
    } catch {
      throw new Error(`--otlp-endpoint must be a URL such as http://collector:4318/v1/traces, got "${endpoint}"`);
    }
    const serviceName = values["otlp-service-name"] ?? env["OTEL_SERVICE_NAME"];
    configureTracing({ endpoint, ...(serviceName !== undefined ? { serviceName } : {}) });
  }
  return lineLogger();
}

/** The default format of a command a person runs: pretty on a terminal, text otherwise (a pipe, a test). */
export function interactiveFormat(): LogFormat {
  return process.stderr.isTTY === true ? "pretty" : "text";
}

/**
 * Whether Sluice's services run each request in a context of its own (context.ts): needed by request metrics' spans,
 * traces and request ids on debug lines; `--request-metrics off` with no tracing and nothing at debug runs none.
 */
export function requestContextWanted(): boolean {
  const l = logConfig().levels;
  const debug = (v: string) => v === "debug" || v === "trace";
  return requestMetricsOn() || tracingOn() || debug(l.level) || [...l.modules.values()].some(debug);
}

/** Flushes what is still to be sent (spans) before the process ends. */
export async function stopObservability(): Promise<void> {
  await shutdownTracing();
}
