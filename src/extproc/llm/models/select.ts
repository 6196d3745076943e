// Which concrete model serves a request's model on one listener (translate/model/ir.ts): the best Public match in
// precedence order, then each virtual model's strategy applied down to concrete models. The answer is the candidates
// in the order to try them (the first, then retries), each with the model name to ask its provider for.
// Pure but for the state it is given: CEL variables, a random source and the health tracker.

import type { LlmError } from "../../../llm/errors.js";
import type { ConcreteModelIR, ListenerModelTable, ModelIR, VirtualModelIR } from "../../../translate/model/ir.js";
import { modelMatches } from "../../../translate/model/match.js";
import { evaluateText } from "../cel.js";
import type { ModelHealth } from "./health.js";

export interface SelectContext {
  /** The CEL activation of conditional `when`s: `request`, `llm`, and `jwt` ... where the request has them. */
  readonly vars?: Readonly<Record<string, unknown>>;
  /** Uniform in [0, 1), for weighted picks; Math.random by default. */
  readonly random?: () => number;
  /** Health and latency of concrete models; without it every model is healthy and unscored. */
  readonly health?: ModelHealth;
}

export interface ModelCandidate {
  readonly model: ConcreteModelIR;
  /** The model name to ask the provider for (before the provider's own `model` override). */
  readonly providerModel: string;
  /** The virtual models passed through, from the one matched (`namespace/name`). */
  readonly via: readonly string[];
  /** Ejected when selected: tried only after every healthy candidate. */
  readonly degraded: boolean;
}

export type Selection =
  | {
      readonly ok: true;
      /** `namespace/name` of the GwModel the request's model matched. */
      readonly matched: string;
      readonly candidates: readonly [ModelCandidate, ...ModelCandidate[]];
    }
  | { readonly ok: false; readonly error: LlmError };

const notFound = (model: string): LlmError => ({
  status: 404,
  kind: "not_found",
  message: `The model \`${model}\` does not exist or you do not have access to it.`,
  code: "model_not_found",
});

/** The GwModel a client's model name selects directly: the first Public match in precedence order. */
export function matchModel(table: ListenerModelTable, requestModel: string): ModelIR | undefined {
  for (const id of table.models) {
    const m = table.byId[id];
    if (m !== undefined && m.visibility === "Public" && modelMatches(m.match, requestModel)) return m;
  }
  return undefined;
}

export function selectModel(table: ListenerModelTable, requestModel: string, ctx: SelectContext = {}): Selection {
  const m = matchModel(table, requestModel);
  if (m === undefined) return { ok: false, error: notFound(requestModel) };
  const why: string[] = [];
  const found = expand(table, m, requestModel, [], ctx, why);
  // Degraded candidates go last, in the order their strategy put them (a stable sort).
  const candidates = [...found.filter((c) => !c.degraded), ...found.filter((c) => c.degraded)];
  const seen = new Set<string>();
  const unique = candidates.filter((c) => {
    const k = `${c.model.id}|${c.providerModel}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const [first, ...rest] = unique;
  if (first === undefined) {
    return {
      ok: false,
      error: {
        status: 503,
        kind: "overloaded",
        message: `model ${requestModel} (GwModel ${m.id}) has no model to serve it${why.length > 0 ? `: ${[...new Set(why)].join("; ")}` : ""}`,
      },
    };
  }
  return { ok: true, matched: m.id, candidates: [first, ...rest] };
}

function expand(
  table: ListenerModelTable,
  m: ModelIR,
  model: string,
  via: readonly string[],
  ctx: SelectContext,
  why: string[],
): ModelCandidate[] {
  if (m.type === "concrete") {
    if (m.provider === undefined) {
      why.push(`GwModel ${m.id}: ${m.unavailable ?? "no provider"}`);
      return [];
    }
    return [{ model: m, providerModel: model, via, degraded: ctx.health?.isDegraded(m.id, m.health) ?? false }];
  }
  // The translator refuses cycles and deep chains; this bound only keeps a hand-made table from looping.
  if (via.includes(m.id) || via.length > 8) return [];
  const next = [...via, m.id];
  const sub = (t: { ref: string; model: string }) => {
    const target = table.byId[t.ref];
    return target === undefined ? [] : expand(table, target, t.model, next, ctx, why);
  };
  switch (m.strategy) {
    case "conditional":
      return conditional(m, ctx, why).flatMap(sub);
    case "weighted":
      return weightedOrder(m.targets, ctx.random ?? Math.random).flatMap(sub);
    case "failover":
      return failover(m, sub, ctx);
  }
}

function conditional(
  m: VirtualModelIR & { strategy: "conditional" },
  ctx: SelectContext,
  why: string[],
): { ref: string; model: string }[] {
  const vars = { ...(ctx.vars ?? {}) };
  for (const t of m.targets) {
    // Only `true` matches: an error (a variable the request lacks) or another value does not.
    if (t.when === undefined || evaluateText(t.when, vars) === true) return [t];
  }
  why.push(
    `no target of virtual model ${m.id} matches the request and it has no fallback (a last target without when)`,
  );
  return [];
}

/** Targets in a weighted random order without replacement; weight 0 is never picked. */
export function weightedOrder<T extends { weight: number }>(targets: readonly T[], random: () => number): T[] {
  const left = targets.filter((t) => t.weight > 0);
  const out: T[] = [];
  while (left.length > 0) {
    const total = left.reduce((s, t) => s + t.weight, 0);
    let r = random() * total;
    let i = 0;
    for (; i < left.length - 1; i++) {
      r -= (left[i] as T).weight;
      if (r < 0) break;
    }
    out.push(...left.splice(i, 1));
  }
  return out;
}

/**
 * Priorities from the lowest value: a priority's targets that are not degraded, best score first (health-weighted
 * latency, then the order written); a lower priority only after them. A target that is itself virtual is degraded
 * when all its candidates are, and scores as its first one.
 */
function failover(
  m: VirtualModelIR & { strategy: "failover" },
  sub: (t: { ref: string; model: string }) => ModelCandidate[],
  ctx: SelectContext,
): ModelCandidate[] {
  const expanded = m.targets.map((t, i) => {
    const cands = sub(t);
    const healthy = cands.filter((c) => !c.degraded);
    const first = healthy[0];
    const score =
      first === undefined || ctx.health === undefined ? 0 : ctx.health.score(first.model.id, first.model.health);
    return { priority: t.priority, index: i, cands, degraded: healthy.length === 0, score };
  });
  const ordered = expanded
    .filter((e) => !e.degraded)
    .sort((a, b) => a.priority - b.priority || a.score - b.score || a.index - b.index);
  const degraded = expanded.filter((e) => e.degraded).sort((a, b) => a.priority - b.priority || a.index - b.index);
  return [...ordered, ...degraded].flatMap((e) => e.cands);
}
