// The LLM ext_proc's requests counted, timed and traced: requests, errors, tokens as the provider reported them, time
// to first token, duration, by gateway, route, provider and model, with the OpenTelemetry GenAI names where they
// exist. The service calls the hooks below at four points (a request starts, a streamed chunk arrives, the response is
// complete, it failed); everything else (labels, bounds, spans) is here.

import type { LlmRouteEntry, LlmTable } from "../translate/llm/table.js";
import { currentSpan } from "./context.js";
import { requestDebug } from "./log.js";
import { requestMetricsOn, series } from "./metrics.js";
import type { CounterChild, HistogramChild } from "./series.js";

/** What the hooks read of the service's request state (its RequestState has these and more). */
export interface LlmRequestView {
  readonly entry: { readonly id: string };
  readonly routeType: string;
  readonly body?: { readonly [k: string]: unknown } | undefined;
  readonly attempt?: { readonly provider: string } | undefined;
  readonly model?: { readonly choice: { readonly matched: string } } | undefined;
}

export interface LlmUsageView {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheReadTokens?: number;
  readonly cacheWriteTokens?: number;
  readonly reasoningTokens?: number;
}

const ROUTE_LABELS = ["gateway", "route", "provider", "model"] as const;
const GENAI_LABELS = ["gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model", "gateway", "route"];

const requests = series.counter(
  "sluice_llm_requests_total",
  "LLM requests through the LLM ext_proc, by gateway, route, provider, model and outcome (ok, error, aborted: the stream ended before the response did).",
  [...ROUTE_LABELS, "outcome"],
);
const errors = series.counter(
  "sluice_llm_errors_total",
  "LLM requests that ended in an error, by the HTTP status the client got (error_type).",
  [...ROUTE_LABELS, "error_type"],
);
const tokens = series.counter(
  "sluice_llm_tokens_total",
  "Tokens as the provider reported them, by type (input includes cached_input; reasoning is part of output).",
  [...ROUTE_LABELS, "type"],
);
const tokenUsage = series.histogram(
  "gen_ai_client_token_usage",
  "Tokens per LLM request by gen_ai_token_type (OpenTelemetry gen_ai.client.token.usage, unit {token}).",
  [...GENAI_LABELS, "gen_ai_token_type"],
  [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
);
const SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const duration = series.histogram(
  "gen_ai_client_operation_duration_seconds",
  "From the request's headers at Sluice to the end of its response (OpenTelemetry gen_ai.client.operation.duration).",
  [...GENAI_LABELS, "error_type"],
  SECONDS,
);
const ttft = series.histogram(
  "gen_ai_server_time_to_first_token_seconds",
  "Streamed responses: from the request's headers to the first response chunk (OpenTelemetry gen_ai.server.time_to_first_token).",
  GENAI_LABELS,
  [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
);

/** OpenTelemetry's gen_ai.provider.name for each provider kind (docs: gen-ai semantic conventions). */
const GENAI_PROVIDER: Readonly<Record<string, string>> = {
  openai: "openai",
  "azure-openai": "azure.ai.openai",
  "azure-foundry": "azure.ai.inference",
  anthropic: "anthropic",
  gemini: "gcp.gemini",
  vertex: "gcp.vertex_ai",
  bedrock: "aws.bedrock",
  custom: "custom",
};

function operationOf(routeType: string): string {
  switch (routeType) {
    case "Completions":
    case "Messages":
    case "Responses":
    case "Realtime":
      return "chat";
    case "Embeddings":
      return "embeddings";
    default:
      return routeType.toLowerCase();
  }
}

interface EntryLabels {
  readonly gateway: string;
  readonly route: string;
  /** Provider name → its kind. */
  readonly kinds: ReadonlyMap<string, string>;
  /** The model names the route's providers are configured with: the only client model strings that become labels. */
  readonly models: ReadonlySet<string>;
}

let entries = new Map<string, EntryLabels>();
let published: LlmTable | undefined;

function labelsOf(entry: LlmRouteEntry, gateway: string, route: string): EntryLabels {
  const kinds = new Map<string, string>();
  const models = new Set<string>();
  for (const b of Object.values(entry.backends)) {
    for (const [name, p] of Object.entries(b.providers)) {
      kinds.set(name, p.kind);
      const m = p.settings["model"];
      if (typeof m === "string") models.add(m);
    }
  }
  return { gateway, route, kinds, models };
}

/** Takes the new table's routes (gateway, route name) and configured models; called on every publish. */
export function updateLlmLabels(table: LlmTable): void {
  if (table === published) return;
  published = table;
  const next = new Map<string, EntryLabels>();
  for (const [key, id] of [...table.routes].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (next.has(id)) continue;
    const entry = table.entries.get(id);
    if (entry === undefined) continue;
    const bar = key.indexOf("|");
    next.set(id, labelsOf(entry, key.slice(0, bar), key.slice(bar + 1)));
  }
  // Requests of an Envoy not yet updated still name the old ids.
  for (const [id, l] of entries) if (!next.has(id) && table.entries.has(id)) next.set(id, l);
  entries = next;
  bound = new Map();
}

interface Timing {
  readonly started: number;
  firstChunk?: number;
}

const timings = new WeakMap<object, Timing>();

/** A request's headers reached the router-level ext_proc. */
export function llmStarted(state: object): void {
  timings.set(state, { started: performance.now() });
}

/** A chunk of a streamed response: the first one fixes the time to first token. */
export function llmChunk(state: object | undefined): void {
  if (state === undefined) return;
  const t = timings.get(state);
  if (t !== undefined && t.firstChunk === undefined) t.firstChunk = performance.now();
}

interface Resolved {
  readonly route: string[];
  readonly genai: string[];
  readonly operation: string;
  readonly genaiProvider: string;
  readonly model: string;
}

/** The model label: a client's model string only when configured (bounded cardinality); a GwModel route's GwModel. */
function modelLabel(state: LlmRequestView, e: EntryLabels | undefined): string {
  if (state.model !== undefined) return state.model.choice.matched;
  const requested = state.body?.["model"];
  if (typeof requested !== "string") return "none";
  return e?.models.has(requested) === true ? requested : "other";
}

function resolve(state: LlmRequestView, e: EntryLabels | undefined, model: string): Resolved {
  const provider = state.attempt?.provider ?? "none";
  const gateway = e?.gateway ?? "unknown";
  const route = e?.route ?? "unknown";
  const kind = e?.kinds.get(provider);
  const genaiProvider = kind !== undefined ? (GENAI_PROVIDER[kind] ?? kind) : provider;
  const operation = operationOf(state.routeType);
  return {
    route: [gateway, route, provider, model],
    genai: [operation, genaiProvider, model, gateway, route],
    operation,
    genaiProvider,
    model,
  };
}

/**
 * One label set's children, found once and kept: a request then costs a map lookup and a few additions rather than a
 * walk of each family's label tree (bench/observability-llm.ts). Children are made on first use, so a series appears
 * only once it has counted something.
 */
class Bound {
  readonly #tokens = new Map<string, CounterChild>();
  #ok: CounterChild | undefined;
  #usage: [HistogramChild, HistogramChild] | undefined;
  #duration: HistogramChild | undefined;
  #ttft: HistogramChild | undefined;
  constructor(readonly r: Resolved) {}
  ok(): CounterChild {
    this.#ok ??= requests.labels(...this.r.route, "ok");
    return this.#ok;
  }
  tokens(type: string): CounterChild {
    let c = this.#tokens.get(type);
    if (c === undefined) {
      c = tokens.labels(...this.r.route, type);
      this.#tokens.set(type, c);
    }
    return c;
  }
  usage(): [HistogramChild, HistogramChild] {
    this.#usage ??= [tokenUsage.labels(...this.r.genai, "input"), tokenUsage.labels(...this.r.genai, "output")];
    return this.#usage;
  }
  duration(): HistogramChild {
    this.#duration ??= duration.labels(...this.r.genai, "");
    return this.#duration;
  }
  ttft(): HistogramChild {
    this.#ttft ??= ttft.labels(...this.r.genai);
    return this.#ttft;
  }
}

/** Bound children by entry id, provider, model label and route type: lookups of strings, no key built. */
let bound = new Map<string, Map<string, Map<string, Map<string, Bound>>>>();

function level<T>(m: Map<string, T>, k: string, make: () => T): T {
  let v = m.get(k);
  if (v === undefined) {
    v = make();
    m.set(k, v);
  }
  return v;
}

function bind(state: LlmRequestView): Bound {
  const e = entries.get(state.entry.id);
  const model = modelLabel(state, e);
  const byProvider = level(bound, state.entry.id, () => new Map<string, Map<string, Map<string, Bound>>>());
  const byModel = level(byProvider, state.attempt?.provider ?? "none", () => new Map<string, Map<string, Bound>>());
  const byType = level(byModel, model, () => new Map<string, Bound>());
  return level(byType, state.routeType, () => new Bound(resolve(state, e, model)));
}

function spanName(r: Resolved): string {
  return `${r.operation} ${r.model}`;
}

/** The response is complete with `usage` as the provider reported it (undefined when it reported none). */
export function llmCompleted(
  state: LlmRequestView | undefined,
  usage: LlmUsageView | undefined,
  responseModel: string | undefined,
): void {
  if (state === undefined) return;
  const t = timings.get(state);
  timings.delete(state);
  const span = currentSpan();
  const metrics = requestMetricsOn();
  requestDebug(
    "llm",
    {
      entry: state.entry.id,
      provider: state.attempt?.provider,
      input: usage?.inputTokens,
      output: usage?.outputTokens,
    },
    "llm ext_proc: response complete",
  );
  if (span === undefined && !metrics) return;
  const b = bind(state);
  const r = b.r;
  if (span !== undefined) {
    span.updateName(spanName(r));
    span.setAttributes({
      "gen_ai.operation.name": r.operation,
      "gen_ai.provider.name": r.genaiProvider,
      "gen_ai.request.model": typeof state.body?.["model"] === "string" ? state.body["model"] : "",
      "gen_ai.request.stream": state.body?.["stream"] === true,
      "sluice.gateway": r.route[0] ?? "",
      "sluice.route": r.route[1] ?? "",
      ...(responseModel !== undefined ? { "gen_ai.response.model": responseModel } : {}),
      ...(usage !== undefined
        ? { "gen_ai.usage.input_tokens": usage.inputTokens, "gen_ai.usage.output_tokens": usage.outputTokens }
        : {}),
    });
  }
  if (!metrics) return;
  b.ok().inc();
  if (usage !== undefined) countTokens(b, usage);
  if (t !== undefined) {
    b.duration().observe((performance.now() - t.started) / 1000);
    if (t.firstChunk !== undefined) b.ttft().observe((t.firstChunk - t.started) / 1000);
  }
}

function countTokens(b: Bound, usage: LlmUsageView): void {
  const add = (type: string, n: number | undefined) => {
    if (n !== undefined && n > 0) b.tokens(type).inc(n);
  };
  add("input", usage.inputTokens);
  add("output", usage.outputTokens);
  add("cached_input", usage.cacheReadTokens);
  add("cache_creation_input", usage.cacheWriteTokens);
  add("reasoning", usage.reasoningTokens);
  const [input, output] = b.usage();
  input.observe(usage.inputTokens);
  output.observe(usage.outputTokens);
}

/**
 * One response of a Realtime session Sluice's relay serves is done (its `response.done`): its tokens, as the provider
 * reported them, counted as an HTTP request's are (`sluice_llm_tokens_total` by type, one `gen_ai_client_token_usage`
 * observation per response). The session is the one request the LLM ext_proc counted at its upgrade.
 */
export function llmRealtimeUsage(view: LlmRequestView, usage: LlmUsageView): void {
  if (requestMetricsOn()) countTokens(bind(view), usage);
}

/** The response is an error with HTTP `status` (500 for Sluice's own failures). */
export function llmFailed(state: LlmRequestView | undefined, status: number): void {
  if (state === undefined) return;
  const t = timings.get(state);
  timings.delete(state);
  // Envoy's own answer to what was never an LLM call (no provider attempt, e.g. an OPTIONS probe): not counted.
  if (status < 400) return;
  const span = currentSpan();
  const metrics = requestMetricsOn();
  requestDebug("llm", { entry: state.entry.id, provider: state.attempt?.provider, status }, "llm ext_proc: error");
  if (span === undefined && !metrics) return;
  const r = bind(state).r;
  const errorType = String(status);
  if (span !== undefined) {
    span.updateName(spanName(r));
    span.setAttributes({
      "gen_ai.operation.name": r.operation,
      "gen_ai.provider.name": r.genaiProvider,
      "error.type": errorType,
      "sluice.gateway": r.route[0] ?? "",
      "sluice.route": r.route[1] ?? "",
    });
    span.setStatus({ code: 2 });
  }
  if (!metrics) return;
  const [gateway, route, provider, model] = r.route as [string, string, string, string];
  requests.labels(gateway, route, provider, model, "error").inc();
  errors.labels(gateway, route, provider, model, errorType).inc();
  if (t !== undefined) duration.labels(...r.genai, errorType).observe((performance.now() - t.started) / 1000);
}

/**
 * The exchange ended before its response did (the client went away, Envoy reset the stream): counted as `aborted`,
 * timed with error_type `aborted`. A request already counted as complete or failed is not counted again.
 */
export function llmAborted(state: LlmRequestView | undefined): void {
  if (state === undefined) return;
  const t = timings.get(state);
  if (t === undefined) return;
  timings.delete(state);
  requestDebug("llm", { entry: state.entry.id, provider: state.attempt?.provider }, "llm ext_proc: aborted");
  if (!requestMetricsOn()) return;
  const b = bind(state);
  const [gateway, route, provider, model] = b.r.route as [string, string, string, string];
  requests.labels(gateway, route, provider, model, "aborted").inc();
  duration.labels(...b.r.genai, "aborted").observe((performance.now() - t.started) / 1000);
}
