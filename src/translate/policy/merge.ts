// The merge of the policies that apply at one point (a route rule through a listener, a backend, a Gateway port):
// least specific first, a shallow merge per top-level field, `Override` exclusion for traffic, and combined
// authorization rules. Every field keeps the policy it came from; every value that lost says why.

import type { EffectivePolicyIR, PolicyFieldIR, PolicyLevel, PolicySourceIR, PolicyValueIR } from "../ir.js";
import { comparePolicyAge, type PolicyView } from "./view.js";

/** Precedence of each level, lowest first (spec: Merge and precedence rules 2, 3 and 6). */
export const LEVEL_RANK: Readonly<Record<PolicyLevel, number>> = {
  gateway: 0,
  port: 1,
  listener: 1,
  route: 2,
  rule: 3,
  backend: 4,
  backendSection: 5,
  gwBackend: 6,
  subBackend: 7,
};

/**
 * Fields holding one Authorization object each, which may carry a single action. Policies at the same level combine
 * their rules instead of conflicting (spec: "their rules are combined"); a more specific level still replaces them.
 */
export const COMBINED_FIELDS: ReadonlySet<string> = new Set(["authorization", "networkAuthorization"]);

export interface Contribution {
  readonly source: PolicySourceIR;
  /** The GwPolicy, for same-level order and status; absent for policies embedded in a GwBackend. */
  readonly view?: PolicyView;
  readonly fields: Readonly<Record<string, unknown>>;
  /** `strategy.inheritance: Override` on a traffic contribution. */
  readonly override: boolean;
}

export type NotAppliedKind = "excluded" | "overridden" | "conflict";

/** A policy, or one field of it, that applies at this point but is not part of the effective policy. */
export interface NotApplied {
  readonly from: PolicySourceIR;
  readonly view?: PolicyView;
  /** Absent when the whole policy is excluded. */
  readonly field?: string;
  readonly kind: NotAppliedKind;
  readonly reason: string;
}

export interface MergeResult {
  readonly policy: EffectivePolicyIR;
  readonly applied: readonly { readonly view?: PolicyView; readonly field: string }[];
  readonly notApplied: readonly NotApplied[];
}

function sourceId(s: PolicySourceIR): string {
  return `${s.kind} ${s.name}`;
}

/** Precedence order, most specific first; at one level the same-level winner first. */
function precedence(a: Contribution, b: Contribution): number {
  const r = LEVEL_RANK[b.source.level] - LEVEL_RANK[a.source.level];
  if (r !== 0) return r;
  if (a.view !== undefined && b.view !== undefined) return comparePolicyAge(a.view, b.view);
  return sourceId(a.source) < sourceId(b.source) ? -1 : sourceId(a.source) > sourceId(b.source) ? 1 : 0;
}

function describeSource(s: PolicySourceIR): string {
  return `${s.kind} ${s.name} (${s.level}, ${s.target})`;
}

export function mergeContributions(contributions: readonly Contribution[], overrideApplies: boolean): MergeResult {
  // One policy reaching a level twice (say a Gateway listener and the ListenerSet holding it) counts once.
  const seen = new Set<string>();
  const ordered = [...contributions].sort(precedence).filter((c) => {
    const id = `${sourceId(c.source)}|${LEVEL_RANK[c.source.level]}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  const notApplied: NotApplied[] = [];

  let kept = ordered;
  if (overrideApplies) {
    // The least specific Override policy is authoritative; among several at that level the same-level winner.
    const overriding = [...ordered].reverse().find((c) => c.override);
    if (overriding !== undefined) {
      const limit = LEVEL_RANK[overriding.source.level];
      kept = ordered.filter((c) => LEVEL_RANK[c.source.level] <= limit);
      for (const c of ordered) {
        if (LEVEL_RANK[c.source.level] <= limit) continue;
        notApplied.push({
          from: c.source,
          ...(c.view !== undefined ? { view: c.view } : {}),
          kind: "excluded",
          reason: `excluded by ${describeSource(overriding.source)}, whose strategy.inheritance Override excludes more specific traffic policies`,
        });
      }
    }
  }

  const fields = new Map<string, PolicyFieldIR>();
  const applied: { view?: PolicyView; field: string }[] = [];
  const names = new Set(kept.flatMap((c) => Object.keys(c.fields)));
  for (const field of [...names].sort()) {
    const setting = kept.filter((c) => c.fields[field] !== undefined);
    const top = setting[0];
    if (top === undefined) continue;
    const topRank = LEVEL_RANK[top.source.level];
    const value = (c: Contribution): PolicyValueIR => ({ value: c.fields[field], from: c.source });
    let winners: Contribution[];
    if (COMBINED_FIELDS.has(field)) {
      winners = setting.filter((c) => LEVEL_RANK[c.source.level] === topRank);
      fields.set(field, { combined: winners.map(value) });
    } else {
      winners = [top];
      fields.set(field, value(top));
    }
    for (const w of winners) applied.push({ ...(w.view !== undefined ? { view: w.view } : {}), field });
    for (const c of setting) {
      if (winners.includes(c) || winners.some((w) => sourceId(w.source) === sourceId(c.source))) continue;
      const sameLevel = LEVEL_RANK[c.source.level] === topRank;
      notApplied.push({
        from: c.source,
        ...(c.view !== undefined ? { view: c.view } : {}),
        field,
        kind: sameLevel ? "conflict" : "overridden",
        reason: sameLevel
          ? `same-level conflict: ${describeSource(top.source)} wins (oldest creationTimestamp, then namespace/name)`
          : `replaced by ${describeSource(top.source)}, which is more specific`,
      });
    }
  }
  return { policy: Object.fromEntries(fields), applied, notApplied };
}
