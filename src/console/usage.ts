// LLM usage by route and model, and MCP targets' calls, over the last hour, from Sluice's own counters: the console
// keeps a sample of /metrics a minute and subtracts the one from an hour ago (counters start at zero with the
// process, so a younger process counts from its start).

import { parsePrometheusText, type Sample } from "./prom-text.js";

const WINDOW_MS = 60 * 60 * 1000;
const SAMPLE_EVERY_MS = 60 * 1000;
/** The series usageOf reads: a kept sample holds only these (the rest of /metrics, the process, runtime and
 * control-plane series, would be held sixty times over for nothing). */
const USAGE_SERIES = new Set([
  "sluice_llm_requests_total",
  "sluice_llm_tokens_total",
  "sluice_mcp_target_requests_total",
  "sluice_mcp_target_errors_total",
  "sluice_mcp_target_request_seconds_total",
]);

interface Snapshot {
  readonly at: number;
  readonly samples: readonly Sample[];
}

export interface LlmUsageRow {
  readonly gateway: string;
  readonly route: string;
  readonly provider: string;
  readonly model: string;
  requests: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  reasoningTokens: number;
}

export interface McpTargetCalls {
  readonly backend: string;
  readonly target: string;
  requests: number;
  errors: number;
  seconds: number;
}

export interface Usage {
  /** From when the figures count: an hour ago, or the process's start when that is later. */
  readonly since: string;
  readonly llm: LlmUsageRow[];
  readonly mcp: McpTargetCalls[];
}

function key(s: Sample, names: readonly string[]): string {
  return names.map((n) => s.labels[n] ?? "").join("\n");
}

/** current − base per series (a series absent from base counts from zero; a counter reset counts from zero). */
function delta(current: readonly Sample[], base: readonly Sample[] | undefined): Sample[] {
  if (base === undefined) return [...current];
  const before = new Map(base.map((s) => [`${s.name}${JSON.stringify(s.labels)}`, s.value]));
  return current.map((s) => {
    const b = before.get(`${s.name}${JSON.stringify(s.labels)}`) ?? 0;
    return { ...s, value: s.value >= b ? s.value - b : s.value };
  });
}

export function usageOf(samples: readonly Sample[], since: Date): Usage {
  const llm = new Map<string, LlmUsageRow>();
  const LLM_LABELS = ["gateway", "route", "provider", "model"];
  const row = (s: Sample): LlmUsageRow => {
    const k = key(s, LLM_LABELS);
    let r = llm.get(k);
    if (r === undefined) {
      r = {
        gateway: s.labels["gateway"] ?? "",
        route: s.labels["route"] ?? "",
        provider: s.labels["provider"] ?? "",
        model: s.labels["model"] ?? "",
        requests: 0,
        errors: 0,
        inputTokens: 0,
        outputTokens: 0,
        cachedInputTokens: 0,
        reasoningTokens: 0,
      };
      llm.set(k, r);
    }
    return r;
  };
  const mcp = new Map<string, McpTargetCalls>();
  const target = (s: Sample): McpTargetCalls => {
    const k = key(s, ["backend", "target"]);
    let t = mcp.get(k);
    if (t === undefined) {
      t = { backend: s.labels["backend"] ?? "", target: s.labels["target"] ?? "", requests: 0, errors: 0, seconds: 0 };
      mcp.set(k, t);
    }
    return t;
  };
  for (const s of samples) {
    if (s.name === "sluice_llm_requests_total") {
      const r = row(s);
      r.requests += s.value;
      if (s.labels["outcome"] === "error") r.errors += s.value;
    } else if (s.name === "sluice_llm_tokens_total") {
      const r = row(s);
      const type = s.labels["type"];
      if (type === "input") r.inputTokens += s.value;
      else if (type === "output") r.outputTokens += s.value;
      else if (type === "cached_input") r.cachedInputTokens += s.value;
      else if (type === "reasoning") r.reasoningTokens += s.value;
    } else if (s.name === "sluice_mcp_target_requests_total") target(s).requests += s.value;
    else if (s.name === "sluice_mcp_target_errors_total") target(s).errors += s.value;
    else if (s.name === "sluice_mcp_target_request_seconds_total") target(s).seconds += s.value;
  }
  const byTokens = (a: LlmUsageRow, b: LlmUsageRow) =>
    b.inputTokens + b.outputTokens - (a.inputTokens + a.outputTokens) || b.requests - a.requests;
  return {
    since: since.toISOString(),
    llm: [...llm.values()].filter((r) => r.requests > 0 || r.inputTokens + r.outputTokens > 0).sort(byTokens),
    mcp: [...mcp.values()],
  };
}

/** Samples of /metrics a minute apart over the last hour. */
export class MetricsHistory {
  readonly #read: () => string | Promise<string>;
  readonly #started: number;
  readonly #snapshots: Snapshot[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(read: () => string | Promise<string>, now = Date.now()) {
    this.#read = read;
    this.#started = now;
  }

  start(): void {
    this.#timer = setInterval(() => void this.sample(), SAMPLE_EVERY_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async sample(now = Date.now()): Promise<void> {
    const samples = parsePrometheusText(await this.#read()).filter((x) => USAGE_SERIES.has(x.name));
    this.#snapshots.push({ at: now, samples });
    // Keep the newest snapshot older than the window: it is the base of the next hour's figures.
    while (this.#snapshots.length > 1 && (this.#snapshots[1]?.at ?? now) <= now - WINDOW_MS) this.#snapshots.shift();
  }

  async usage(now = Date.now()): Promise<Usage> {
    const current = parsePrometheusText(await this.#read());
    const base = this.#snapshots.filter((s) => s.at <= now - WINDOW_MS).at(-1);
    const since = base !== undefined ? new Date(base.at) : new Date(Math.max(this.#started, now - WINDOW_MS));
    return usageOf(delta(current, base?.samples), since);
  }
}
