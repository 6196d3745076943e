// Leader election on a coordination.k8s.io/v1 Lease, with client-go's leaderelection semantics:
//
// - a candidate takes the Lease by creating it, or by an update with the resourceVersion precondition once the
//   holder's lease has expired; two candidates racing get one success and one 409, which is not an error;
// - expiry is judged on this replica's own monotonic clock: from the moment it last saw the lease record change, plus
//   the record's leaseDurationSeconds. Other machines' clocks (the renewTime written in the Lease) are never compared;
// - the leader renews every retry period and steps down when no renewal has succeeded within the renew deadline,
//   counted from when the last successful renewal was *sent*. Since renewDeadline < leaseDuration and a follower
//   starts its countdown only after it sees that renewal, the old leader has stopped before anyone else can take
//   over (`isLeader` checks the deadline itself, so it is never true past it, however late timers run);
// - after stepping down the replica stays a candidate: every replica keeps serving xDS, only the leader's duties
//   (status writes, Events) move;
// - `stop({ release: true })` clears holderIdentity, so another replica takes over on its next try instead of waiting
//   for the lease to expire.

import { isKubeError, KubeApiError, type KubeClient, type KubeObject, resourcePath } from "./client.js";
import { microTime } from "./micro-time.js";

const LEASES = { group: "coordination.k8s.io", version: "v1", plural: "leases" } as const;
/** A candidate retries after retryPeriod × [1, 1 + ACQUIRE_JITTER), so replicas started together spread out. */
const ACQUIRE_JITTER = 0.5;

export interface LeaderElectorOptions {
  readonly namespace: string;
  /** The Lease's name. */
  readonly name: string;
  /** This replica's identity (written as holderIdentity), unique among the replicas: e.g. the pod name. */
  readonly identity: string;
  /** How long followers wait, from the last change they saw, before taking the Lease (default 15; whole seconds). */
  readonly leaseDurationSeconds?: number;
  /** How long the leader tries to renew before it steps down (default 10; less than the lease duration). */
  readonly renewDeadlineSeconds?: number;
  /** Time between tries to acquire or renew (default 2; less than the renew deadline). */
  readonly retryPeriodSeconds?: number;
  /** Called when this replica becomes the leader; `signal` aborts when it stops being the leader. */
  readonly onStartedLeading?: (signal: AbortSignal) => void | Promise<void>;
  /** Called when this replica stops being the leader (lost the Lease, could not renew, or stop()). */
  readonly onStoppedLeading?: () => void | Promise<void>;
  readonly log: (line: string) => void;
}

interface LeaseSpec {
  readonly holderIdentity?: string | null;
  readonly leaseDurationSeconds?: number;
  readonly acquireTime?: string;
  readonly renewTime?: string;
  readonly leaseTransitions?: number;
  readonly [k: string]: unknown;
}

interface Lease extends KubeObject {
  readonly spec?: LeaseSpec;
}

export class LeaderElector {
  readonly identity: string;
  readonly #client: KubeClient;
  readonly #opts: LeaderElectorOptions;
  readonly #what: string;
  readonly #leaseDurationS: number;
  readonly #renewDeadlineMs: number;
  readonly #retryMs: number;

  /** The Lease as last read or written. */
  #lease: Lease | undefined;
  /** The last record seen (its spec's election fields) and when, on the monotonic clock, it was first seen. */
  #observedRecord = "";
  #observedAt = 0;
  #holder: string | undefined;

  #leading = false;
  /** Monotonic time until which this replica may act as the leader. */
  #leadingUntil = 0;
  #stepDownTimer: NodeJS.Timeout | undefined;
  #leadership: AbortController | undefined;

  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #stopped = false;
  /** The last error logged and how many failed tries since: one line per distinct error, not one per retry. */
  #lastError: string | undefined;
  #failures = 0;

  constructor(client: KubeClient, opts: LeaderElectorOptions) {
    const lease = opts.leaseDurationSeconds ?? 15;
    const renew = opts.renewDeadlineSeconds ?? 10;
    const retry = opts.retryPeriodSeconds ?? 2;
    if (!Number.isInteger(lease) || lease < 1) throw new Error("leaseDurationSeconds must be a whole number ≥ 1");
    if (!(retry > 0 && retry < renew && renew < lease)) {
      throw new Error("leader election needs 0 < retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds");
    }
    if (opts.identity === "") throw new Error("leader election needs a non-empty identity");
    this.#client = client;
    this.#opts = opts;
    this.identity = opts.identity;
    this.#what = `lease ${opts.namespace}/${opts.name}`;
    this.#leaseDurationS = lease;
    this.#renewDeadlineMs = renew * 1000;
    this.#retryMs = retry * 1000;
  }

  /** True while this replica holds the Lease and its last renewal is within the renew deadline. */
  get isLeader(): boolean {
    return this.#leading && performance.now() < this.#leadingUntil;
  }

  /** The holderIdentity last seen in the Lease (undefined: none seen, or released). */
  get leader(): string | undefined {
    return this.#holder;
  }

  start(): void {
    if (this.#loop !== undefined || this.#stopped) return;
    this.#loop = this.#run();
  }

  /**
   * Stops trying, once a try under way has ended (at most the renew deadline); if leading, calls onStoppedLeading
   * (and waits for it). With `release`, then clears holderIdentity in the Lease if it still names this replica. Never
   * throws; failures are logged.
   */
  async stop(opts: { readonly release?: boolean } = {}): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#abort.abort();
    await this.#loop;
    await this.#stepDown("stopped");
    if (opts.release) await this.#release();
  }

  async #run(): Promise<void> {
    const stop = this.#abort.signal;
    while (!stop.aborted) {
      const sentAt = performance.now();
      let ok = false;
      try {
        ok = await this.#try();
        this.#recovered();
      } catch (e) {
        if (stop.aborted) break;
        this.#failed(e);
      }
      if (stop.aborted) break;
      if (ok) this.#lead(sentAt);
      else if (this.#leading && this.#holder !== this.identity) {
        void this.#stepDown(`the lease is held by ${this.#holder ?? "nobody"}`);
      }
      // A leader renews on the period; a leader whose renewal failed retries sooner, to fit more tries in the deadline.
      const r = Math.random();
      const wait = this.#leading
        ? ok
          ? this.#retryMs
          : this.#retryMs * (0.5 + r / 2)
        : this.#retryMs * (1 + r * ACQUIRE_JITTER);
      await sleep(wait, stop);
    }
  }

  /**
   * One try, abandoned after the renew deadline. stop() does not abort it: aborting an HTTP/2 request whose body is
   * being sent can spin Node's HTTP/2 session (Http2Session::SendPendingData) until memory runs out.
   */
  async #try(): Promise<boolean> {
    const attempt = new AbortController();
    const deadline = this.#renewDeadlineMs;
    const timer = setTimeout(() => attempt.abort(new Error(`no answer within ${deadline / 1000}s`)), deadline);
    try {
      return await this.#tryAcquireOrRenew(attempt.signal);
    } finally {
      clearTimeout(timer);
    }
  }

  /** True when this replica holds the Lease after the call. Throws on errors other than 404 on get and 409. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = microTime();
    // Fast path: the leader updates the Lease it last saw, without reading it first.
    if (this.#leading && this.#lease !== undefined) {
      try {
        this.#observe(await this.#update(this.#withRecord(this.#lease, now, true), signal));
        return true;
      } catch (e) {
        if (!isKubeError(e, 409)) throw e;
      }
    }
    let lease: Lease;
    try {
      lease = await this.#client.get<Lease>(this.#path(this.#opts.name), { signal });
    } catch (e) {
      if (!isKubeError(e, 404)) throw e;
      const created: Lease = {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: this.#opts.name, namespace: this.#opts.namespace },
        spec: this.#record(now, now, 0),
      };
      try {
        this.#observe(await this.#client.request<Lease>("POST", this.#path(), { body: created, signal }));
        return true;
      } catch (e2) {
        if (isKubeError(e2, 409)) return false; // another replica created it first
        throw e2;
      }
    }
    this.#observe(lease);
    const holder = lease.spec?.holderIdentity ?? "";
    if (holder !== "" && holder !== this.identity && this.#observedValid()) return false;
    try {
      this.#observe(await this.#update(this.#withRecord(lease, now, holder === this.identity), signal));
      return true;
    } catch (e) {
      if (isKubeError(e, 409)) return false; // another replica updated it first
      throw e;
    }
  }

  #record(acquireTime: string, renewTime: string, transitions: number): LeaseSpec {
    return {
      holderIdentity: this.identity,
      leaseDurationSeconds: this.#leaseDurationS,
      acquireTime,
      renewTime,
      leaseTransitions: transitions,
    };
  }

  /** `lease` with this replica as holder: a renewal keeps acquireTime and the transition count. */
  #withRecord(lease: Lease, now: string, renewal: boolean): Lease {
    const spec = lease.spec ?? {};
    const transitions = spec.leaseTransitions ?? 0;
    const record = renewal
      ? this.#record(spec.acquireTime ?? now, now, transitions)
      : this.#record(now, now, transitions + 1);
    return { ...lease, spec: { ...spec, ...record } };
  }

  #update(lease: Lease, signal: AbortSignal): Promise<Lease> {
    // The body carries metadata.resourceVersion: the update fails with 409 if the Lease changed since it was read.
    return this.#client.request<Lease>("PUT", this.#path(this.#opts.name), { body: lease, signal });
  }

  #path(name?: string): string {
    return resourcePath(LEASES, this.#opts.namespace, name);
  }

  #observe(lease: Lease): void {
    this.#lease = lease;
    const s = lease.spec ?? {};
    const record = JSON.stringify([
      s.holderIdentity ?? "",
      s.leaseDurationSeconds,
      s.acquireTime,
      s.renewTime,
      s.leaseTransitions,
    ]);
    if (record !== this.#observedRecord) {
      this.#observedRecord = record;
      this.#observedAt = performance.now();
    }
    const holder = s.holderIdentity || undefined;
    if (holder !== this.#holder) {
      this.#holder = holder;
      if (holder !== this.identity) this.#opts.log(`${this.#what}: held by ${holder ?? "nobody (released)"}`);
    }
  }

  /** Whether the record last seen is still within its lease duration, from when this replica first saw it. */
  #observedValid(): boolean {
    const seconds = this.#lease?.spec?.leaseDurationSeconds ?? this.#leaseDurationS;
    return performance.now() < this.#observedAt + seconds * 1000;
  }

  #lead(sentAt: number): void {
    this.#leadingUntil = Math.max(this.#leadingUntil, sentAt + this.#renewDeadlineMs);
    clearTimeout(this.#stepDownTimer);
    this.#stepDownTimer = setTimeout(() => this.#checkDeadline(), this.#leadingUntil - performance.now());
    if (this.#leading) return;
    this.#leading = true;
    this.#leadership = new AbortController();
    this.#opts.log(`${this.#what}: ${this.identity} is the leader`);
    const signal = this.#leadership.signal;
    void this.#callback("onStartedLeading", () => this.#opts.onStartedLeading?.(signal));
  }

  #checkDeadline(): void {
    const left = this.#leadingUntil - performance.now();
    if (left > 0) this.#stepDownTimer = setTimeout(() => this.#checkDeadline(), left);
    else void this.#stepDown(`no renewal succeeded within ${this.#renewDeadlineMs / 1000}s`);
  }

  /** Stops leading (if leading): isLeader turns false first, then the leadership signal aborts and the callback runs. */
  #stepDown(why: string): Promise<void> {
    if (!this.#leading) return Promise.resolve();
    this.#leading = false;
    this.#leadingUntil = 0;
    clearTimeout(this.#stepDownTimer);
    this.#leadership?.abort();
    this.#leadership = undefined;
    this.#opts.log(`${this.#what}: ${this.identity} stopped leading: ${why}`);
    return this.#callback("onStoppedLeading", () => this.#opts.onStoppedLeading?.());
  }

  async #callback(name: string, fn: () => void | Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      this.#opts.log(`${this.#what}: ${name} failed: ${(e as Error).message}`);
    }
  }

  async #release(): Promise<void> {
    const signal = AbortSignal.timeout(this.#renewDeadlineMs);
    try {
      const lease = await this.#client.get<Lease>(this.#path(this.#opts.name), { signal });
      if (lease.spec?.holderIdentity !== this.identity) return;
      const now = microTime();
      // As client-go: no holder, a 1 s duration, so a candidate that never saw this record does not wait either.
      const { holderIdentity: _h, ...spec } = lease.spec;
      const released = { ...lease, spec: { ...spec, leaseDurationSeconds: 1, acquireTime: now, renewTime: now } };
      this.#observe(await this.#update(released, signal));
      this.#opts.log(`${this.#what}: released by ${this.identity}`);
    } catch (e) {
      if (isKubeError(e, 404) || isKubeError(e, 409)) return; // gone, or changed since: no longer ours to release
      this.#opts.log(`${this.#what}: release failed: ${(e as Error).message}`);
    }
  }

  #failed(e: unknown): void {
    this.#failures++;
    // The same answer to a get and to an update (403 Forbidden, say) is one problem: keyed by status and reason.
    const key = e instanceof KubeApiError ? `${e.status} ${e.reason}` : (e as Error).message;
    if (key === this.#lastError) return;
    this.#lastError = key;
    this.#opts.log(`${this.#what}: ${(e as Error).message} (retrying; repeats are not logged)`);
  }

  #recovered(): void {
    if (this.#lastError === undefined) return;
    this.#opts.log(`${this.#what}: reachable again after ${this.#failures} failed tries`);
    this.#lastError = undefined;
    this.#failures = 0;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
