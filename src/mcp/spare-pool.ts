// Spare target sessions started ahead (docs/mcp.md, "Spare target sessions"): after a client's session over a Stateful
// backend is initialized, one set of target sessions is started in the background with exactly what that client's
// initialize sent the targets (protocol version, capabilities, clientInfo, and the credential its requests carry), its
// notifications/initialized held. The next client whose initialize would send the targets the same adopts the set: the
// targets see the messages they see today, only earlier, and the client's wait is Sluice's hop alone.
//
// Bounded: one set per (backend, key), a few keys per backend and a few sets in all (least recently wanted evicted),
// each DELETEd at its targets after an idle age, when its backend's configuration changes, and at shutdown.

import { createHash } from "node:crypto";
import { connect as tcpConnect } from "node:net";
import type { McpBackendEntry } from "../translate/mcp/table.js";
import { ErrorCodes, RpcError } from "./jsonrpc.js";
import { pooledConnectionOpen, withClientHeaders } from "./target-connection.js";
import { targetEvicted } from "./target-health.js";
import { TargetConnection, type TargetHooks } from "./upstream.js";

export interface SparePoolOptions {
  /** Off: every client initialize starts its target sessions itself, as before. */
  readonly enabled: boolean;
  /** A ready set no client adopted within this long is DELETEd at its targets. */
  readonly idleMs: number;
  /** Distinct keys (client kinds) with a set, per backend. */
  readonly maxKeysPerBackend: number;
  /** Sets in all, every backend together. */
  readonly maxSets: number;
  /** After a set failed to start, no other is started for its key for this long. */
  readonly retryMs: number;
  /**
   * What is checked of a set when a client adopts it. `connect`: each target still accepts a TCP connection (its
   * kernel answers; the target's process need not run), and the held notifications/initialized go out after the
   * client's answer, as for a session started anew. `session`: each target answers the held notifications/initialized
   * before the client is answered (which proves its session is still there, at one round trip to every target).
   */
  readonly check: "connect" | "session";
  /**
   * How long after it is asked for a set starts: the client just answered is still finishing its own start (its
   * notifications/initialized, its GET stream), and 8 target initializes at that moment would share the CPU with it.
   * A client wanting the set before then starts it at once.
   */
  readonly startDelayMs: number;
}

export const SPARE_DEFAULTS: SparePoolOptions = {
  enabled: true,
  idleMs: 60_000,
  maxKeysPerBackend: 4,
  maxSets: 64,
  retryMs: 5_000,
  check: "connect",
  startDelayMs: 100,
};

/** Longest wait for a target's TCP handshake (`connect`) or its answer to notifications/initialized (`session`). */
const PROBE_MS = 1_000;
const CONFIRM_MS = 5_000;

/** Whether something accepts TCP connections at the URL's host and port (opened and closed at once). */
function reachable(url: string, timeoutMs: number): Promise<void> {
  const u = new URL(url);
  const port = Number(u.port || (u.protocol === "https:" ? 443 : 80));
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no TCP handshake with ${host}:${port} in ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.destroy();
      resolve();
    });
    socket.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`${host}:${port}: ${e.message}`));
    });
  });
}

function positive(v: string | undefined, fallback: number): number {
  const n = Number(v);
  return v !== undefined && v !== "" && Number.isFinite(n) && n > 0 ? n : fallback;
}

/**
 * From the environment: `SLUICE_MCP_SPARE_SESSIONS=off` (or `0`, `false`) turns spares off; `SLUICE_MCP_SPARE_IDLE_MS`,
 * `SLUICE_MCP_SPARE_KEYS` (per backend) and `SLUICE_MCP_SPARE_SETS` (in all) bound them; `SLUICE_MCP_SPARE_CHECK`
 * (`connect` or `session`) says what is checked at adoption.
 */
export function spareOptionsFromEnv(env: Readonly<Record<string, string | undefined>>): SparePoolOptions {
  const flag = (env["SLUICE_MCP_SPARE_SESSIONS"] ?? "").trim().toLowerCase();
  return {
    enabled: !["off", "0", "false", "no"].includes(flag),
    idleMs: positive(env["SLUICE_MCP_SPARE_IDLE_MS"], SPARE_DEFAULTS.idleMs),
    maxKeysPerBackend: positive(env["SLUICE_MCP_SPARE_KEYS"], SPARE_DEFAULTS.maxKeysPerBackend),
    maxSets: positive(env["SLUICE_MCP_SPARE_SETS"], SPARE_DEFAULTS.maxSets),
    retryMs: SPARE_DEFAULTS.retryMs,
    check: (env["SLUICE_MCP_SPARE_CHECK"] ?? "").trim().toLowerCase() === "session" ? "session" : "connect",
    startDelayMs: SPARE_DEFAULTS.startDelayMs,
  };
}

/** What a client's initialize sends each target: the key of the spare sets it may adopt. */
export interface SpareTemplate {
  readonly protocolVersion: string;
  readonly capabilities: Record<string, unknown>;
  readonly clientInfo: { readonly name: string; readonly version: string } | undefined;
  /** The client request's headers: a credential minted from its token is part of what the targets see. */
  readonly headers?: ReadonlyMap<string, string> | undefined;
}

export function mints(entry: McpBackendEntry): boolean {
  return entry.targets.some((t) => t.connection?.minted !== undefined);
}

/**
 * The key of a template for a backend: a SHA-256 over what the targets would see, the client's `authorization` header
 * included where a target's credential is minted from it (never kept or logged in clear).
 */
export function spareKey(entry: McpBackendEntry, t: SpareTemplate): string {
  const h = createHash("sha256");
  h.update(JSON.stringify([t.protocolVersion, t.capabilities, t.clientInfo ?? null]));
  if (mints(entry)) h.update(`\0${t.headers?.get("authorization") ?? ""}`);
  return h.digest("base64url");
}

const fingerprints = new WeakMap<McpBackendEntry, string>();

/**
 * What of a backend's configuration its target sessions depend on (targets, URLs, connection policies, credentials;
 * hashed, since policies carry secrets): a set is adopted only under the configuration it was started with.
 */
export function backendFingerprint(entry: McpBackendEntry): string {
  let f = fingerprints.get(entry);
  if (f === undefined) {
    f = createHash("sha256")
      .update(JSON.stringify([entry.key, entry.targets, entry.unresolved, entry.failureMode]))
      .digest("base64url");
    fingerprints.set(entry, f);
  }
  return f;
}

/** Whether a backend's sessions can come from spares: Stateful, and every target Streamable HTTP. */
export function spareable(entry: McpBackendEntry): boolean {
  return (
    entry.sessionRouting === "Stateful" &&
    entry.targets.length > 0 &&
    entry.targets.every((t) => t.protocol === "StreamableHTTP")
  );
}

/**
 * The hooks of a spare's target connections: nobody's until a session adopts the set. Before that a target has no
 * client to send requests to (it refuses them) and its notifications have nowhere to go.
 */
export class HookRelay implements TargetHooks {
  #to: TargetHooks | undefined;
  readonly #log: (line: string) => void;
  constructor(log: (line: string) => void) {
    this.#log = log;
  }
  bind(to: TargetHooks): void {
    this.#to = to;
  }
  readonly onRequest = (target: string, method: string, params: Record<string, unknown> | undefined) =>
    this.#to !== undefined
      ? this.#to.onRequest(target, method, params)
      : Promise.reject(new RpcError(ErrorCodes.InternalError, `no client yet for ${method}`));
  readonly onNotification = (target: string, method: string, params: Record<string, unknown> | undefined) => {
    this.#to?.onNotification(target, method, params);
  };
  readonly log = (line: string) => {
    (this.#to?.log ?? this.#log)(line);
  };
  readonly observe = (target: string, method: string, ok: boolean, ms: number) => {
    this.#to?.observe?.(target, method, ok, ms);
  };
}

/** One set of spare target sessions, one per target of the backend. */
export interface SpareSet {
  readonly backend: string;
  readonly fingerprint: string;
  readonly key: string;
  readonly connections: ReadonlyMap<string, TargetConnection>;
  readonly relay: HookRelay;
}

interface Slot {
  readonly backend: string;
  readonly fingerprint: string;
  readonly key: string;
  state: "starting" | "ready";
  set?: SpareSet;
  /** Last time a client's initialize asked for this key (least recently wanted is evicted first). */
  wanted: number;
  timer?: NodeJS.Timeout | undefined;
  /** Set when the slot was dropped while starting: its set is discarded as soon as it is up. */
  dropped?: boolean;
  /** Taken by a client's initialize (while starting, it waits for `done`): no longer the pool's. */
  claimed?: boolean;
  /** Settles when the set is up or failed. */
  readonly done: Promise<void>;
  settle: () => void;
  /** Starts the set now if its delayed start has not begun (once). */
  begin?: (() => void) | undefined;
}

export interface SpareCounters {
  started: number;
  ready: number;
  adopted: number;
  /** A ready set whose confirmation failed at adoption (a target died or lost the session). */
  refused: number;
  /** Sets that failed to start (a target failed). */
  failed: number;
  /** Sets DELETEd at their targets unadopted: idle, evicted, configuration changed, shutdown. */
  discarded: number;
}

type Connect = typeof TargetConnection.connect;

export class SparePool {
  readonly options: SparePoolOptions;
  readonly #log: (line: string) => void;
  readonly #connect: Connect;
  /** By `backend \0 key`, in insertion order. */
  readonly #slots = new Map<string, Slot>();
  /** Keys whose last set failed to start, until when no other is tried. */
  readonly #backoff = new Map<string, number>();
  readonly #closing = new Set<Promise<void>>();
  readonly #starting = new Set<Promise<void>>();
  #closed = false;
  readonly counters: SpareCounters = { started: 0, ready: 0, adopted: 0, refused: 0, failed: 0, discarded: 0 };

  constructor(options: SparePoolOptions, log: (line: string) => void, connect: Connect = TargetConnection.connect) {
    this.options = options;
    this.#log = log;
    this.#connect = (o, h) => connect.call(TargetConnection, o, h);
  }

  /** Sets held now (starting or ready), every backend together. */
  get size(): number {
    return this.#slots.size;
  }

  /** The slots of a backend, for tests and metrics: key and state. */
  held(backend?: string): { backend: string; key: string; state: "starting" | "ready" }[] {
    return [...this.#slots.values()]
      .filter((s) => backend === undefined || s.backend === backend)
      .map((s) => ({ backend: s.backend, key: s.key, state: s.state }));
  }

  /**
   * The set for this backend (as configured now) and key, taken out of the pool: a ready one at once; one still starting
   * once it is up (it was started earlier than a new one would be, and the targets' work is not done twice). Undefined
   * when there is none, it failed to start, or it was started under another configuration.
   */
  async take(entry: McpBackendEntry, key: string): Promise<SpareSet | undefined> {
    if (!this.options.enabled || !spareable(entry)) return undefined;
    const id = `${entry.key}\0${key}`;
    const slot = this.#slots.get(id);
    if (slot === undefined) return undefined;
    slot.wanted = Date.now();
    if (slot.fingerprint !== backendFingerprint(entry)) {
      this.#drop(slot);
      return undefined;
    }
    clearTimeout(slot.timer);
    this.#slots.delete(id);
    slot.claimed = true;
    slot.begin?.();
    if (slot.state === "starting") await slot.done;
    if (slot.set === undefined || slot.dropped === true) return undefined;
    this.counters.adopted++;
    return slot.set;
  }

  /**
   * Why a taken set must not be adopted (empty: it may be): a target whose spare connection failed or closed, one its
   * health policy evicted since, one that no longer accepts connections (`connect`; a target reached through a CONNECT proxy is not probed, the proxy would
   * answer), or one that did not accept its notifications/initialized (`session`).
   */
  async check(set: SpareSet, entry: McpBackendEntry): Promise<string[]> {
    const conns = [...set.connections.entries()];
    const results = await Promise.allSettled(
      conns.map(([name, c]) => {
        if (c.closed || c.failure !== undefined) return Promise.reject(new Error(c.failure ?? "its connection closed"));
        const connection = entry.targets.find((t) => t.name === name)?.connection;
        // Evicted by its health policy since the set started: a session started now would not reach it either.
        const evicted = targetEvicted(connection?.health);
        if (evicted !== undefined) return Promise.reject(new Error(evicted));
        if (this.options.check === "session") return c.confirm(CONFIRM_MS);
        if (connection?.proxy !== undefined) return Promise.resolve();
        // A kept-alive connection to the target still open says as much as a new one would, without waking it.
        return pooledConnectionOpen(new URL(c.url), connection) ? Promise.resolve() : reachable(c.url, PROBE_MS);
      }),
    );
    return results.flatMap((r, i) =>
      r.status === "rejected" ? [`target ${conns[i]?.[0]}: ${(r.reason as Error).message}`] : [],
    );
  }

  /** A taken set that failed its check: DELETEd at the targets that still answer. */
  refuse(set: SpareSet, why: string): void {
    this.counters.refused++;
    this.#log(`sluice mcp: ${set.backend}: a spare session set was not adopted (${why}); starting sessions anew`);
    this.#discard(set);
  }

  /**
   * Starts a set for this backend and template in the background unless one is held (starting or ready) or the bounds
   * say no: per backend, the least recently wanted ready set makes room; in all, likewise; a key whose last set failed
   * waits `retryMs`.
   */
  refill(entry: McpBackendEntry, template: SpareTemplate, key = spareKey(entry, template)): void {
    if (!this.options.enabled || this.#closed || !spareable(entry)) return;
    const id = `${entry.key}\0${key}`;
    const now = Date.now();
    const held = this.#slots.get(id);
    if (held !== undefined) {
      held.wanted = now;
      if (held.fingerprint === backendFingerprint(entry)) return;
      this.#drop(held);
    }
    if ((this.#backoff.get(id) ?? 0) > now) return;
    this.#backoff.delete(id);
    const mine = [...this.#slots.values()].filter((s) => s.backend === entry.key);
    if (mine.length >= this.options.maxKeysPerBackend && !this.#evict(mine)) return;
    if (this.#slots.size >= this.options.maxSets && !this.#evict([...this.#slots.values()])) return;
    let settle = () => {};
    const done = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const slot: Slot = {
      backend: entry.key,
      fingerprint: backendFingerprint(entry),
      key,
      state: "starting",
      wanted: now,
      done,
      settle,
    };
    this.#slots.set(id, slot);
    this.counters.started++;
    slot.begin = () => {
      slot.begin = undefined;
      clearTimeout(slot.timer);
      slot.timer = undefined;
      if (slot.dropped === true) return slot.settle();
      const p = this.#start(entry, template, slot, id)
        .catch((e: unknown) => {
          this.#log(`sluice mcp: ${entry.backend}: spare sessions: ${(e as Error).message}`);
        })
        .finally(() => slot.settle());
      this.#starting.add(p);
      void p.finally(() => this.#starting.delete(p));
    };
    if (this.options.startDelayMs <= 0) slot.begin();
    else {
      slot.timer = setTimeout(() => slot.begin?.(), this.options.startDelayMs);
      slot.timer.unref();
    }
  }

  /** Drops the least recently wanted ready slot of `among`; false when all of them are still starting. */
  #evict(among: readonly Slot[]): boolean {
    const victim = among.filter((s) => s.state === "ready").sort((a, b) => a.wanted - b.wanted)[0];
    if (victim === undefined) return false;
    this.#drop(victim);
    return true;
  }

  async #start(entry: McpBackendEntry, t: SpareTemplate, slot: Slot, id: string): Promise<void> {
    const relay = new HookRelay(this.#log);
    const results = await withClientHeaders(t.headers, () =>
      Promise.allSettled(
        entry.targets.map((target) =>
          this.#connect(
            {
              name: target.name,
              url: target.urls[0] as string,
              protocol: target.protocol,
              capabilities: t.capabilities,
              ...(t.clientInfo !== undefined ? { clientInfo: t.clientInfo } : {}),
              ...(target.connection !== undefined ? { connection: target.connection } : {}),
            },
            relay,
          ),
        ),
      ),
    );
    const connections = new Map<string, TargetConnection>();
    const failures: string[] = [];
    results.forEach((r, i) => {
      const name = entry.targets[i]?.name ?? String(i);
      if (r.status === "fulfilled") connections.set(name, r.value);
      else failures.push(`target ${name}: ${(r.reason as Error).message}`);
    });
    const set: SpareSet = { backend: entry.key, fingerprint: slot.fingerprint, key: slot.key, connections, relay };
    if (failures.length > 0) {
      // A set missing a target is never adopted: the client's own initialize meets the failure as it always did.
      this.counters.failed++;
      if (this.#slots.get(id) === slot) this.#slots.delete(id);
      this.#backoff.set(id, Date.now() + this.options.retryMs);
      if (this.#backoff.size > 1024) this.#backoff.delete(this.#backoff.keys().next().value as string);
      this.#discard(set);
      return;
    }
    if (slot.dropped === true || (slot.claimed !== true && (this.#closed || this.#slots.get(id) !== slot))) {
      this.#discard(set);
      return;
    }
    slot.state = "ready";
    slot.set = set;
    this.counters.ready++;
    if (slot.claimed === true) return;
    slot.timer = setTimeout(() => this.#drop(slot), this.options.idleMs);
    slot.timer.unref();
  }

  #drop(slot: Slot): void {
    clearTimeout(slot.timer);
    const id = `${slot.backend}\0${slot.key}`;
    if (this.#slots.get(id) === slot) this.#slots.delete(id);
    slot.dropped = true;
    // Not started yet: nothing at the targets; whoever waits for it hears it is gone.
    if (slot.begin !== undefined) slot.begin();
    if (slot.set !== undefined) this.#discard(slot.set);
  }

  #discard(set: SpareSet): void {
    this.counters.discarded++;
    const p = Promise.all([...set.connections.values()].map((c) => c.discard())).then(() => undefined);
    this.#closing.add(p);
    void p.finally(() => this.#closing.delete(p));
  }

  /** A new configuration: sets of backends no longer served, or served with other targets or policies, are DELETEd. */
  retain(entries: ReadonlyMap<string, McpBackendEntry>): void {
    for (const slot of [...this.#slots.values()]) {
      const e = entries.get(slot.backend);
      if (e === undefined || !this.options.enabled || !spareable(e) || backendFingerprint(e) !== slot.fingerprint) {
        this.#drop(slot);
      }
    }
  }

  /** Shutdown: every set DELETEd at its targets (those still starting once they are up), awaited. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const slot of [...this.#slots.values()]) this.#drop(slot);
    await Promise.all([...this.#starting]);
    await Promise.all([...this.#closing]);
  }
}
