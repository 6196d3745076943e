// What the policy engine keeps between translations (the translation memo, src/translate/memo.ts): the view of each
// GwPolicy object and the attachments of its targets. An unchanged policy whose targets name the same objects gets
// the same PolicyView and Attachment objects, which is what lets route memo entries recognise their attachments.

import type { GwPolicy } from "../../api/sluice.js";
import type { TranslationInput } from "../input.js";
import { type Attachment, type ResolvedTargets, resolveTargets, targetCandidates } from "./targets.js";
import { type PolicyView, readPolicy } from "./view.js";

interface TargetsEntry {
  readonly candidates: readonly (readonly object[])[];
  readonly resolved: ResolvedTargets;
}

/** What changed since the last finished translation, for checking traces without looking at every point. */
export interface PolicyChanges {
  /** Attachment points whose attachments are not the same as last time; undefined: assume every point changed. */
  readonly points: ReadonlySet<string> | undefined;
  /** The Services and GwBackends are the same objects as last time. */
  readonly objectsSame: boolean;
}

export class PolicyMemo {
  #views = new WeakMap<GwPolicy, PolicyView>();
  #targets = new WeakMap<PolicyView, TargetsEntry>();
  /** Of the last finished translation, and of the current one until it finishes. */
  #last: { byPoint: ReadonlyMap<string, readonly Attachment[]>; objects: readonly object[][] } | undefined;
  #pending: { byPoint: ReadonlyMap<string, readonly Attachment[]>; objects: readonly object[][] } | undefined;

  #ids = new WeakMap<object, number>();
  #nextId = 1;

  /** A number for an object, the same in every translation (for keys of memoized values). */
  idOf(o: object): number {
    let id = this.#ids.get(o);
    if (id === undefined) {
      id = this.#nextId++;
      this.#ids.set(o, id);
    }
    return id;
  }

  /** Compares this translation's attachments and backends with the last finished translation's. */
  changes(input: TranslationInput, byPoint: ReadonlyMap<string, readonly Attachment[]>): PolicyChanges {
    const objects = [input.services as readonly object[] as object[], input.backends as readonly object[] as object[]];
    const last = this.#last;
    this.#pending = { byPoint, objects };
    if (last === undefined) return { points: undefined, objectsSame: false };
    const points = new Set<string>();
    for (const [key, list] of byPoint) if (!sameItems(last.byPoint.get(key) ?? [], list)) points.add(key);
    for (const key of last.byPoint.keys()) if (!byPoint.has(key)) points.add(key);
    return { points, objectsSame: last.objects.every((l, i) => sameItems(l, objects[i] ?? [])) };
  }

  /** The translation finished: its state is what the next one compares with. */
  commit(): void {
    if (this.#pending !== undefined) this.#last = this.#pending;
    this.#pending = undefined;
  }

  /** The view of a valid policy (policies are immutable once loaded, so the object is the key). */
  view(policy: GwPolicy): PolicyView {
    let view = this.#views.get(policy);
    if (view === undefined) {
      view = readPolicy(policy);
      this.#views.set(policy, view);
    }
    return view;
  }

  /** resolveTargets(input, view), reused while the objects its targets may name are the same objects. */
  targets(input: TranslationInput, view: PolicyView): ResolvedTargets {
    const candidates = targetCandidates(input, view);
    const known = this.#targets.get(view);
    if (known !== undefined && sameLists(known.candidates, candidates)) return known.resolved;
    const resolved = resolveTargets(input, view);
    this.#targets.set(view, { candidates, resolved });
    return resolved;
  }
}

function sameLists(a: readonly (readonly object[])[], b: readonly (readonly object[])[]): boolean {
  return a.length === b.length && a.every((x, i) => sameItems(x, b[i] ?? []));
}

/** Same length and the same objects in the same order. */
export function sameItems(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
