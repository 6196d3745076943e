// One kind's objects kept in memory from a list and then a watch (client-go's reflector, in small):
//
// - the list is paged; its objects replace the previous view in one step, so a relist never shows an empty or
//   partial view (the old view serves until the new one is whole);
// - the watch resumes from the last resourceVersion seen (events and bookmarks), so a dropped connection or an API
//   server restart loses nothing; `410 Gone` (that version is compacted away) relists;
// - errors back off exponentially with jitter, up to MAX_BACKOFF_MS;
// - an optional kind the server does not serve (404: its CRD is not installed) counts as synced and empty, is logged
//   once, and is asked for again every REDISCOVER_MS.

import { isKubeError, KubeApiError, type KubeClient, type KubeList, type KubeObject, resourcePath } from "./client.js";
import { apiVersionOf, type WatchedKind } from "./kinds.js";

const PAGE_SIZE = 500;
const MIN_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 30_000;
const REDISCOVER_MS = 10_000;
/** The server ends each watch after a random 5–10 minutes (as client-go asks), spreading relist-free reconnects. */
const WATCH_TIMEOUT_S = 300;

export interface ReflectorOptions {
  /** Called after the view changed (a list replaced it, or a watch event changed it). */
  readonly onChange: (kind: string) => void;
  /** Called instead of onChange when only an object's status changed (see WatchedKind.statusOnlyIgnored). */
  readonly onStatusOnly?: (object: KubeObject) => void;
  readonly log: (line: string) => void;
  /** Test hook: milliseconds before the Nth retry. */
  readonly backoff?: (attempt: number) => number;
}

export type ReflectorState = "starting" | "synced" | "absent";

/** What is kept of an object: no managedFields or last-applied copy (often larger than the rest). */
function trim(k: WatchedKind, apiVersion: string, o: KubeObject): KubeObject {
  const kept = trimmed(k.kind, apiVersion, o);
  return k.slim !== undefined ? (k.slim(kept as unknown as Record<string, unknown>) as unknown as KubeObject) : kept;
}

function trimmed(kind: string, apiVersion: string, o: KubeObject): KubeObject {
  const { managedFields: _m, ...metadata } = o.metadata as KubeObject["metadata"] & { managedFields?: unknown };
  const annotations = metadata.annotations;
  if (annotations?.["kubectl.kubernetes.io/last-applied-configuration"] !== undefined) {
    const { "kubectl.kubernetes.io/last-applied-configuration": _l, ...rest } = annotations;
    (metadata as { annotations?: Record<string, string> }).annotations = rest;
  }
  // List items carry no apiVersion and kind; watch events do.
  return { ...o, apiVersion, kind, metadata };
}

/**
 * Whether two versions of an object differ in nothing the translator reads: same generation (the API server bumps it
 * on every spec change of a kind with a status subresource), labels, annotations and deletion.
 */
export function sameSpec(a: KubeObject | undefined, b: KubeObject): boolean {
  if (a === undefined) return false;
  const ma = a.metadata;
  const mb = b.metadata;
  return (
    ma.generation !== undefined &&
    ma.generation === mb.generation &&
    ma["deletionTimestamp"] === mb["deletionTimestamp"] &&
    JSON.stringify(ma.labels ?? {}) === JSON.stringify(mb.labels ?? {}) &&
    JSON.stringify(ma.annotations ?? {}) === JSON.stringify(mb.annotations ?? {})
  );
}

function keyOf(o: KubeObject): string {
  return o.metadata.namespace !== undefined ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
}

export class Reflector {
  readonly kind: WatchedKind;
  /** The current view by `namespace/name` (or name); a relist replaces it whole once the new list is complete. */
  objects = new Map<string, KubeObject>();
  state: ReflectorState = "starting";
  /** The version served (first one the server answered), once known. */
  version: string | undefined;
  /** Incremented on every change of the view that matters to translation (KubeSource caches per kind by it). */
  changes = 0;
  /** Keys changed since the last drain(), or (#whole) a list replaced the view. */
  readonly #dirty = new Set<string>();
  #whole = true;
  /** Counters for tests and metrics. */
  readonly counts = { lists: 0, watches: 0, events: 0, gone: 0, errors: 0, statusOnly: 0 };
  readonly #client: KubeClient;
  readonly #opts: ReflectorOptions;
  #resourceVersion = "";
  #abort = new AbortController();
  #stopped = false;
  #loop: Promise<void> | undefined;
  #absentLogged = false;
  #lastError = "";

  constructor(client: KubeClient, kind: WatchedKind, opts: ReflectorOptions) {
    this.#client = client;
    this.kind = kind;
    this.#opts = opts;
  }

  get synced(): boolean {
    return this.state !== "starting";
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort.abort();
    await this.#loop;
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#stopped) {
      try {
        if (this.#resourceVersion === "") await this.#list();
        attempt = 0;
        await this.#watch();
      } catch (e) {
        if (this.#stopped) return;
        if (isKubeError(e, 410)) {
          // Too old a resourceVersion: list again (the current view keeps serving meanwhile).
          this.counts.gone++;
          this.#resourceVersion = "";
          continue;
        }
        if (this.kind.optional && isKubeError(e, 404) && this.#resourceVersion === "") {
          if (this.#absent()) continue;
          await this.#sleep(REDISCOVER_MS);
          continue;
        }
        this.counts.errors++;
        const message = e instanceof KubeApiError ? e.message : `${(e as Error).message ?? e}`;
        if (message !== this.#lastError) this.#opts.log(`kube: ${this.kind.kind}: ${message}; retrying`);
        this.#lastError = message;
        await this.#sleep(this.#opts.backoff?.(attempt) ?? backoffMs(attempt));
        attempt++;
      }
    }
  }

  /** Marks the kind absent; true if another served version should be tried at once. */
  #absent(): boolean {
    const next = this.version === undefined ? 0 : this.kind.versions.indexOf(this.version) + 1;
    if (next > 0 && next < this.kind.versions.length) {
      this.version = this.kind.versions[next];
      return true;
    }
    this.version = undefined;
    if (!this.#absentLogged) {
      this.#opts.log(
        `kube: ${this.kind.kind} (${this.kind.group}) is not served by the API server (its CRD is not installed); going on without it, and looking again every ${REDISCOVER_MS / 1000} s`,
      );
      this.#absentLogged = true;
    }
    const wasSynced = this.synced;
    const hadObjects = this.objects.size > 0;
    this.state = "absent";
    this.objects = new Map();
    this.#replaced();
    if (!wasSynced || hadObjects) this.#opts.onChange(this.kind.kind);
    return false;
  }

  async #list(): Promise<void> {
    const version = this.version ?? this.kind.versions[0] ?? "v1";
    const apiVersion = apiVersionOf(this.kind, version);
    const path = resourcePath({ ...this.kind, version });
    const next = new Map<string, KubeObject>();
    let cont: string | undefined;
    let rv = "";
    do {
      const page: KubeList = await this.#client.get<KubeList>(path, {
        query: {
          limit: PAGE_SIZE,
          ...(cont !== undefined ? { continue: cont } : {}),
          ...(this.kind.fieldSelector !== undefined ? { fieldSelector: this.kind.fieldSelector } : {}),
          ...(this.kind.labelSelector !== undefined ? { labelSelector: this.kind.labelSelector } : {}),
        },
        signal: this.#abort.signal,
        timeoutMs: 60_000,
      });
      for (const item of page.items) next.set(keyOf(item), trim(this.kind, apiVersion, item));
      cont = page.metadata.continue || undefined;
      rv = page.metadata.resourceVersion ?? "";
    } while (cont !== undefined);
    this.counts.lists++;
    this.version = version;
    if (this.state === "absent" && this.#absentLogged) this.#opts.log(`kube: ${this.kind.kind} is served now`);
    this.#absentLogged = false;
    this.#lastError = "";
    this.objects = next;
    this.#replaced();
    this.#resourceVersion = rv;
    this.state = "synced";
    this.#opts.onChange(this.kind.kind);
  }

  async #watch(): Promise<void> {
    const version = this.version ?? this.kind.versions[0] ?? "v1";
    const apiVersion = apiVersionOf(this.kind, version);
    const path = resourcePath({ ...this.kind, version });
    this.counts.watches++;
    await this.#client.watch(
      path,
      {
        resourceVersion: this.#resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: WATCH_TIMEOUT_S + Math.floor(Math.random() * WATCH_TIMEOUT_S),
        ...(this.kind.fieldSelector !== undefined ? { fieldSelector: this.kind.fieldSelector } : {}),
        ...(this.kind.labelSelector !== undefined ? { labelSelector: this.kind.labelSelector } : {}),
      },
      (type, object) => {
        const rv = object.metadata.resourceVersion;
        if (type === "BOOKMARK") {
          if (rv !== undefined) this.#resourceVersion = rv;
          return;
        }
        const key = keyOf(object);
        const previous = this.objects.get(key);
        // In place: readers (KubeSource.load) take what they need in one synchronous pass.
        if (type === "DELETED") this.objects.delete(key);
        else this.objects.set(key, trim(this.kind, apiVersion, object));
        if (rv !== undefined) this.#resourceVersion = rv;
        this.counts.events++;
        this.#lastError = "";
        // A write to the status subresource (Sluice's own, or another controller's) changes nothing translated.
        if (type === "MODIFIED" && this.kind.statusOnlyIgnored === true && sameSpec(previous, object)) {
          this.counts.statusOnly++;
          this.#opts.onStatusOnly?.(this.objects.get(key) as KubeObject);
          return;
        }
        this.changes++;
        if (!this.#whole) this.#dirty.add(key);
        this.#opts.onChange(this.kind.kind);
      },
      this.#abort.signal,
    );
  }

  /**
   * What changed since the last call: the keys of objects added, modified or deleted, or `whole` when a list (or
   * the kind's disappearance) replaced the view. A reader that keeps its own per-object work (KubeSource) redoes
   * only those.
   */
  drain(): { readonly whole: boolean; readonly keys: ReadonlySet<string> } {
    const out = { whole: this.#whole, keys: new Set(this.#dirty) };
    this.#whole = false;
    this.#dirty.clear();
    return out;
  }

  #replaced(): void {
    this.changes++;
    this.#whole = true;
    this.#dirty.clear();
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.#abort.signal.addEventListener(
        "abort",
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
  }
}

function backoffMs(attempt: number): number {
  const base = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * 2 ** attempt);
  return base / 2 + Math.random() * (base / 2);
}
