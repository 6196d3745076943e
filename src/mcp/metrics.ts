// Prometheus series of the MCP service: per backend, target and method, the requests Sluice sent to targets, how many
// failed (an error answer or no answer), and their time; plus sessions started, resumed and refused.

interface Series {
  readonly labels: string;
  count: number;
  errors: number;
  seconds: number;
}

function label(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

export class McpMetrics {
  readonly #series = new Map<string, Series>();
  readonly sessions = { started: 0, resumed: 0, refused: 0 };

  /** One request to a target: `ok` false for an error answer or a failure to get one. */
  record(backend: string, target: string, method: string, ok: boolean, ms: number): void {
    const key = `${backend}\n${target}\n${method}`;
    let s = this.#series.get(key);
    if (s === undefined) {
      s = {
        labels: `backend="${label(backend)}",target="${label(target)}",method="${label(method)}"`,
        count: 0,
        errors: 0,
        seconds: 0,
      };
      this.#series.set(key, s);
    }
    s.count++;
    if (!ok) s.errors++;
    s.seconds += ms / 1000;
  }

  lines(): string[] {
    const series = [...this.#series.values()].sort((a, b) => (a.labels < b.labels ? -1 : 1));
    return [
      "# HELP sluice_mcp_sessions_total MCP sessions started here, resumed from a sealed id, and refused (404).",
      "# TYPE sluice_mcp_sessions_total counter",
      `sluice_mcp_sessions_total{outcome="started"} ${this.sessions.started}`,
      `sluice_mcp_sessions_total{outcome="resumed"} ${this.sessions.resumed}`,
      `sluice_mcp_sessions_total{outcome="refused"} ${this.sessions.refused}`,
      "# HELP sluice_mcp_target_requests_total Requests the MCP service sent to a target, by backend, target and method.",
      "# TYPE sluice_mcp_target_requests_total counter",
      ...series.map((s) => `sluice_mcp_target_requests_total{${s.labels}} ${s.count}`),
      "# HELP sluice_mcp_target_errors_total Of those, the ones answered with an error or not answered.",
      "# TYPE sluice_mcp_target_errors_total counter",
      ...series.map((s) => `sluice_mcp_target_errors_total{${s.labels}} ${s.errors}`),
      "# HELP sluice_mcp_target_request_seconds_total Time spent waiting for targets' answers.",
      "# TYPE sluice_mcp_target_request_seconds_total counter",
      ...series.map((s) => `sluice_mcp_target_request_seconds_total{${s.labels}} ${s.seconds.toFixed(6)}`),
    ];
  }
}
