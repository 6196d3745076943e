// `health` of MCP targets (a policy's `backend.health` reaching a target, translate/mcp/connection.ts): the spec's
// "Backend health behavior" table, with the same state machine as the endpoints of Envoy-routed backends
// (src/health/endpoint-health.ts: EWMA health score, eviction at `consecutiveFailures` in a row or below
// `healthThreshold`, the n-th eviction lasting n × `duration`, the return with `restoreHealth`). What counts: a
// target's failure (no connection, a TLS or HTTP error, no answer within the timeout) is unhealthy, an answer (a JSON-RPC
// error included) healthy. An evicted target is not contacted: a new session treats it as a target that failed to
// start (failureMode decides), and a session's request to it fails as a failing target's does.
//
// One state per target of a backend and Sluice process (shared by its sessions; each replica scores on its own), kept
// while the target is in use.
//
// With `unhealthyCondition` (McpTargetHealth.condition) the score is kept at the HTTP layer instead
// (target-request.ts, `scoredRequest`): one outcome per HTTP exchange with the target, the condition's verdict on its
// answer's status and headers as health/service.ts judges a Service backend's responses, and unhealthy when no answer
// came (no connection, TLS, cut, http.requestTimeout). The request level (upstream.ts) then records nothing of its own
// but the unanswered requests of SSE-protocol targets, whose answers travel on the GET stream.

import type { IncomingHttpHeaders } from "node:http";
import { evaluateText } from "../extproc/llm/cel.js";
import { RESPONSE_ENVIRONMENT } from "../extproc/transformation.js";
import { EndpointHealth } from "../health/endpoint-health.js";
import { moduleLogger } from "../observability/log.js";
import type { HealthScoreIR } from "../translate/ir.js";
import type { McpTargetHealth } from "../translate/mcp/connection.js";

/** Each target is scored as a "cluster" of one endpoint, keyed by McpTargetHealth.key. */
const ENDPOINT = "target";

const scores = new EndpointHealth();
/** Targets scored: their configuration, names (metrics) and last use. */
const known = new Map<
  string,
  { src: McpTargetHealth; cfg: HealthScoreIR; backend: string; target: string; used: number }
>();
/** A target neither used nor evicted for this long is forgotten (a backend changed or removed meanwhile). */
const FORGET_MS = 15 * 60_000;

function cfgOf(h: McpTargetHealth): HealthScoreIR {
  return {
    responseBody: false,
    durationMs: h.durationMs,
    ...(h.consecutiveFailures !== undefined ? { consecutiveFailures: h.consecutiveFailures } : {}),
    ...(h.healthThreshold !== undefined ? { healthThreshold: h.healthThreshold } : {}),
    ...(h.restoreHealth !== undefined ? { restoreHealth: h.restoreHealth } : {}),
  };
}

/**
 * Registers the target as it is configured now (its configuration changes apply from the next outcome) and forgets
 * those unused for FORGET_MS, so the state stays bounded by the targets in use.
 */
function ensure(h: McpTargetHealth): void {
  const now = Date.now();
  const k = known.get(h.key);
  const cfg = cfgOf(h);
  // The same table's object, or an equal configuration of a newer table: only the last use changes.
  if (k !== undefined && (k.src === h || JSON.stringify(k.cfg) === JSON.stringify(cfg))) {
    k.used = now;
    k.src = h;
    return;
  }
  known.set(h.key, { src: h, cfg, backend: h.backend, target: h.target, used: now });
  for (const [key, v] of known) {
    if (now - v.used > FORGET_MS && (scores.state(key, ENDPOINT)?.evictedUntil ?? 0) === 0) known.delete(key);
  }
  scores.configure(new Map([...known].map(([key, v]) => [key, { cfg: v.cfg, endpoints: [ENDPOINT] }])));
}

/** Why the target is not to be contacted now (evicted), or undefined. */
export function targetEvicted(h: McpTargetHealth | undefined): string | undefined {
  if (h === undefined) return undefined;
  ensure(h);
  const s = scores.state(h.key, ENDPOINT);
  if (s === undefined || s.evictedUntil === 0) return undefined;
  const left = Math.max(0, s.evictedUntil - Date.now());
  return `evicted by its health policy (eviction ${s.evictions}; back in ${left} ms)`;
}

/** One outcome of a request to the target: answered (`ok`), or failed. */
export function recordTarget(h: McpTargetHealth | undefined, ok: boolean): void {
  if (h === undefined) return;
  ensure(h);
  scores.record(h.key, ENDPOINT, !ok);
}

/** Conditions already reported as not giving a boolean (logged once each). */
const warned = new Set<string>();

/**
 * Whether an HTTP answer of the target is unhealthy by its `unhealthyCondition`: only `true` is; a failing or
 * non-boolean result counts healthy and is logged once per condition (as health/service.ts does for Service backends).
 */
export function unhealthyAnswer(h: McpTargetHealth, condition: string, status: number, head: IncomingHttpHeaders) {
  const headers = new Map<string, string>();
  for (const [k, v] of Object.entries(head)) {
    // HTTP/2 pseudo-headers are not headers; a repeated header is one value, joined as Envoy joins them.
    if (v === undefined || k.startsWith(":")) continue;
    headers.set(k, Array.isArray(v) ? v.join(",") : v);
  }
  const v = evaluateText(condition, { response: { code: BigInt(status), headers } }, RESPONSE_ENVIRONMENT);
  if (typeof v !== "boolean" && !warned.has(condition)) {
    if (warned.size > 1000) warned.clear();
    warned.add(condition);
    moduleLogger("mcp").warn(
      `sluice mcp: unhealthyCondition of target ${h.target} of ${h.backend} did not give a boolean (${typeof v}); counted healthy`,
    );
  }
  return v === true;
}

/** Prometheus lines: per scored target, its health, whether it is evicted, and its evictions so far. */
export function targetHealthLines(): string[] {
  const rows = [...known].flatMap(([key, n]) => {
    const s = scores.state(key, ENDPOINT);
    if (s === undefined) return [];
    const labels = `backend="${n.backend}",target="${n.target}"`;
    return [{ labels, s }];
  });
  if (rows.length === 0) return [];
  return [
    "# HELP sluice_mcp_target_health Health score (0..100) of an MCP target with a health policy.",
    "# TYPE sluice_mcp_target_health gauge",
    ...rows.map((r) => `sluice_mcp_target_health{${r.labels}} ${Math.round(r.s.health * 100) / 100}`),
    "# HELP sluice_mcp_target_evicted Whether an MCP target is evicted by its health policy now (1) or not (0).",
    "# TYPE sluice_mcp_target_evicted gauge",
    ...rows.map((r) => `sluice_mcp_target_evicted{${r.labels}} ${r.s.evictedUntil === 0 ? 0 : 1}`),
    "# HELP sluice_mcp_target_evictions_total Evictions of an MCP target by its health policy.",
    "# TYPE sluice_mcp_target_evictions_total counter",
    ...rows.map((r) => `sluice_mcp_target_evictions_total{${r.labels}} ${r.s.evictions}`),
  ];
}
