// Host names of the AI providers Sluice scores (xds/llm-health.ts): their cluster is EDS, and an EDS endpoint is an
// address, so Sluice resolves the names Envoy's STRICT_DNS cluster resolved before, as it did:
//
// - getaddrinfo (node:dns lookup: /etc/hosts, then DNS), IPv4 when the name has any, else IPv6 (Envoy's default
//   lookup family, V4_PREFERRED); an IP literal is used as it is;
// - every name re-resolved every `refreshMs` (default 5 s, Envoy's `dns_refresh_rate`; getaddrinfo gives no TTL, and
//   Envoy does not follow TTLs by default either); a change republishes the snapshots;
// - a failed lookup keeps the last addresses (Envoy keeps its hosts too); a name never resolved has no endpoint yet,
//   and its provider is skipped by the load balancer rather than sent to a name Envoy cannot read.
//
// Only names in the current translation are tracked: `track` forgets the rest with their timers.

import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { clone } from "@bufbuild/protobuf";
import { type LbEndpoint, LbEndpointSchema } from "../gen/envoy/config/endpoint/v3/endpoint_components_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../gen/envoy/config/endpoint/v3/endpoint_pb.js";

/** Addresses of a host name (the default: getaddrinfo, every family). */
export type Resolve = (host: string) => Promise<readonly { readonly address: string; readonly family: number }[]>;

const DEFAULT_REFRESH_MS = 5000;
/** How long a publication waits for names it has never resolved (a slow resolver must not hold every config back). */
const FIRST_LOOKUP_WAIT_MS = 2000;

const systemResolve: Resolve = (host) => lookup(host, { all: true });

interface Host {
  addresses?: readonly string[];
  timer?: NodeJS.Timeout;
  /** Failure already logged (once until the next success). */
  warned?: boolean;
  /** The first lookup has ended. */
  settled?: boolean;
  /** A publication went out without waiting for the first lookup: its result is republished. */
  late?: boolean;
}

/** The host name of an endpoint's socket address, when it is not an IP literal. */
function hostOf(lb: LbEndpoint): string | undefined {
  const sa = lb.hostIdentifier.case === "endpoint" ? lb.hostIdentifier.value.address?.address : undefined;
  if (sa?.case !== "socketAddress" || isIP(sa.value.address) !== 0) return undefined;
  return sa.value.address;
}

export class ProviderDns {
  readonly #hosts = new Map<string, Host>();
  readonly #resolve: Resolve;
  readonly #refreshMs: number;
  readonly #onChange: () => void;
  readonly #log: (line: string) => void;
  readonly #firstWaitMs: number;

  constructor(
    opts: {
      resolve?: Resolve;
      refreshMs?: number;
      firstWaitMs?: number;
      onChange?: () => void;
      log?: (line: string) => void;
    } = {},
  ) {
    this.#firstWaitMs = opts.firstWaitMs ?? FIRST_LOOKUP_WAIT_MS;
    this.#resolve = opts.resolve ?? systemResolve;
    this.#refreshMs = opts.refreshMs ?? DEFAULT_REFRESH_MS;
    this.#onChange = opts.onChange ?? (() => {});
    this.#log = opts.log ?? (() => {});
  }

  /**
   * Tracks the host names of `assignments` (forgetting the others) and resolves once every new one has been looked
   * up, or after FIRST_LOOKUP_WAIT_MS.
   */
  async track(assignments: readonly ClusterLoadAssignment[]): Promise<void> {
    const names = new Set<string>();
    for (const a of assignments) {
      for (const l of a.endpoints) {
        for (const lb of l.lbEndpoints) {
          const h = hostOf(lb);
          if (h !== undefined) names.add(h);
        }
      }
    }
    for (const [name, h] of this.#hosts) {
      if (names.has(name)) continue;
      clearTimeout(h.timer);
      this.#hosts.delete(name);
    }
    const first: Host[] = [];
    const lookups: Promise<void>[] = [];
    for (const name of names) {
      if (this.#hosts.has(name)) continue;
      const h: Host = {};
      this.#hosts.set(name, h);
      first.push(h);
      lookups.push(this.#refresh(name, h, false));
    }
    if (first.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const wait = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#firstWaitMs);
    });
    await Promise.race([Promise.all(lookups), wait]);
    clearTimeout(timer);
    for (const h of first) if (h.settled !== true) h.late = true;
  }

  /** The addresses `host` resolves to now (undefined before its first lookup succeeded). */
  addresses(host: string): readonly string[] | undefined {
    return this.#hosts.get(host)?.addresses;
  }

  /** Looks `name` up, keeps its addresses, schedules the next lookup; `notify`: a change republishes. */
  async #refresh(name: string, h: Host, notify: boolean): Promise<void> {
    let next: readonly string[] | undefined;
    try {
      const all = await this.#resolve(name);
      const v4 = all.filter((a) => a.family === 4);
      next = [...new Set((v4.length > 0 ? v4 : all).map((a) => a.address))].sort();
      if (next.length === 0) throw new Error("no address");
      h.warned = false;
    } catch (e) {
      if (h.warned !== true) this.#log(`health: cannot resolve provider host ${name}: ${(e as Error).message}`);
      h.warned = true;
      next = undefined;
    }
    // Forgotten meanwhile (track): no timer, no change.
    if (this.#hosts.get(name) !== h) return;
    const changed = next !== undefined && next.join(",") !== (h.addresses ?? []).join(",");
    if (next !== undefined) h.addresses = next;
    h.timer = setTimeout(() => void this.#refresh(name, h, true), this.#refreshMs);
    h.timer.unref();
    h.settled = true;
    const republish = changed && (notify || h.late === true);
    h.late = false;
    if (republish) this.#onChange();
  }

  /**
   * `assignments` with each host-name endpoint replaced by one endpoint per address it resolves to (metadata, health
   * and the host name kept); a name not resolved yet has none. Assignments without host names are the same objects.
   */
  overlay(assignments: readonly ClusterLoadAssignment[]): ClusterLoadAssignment[] {
    return assignments.map((a) => {
      if (!a.endpoints.some((l) => l.lbEndpoints.some((lb) => hostOf(lb) !== undefined))) return a;
      const out = clone(ClusterLoadAssignmentSchema, a);
      for (const l of out.endpoints) {
        l.lbEndpoints = l.lbEndpoints.flatMap((lb) => {
          const host = hostOf(lb);
          if (host === undefined) return [lb];
          return (this.addresses(host) ?? []).map((address) => {
            const copy = clone(LbEndpointSchema, lb);
            const sa = copy.hostIdentifier.case === "endpoint" ? copy.hostIdentifier.value.address?.address : undefined;
            if (sa?.case === "socketAddress") sa.value.address = address;
            return copy;
          });
        });
      }
      return out;
    });
  }

  /** Stops every timer (server shutdown). */
  close(): void {
    for (const h of this.#hosts.values()) clearTimeout(h.timer);
    this.#hosts.clear();
  }
}
