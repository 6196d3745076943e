// Backend policy `health` scored by Sluice, per endpoint of each cluster that has it (xds/backend-health.ts): the
// spec's "Backend health behavior" table as a small state machine per endpoint, driven by the responses the cluster's
// upstream ext_proc reports (src/health/service.ts), and applied through that cluster's EDS.
//
// - health: an EWMA in 0..100 of the responses (healthy 100, unhealthy 0), weight EWMA_ALPHA on the newest, from 100;
// - an unhealthy response evicts when `consecutiveFailures` are reached, or health falls below `healthThreshold`
//   (either suffices when both are set; a single unhealthy response when neither is);
// - the n-th eviction of an endpoint lasts n × `duration` (at most MAX_EJECTION_MS, as Envoy's max_ejection_time, or
//   `duration` when longer); a timer returns it with `restoreHealth`, or the health it held when evicted;
// - responses while evicted (requests already under way) change nothing;
// - evicted endpoints are marked UNHEALTHY in the cluster's ClusterLoadAssignment (`overlay`); when all are, Envoy's
//   panic mode (threshold 1 %, xds/cluster.ts) balances over all of them: the spec's fallback.
//
// An AI cluster (xds/llm-health.ts) is scored per provider: its endpoints' key is the provider their metadata names
// (every address of the provider shares it), and a provider's own `health` (cfg.providers) replaces the cluster's.
//
// Only endpoints the current translation names are kept: `configure` drops the rest, so the map stays bounded by the
// configuration, whatever addresses the ext_proc reports.

import { clone } from "@bufbuild/protobuf";
import { HealthStatus } from "../gen/envoy/config/core/v3/health_check_pb.js";
import type { LbEndpoint } from "../gen/envoy/config/endpoint/v3/endpoint_components_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import type { HealthScoreIR } from "../translate/ir.js";
import { LLM_METADATA_NAMESPACE } from "../translate/llm/table.js";

/** Weight of the newest response in the health score (also the LLM model health's, extproc/llm/models/health.ts). */
export const EWMA_ALPHA = 0.3;
/** Longest eviction, as Envoy's outlier detection's default max_ejection_time. */
export const MAX_EJECTION_MS = 300_000;
/** The stage metadata value of the health ext_proc (LLM_STAGE_METADATA), and the metadata naming the cluster. */
export const HEALTH_STAGE = "health";
export const HEALTH_CLUSTER_METADATA = "x-sluice-health-cluster";
/** The cluster's scoring (HealthScoreIR, base64url of JSON), in the same metadata: read back from the xDS (service.ts). */
export const HEALTH_SPEC_METADATA = "x-sluice-health";

export function encodeHealthScore(h: HealthScoreIR): string {
  return Buffer.from(JSON.stringify(h)).toString("base64url");
}

/** The scoring of a filter's metadata, or undefined when malformed. */
export function decodeHealthScore(text: string): HealthScoreIR | undefined {
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString()) as HealthScoreIR;
    return typeof v === "object" && v !== null && typeof v.durationMs === "number" ? v : undefined;
  } catch {
    return undefined;
  }
}

export interface EndpointHealthState {
  readonly health: number;
  readonly consecutiveFailures: number;
  /** Evictions so far. */
  readonly evictions: number;
  /** Clock time the eviction ends; 0 = in rotation. */
  readonly evictedUntil: number;
}

interface Tracked {
  state: EndpointHealthState;
  timer?: NodeJS.Timeout;
}

interface ClusterHealth {
  cfg: HealthScoreIR;
  readonly endpoints: Map<string, Tracked>;
}

const FRESH: EndpointHealthState = { health: 100, consecutiveFailures: 0, evictions: 0, evictedUntil: 0 };

/** `address:port` as Envoy's `upstream.address` attribute gives it (IPv6 in brackets). */
export function endpointKey(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}

/** The key of an AI provider's endpoints: the provider's name, prefixed so it never reads as an address. */
export function providerKey(provider: string): string {
  return `provider:${provider}`;
}

/** The scoring key of an endpoint of an assignment: its AI provider's, else its address's; undefined without either. */
export function lbEndpointKey(lb: LbEndpoint): string | undefined {
  const provider = lb.metadata?.filterMetadata[LLM_METADATA_NAMESPACE]?.["provider"];
  if (typeof provider === "string") return providerKey(provider);
  const sa = lb.hostIdentifier.case === "endpoint" ? lb.hostIdentifier.value.address?.address : undefined;
  if (sa?.case !== "socketAddress") return undefined;
  return endpointKey(sa.value.address, sa.value.portSpecifier.case === "portValue" ? sa.value.portSpecifier.value : 0);
}

/** The scoring of `key` in a cluster scored with `cfg`: an AI provider's own, else the cluster's. */
export function scoringFor(cfg: HealthScoreIR, key: string): HealthScoreIR {
  return key.startsWith("provider:") ? (cfg.providers?.[key.slice("provider:".length)] ?? cfg) : cfg;
}

export class EndpointHealth {
  readonly #clusters = new Map<string, ClusterHealth>();
  readonly #now: () => number;
  readonly #onChange: () => void;

  /** `onChange`: called when an endpoint is evicted or returns (the snapshots need republishing). */
  constructor(opts: { onChange?: () => void; now?: () => number } = {}) {
    this.#now = opts.now ?? Date.now;
    this.#onChange = opts.onChange ?? (() => {});
  }

  /**
   * The clusters scored now, each with its configuration and endpoint keys. Clusters and endpoints not named are
   * forgotten (their timers stopped); a changed configuration applies from the next response.
   */
  configure(clusters: ReadonlyMap<string, { readonly cfg: HealthScoreIR; readonly endpoints: readonly string[] }>) {
    let changed = false;
    for (const [name, c] of this.#clusters) {
      const next = clusters.get(name);
      for (const [key, t] of c.endpoints) {
        if (next?.endpoints.includes(key)) continue;
        if (t.timer !== undefined) clearTimeout(t.timer);
        if (t.state.evictedUntil !== 0) changed = true;
        c.endpoints.delete(key);
      }
      if (next === undefined) this.#clusters.delete(name);
    }
    for (const [name, next] of clusters) {
      const c = this.#clusters.get(name);
      if (c === undefined) {
        this.#clusters.set(name, {
          cfg: next.cfg,
          endpoints: new Map(next.endpoints.map((k) => [k, { state: FRESH }])),
        });
        continue;
      }
      c.cfg = next.cfg;
      for (const k of next.endpoints) if (!c.endpoints.has(k)) c.endpoints.set(k, { state: FRESH });
    }
    if (changed) this.#onChange();
  }

  /** The configuration of a scored cluster. */
  config(cluster: string): HealthScoreIR | undefined {
    return this.#clusters.get(cluster)?.cfg;
  }

  state(cluster: string, endpoint: string): EndpointHealthState | undefined {
    return this.#clusters.get(cluster)?.endpoints.get(endpoint)?.state;
  }

  /** Endpoints tracked, over all clusters (tests check the bound). */
  get size(): number {
    let n = 0;
    for (const c of this.#clusters.values()) n += c.endpoints.size;
    return n;
  }

  /** One response of `endpoint` in `cluster`, judged healthy or not; unknown clusters and endpoints are ignored. */
  record(cluster: string, endpoint: string, unhealthy: boolean): void {
    const c = this.#clusters.get(cluster);
    const t = c?.endpoints.get(endpoint);
    if (c === undefined || t === undefined) return;
    const s = t.state;
    if (s.evictedUntil !== 0) return;
    if (!unhealthy) {
      t.state = { ...s, health: ewma(s.health, 100), consecutiveFailures: 0 };
      return;
    }
    const health = ewma(s.health, 0);
    const consecutiveFailures = s.consecutiveFailures + 1;
    const cfg = scoringFor(c.cfg, endpoint);
    const { consecutiveFailures: cf, healthThreshold: threshold } = cfg;
    const evict =
      (cf === undefined && threshold === undefined) ||
      (cf !== undefined && consecutiveFailures >= cf) ||
      (threshold !== undefined && health < threshold);
    if (!evict) {
      t.state = { ...s, health, consecutiveFailures };
      return;
    }
    const evictions = s.evictions + 1;
    const base = cfg.durationMs;
    const ms = Math.min(base * evictions, Math.max(MAX_EJECTION_MS, base));
    t.state = { health, consecutiveFailures: 0, evictions, evictedUntil: this.#now() + ms };
    t.timer = setTimeout(() => this.#restore(cluster, endpoint, t), ms);
    t.timer.unref();
    this.#onChange();
  }

  #restore(cluster: string, endpoint: string, t: Tracked): void {
    // Forgotten meanwhile (configure): nothing to return.
    if (this.#clusters.get(cluster)?.endpoints.get(endpoint) !== t) return;
    const all = this.#clusters.get(cluster)?.cfg;
    const cfg = all === undefined ? undefined : scoringFor(all, endpoint);
    delete t.timer;
    t.state = { ...t.state, health: cfg?.restoreHealth ?? t.state.health, evictedUntil: 0 };
    this.#onChange();
  }

  /** Keys of the endpoints of `cluster` evicted now. */
  evicted(cluster: string): string[] {
    const c = this.#clusters.get(cluster);
    if (c === undefined) return [];
    return [...c.endpoints].filter(([, t]) => t.state.evictedUntil !== 0).map(([k]) => k);
  }

  /** `endpoints` with each evicted endpoint of a scored cluster marked UNHEALTHY (others are the same objects). */
  overlay(endpoints: readonly ClusterLoadAssignment[]): ClusterLoadAssignment[] {
    return endpoints.map((cla) => {
      const evicted = new Set(this.evicted(cla.clusterName));
      if (evicted.size === 0) return cla;
      const out = clone(ClusterLoadAssignmentSchema, cla);
      for (const locality of out.endpoints) {
        for (const lb of locality.lbEndpoints) {
          const key = lbEndpointKey(lb);
          if (key !== undefined && evicted.has(key)) lb.healthStatus = HealthStatus.UNHEALTHY;
        }
      }
      return out;
    });
  }

  /** Stops every timer (server shutdown). */
  close(): void {
    for (const c of this.#clusters.values()) for (const t of c.endpoints.values()) clearTimeout(t.timer);
    this.#clusters.clear();
  }
}

function ewma(current: number, sample: number): number {
  return current + EWMA_ALPHA * (sample - current);
}
