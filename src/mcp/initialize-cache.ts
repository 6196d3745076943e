// The answer to a client's `initialize` on a Stateless backend, cached (docs/mcp.md, "Stateless initialize"). Such an
// initialize starts no session anyone keeps: Sluice started and ended a session at every target only to merge their
// capabilities. The merged answer is kept per backend configuration and key (what the targets would see: protocol
// version, capabilities, clientInfo) for a short age, and refreshed in the background once half of it has passed.

import type { McpBackendEntry } from "../translate/mcp/table.js";
import { backendFingerprint, mints, type SpareTemplate, spareKey } from "./spare-pool.js";

export interface InitializeCacheOptions {
  /** 0: no cache. */
  readonly maxAgeMs: number;
  readonly maxEntries: number;
}

export const INITIALIZE_CACHE_DEFAULTS: InitializeCacheOptions = { maxAgeMs: 30_000, maxEntries: 256 };

/** `SLUICE_MCP_INITIALIZE_CACHE_MS`: the age (0 or `off`: none). */
export function initializeCacheOptionsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): InitializeCacheOptions {
  const v = (env["SLUICE_MCP_INITIALIZE_CACHE_MS"] ?? "").trim().toLowerCase();
  if (v === "") return INITIALIZE_CACHE_DEFAULTS;
  const n = Number(v);
  return { ...INITIALIZE_CACHE_DEFAULTS, maxAgeMs: v === "off" || !Number.isFinite(n) || n < 0 ? 0 : n };
}

/** Computes a fresh answer: the targets initialized and their sessions ended; `complete` when no target failed. */
export type Initializer = (
  entry: McpBackendEntry,
  params: Record<string, unknown> | undefined,
) => Promise<{ result: Record<string, unknown>; complete: boolean }>;

interface Cached {
  readonly result: Record<string, unknown>;
  readonly at: number;
  refreshing: boolean;
}

export class InitializeCache {
  readonly #opts: InitializeCacheOptions;
  readonly #compute: Initializer;
  readonly #log: (line: string) => void;
  /** By backend fingerprint and key; Map order is recency (a hit moves its entry last). */
  readonly #entries = new Map<string, Cached>();
  readonly counters = { hits: 0, misses: 0, refreshes: 0 };

  constructor(opts: InitializeCacheOptions, compute: Initializer, log: (line: string) => void) {
    this.#opts = opts;
    this.#compute = compute;
    this.#log = log;
  }

  get size(): number {
    return this.#entries.size;
  }

  /**
   * The answer for this initialize. Cached only when every target answered (a target that failed shows at once when
   * it is back) and never for a backend whose credentials are minted from the client's token (the answer would be one
   * client's). Errors are not cached.
   */
  async result(entry: McpBackendEntry, params: Record<string, unknown> | undefined): Promise<Record<string, unknown>> {
    if (this.#opts.maxAgeMs <= 0 || mints(entry)) return (await this.#compute(entry, params)).result;
    // The key of what the targets would see; the template the session would be started with tells it.
    const template = templateOf(params);
    const id = `${backendFingerprint(entry)}\0${spareKey(entry, template)}`;
    const hit = this.#entries.get(id);
    const now = Date.now();
    if (hit !== undefined && now - hit.at < this.#opts.maxAgeMs) {
      this.counters.hits++;
      this.#entries.delete(id);
      this.#entries.set(id, hit);
      if (now - hit.at > this.#opts.maxAgeMs / 2 && !hit.refreshing) {
        hit.refreshing = true;
        this.counters.refreshes++;
        this.#fill(entry, params, id).catch((e: unknown) => {
          hit.refreshing = false;
          this.#log(`sluice mcp: ${entry.backend}: refreshing the initialize answer: ${(e as Error).message}`);
        });
      }
      return hit.result;
    }
    this.counters.misses++;
    return this.#fill(entry, params, id);
  }

  async #fill(entry: McpBackendEntry, params: Record<string, unknown> | undefined, id: string) {
    const fresh = await this.#compute(entry, params);
    if (fresh.complete) {
      this.#entries.delete(id);
      this.#entries.set(id, { result: fresh.result, at: Date.now(), refreshing: false });
      while (this.#entries.size > this.#opts.maxEntries)
        this.#entries.delete(this.#entries.keys().next().value as string);
    } else {
      this.#entries.delete(id);
    }
    return fresh.result;
  }

  /** A new configuration: answers of backends gone or changed are dropped (their fingerprint is no longer asked). */
  retain(entries: ReadonlyMap<string, McpBackendEntry>): void {
    const live = new Set([...entries.values()].map((e) => backendFingerprint(e)));
    for (const id of [...this.#entries.keys()]) if (!live.has(id.slice(0, id.indexOf("\0")))) this.#entries.delete(id);
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** What McpSession.initialize would make of these params (version, capabilities, clientInfo), for the key. */
function templateOf(params: Record<string, unknown> | undefined): SpareTemplate {
  const v = params?.["protocolVersion"];
  const info = params?.["clientInfo"];
  return {
    protocolVersion: typeof v === "string" ? v : "",
    capabilities: isRecord(params?.["capabilities"]) ? params["capabilities"] : {},
    clientInfo: isRecord(info)
      ? { name: String(info["name"] ?? "client"), version: String(info["version"] ?? "0") }
      : undefined,
  };
}
