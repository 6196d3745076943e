// What the policy engine keeps between translations (the translation memo, src/translate/memo.ts): the view of each
// GwPolicy object and the attachments of its targets. An unchanged policy whose targets name the same objects gets
// the same PolicyView and Attachment objects, which is what lets route memo entries recognise their attachments.

import type { GwPolicy } from "../../api/sluice.js";
import type { TranslationInput } from "../input.js";
import type { PolicyStatusMemo } from "./status.js";
import {
  type Attachment,
  indexByPoint,
  kindOf,
  type ResolvedTargets,
  resolveTargets,
  targetCandidates,
} from "./targets.js";
import { type PolicyTargetView, type PolicyView, readPolicy } from "./view.js";

const NO_POINTS: ReadonlySet<string> = new Set();

/** Every attachment of a translation, in policy order, and by attachment point. */
export interface PolicyIndex {
  readonly attachments: readonly Attachment[];
  readonly byPoint: ReadonlyMap<string, readonly Attachment[]>;
}

interface TargetsEntry {
  readonly candidates: readonly (readonly object[])[];
  readonly resolved: ResolvedTargets;
  /** The translation that last found it valid. */
  checked: number;
}

/** What changed since the last finished translation, for checking traces without looking at every point. */
export interface PolicyChanges {
  /** Attachment points whose attachments are not the same as last time; undefined: assume every point changed. */
  readonly points: ReadonlySet<string> | undefined;
  /** The Services and GwBackends are the same objects as last time. */
  readonly objectsSame: boolean;
}

export class PolicyMemo {
  /** The status of each policy, reused while what it is made of is the same. */
  readonly statuses: PolicyStatusMemo = new WeakMap();
  #views = new WeakMap<GwPolicy, PolicyView>();
  #targets = new WeakMap<PolicyView, TargetsEntry>();
  /** Of the last finished translation, and of the current one until it finishes. */
  #last: PolicyIndex | undefined;
  #pending: PolicyIndex | undefined;
  #lastObjects: readonly (readonly object[])[] | undefined;
  #pendingObjects: readonly (readonly object[])[] | undefined;

  readonly #interned = new Map<string, { readonly key: string; readonly ops: readonly unknown[] }>();

  /** One shared object for equal keys (most routes replay the same Gateway- and listener-level operations). */
  interned<T>(key: string, ops: readonly T[]): { readonly key: string; readonly ops: readonly T[] } {
    let known = this.#interned.get(key);
    if (known === undefined) {
      known = { key, ops };
      // Keys are few (one per distinct set of policies reached); a bound keeps a pathological input from growing it.
      if (this.#interned.size > 10_000) this.#interned.clear();
      this.#interned.set(key, known);
    }
    return known as { readonly key: string; readonly ops: readonly T[] };
  }

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

  /** The attachments by point; the last translation's index when the attachments are the same. */
  index(attachments: readonly Attachment[]): PolicyIndex {
    const last = this.#last;
    const index =
      last !== undefined && sameItems(last.attachments, attachments)
        ? last
        : { attachments, byPoint: indexByPoint(attachments) };
    this.#pending = index;
    return index;
  }

  /** Compares this translation's attachments and backends with the last finished translation's. */
  changes(input: TranslationInput, index: PolicyIndex): PolicyChanges {
    const objects = [input.services, input.backends];
    this.#pendingObjects = objects;
    const last = this.#last;
    const lastObjects = this.#lastObjects;
    if (last === undefined || lastObjects === undefined) return { points: undefined, objectsSame: false };
    const objectsSame = lastObjects.every((l, i) => sameItems(l, objects[i] ?? []));
    if (last === index) return { points: NO_POINTS, objectsSame };
    const points = new Set<string>();
    const { byPoint } = index;
    for (const [key, list] of byPoint) if (!sameItems(last.byPoint.get(key) ?? [], list)) points.add(key);
    for (const key of last.byPoint.keys()) if (!byPoint.has(key)) points.add(key);
    return { points, objectsSame };
  }

  /** The translation finished: its state is what the next one compares with. */
  commit(): void {
    this.#finished = this.#current;
    if (this.#pending !== undefined) this.#last = this.#pending;
    if (this.#pendingObjects !== undefined) this.#lastObjects = this.#pendingObjects;
    this.#pending = undefined;
    this.#pendingObjects = undefined;
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
    const known = this.#targets.get(view);
    // Valid last time, and nothing its targets may name changed since: no need to look at the input.
    if (known?.checked === this.#finished && view.targets.every((t) => this.#unchangedTarget(view, t))) {
      known.checked = this.#current;
      return known.resolved;
    }
    const candidates = targetCandidates(input, view);
    if (known !== undefined && sameLists(known.candidates, candidates)) {
      known.checked = this.#current;
      return known.resolved;
    }
    const resolved = resolveTargets(input, view);
    this.#targets.set(view, { candidates, resolved, checked: this.#current });
    return resolved;
  }

  #unchangedTarget(view: PolicyView, t: PolicyTargetView): boolean {
    const kind = kindOf(t);
    if (kind === undefined) return true;
    const changed = this.#changed?.get(kind);
    if (changed === undefined) return false;
    if (changed.size === 0) return true;
    if (t.name !== undefined) return !changed.has(`${view.namespace}/${t.name}`);
    for (const name of changed) if (name.startsWith(`${view.namespace}/`)) return false;
    return true;
  }

  /** Numbers of this translation and of the last finished one; what changed in between, by target kind. */
  #current = 0;
  #finished = -1;
  #counter = 0;
  #changed: ReadonlyMap<string, ReadonlySet<string>> | undefined;

  /** Starts a translation; `changed`: namespace/name of the objects of each kind changed since the last finished one. */
  begin(changed: ReadonlyMap<string, ReadonlySet<string>> | undefined): void {
    // A new number every time: a translation that did not finish leaves no mark that a later one takes as current.
    this.#current = ++this.#counter;
    this.#changed = changed;
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
