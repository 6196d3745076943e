// Kubernetes Events (events.k8s.io/v1) about the resources Sluice refuses or cannot serve: what `kubectl describe`
// shows its users. Best effort, as Events are meant to be:
//
// - an identical event (same object, type, reason, action and note) within the window of its last occurrence is not
//   written again: it is counted in the first one's `series` (count ≥ 2 and lastObservedTime, the only fields
//   events.k8s.io/v1 lets an update change), patched at most every SERIES_INTERVAL_MS per event;
// - every write takes a token from one bucket (burst 25, 5/s by default); an event without a token is dropped, and
//   drops are logged once a minute as a sum;
// - only the Lease holder writes Events (`enabled`), so replicas do not repeat each other;
// - nothing throws into the caller: failures are logged, at most one line a minute plus a sum.

import { isKubeError, type KubeClient, resourcePath } from "./client.js";
import { microTime } from "./micro-time.js";

export const REPORTING_CONTROLLER = "sluice.dev/gateway-controller";

const EVENTS = { group: "events.k8s.io", version: "v1", plural: "events" } as const;
/** The API server's limits (bytes, as Go counts them): note 1 KiB, reason / action / reportingInstance 128. */
const NOTE_LIMIT = 1024;
const FIELD_LIMIT = 128;
/** At most one series update per event this often; flush() writes pending ones at once. */
const SERIES_INTERVAL_MS = 30_000;
/** Identical events remembered at most (the oldest forgotten first), so memory stays bounded. */
const MAX_REMEMBERED = 4096;
const MINUTE_MS = 60_000;

/** The object an Event is about (an ObjectReference). */
export interface EventRegarding {
  readonly apiVersion: string;
  readonly kind: string;
  /** Absent for a cluster-scoped object: its Events go to namespace `default`, as client-go does. */
  readonly namespace?: string;
  readonly name: string;
  readonly uid?: string;
}

export interface EventRecorderOptions {
  /** This replica's identity: the Events' reportingInstance (the same identity as its Lease). */
  readonly identity: string;
  readonly log: (line: string) => void;
  /** Whether Events are written; default false (the controller turns it on while it holds the Lease). */
  readonly enabled?: boolean;
  /** Writes (creates and series updates) allowed at once (default 25). */
  readonly burst?: number;
  /** Writes allowed per second after the burst (default 5). */
  readonly perSecond?: number;
  /** An identical event within this many seconds of its last occurrence is counted, not written (default 600). */
  readonly windowSeconds?: number;
}

export type EventType = "Normal" | "Warning";

interface Remembered {
  readonly key: string;
  readonly namespace: string;
  readonly name: string;
  /** Occurrences so far, and how many the API server has been told of (1 once created). */
  count: number;
  written: number;
  /** Wall-clock time of the last occurrence (series.lastObservedTime) and monotonic time (the window). */
  lastObserved: number;
  lastSeen: number;
  created: boolean;
  writing: boolean;
  lastWriteAt: number;
  timer: NodeJS.Timeout | undefined;
}

export class EventRecorder {
  /** Whether Events are written at all; set while this replica leads. */
  enabled: boolean;
  /** Counters for tests and metrics. */
  readonly counts = { created: 0, seriesUpdates: 0, counted: 0, dropped: 0, failed: 0 };
  readonly #client: KubeClient;
  readonly #log: (line: string) => void;
  readonly #instance: string;
  readonly #windowMs: number;
  readonly #bucket: TokenBucket;
  readonly #remembered = new Map<string, Remembered>();
  readonly #pendingSeries = new Set<Remembered>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #drops: MinuteSummary;
  readonly #failures: MinuteSummary;
  #lastNameNs = 0n;

  constructor(client: KubeClient, opts: EventRecorderOptions) {
    this.#client = client;
    this.#log = opts.log;
    this.enabled = opts.enabled ?? false;
    this.#instance = truncateUtf8(opts.identity, FIELD_LIMIT);
    this.#windowMs = (opts.windowSeconds ?? 600) * 1000;
    const burst = opts.burst ?? 25;
    const perSecond = opts.perSecond ?? 5;
    this.#bucket = new TokenBucket(burst, perSecond);
    this.#drops = new MinuteSummary(
      (n) => `events: ${n} more event(s) dropped by the rate limit (burst ${burst}, ${perSecond}/s) in the last minute`,
      (first) => `events: rate limit (burst ${burst}, ${perSecond}/s) reached, dropping events: ${first}`,
      opts.log,
    );
    this.#failures = new MinuteSummary(
      (n, last) => `events: ${n} more event write(s) failed in the last minute; the last: ${last}`,
      (first) => `events: ${first}`,
      opts.log,
    );
  }

  /** A Warning Event about `regarding`: `reason` in UpperCamelCase, `note` for humans, `action` what was done. */
  warning(regarding: EventRegarding, reason: string, note: string, action: string): void {
    this.#record("Warning", regarding, reason, note, action);
  }

  normal(regarding: EventRegarding, reason: string, note: string, action: string): void {
    this.#record("Normal", regarding, reason, note, action);
  }

  /** Writes pending series updates now (no rate limit) and waits for every write under way. */
  async flush(): Promise<void> {
    for (;;) {
      for (const r of [...this.#pendingSeries]) {
        clearTimeout(r.timer);
        r.timer = undefined;
        this.#writeSeries(r, true);
      }
      // A create finishing may leave a series update pending: go round until nothing is under way.
      if (this.#inFlight.size === 0) return;
      await Promise.all([...this.#inFlight]);
    }
  }

  /** flush(), then forgets pending work and stops the log timers. */
  async close(): Promise<void> {
    await this.flush();
    for (const r of this.#pendingSeries) clearTimeout(r.timer);
    this.#pendingSeries.clear();
    this.#drops.close();
    this.#failures.close();
  }

  #record(type: EventType, regarding: EventRegarding, reason: string, note: string, action: string): void {
    try {
      if (!this.enabled) return;
      reason = truncateUtf8(reason, FIELD_LIMIT);
      action = truncateUtf8(action, FIELD_LIMIT);
      note = truncateUtf8(note, NOTE_LIMIT);
      const r = regarding;
      const key = JSON.stringify([r.apiVersion, r.kind, r.namespace, r.name, r.uid, type, reason, action, note]);
      const now = performance.now();
      this.#forgetOld(now);
      const seen = this.#remembered.get(key);
      if (seen !== undefined) {
        seen.count++;
        seen.lastObserved = Date.now();
        seen.lastSeen = now;
        // Re-inserted, so the map stays ordered by last occurrence (#forgetOld reads it from the front).
        this.#remembered.delete(key);
        this.#remembered.set(key, seen);
        this.counts.counted++;
        this.#scheduleSeries(seen);
        return;
      }
      if (!this.#bucket.take()) {
        this.counts.dropped++;
        this.#drops.add(`${type} ${reason} on ${describe(regarding)}`);
        return;
      }
      const namespace = regarding.namespace ?? "default";
      const entry: Remembered = {
        key,
        namespace,
        name: this.#eventName(regarding.name),
        count: 1,
        written: 0,
        lastObserved: Date.now(),
        lastSeen: now,
        created: false,
        writing: true,
        lastWriteAt: now,
        timer: undefined,
      };
      this.#remembered.set(key, entry);
      if (this.#remembered.size > MAX_REMEMBERED) {
        const oldest = this.#remembered.keys().next().value;
        if (oldest !== undefined) this.#remembered.delete(oldest);
      }
      const body = {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name: entry.name, namespace },
        eventTime: microTime(entry.lastObserved),
        type,
        reason,
        action,
        note,
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: this.#instance,
        regarding: {
          apiVersion: r.apiVersion,
          kind: r.kind,
          ...(r.namespace !== undefined ? { namespace: r.namespace } : {}),
          name: r.name,
          ...(r.uid !== undefined ? { uid: r.uid } : {}),
        },
      };
      this.#track(this.#create(entry, body));
    } catch (e) {
      // A bug here must not become the caller's: Events are best effort.
      this.#log(`events: ${(e as Error).message}`);
    }
  }

  async #create(entry: Remembered, body: unknown): Promise<void> {
    try {
      await this.#client.request("POST", resourcePath(EVENTS, entry.namespace), { body });
      this.counts.created++;
      entry.created = true;
      entry.written = 1;
    } catch (e) {
      this.counts.failed++;
      this.#failures.add((e as Error).message);
      // Not remembered: the next occurrence tries again.
      if (this.#remembered.get(entry.key) === entry) this.#remembered.delete(entry.key);
    } finally {
      entry.writing = false;
      entry.lastWriteAt = performance.now();
    }
    this.#scheduleSeries(entry);
  }

  #scheduleSeries(r: Remembered): void {
    if (!r.created || r.writing || r.timer !== undefined || r.count <= r.written) return;
    const delay = Math.max(0, r.lastWriteAt + SERIES_INTERVAL_MS - performance.now());
    this.#pendingSeries.add(r);
    r.timer = setTimeout(() => {
      r.timer = undefined;
      this.#writeSeries(r, false);
    }, delay);
    r.timer.unref();
  }

  #writeSeries(r: Remembered, force: boolean): void {
    this.#pendingSeries.delete(r);
    if (!this.enabled || r.writing || r.count <= r.written) return;
    if (!force && !this.#bucket.take()) {
      // Counted occurrences are not lost, only late: try again when a token is due.
      this.#pendingSeries.add(r);
      r.timer = setTimeout(() => {
        r.timer = undefined;
        this.#writeSeries(r, false);
      }, this.#bucket.msUntilToken());
      r.timer.unref();
      return;
    }
    this.#track(this.#patchSeries(r));
  }

  async #patchSeries(r: Remembered): Promise<void> {
    r.writing = true;
    const count = r.count;
    const patch = { series: { count, lastObservedTime: microTime(r.lastObserved) } };
    try {
      await this.#client.request("PATCH", resourcePath(EVENTS, r.namespace, r.name), {
        body: patch,
        contentType: "application/merge-patch+json",
      });
      this.counts.seriesUpdates++;
      r.written = count;
    } catch (e) {
      if (isKubeError(e, 404)) {
        // The Event expired (the API server's event TTL) or was deleted: the next occurrence creates a new one.
        if (this.#remembered.get(r.key) === r) this.#remembered.delete(r.key);
        r.written = r.count;
      } else {
        this.counts.failed++;
        this.#failures.add((e as Error).message);
      }
    } finally {
      r.writing = false;
      r.lastWriteAt = performance.now();
    }
    this.#scheduleSeries(r);
  }

  #track(p: Promise<void>): void {
    this.#inFlight.add(p);
    void p.finally(() => this.#inFlight.delete(p));
  }

  #forgetOld(now: number): void {
    for (const [key, r] of this.#remembered) {
      if (now - r.lastSeen < this.#windowMs) break;
      this.#remembered.delete(key);
    }
  }

  /** `<object name>.<hex nanoseconds>` as client-go names them, strictly increasing so a burst cannot collide. */
  #eventName(objectName: string): string {
    let ns = BigInt(Date.now()) * 1_000_000n;
    if (ns <= this.#lastNameNs) ns = this.#lastNameNs + 1n;
    this.#lastNameNs = ns;
    const suffix = ns.toString(16);
    const prefix = objectName
      .toLowerCase()
      .replace(/[^a-z0-9.-]/g, "-")
      .slice(0, 253 - 1 - suffix.length)
      .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "");
    return prefix === "" ? suffix : `${prefix}.${suffix}`;
  }
}

function describe(r: EventRegarding): string {
  return `${r.kind} ${r.namespace !== undefined ? `${r.namespace}/` : ""}${r.name}`;
}

/** `s` cut to at most `max` UTF-8 bytes on a character boundary, with an ellipsis when cut. */
export function truncateUtf8(s: string, max: number): string {
  const bytes = Buffer.from(s, "utf8");
  if (bytes.length <= max) return s;
  let cut = max - 3; // room for "…"
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return `${bytes.subarray(0, cut).toString("utf8")}…`;
}

/** Tokens refilled continuously at `perSecond` up to `burst`. */
class TokenBucket {
  #tokens: number;
  #at = performance.now();
  constructor(
    readonly burst: number,
    readonly perSecond: number,
  ) {
    this.#tokens = burst;
  }

  #refill(): void {
    const now = performance.now();
    this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) / 1000) * this.perSecond);
    this.#at = now;
  }

  take(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  msUntilToken(): number {
    this.#refill();
    return Math.max(0, ((1 - this.#tokens) / this.perSecond) * 1000);
  }
}

/** The first occurrence logged at once, the ones after it summed in one line a minute (while they keep coming). */
class MinuteSummary {
  #timer: NodeJS.Timeout | undefined;
  #since = 0;
  #last = "";
  constructor(
    readonly summary: (count: number, last: string) => string,
    readonly first: (what: string) => string,
    readonly log: (line: string) => void,
  ) {}

  add(what: string): void {
    if (this.#timer === undefined) {
      this.log(this.first(what));
      this.#arm();
      return;
    }
    this.#since++;
    this.#last = what;
  }

  #arm(): void {
    this.#timer = setTimeout(() => {
      if (this.#since === 0) {
        this.#timer = undefined;
        return;
      }
      this.log(this.summary(this.#since, this.#last));
      this.#since = 0;
      this.#arm();
    }, MINUTE_MS);
    this.#timer.unref();
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#since > 0) this.log(this.summary(this.#since, this.#last));
    this.#since = 0;
  }
}
