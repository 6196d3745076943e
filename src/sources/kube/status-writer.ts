// Writes the translator's status back to the API server, through the status subresource, by server-side apply with
// Sluice's field manager.
//
// - Only when changed: the status to write is compared with what the watch last saw (and with what this writer last
//   wrote, while the watch has not caught up), so a converged object gets no write at all.
// - lastTransitionTime moves only when a condition's status changes; every condition carries the object's
//   observedGeneration.
// - Lists that several controllers share (route `parents`, policy `ancestors`, model `parents`) are merged: entries
//   with another controllerName are kept as they are; the write carries the resourceVersion it was computed from,
//   so a concurrent write by another controller is a conflict (409), retried from a fresh read, never overwritten.
// - A status is written once it has stayed the same for half a second (at most 30 s after it first differed), so an
//   object that follows a burst (a Gateway's attachedRoutes while 1,000 routes arrive) is written once, not per change.
// - A coalescing work queue with bounded concurrency: a key changed many times while queued is written once, with
//   its latest status.

import { canonicalJson } from "../../translate/authz/policy-table.js";
import { isKubeError, type KubeClient, type KubeObject, resourcePath } from "./client.js";
import type { KubeSource } from "./kube-source.js";

export const FIELD_MANAGER = "sluice.dev/gateway-controller";

export interface DesiredStatus {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly status: unknown;
}

export interface StatusWriterOptions {
  readonly controllerName: string;
  readonly log: (line: string) => void;
  /** Writes in flight at once (default 4). */
  readonly concurrency?: number;
  /** How long a status must stay the same before it is written (default SETTLE_MS). */
  readonly settleMs?: number;
  /** The clock for lastTransitionTime (tests). */
  readonly now?: () => Date;
}

/** Status lists that other controllers write entries of too, keyed by their controllerName. */
const SHARED_LISTS = ["parents", "ancestors"] as const;
const MAX_ATTEMPTS = 5;
/** See StatusWriter.#tick. */
const SETTLE_MS = 500;
const MAX_DELAY_MS = 30_000;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function keyOf(d: { kind: string; namespace: string; name: string }): string {
  return `${d.kind}/${d.namespace}/${d.name}`;
}

/** RFC 3339 to the second, as metav1.Time serialises. */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** Structural equality of JSON values; object key order does not matter, array order does. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (!isObject(a) || !isObject(b)) return false;
  const ka = Object.keys(a).filter((k) => a[k] !== undefined);
  const kb = Object.keys(b).filter((k) => b[k] !== undefined);
  if (ka.length !== kb.length) return false;
  for (const k of ka) if (!jsonEqual(a[k], b[k])) return false;
  return true;
}

/** What identifies an entry of a status list across writes. */
function identity(item: unknown): string | undefined {
  if (!isObject(item)) return undefined;
  if (item["parentRef"] !== undefined) return `p:${canonicalJson(item["parentRef"])}|${String(item["controllerName"])}`;
  if (item["ancestorRef"] !== undefined)
    return `a:${canonicalJson(item["ancestorRef"])}|${String(item["controllerName"])}`;
  if (typeof item["name"] === "string") return `n:${item["name"]}`;
  return undefined;
}

/**
 * The desired status with every condition completed: lastTransitionTime kept from the previous status while the
 * condition's status is unchanged (else now), observedGeneration set.
 */
export function stamp(desired: unknown, previous: unknown, generation: number | undefined, now: string): Json {
  if (Array.isArray(desired)) {
    const prev = Array.isArray(previous) ? previous : [];
    const byId = new Map<string, unknown>();
    for (const p of prev) {
      const id = identity(p);
      if (id !== undefined) byId.set(id, p);
    }
    return desired.map((item) => {
      const id = identity(item);
      return stamp(item, id !== undefined ? byId.get(id) : undefined, generation, now);
    });
  }
  if (!isObject(desired)) return desired as Json;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(desired)) {
    if (v === undefined) continue;
    const p = isObject(previous) ? previous[k] : undefined;
    out[k] =
      k === "conditions" && Array.isArray(v) ? stampConditions(v, p, generation, now) : stamp(v, p, generation, now);
  }
  return out;
}

function stampConditions(conditions: unknown[], previous: unknown, generation: number | undefined, now: string): Json {
  const prev = Array.isArray(previous) ? previous.filter(isObject) : [];
  return conditions.map((c) => {
    const cond = c as JsonObject;
    const before = prev.find((p) => p["type"] === cond["type"]);
    const since =
      before !== undefined && before["status"] === cond["status"] && typeof before["lastTransitionTime"] === "string"
        ? before["lastTransitionTime"]
        : now;
    return {
      ...cond,
      lastTransitionTime: since,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    };
  });
}

/**
 * The status to write: ours, with the entries other controllers wrote in shared lists kept (theirs first, in their
 * order, then ours). `desired` undefined removes our entries and keeps theirs.
 */
export function mergeStatus(
  desired: Json | undefined,
  current: unknown,
  controllerName: string,
): JsonObject | undefined {
  const cur = isObject(current) ? current : {};
  const out: JsonObject = isObject(desired) ? { ...desired } : {};
  let shared = false;
  for (const list of SHARED_LISTS) {
    const theirs = Array.isArray(cur[list])
      ? (cur[list] as Json[]).filter((e) => isObject(e) && e["controllerName"] !== controllerName)
      : [];
    const ours = Array.isArray(out[list]) ? (out[list] as Json[]) : [];
    if (theirs.length === 0 && ours.length === 0 && out[list] === undefined) continue;
    shared = true;
    out[list] = [...theirs, ...ours];
  }
  if (desired === undefined && !shared) return undefined;
  return out;
}

interface Written {
  /** The status written, and the resourceVersions before and after the write. */
  readonly status: JsonObject;
  readonly before: string;
  readonly after: string;
}

export interface StatusWriterStats {
  writes: number;
  conflicts: number;
  /** Failures that are tried again (the API server away, busy, or slower than the timeout). */
  errors: number;
  /** Writes the API server refused (4xx other than conflicts): a status of ours its schema does not take. */
  refused: number;
  /** Writes per object key (tests check convergence with it). */
  readonly perObject: Map<string, number>;
}

export class StatusWriter {
  readonly stats: StatusWriterStats = { writes: 0, conflicts: 0, errors: 0, refused: 0, perObject: new Map() };
  readonly #client: KubeClient;
  readonly #source: KubeSource;
  readonly #opts: StatusWriterOptions;
  #desired = new Map<string, DesiredStatus>();
  readonly #written = new Map<string, Written>();
  readonly #queue = new Set<string>();
  #running = 0;
  #active = false;
  #idle: (() => void)[] = [];
  readonly #reported = new Set<string>();

  constructor(client: KubeClient, source: KubeSource, opts: StatusWriterOptions) {
    this.#client = client;
    this.#source = source;
    this.#opts = opts;
  }

  /** Only the Lease holder writes; a new holder looks at every object once. */
  set active(on: boolean) {
    if (on === this.#active) return;
    this.#active = on;
    if (on) {
      for (const key of this.#desired.keys()) this.#queue.add(key);
      this.#pump();
    } else {
      this.#queue.clear();
      this.#waiting.clear();
    }
  }

  get active(): boolean {
    return this.#active;
  }

  /** The statuses of the latest translation; objects whose status differs from it are queued. */
  update(statuses: readonly DesiredStatus[]): void {
    const next = new Map<string, DesiredStatus>();
    for (const s of statuses) next.set(keyOf(s), s);
    const previous = this.#desired;
    this.#desired = next;
    if (!this.#active) return;
    const now = performance.now();
    for (const [key, s] of next) {
      const before = previous.get(key);
      const changed = before !== undefined && before.status !== s.status && !jsonEqual(before.status, s.status);
      // A key already due for a write is written with the desired status of that moment: nothing to compare now
      // (after a burst of 5,000 routes, thousands wait, and each reload would stamp and compare them all).
      if (this.#waiting.has(key) || this.#queue.has(key) || this.#retry.has(key)) {
        if (changed) this.#changedAt.set(key, now);
        continue;
      }
      // The translator's memo hands back the same status object for what did not change: with the object unchanged
      // too, nothing needs a look (a reload at 5,000 routes would otherwise stamp and compare every status).
      const object = this.#source.object(s.kind, s.namespace, s.name);
      const rv = object?.metadata.resourceVersion;
      const seen = this.#seen.get(key);
      if (seen !== undefined && seen.status === s.status && seen.rv === rv) continue;
      if (changed) this.#changedAt.set(key, now);
      if (this.#needsWrite(key, s)) this.#wait(key, now);
      else if (rv !== undefined) this.#seen.set(key, { status: s.status, rv });
    }
    // Objects Sluice no longer reports on: take our entries out of their shared lists; of those gone from the
    // cluster, forget what was remembered (a long-lived controller sees many come and go).
    for (const key of previous.keys()) {
      if (next.has(key)) continue;
      const [kind = "", namespace = "", ...rest] = key.split("/");
      if (this.#source.object(kind, namespace, rest.join("/")) !== undefined) {
        this.#wait(key, now);
        continue;
      }
      this.#written.delete(key);
      this.#seen.delete(key);
      this.stats.perObject.delete(key);
    }
    this.#tick();
  }

  /**
   * A key's status is written once it has stayed the same for SETTLE_MS, or MAX_DELAY_MS after it first needed a
   * write: an object whose status follows a burst of changes (a Gateway's attachedRoutes while routes are created)
   * is written a few times, not once per change.
   */
  readonly #waiting = new Map<string, number>();
  /** Keys found to need no write, with the desired status object and the object's resourceVersion then. */
  readonly #seen = new Map<string, { readonly status: unknown; readonly rv: string }>();
  readonly #changedAt = new Map<string, number>();
  #tickTimer: NodeJS.Timeout | undefined;

  #wait(key: string, now: number): void {
    if (!this.#waiting.has(key)) this.#waiting.set(key, now);
  }

  #tick(): void {
    const now = performance.now();
    const settle = this.#opts.settleMs ?? SETTLE_MS;
    for (const [key, since] of this.#waiting) {
      const changed = this.#changedAt.get(key) ?? since;
      if (now - changed >= settle || now - since >= MAX_DELAY_MS) {
        this.#waiting.delete(key);
        this.#changedAt.delete(key);
        this.#queue.add(key);
      }
    }
    this.#pump();
    if (this.#waiting.size > 0 && this.#tickTimer === undefined && this.#active) {
      this.#tickTimer = setTimeout(
        () => {
          this.#tickTimer = undefined;
          this.#tick();
        },
        Math.max(10, settle / 5),
      );
    }
  }

  /** An object's status changed under us (another controller, or our own write coming back): write again if ours
   * is no longer what it should be. */
  recheck(kind: string, namespace: string | undefined, name: string): void {
    const key = keyOf({ kind, namespace: namespace ?? "", name });
    const d = this.#desired.get(key);
    if (!this.#active || d === undefined || !this.#needsWrite(key, d)) return;
    this.#queue.add(key);
    this.#pump();
  }

  /** Resolves when nothing is queued or being written (tests and shutdown). */
  idle(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  get pending(): number {
    return this.#waiting.size + this.#queue.size + this.#running;
  }

  #needsWrite(key: string, d: DesiredStatus): boolean {
    const object = this.#source.object(d.kind, d.namespace, d.name);
    if (object === undefined) return false;
    const body = this.#body(d, object);
    if (body === undefined) return false;
    if (jsonEqual(body, object["status"])) return false;
    // The watch may not have brought back our last write yet.
    const w = this.#written.get(key);
    const rv = object.metadata.resourceVersion ?? "";
    return !(w !== undefined && (rv === w.before || rv === w.after) && jsonEqual(body, w.status));
  }

  #body(d: DesiredStatus | undefined, object: KubeObject): JsonObject | undefined {
    const current = object["status"];
    const generation = object.metadata.generation;
    const stamped =
      d !== undefined ? stamp(d.status, current, generation, rfc3339(this.#opts.now?.() ?? new Date())) : undefined;
    return mergeStatus(stamped, current, this.#opts.controllerName);
  }

  #retryTimer: NodeJS.Timeout | undefined;
  readonly #retry = new Set<string>();

  #retryLater(key: string): void {
    this.#retry.add(key);
    this.#retryTimer ??= setTimeout(() => {
      this.#retryTimer = undefined;
      for (const k of this.#retry) this.#queue.add(k);
      this.#retry.clear();
      this.#pump();
    }, 1_000);
  }

  /** Stops retrying (shutdown). */
  close(): void {
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    if (this.#tickTimer !== undefined) clearTimeout(this.#tickTimer);
    this.#tickTimer = undefined;
    this.#waiting.clear();
    this.#active = false;
    this.#queue.clear();
  }

  #pump(): void {
    const limit = this.#opts.concurrency ?? 4;
    while (this.#active && this.#running < limit && this.#queue.size > 0) {
      const key = this.#queue.values().next().value as string;
      this.#queue.delete(key);
      this.#running++;
      void this.#write(key).finally(() => {
        this.#running--;
        this.#pump();
        if (this.pending === 0) for (const f of this.#idle.splice(0)) f();
      });
    }
  }

  async #write(key: string): Promise<void> {
    const [kind, namespace, ...rest] = key.split("/");
    const name = rest.join("/");
    if (kind === undefined || namespace === undefined) return;
    const served = this.#source.served(kind);
    if (served === undefined) return;
    let object = this.#source.object(kind, namespace, name);
    for (let attempt = 0; attempt < MAX_ATTEMPTS && this.#active; attempt++) {
      if (object === undefined) return;
      const d = this.#desired.get(key);
      const status = this.#body(d, object);
      if (status === undefined || jsonEqual(status, object["status"])) return;
      const w = this.#written.get(key);
      const rv = object.metadata.resourceVersion ?? "";
      if (w !== undefined && (rv === w.before || rv === w.after) && jsonEqual(status, w.status)) return;
      const ns = served.kind.namespaced ? namespace : undefined;
      const path = resourcePath({ ...served.kind, version: served.version }, ns, name, "status");
      try {
        const result = await this.#client.apply<KubeObject>(
          path,
          {
            apiVersion: object.apiVersion,
            kind,
            metadata: { name, ...(ns !== undefined ? { namespace: ns } : {}), resourceVersion: rv },
            status,
          },
          FIELD_MANAGER,
        );
        this.stats.writes++;
        this.stats.perObject.set(key, (this.stats.perObject.get(key) ?? 0) + 1);
        this.#written.set(key, { status, before: rv, after: result.metadata.resourceVersion ?? "" });
        this.#reported.delete(key);
        return;
      } catch (e) {
        if (isKubeError(e, 404)) return;
        if (isKubeError(e, 409)) {
          // Someone else wrote the object since our view of it: read it again and merge with what they wrote.
          this.stats.conflicts++;
          await new Promise((r) => setTimeout(r, 20 * (attempt + 1) + Math.random() * 50));
          try {
            object = await this.#client.get<KubeObject>(
              resourcePath({ ...served.kind, version: served.version }, ns, name),
            );
          } catch (g) {
            if (isKubeError(g, 404)) return;
            // The re-read failed (the API server is away): the key is tried again later.
            this.stats.errors++;
            this.#retryLater(key);
            return;
          }
          continue;
        }
        const message = (e as Error).message;
        const status = (e as { status?: number }).status;
        if (status === undefined || status >= 500 || status === 429) {
          this.stats.errors++;
          // The API server is away or busy: try again later (the latest status then).
          this.#retryLater(key);
          if (!this.#reported.has(key))
            this.#opts.log(`kube: status of ${kind} ${namespace}/${name}: ${message}; retrying`);
          this.#reported.add(key);
          return;
        }
        // One line per object and message: a status the API server refuses is a bug of ours, not a log flood.
        this.stats.refused++;
        if (!this.#reported.has(key))
          this.#opts.log(`kube: status of ${kind} ${namespace}/${name} not written: ${message}`);
        this.#reported.add(key);
        return;
      }
    }
    // Conflicts on every attempt (a busy object): later, from a fresh view.
    if (this.#active) this.#retryLater(key);
  }
}
