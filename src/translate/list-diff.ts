// Which objects of a list of the input changed since the last translation: found by comparing object identities,
// without building a map of the whole list (a map of thousands of routes per translation is garbage the size of a
// large object every time).

import { namespaceOf } from "../api/resource.js";

export interface Named {
  readonly metadata: { readonly name: string; readonly namespace?: string };
}

export interface ListChange<T> {
  /** Objects of the old list that are not at the same place in the new one (edits, removals, moves). */
  readonly removed: readonly T[];
  /** Objects of the new list that are not at the same place in the old one (edits, additions, moves). */
  readonly added: readonly T[];
}

/** The part of two lists between their longest common prefix and suffix (by identity). */
export function listChange<T>(before: readonly T[], after: readonly T[]): ListChange<T> {
  let start = 0;
  const shorter = Math.min(before.length, after.length);
  while (start < shorter && before[start] === after[start]) start++;
  let endBefore = before.length;
  let endAfter = after.length;
  while (endBefore > start && endAfter > start && before[endBefore - 1] === after[endAfter - 1]) {
    endBefore--;
    endAfter--;
  }
  return { removed: before.slice(start, endBefore), added: after.slice(start, endAfter) };
}

/** `namespace/name` of every object in a change, old or new. Empty when the lists hold the same objects. */
export function changedNames(change: ListChange<Named>): Set<string> {
  const out = new Set<string>();
  for (const o of change.removed) out.add(nameOf(o));
  for (const o of change.added) out.add(nameOf(o));
  return out;
}

export function nameOf(o: Named): string {
  return `${namespaceOf(o)}/${o.metadata.name}`;
}
