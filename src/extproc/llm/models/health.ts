// Health and latency of concrete models, as the failover (and weighted) selection reads it: a small state machine per
// model, driven by the outcome of each request and an injectable clock, tuned by the model's `policies.health`.
//
// - health: an EWMA in 0..100 of outcomes (success 100, failure 0), starting at 100;
// - a failure ejects the model when it makes `consecutiveFailures` in a row (when > 0) or drops health below
//   `healthThreshold` (when > 0); the n-th ejection in a row lasts n × the base time, at most MAX_EJECTION_MS (or the
//   base time, when that is longer);
// - an ejected model is degraded until its time is up; it then returns with `restoreHealth`, and its first success
//   resets the ejection count;
// - latency: an EWMA of response times in milliseconds, unknown until the first one.

import type { ModelHealthIR } from "../../../translate/model/ir.js";

/** Weight of the newest sample in both moving averages. */
export const EWMA_ALPHA = 0.3;
/** Longest ejection, as Envoy's outlier detection's default max_ejection_time. */
export const MAX_EJECTION_MS = 300_000;

export interface ModelHealthState {
  readonly health: number;
  readonly latencyMs?: number;
  readonly consecutiveFailures: number;
  /** Ejections in a row (reset by a success after a return). */
  readonly ejections: number;
  /** Clock time the ejection ends; 0 = not ejected. */
  readonly ejectedUntil: number;
}

const FRESH: ModelHealthState = { health: 100, consecutiveFailures: 0, ejections: 0, ejectedUntil: 0 };

export class ModelHealth {
  readonly #now: () => number;
  readonly #states = new Map<string, ModelHealthState>();

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** The state of a model now (a model whose ejection is over has returned with `restoreHealth`). */
  state(id: string, cfg: ModelHealthIR): ModelHealthState {
    const s = this.#states.get(id) ?? FRESH;
    if (s.ejectedUntil !== 0 && this.#now() >= s.ejectedUntil) {
      const back = { ...s, ejectedUntil: 0, health: cfg.restoreHealth, consecutiveFailures: 0 };
      this.#states.set(id, back);
      return back;
    }
    return s;
  }

  /** Ejected now: selection tries it only after every model that is not. */
  isDegraded(id: string, cfg: ModelHealthIR): boolean {
    return this.state(id, cfg).ejectedUntil !== 0;
  }

  /** Expected cost of a request to the model (lower is better): its latency weighed by how often it fails. */
  score(id: string, cfg: ModelHealthIR): number {
    const s = this.state(id, cfg);
    // An unknown latency counts as 0: a model never tried gets tried, and then has one.
    return (s.latencyMs ?? 0) / Math.max(s.health, 1);
  }

  recordSuccess(id: string, cfg: ModelHealthIR, latencyMs?: number): void {
    const s = this.state(id, cfg);
    this.#states.set(id, {
      ...s,
      health: ewma(s.health, 100),
      ...(latencyMs !== undefined
        ? { latencyMs: s.latencyMs === undefined ? latencyMs : ewma(s.latencyMs, latencyMs) }
        : {}),
      consecutiveFailures: 0,
      ejections: s.ejectedUntil === 0 ? 0 : s.ejections,
    });
  }

  /** A 5xx, a timeout or a connection failure (or what `unhealthyCondition` calls one). */
  recordFailure(id: string, cfg: ModelHealthIR, latencyMs?: number): void {
    const s = this.state(id, cfg);
    // Failures reported while ejected (requests already under way) change nothing.
    if (s.ejectedUntil !== 0) return;
    const health = ewma(s.health, 0);
    const consecutiveFailures = s.consecutiveFailures + 1;
    const latency =
      latencyMs !== undefined
        ? { latencyMs: s.latencyMs === undefined ? latencyMs : ewma(s.latencyMs, latencyMs) }
        : {};
    const eject =
      (cfg.consecutiveFailures > 0 && consecutiveFailures >= cfg.consecutiveFailures) ||
      (cfg.healthThreshold > 0 && health < cfg.healthThreshold);
    if (!eject) {
      this.#states.set(id, { ...s, ...latency, health, consecutiveFailures });
      return;
    }
    const ejections = s.ejections + 1;
    const ms = Math.min(cfg.ejectionMs * ejections, Math.max(MAX_EJECTION_MS, cfg.ejectionMs));
    this.#states.set(id, {
      ...s,
      ...latency,
      health,
      consecutiveFailures: 0,
      ejections,
      ejectedUntil: this.#now() + ms,
    });
  }
}

function ewma(current: number, sample: number): number {
  return current + EWMA_ALPHA * (sample - current);
}
