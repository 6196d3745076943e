// The Kubernetes source: the watched kinds' objects, validated like the files' documents, feeding the same store and
// translator as the file source (the translator does not know where resources came from).
//
// - Every object passes Sluice's validator (the CRDs' schemas catch most mistakes at the API server; what only Sluice
//   catches is reported in status). An object that fails it is left out, except that its last valid version, seen
//   by this process, keeps serving.
// - Resources are handed over in one fixed order (kind, namespace, name), so two replicas watching the same cluster
//   translate the same input and build byte-identical snapshots with identical versions.
// - Not ready until every kind has been listed once (or found absent): a snapshot built from half-synced caches would
//   make Envoys drop routes when a replica restarts.

import { describeResource, type Resource, resourceKey, type SourceRef } from "../../api/resource.js";
import { type ValidationResult, validateResource } from "../../api/validate.js";
import type { InvalidResource } from "../../translate/input.js";
import type { LoadResult, SourceProblem } from "../file-source.js";
import type { KubeClient, KubeObject } from "./client.js";
import { WATCHED_KINDS, type WatchedKind } from "./kinds.js";
import { Reflector, sameSpec } from "./reflector.js";

/** What problems name as their "file": the objects came from the API server. */
export const KUBE_SOURCE_FILE = "kubernetes";

interface KindView {
  /** The reflector's change count this view was computed at. */
  readonly changes: number;
  readonly documents: number;
  /** resourceKey of every object, to forget what left. */
  readonly keys: ReadonlySet<string>;
  readonly resources: readonly Resource[];
  readonly problems: readonly SourceProblem[];
  readonly invalid: readonly InvalidResource[];
}

interface Validated {
  readonly object: KubeObject;
  readonly result: ValidationResult;
}

export interface KubeSourceOptions {
  readonly log: (line: string) => void;
  /** The kinds watched (default WATCHED_KINDS). */
  readonly kinds?: readonly WatchedKind[];
}

export class KubeSource {
  readonly reflectors: ReadonlyMap<string, Reflector>;
  readonly #validated = new Map<string, Validated>();
  /** Last valid version of each resource, served while a newer one is invalid. */
  readonly #lastGood = new Map<string, Resource>();
  readonly #listeners: (() => void)[] = [];
  readonly #statusListeners: ((object: KubeObject) => void)[] = [];
  readonly #order: readonly string[];

  constructor(client: KubeClient, opts: KubeSourceOptions) {
    const kinds = opts.kinds ?? WATCHED_KINDS;
    this.#order = kinds.map((k) => k.kind);
    this.reflectors = new Map(
      kinds.map((k) => [
        k.kind,
        new Reflector(client, k, {
          log: opts.log,
          onChange: () => {
            for (const l of this.#listeners) l();
          },
          onStatusOnly: (object) => {
            for (const l of this.#statusListeners) l(object);
          },
        }),
      ]),
    );
  }

  start(): void {
    for (const r of this.reflectors.values()) r.start();
  }

  /** Every kind listed once (or found absent). */
  get synced(): boolean {
    for (const r of this.reflectors.values()) if (!r.synced) return false;
    return true;
  }

  /** Kinds not synced yet, for /readyz. */
  unsynced(): string[] {
    return [...this.reflectors.values()].filter((r) => !r.synced).map((r) => r.kind.kind);
  }

  /** The object as last seen by the watch, for status writes (its generation and the status others wrote). */
  object(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const r = this.reflectors.get(kind);
    return r?.objects.get(r.kind.namespaced ? `${namespace ?? "default"}/${name}` : name);
  }

  /** The version of a kind the API server serves (for status writes), when it is served. */
  served(kind: string): { readonly kind: WatchedKind; readonly version: string } | undefined {
    const r = this.reflectors.get(kind);
    return r?.version !== undefined && r.state === "synced" ? { kind: r.kind, version: r.version } : undefined;
  }

  /** Calls `onChange` after every change of any kind's view (callers coalesce). */
  async watch(onChange: () => void): Promise<void> {
    this.#listeners.push(onChange);
  }

  /** Calls `onStatus` when only an object's status changed (no translation follows; the status writer checks it). */
  onStatusOnly(onStatus: (object: KubeObject) => void): void {
    this.#statusListeners.push(onStatus);
  }

  /** The current view, validated, in a fixed order. Synchronous at heart: one consistent pass over the caches. */
  async load(): Promise<LoadResult> {
    const resources: Resource[] = [];
    const problems: SourceProblem[] = [];
    const invalid: InvalidResource[] = [];
    let documents = 0;
    for (const kind of this.#order) {
      const r = this.reflectors.get(kind);
      if (r === undefined) continue;
      let view = this.#views.get(kind);
      if (view === undefined || view.changes !== r.changes) {
        view = this.#viewOf(r, view);
        this.#views.set(kind, view);
      }
      documents += view.documents;
      for (const x of view.resources) resources.push(x);
      for (const x of view.problems) problems.push(x);
      for (const x of view.invalid) invalid.push(x);
    }
    return { documents, resources, sources: new Map<string, SourceRef>(), problems, invalid };
  }

  /** What one kind contributes to loads, recomputed only when its view changed (a route change leaves the 10,000
   * EndpointSlices alone). */
  readonly #views = new Map<string, KindView>();

  #viewOf(r: Reflector, previous: KindView | undefined): KindView {
    const resources: Resource[] = [];
    const problems: SourceProblem[] = [];
    const invalid: InvalidResource[] = [];
    const keys = new Set<string>();
    const names = [...r.objects.keys()].sort();
    for (const k of names) {
      const object = r.objects.get(k) as KubeObject;
      const key = resourceKey(object as unknown as Resource);
      keys.add(key);
      const result = this.#validate(key, object, r.kind.statusOnlyIgnored === true);
      if (result.resource !== undefined && result.problems.length === 0) {
        this.#lastGood.set(key, result.resource);
        resources.push(result.resource);
        continue;
      }
      const description = describeResource(object as unknown as Resource);
      const previousGood = result.resource === undefined ? this.#lastGood.get(key) : undefined;
      const consequence =
        result.resource !== undefined
          ? undefined
          : previousGood !== undefined
            ? "the last valid version keeps serving"
            : "resource left out";
      for (const p of result.problems)
        problems.push({
          file: KUBE_SOURCE_FILE,
          line: 0,
          resource: description,
          path: p.path,
          message: p.message,
          severity: p.severity,
          ...(p.severity === "error" && consequence !== undefined ? { consequence } : {}),
        });
      if (result.resource !== undefined) {
        this.#lastGood.set(key, result.resource);
        resources.push(result.resource);
      } else if (previousGood !== undefined) resources.push(previousGood);
      else
        invalid.push({
          kind: object.kind ?? r.kind.kind,
          document: object as unknown as Resource,
          problems: result.problems.filter((p) => p.severity === "error").map((p) => `${p.path}: ${p.message}`),
        });
    }
    for (const key of previous?.keys ?? []) {
      if (keys.has(key)) continue;
      this.#validated.delete(key);
      this.#lastGood.delete(key);
    }
    return { changes: r.changes, documents: names.length, keys, resources, problems, invalid };
  }

  /** Validation once per version of an object's spec: an unchanged object keeps its validated resource (same identity,
   * for the translator's memo). */
  #validate(key: string, object: KubeObject, statusOnlyIgnored: boolean): ValidationResult {
    const cached = this.#validated.get(key);
    if (cached !== undefined) {
      const rv = object.metadata.resourceVersion;
      if (cached.object === object || (rv !== undefined && rv === cached.object.metadata.resourceVersion))
        return cached.result;
      // Only its status changed (a status write): the same validated resource, so the memo keeps its translation.
      if (statusOnlyIgnored && sameSpec(cached.object, object)) {
        this.#validated.set(key, { object, result: cached.result });
        return cached.result;
      }
    }
    const result = validateResource(object);
    this.#validated.set(key, { object, result });
    return result;
  }

  async close(): Promise<void> {
    await Promise.all([...this.reflectors.values()].map((r) => r.stop()));
  }
}
