// The request-path series of Sluice's own services (docs/observability.md lists them all), in one prom-client
// registry that /metrics appends to the control-plane series. Label values that come from clients are bounded by the
// callers: a policy id not in the table is "unknown", a model not configured is "other" (llm.ts).

import { collectDefaultMetrics, Registry } from "prom-client";
import { currentSpan } from "./context.js";
import { requestDebug } from "./log.js";
import { Series } from "./series.js";

/** The request path's series (series.ts: cheaper per request than prom-client's). */
export const series = new Series();

/**
 * prom-client's process and Node.js series (CPU, file descriptors, event loop lag, garbage collection), which are
 * sampled at scrape time, not per request.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });

let on = true;

/** Request metrics on or off (`--request-metrics off`: what they cost, measured by the benches). */
export function setRequestMetrics(enabled: boolean): void {
  on = enabled;
}

export function requestMetricsOn(): boolean {
  return on;
}

// ---- ext_authz ----

const authzDecisions = series.counter(
  "sluice_authz_decisions_total",
  "ext_authz decisions by policy and outcome (allow, deny, unauthenticated, error).",
  ["policy", "outcome"],
);
const authzDuration = series.histogram(
  "sluice_authz_check_duration_seconds",
  "Time Sluice took to decide an ext_authz check.",
  ["outcome"],
  [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
);

export type AuthzOutcome = "allow" | "deny" | "unauthenticated" | "error";

/** The outcome a serialized CheckResponse carries: its google.rpc.Status code (field 1, then field 1), 0 if absent. */
export function authzOutcomeOf(response: Uint8Array): AuthzOutcome {
  // Field 1 (status), length-delimited; protobuf-es writes fields in number order, so it comes first when present.
  if (response[0] !== 0x0a || (response[1] ?? 0) === 0) return "allow";
  if (response[2] !== 0x08) return "allow";
  const code = response[3] ?? 0;
  return code === 0 ? "allow" : code === 16 ? "unauthenticated" : code === 7 ? "deny" : "error";
}

/** One check decided: `policy` the id in the table ("unknown" when none), `startedMs` from performance.now(). */
export function observeAuthz(policy: string, outcome: AuthzOutcome, startedMs: number): void {
  const span = currentSpan();
  if (span !== undefined) {
    span.updateName("ext_authz check");
    span.setAttribute("sluice.authz.policy", policy);
    span.setAttribute("sluice.authz.outcome", outcome);
  }
  requestDebug("authz", { policy, outcome }, "ext_authz: decided");
  if (!on) return;
  authzDecisions.labels(policy, outcome).inc();
  authzDuration.labels(outcome).observe((performance.now() - startedMs) / 1000);
}

// ---- prompt guards ----

const guardVerdicts = series.counter(
  "sluice_llm_guard_verdicts_total",
  "Prompt guard outcomes: direction, the kind of the guard that rejected (all when none did), verdict.",
  ["direction", "guard", "verdict"],
);

/** What a set of guards decided (runner.ts); `rejectedBy` the rejecting guard's kind. */
export function observeGuards(direction: string, verdict: "pass" | "mask" | "reject", rejectedBy?: string): void {
  requestDebug("llm", { direction, verdict, guard: rejectedBy }, "llm prompt guards: verdict");
  if (!on) return;
  guardVerdicts.labels(direction, rejectedBy ?? "all", verdict).inc();
}
