// Who gets which snapshot: one current snapshot per node group, and watchers told when it changes. Knows nothing of
// streams, nonces or ACKs (those live in the stream code), like go-control-plane's cache.
import { checkConsistency, type SnapshotError } from "./consistency.js";
import type { Snapshot } from "./snapshot.js";

export type SetSnapshotResult =
  | {
      readonly ok: true /** false when the snapshot equals the current one, so nothing is pushed */;
      readonly changed: boolean;
    }
  | { readonly ok: false; readonly errors: readonly SnapshotError[] };

export type SnapshotWatcher = (snapshot: Snapshot) => void;

export class SnapshotCache {
  readonly #snapshots = new Map<string, Snapshot>();
  readonly #watchers = new Map<string, Set<SnapshotWatcher>>();

  /**
   * Publishes `snapshot` for `group` if it is consistent; otherwise returns the problems and the group keeps its
   * previous snapshot. Watchers are told only when the content changed.
   */
  setSnapshot(group: string, snapshot: Snapshot): SetSnapshotResult {
    const errors = checkConsistency(snapshot);
    if (errors.length > 0) return { ok: false, errors };
    if (this.#snapshots.get(group)?.version === snapshot.version) return { ok: true, changed: false };
    this.#snapshots.set(group, snapshot);
    for (const watcher of [...(this.#watchers.get(group) ?? [])]) watcher(snapshot);
    return { ok: true, changed: true };
  }

  getSnapshot(group: string): Snapshot | undefined {
    return this.#snapshots.get(group);
  }

  /** Forgets a group (e.g. its Gateway was deleted). Connected nodes keep their config until a new snapshot. */
  clearSnapshot(group: string): void {
    this.#snapshots.delete(group);
  }

  groups(): string[] {
    return [...this.#snapshots.keys()].sort();
  }

  /** Calls `watcher` with every new snapshot of `group`; returns the function that stops it. */
  watch(group: string, watcher: SnapshotWatcher): () => void {
    let set = this.#watchers.get(group);
    if (!set) {
      set = new Set();
      this.#watchers.set(group, set);
    }
    set.add(watcher);
    return () => {
      set.delete(watcher);
      if (set.size === 0 && this.#watchers.get(group) === set) this.#watchers.delete(group);
    };
  }
}
