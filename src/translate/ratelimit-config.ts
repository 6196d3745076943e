// The configuration of envoyproxy/ratelimit (the reference rate limit service, Redis-backed) for the descriptors that
// GwPolicies' `traffic.rateLimit.global` make Envoy send. A GwPolicy names the domain and the descriptor entries but
// no numbers: the numbers are the operator's, given per (domain, entry names) as `--limit` to
// `sluice ratelimit-config`. One YAML document per domain, in the service's file format: `domain`, then one nested
// `descriptors` level per entry, keyed by the entry's `name` and without a `value`, so that every distinct value of the
// entry (each user, each model) gets its own counter; the innermost level carries `rate_limit`.
//
// Envoy sends a `Tokens` descriptor twice, with 0 hits before the request and with the request's tokens once it is done
// (src/translate/xds/filters/global-ratelimit.ts); envoyproxy/ratelimit honours a per-descriptor hits_addend of 0 as a
// check that adds nothing, so the same entry counts requests or tokens by how Envoy sends it.

import { stringify } from "yaml";
import type { GwPolicy } from "../api/sluice.js";

/** The units envoyproxy/ratelimit reads (its RateLimitResponse.RateLimit.Unit, lower case). */
export const RATELIMIT_UNITS = ["second", "minute", "hour", "day", "week", "month", "year"] as const;
export type RateLimitUnit = (typeof RATELIMIT_UNITS)[number];

export interface ServiceLimit {
  readonly requestsPerUnit: number;
  readonly unit: RateLimitUnit;
}

/** A `--limit` value: `<domain>/<entry>[/<entry>...]=<n>/<unit>`. */
export interface LimitArg extends ServiceLimit {
  readonly domain: string;
  readonly entries: readonly string[];
}

/** Parses `<domain>/<entry>[/<entry>...]=<n>/<unit>`; throws naming what is wrong. */
export function parseLimitArg(text: string): LimitArg {
  const m = /^([^=]+)=(\d+)\/([a-z]+)$/.exec(text.trim());
  if (m === null) throw new Error(`--limit ${text}: expected <domain>/<entry>[/<entry>...]=<n>/<unit>`);
  const [domain, ...entries] = m[1]!.split("/");
  if (domain === undefined || domain === "" || entries.length === 0 || entries.some((e) => e === "")) {
    throw new Error(`--limit ${text}: expected a domain and at least one entry name, e.g. llm/user=1000/hour`);
  }
  const unit = m[3] as RateLimitUnit;
  if (!RATELIMIT_UNITS.includes(unit)) {
    throw new Error(`--limit ${text}: unit must be one of ${RATELIMIT_UNITS.join(", ")}`);
  }
  const n = Number(m[2]);
  if (!Number.isSafeInteger(n) || n > 0xffff_ffff) throw new Error(`--limit ${text}: ${m[2]} is above 4294967295`);
  return { domain, entries, requestsPerUnit: n, unit };
}

export interface RateLimitServiceConfig {
  /** YAML text per domain, in envoyproxy/ratelimit's file format. */
  readonly files: ReadonlyMap<string, string>;
  /** What the operator should know: descriptors without a limit, requests and tokens sharing one counter, unused limits. */
  readonly warnings: readonly string[];
}

interface Node {
  key: string;
  rate_limit?: { unit: string; requests_per_unit: number };
  descriptors?: Node[];
}

const chainKey = (domain: string, entries: readonly string[]) => `${domain}/${entries.join("/")}`;

/** envoyproxy/ratelimit's configuration for the global rate limits of `policies`, with the numbers of `limits`. */
export function rateLimitServiceConfig(
  policies: readonly GwPolicy[],
  limits: readonly LimitArg[],
): RateLimitServiceConfig {
  const warnings: string[] = [];
  const byChain = new Map(limits.map((l) => [chainKey(l.domain, l.entries), l]));
  const used = new Set<string>();
  // domain → chain → the units it is sent with and the first policy that sends it
  const chains = new Map<string, Map<string, { entries: string[]; units: Set<string>; from: string }>>();
  for (const p of policies) {
    const g = p.spec.traffic?.rateLimit?.global;
    if (g === undefined) continue;
    const name = `GwPolicy ${p.metadata.namespace ?? "default"}/${p.metadata.name}`;
    let domain = chains.get(g.domain);
    if (domain === undefined) {
      domain = new Map();
      chains.set(g.domain, domain);
    }
    g.descriptors.forEach((d, i) => {
      const entries = d.entries.map((e) => e.name);
      const key = chainKey(g.domain, entries);
      const chain = domain.get(key) ?? {
        entries,
        units: new Set<string>(),
        from: `${name}: spec.traffic.rateLimit.global.descriptors[${i}]`,
      };
      chain.units.add(d.unit ?? "Requests");
      domain.set(key, chain);
    });
  }
  const files = new Map<string, string>();
  for (const [domain, byKey] of [...chains].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const top: Node[] = [];
    for (const [key, chain] of [...byKey].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (chain.units.size > 1) {
        warnings.push(
          `${chain.from}: ${key} is sent as Requests by one descriptor and as Tokens by another; envoyproxy/ratelimit counts both in one counter (give the entries different names)`,
        );
      }
      const limit = byChain.get(key);
      if (limit === undefined) {
        warnings.push(`${chain.from}: no --limit ${key}=<n>/<unit>; written without a limit (the service allows it)`);
      } else used.add(key);
      let level = top;
      chain.entries.forEach((entry, j) => {
        let node = level.find((n) => n.key === entry);
        if (node === undefined) {
          node = { key: entry };
          level.push(node);
        }
        if (j === chain.entries.length - 1) {
          if (limit !== undefined) node.rate_limit = { unit: limit.unit, requests_per_unit: limit.requestsPerUnit };
        } else {
          node.descriptors ??= [];
          level = node.descriptors;
        }
      });
    }
    files.set(domain, stringify({ domain, descriptors: top }));
  }
  for (const l of limits) {
    const key = chainKey(l.domain, l.entries);
    if (!used.has(key)) warnings.push(`--limit ${key}: no GwPolicy sends this descriptor; left out`);
  }
  return { files, warnings };
}

/** A file name for a domain's YAML: the domain with characters outside [A-Za-z0-9._-] replaced. */
export function domainFileName(domain: string): string {
  return `${domain.replace(/[^A-Za-z0-9._-]/g, "_")}.yaml`;
}
