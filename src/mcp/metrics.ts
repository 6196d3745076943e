// Prometheus series of the MCP service: per backend, target and method, the requests Sluice sent to targets, how many
// failed (an error answer or no answer), and their time; plus sessions started, resumed and refused. Written with the
// request path's counters (src/observability/series.ts); each target call is also traced and logged at debug there.
// The spare session pool's sets by outcome (spare-pool.ts).
// Targets with a health policy add their health, eviction state and evictions (target-health.ts).

import { observeMcpCall } from "../observability/mcp.js";
import { Counter, type CounterChild } from "../observability/series.js";
import { targetHealthLines } from "./target-health.js";

const TARGET_LABELS = ["backend", "target", "method"];

export class McpMetrics {
  readonly sessions = { started: 0, resumed: 0, refused: 0 };
  /** The spare session pool's counters (spare-pool.ts), once the service has one. */
  spares: (() => Readonly<Record<string, number>>) | undefined;
  readonly #requests = new Counter(
    "sluice_mcp_target_requests_total",
    "Requests the MCP service sent to a target, by backend, target and method.",
    TARGET_LABELS,
  );
  readonly #errors = new Counter(
    "sluice_mcp_target_errors_total",
    "Of those, the ones answered with an error or not answered.",
    TARGET_LABELS,
  );
  readonly #seconds = new Counter(
    "sluice_mcp_target_request_seconds_total",
    "Time spent waiting for targets' answers.",
    TARGET_LABELS,
  );

  /** One request to a target: `ok` false for an error answer or a failure to get one. */
  record(backend: string, target: string, method: string, ok: boolean, ms: number): void {
    this.#requests.labels(backend, target, method).inc();
    // Every series has all three families' samples, errors at 0 until one happens.
    const errors: CounterChild = this.#errors.labels(backend, target, method);
    if (!ok) errors.inc();
    this.#seconds.labels(backend, target, method).inc(ms / 1000);
    observeMcpCall(backend, target, method, ok, ms);
  }

  #spareLines(): string[] {
    const c = this.spares?.();
    if (c === undefined) return [];
    return [
      "# HELP sluice_mcp_spare_sets_total Sets of spare target sessions: started, ready, adopted by a client, refused at adoption (a target gone), failed to start, DELETEd unadopted.",
      "# TYPE sluice_mcp_spare_sets_total counter",
      ...Object.entries(c).map(([outcome, n]) => `sluice_mcp_spare_sets_total{outcome="${outcome}"} ${n}`),
    ];
  }

  lines(): string[] {
    return [
      "# HELP sluice_mcp_sessions_total MCP sessions started here, resumed from a sealed id, and refused (404).",
      "# TYPE sluice_mcp_sessions_total counter",
      `sluice_mcp_sessions_total{outcome="started"} ${this.sessions.started}`,
      `sluice_mcp_sessions_total{outcome="resumed"} ${this.sessions.resumed}`,
      `sluice_mcp_sessions_total{outcome="refused"} ${this.sessions.refused}`,
      ...this.#spareLines(),
      ...this.#requests.lines(),
      ...this.#errors.lines(),
      ...this.#seconds.lines(),
      ...targetHealthLines(),
    ];
  }
}
