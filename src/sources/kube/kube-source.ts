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
import { sameItems } from "../../translate/policy/memo.js";
import type { LoadResult, SourceProblem } from "../file-source.js";
import type { KubeClient, KubeObject } from "./client.js";
import { WATCHED_KINDS, type WatchedKind } from "./kinds.js";
import { Reflector, sameSpec } from "./reflector.js";

/** What problems name as their "file": the objects came from the API server. */
export const KUBE_SOURCE_FILE = "kubernetes";

/** What one object contributes to loads. */
interface Entry {
  readonly key: string;
  readonly resource: Resource | undefined;
  readonly problems: readonly SourceProblem[];
  readonly invalid: InvalidResource | undefined;
  /** Of a kind that may name Secrets and ConfigMaps: every string in it (see #referenced). */
  readonly mentions: readonly string[] | undefined;
  /** Of a kind translated only when referenced: the strings of it (WatchedKind.referencedBy) any mention of which
   * makes it referenced. */
  readonly names: readonly string[] | undefined;
}

/** Longest string that can name an object or be a label value. */
const MAX_NAME = 253;

/** Every string value of an object outside its metadata and status, deduplicated; a Gateway's own name too (its
 * Service is found by a label whose value is that name). */
function mentionsOf(object: KubeObject): string[] {
  const out = new Set<string>();
  const walk = (v: unknown): void => {
    if (typeof v === "string") {
      if (v.length > 0 && v.length <= MAX_NAME) out.add(v);
    } else if (Array.isArray(v)) for (const x of v) walk(x);
    else if (typeof v === "object" && v !== null) for (const x of Object.values(v)) walk(x);
  };
  for (const [k, v] of Object.entries(object)) if (k !== "metadata" && k !== "status") walk(v);
  if (object.kind === "Gateway") out.add(object.metadata.name);
  return [...out];
}

/** Kinds whose objects can name Secrets and ConfigMaps: Gateway API's and Sluice's (not the core ones). */
function mayReference(k: WatchedKind): boolean {
  return k.group !== "" && k.group !== "discovery.k8s.io";
}

interface KindView {
  /** The reflector's change count this view was computed at. */
  readonly changes: number;
  /** Each object's contribution by the reflector's key, and those keys sorted (the fixed order of loads). */
  readonly entries: Map<string, Entry>;
  readonly names: readonly string[];
  /** The #referencedVersion the lists below were filtered at (kinds with referencedBy). */
  readonly referencedVersion: number;
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

  /** How many of a kind's objects the last load handed to translation (Secrets and ConfigMaps: those named). */
  translated(kind: string): number {
    return this.#views.get(kind)?.resources.length ?? 0;
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
    // Every kind's objects first (the strings mentioned by all of them decide which Secrets, ConfigMaps, Services
    // and EndpointSlices count).
    const before = new Map(this.#views);
    for (const kind of this.#order) {
      const r = this.reflectors.get(kind);
      const view = this.#views.get(kind);
      if (r !== undefined && (view === undefined || view.changes !== r.changes)) this.#update(r, view);
    }
    let changed = this.#last === undefined;
    const views: KindView[] = [];
    for (const kind of this.#order) {
      const r = this.reflectors.get(kind);
      let view = this.#views.get(kind);
      if (r === undefined || view === undefined) continue;
      if (r.kind.referencedBy !== undefined && view.referencedVersion !== this.#referencedVersion) {
        view = { ...view, ...this.#assemble(r, view.entries, view.names) };
        this.#views.set(kind, view);
      }
      views.push(view);
      const was = before.get(kind);
      if (
        was !== view &&
        (was === undefined ||
          !sameItems(was.resources, view.resources) ||
          !sameItems(was.problems, view.problems) ||
          !sameItems(was.invalid, view.invalid))
      )
        changed = true;
    }
    // Nothing translation reads changed (an EndpointSlice of a Service no route names, a Secret nothing names): the
    // same load, which the server recognises and does not translate again.
    if (!changed && this.#last !== undefined) return this.#last;
    const resources: Resource[] = [];
    const problems: SourceProblem[] = [];
    const invalid: InvalidResource[] = [];
    let documents = 0;
    for (const view of views) {
      documents += view.names.length;
      for (const x of view.resources) resources.push(x);
      for (const x of view.problems) problems.push(x);
      for (const x of view.invalid) invalid.push(x);
    }
    this.#last = { documents, resources, sources: new Map<string, SourceRef>(), problems, invalid };
    return this.#last;
  }

  #last: LoadResult | undefined;

  /** What one kind contributes to loads, recomputed only when its view changed (a route change leaves the 10,000
   * EndpointSlices alone), and then only for the objects that changed (a route change redoes one route, not 5,000). */
  readonly #views = new Map<string, KindView>();

  /**
   * How many objects mention each string (see mentionsOf). A Secret or ConfigMap takes part in translation only when
   * its name or one of its label values is among them: an over-approximation of "some resource references it, by
   * name or by label selector", which needs no knowledge of where references sit in each kind's schema. The rest
   * stay in the watch's cache, untranslated, so a change to one of them costs no translation.
   */
  readonly #mentioned = new Map<string, number>();
  /** Incremented whenever a string starts or stops being mentioned. */
  #referencedVersion = 0;

  #mention(strings: readonly string[] | undefined, by: 1 | -1): void {
    for (const x of strings ?? []) {
      const n = (this.#mentioned.get(x) ?? 0) + by;
      if (n <= 0) {
        this.#mentioned.delete(x);
        this.#referencedVersion++;
      } else {
        if (n === 1 && by === 1) this.#referencedVersion++;
        this.#mentioned.set(x, n);
      }
    }
  }

  #isReferenced(e: Entry): boolean {
    for (const x of e.names ?? []) if (this.#mentioned.has(x)) return true;
    return false;
  }

  #update(r: Reflector, previous: KindView | undefined): void {
    const { entries, names } = this.#entries(r, previous);
    this.#views.set(r.kind.kind, { changes: r.changes, entries, names, ...this.#assemble(r, entries, names) });
  }

  #assemble(
    r: Reflector,
    entries: ReadonlyMap<string, Entry>,
    names: readonly string[],
  ): Pick<KindView, "referencedVersion" | "resources" | "problems" | "invalid"> {
    const resources: Resource[] = [];
    const problems: SourceProblem[] = [];
    const invalid: InvalidResource[] = [];
    const only = r.kind.referencedBy !== undefined;
    for (const k of names) {
      const e = entries.get(k) as Entry;
      if (only && !this.#isReferenced(e)) continue;
      if (e.resource !== undefined) resources.push(e.resource);
      for (const p of e.problems) problems.push(p);
      if (e.invalid !== undefined) invalid.push(e.invalid);
    }
    return { referencedVersion: this.#referencedVersion, resources, problems, invalid };
  }

  #entries(r: Reflector, previous: KindView | undefined): { entries: Map<string, Entry>; names: readonly string[] } {
    const { whole, keys } = r.drain();
    let entries: Map<string, Entry>;
    let names: readonly string[];
    if (previous === undefined || whole) {
      entries = new Map();
      for (const [k, object] of r.objects) entries.set(k, this.#entryOf(r, object));
      for (const [k, e] of previous?.entries ?? []) {
        this.#mention(e.mentions, -1);
        if (!entries.has(k)) this.#forget(e.key);
      }
      for (const e of entries.values()) this.#mention(e.mentions, 1);
      names = [...entries.keys()].sort();
    } else {
      entries = previous.entries;
      let membership = false;
      for (const k of keys) {
        const object = r.objects.get(k);
        const before = entries.get(k);
        if (object === undefined) {
          if (before !== undefined) {
            entries.delete(k);
            this.#mention(before.mentions, -1);
            this.#forget(before.key);
            membership = true;
          }
          continue;
        }
        if (before === undefined) membership = true;
        const entry = this.#entryOf(r, object);
        // Counted up before down: a string both versions mention never drops to zero in between.
        this.#mention(entry.mentions, 1);
        this.#mention(before?.mentions, -1);
        entries.set(k, entry);
      }
      names = membership ? [...entries.keys()].sort() : previous.names;
    }
    return { entries, names };
  }

  /** An object gone from the cluster: its validation and last good version are forgotten. */
  #forget(key: string): void {
    this.#validated.delete(key);
    this.#lastGood.delete(key);
  }

  #entryOf(r: Reflector, object: KubeObject): Entry {
    const e = this.#contribution(r, object);
    return {
      ...e,
      mentions: mayReference(r.kind) ? mentionsOf(object) : undefined,
      names: r.kind.referencedBy?.(object),
    };
  }

  #contribution(r: Reflector, object: KubeObject): Omit<Entry, "mentions" | "names"> {
    const key = resourceKey(object as unknown as Resource);
    const result = this.#validate(key, object, r.kind.statusOnlyIgnored === true);
    if (result.resource !== undefined && result.problems.length === 0) {
      this.#lastGood.set(key, result.resource);
      return { key, resource: result.resource, problems: [], invalid: undefined };
    }
    const description = describeResource(object as unknown as Resource);
    const previousGood = result.resource === undefined ? this.#lastGood.get(key) : undefined;
    const consequence =
      result.resource !== undefined
        ? undefined
        : previousGood !== undefined
          ? "the last valid version keeps serving"
          : "resource left out";
    const problems = result.problems.map(
      (p): SourceProblem => ({
        file: KUBE_SOURCE_FILE,
        line: 0,
        resource: description,
        path: p.path,
        message: p.message,
        severity: p.severity,
        ...(p.severity === "error" && consequence !== undefined ? { consequence } : {}),
      }),
    );
    if (result.resource !== undefined) {
      this.#lastGood.set(key, result.resource);
      return { key, resource: result.resource, problems, invalid: undefined };
    }
    if (previousGood !== undefined) return { key, resource: previousGood, problems, invalid: undefined };
    return {
      key,
      resource: undefined,
      problems,
      invalid: {
        kind: object.kind ?? r.kind.kind,
        document: object as unknown as Resource,
        problems: result.problems.filter((p) => p.severity === "error").map((p) => `${p.path}: ${p.message}`),
      },
    };
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
