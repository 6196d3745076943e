// A provider's own `tcp` and `http` (`spec.ai.groups[].providers[].policies`, or a GwPolicy's `backend.tcp` /
// `backend.http` targeting the provider by sectionName) → `LlmProviderIR.connection`. The spec merges per top-level
// field (the policy engine's `subBackends`: GwPolicy for the GwBackend, then the GwBackend's own, then a GwPolicy for
// the provider, then the provider's own), so a provider's value replaces the cluster's field as a whole: a provider's
// `tcp` without `connectTimeout` has Envoy's default of 5 s, whatever the GwBackend's `tcp` says.
//
// Only values set at the provider's levels are carried (a route-level GwPolicy or the GwBackend's own are the
// cluster's: backend/ai.ts, xds/llm-connection.ts); those levels do not depend on the route, so every route reaching
// the GwBackend sees the same. Applied to the Gateways' IR before the LLM table and the xDS are made, so Envoy (a hop
// per provider that differs, xds/llm-provider-hop.ts) and the Realtime relay (its connect timeout and keepalive) agree.

import { parseDurationMs } from "../duration.js";
import type { BackendPolicyIR, GatewayIR, LlmClusterIR, LlmProviderIR, ProviderConnectionIR } from "../ir.js";
import { keepaliveSettings } from "../keepalive.js";
import { clusterVariantBase } from "../names.js";
import { routesOf } from "../xds/llm-passes.js";

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);

/** Envoy's (and a Service backend's) defaults for a `tcp` that leaves them out. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 5000;

/** A `tcp` value as connection settings (the defaults of its keepalive filled in). */
export function tcpSettings(tcp: Rec): NonNullable<ProviderConnectionIR["tcp"]> {
  const connectTimeoutMs = ms(tcp.connectTimeout);
  const k = tcp.keepalive;
  return {
    ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
    ...(isRec(k) ? { keepalive: keepaliveSettings(k) } : {}),
  };
}

/** An `http` value as connection settings: the version (absent: HTTP/1.1) and the request timeout. */
export function httpSettings(http: Rec): NonNullable<ProviderConnectionIR["http"]> {
  const requestTimeoutMs = ms(http.requestTimeout);
  return {
    ...(http.version === "HTTP2" ? { http2: true } : {}),
    // 0 disables a deadline (as the route's own timeout does): nothing to serve per provider then.
    ...(requestTimeoutMs !== undefined && requestTimeoutMs > 0 ? { requestTimeoutMs } : {}),
  };
}

/** What the provider's own levels set of `tcp` and `http` in a route's backend policy (undefined: nothing). */
export function providerConnectionOf(
  bp: BackendPolicyIR | undefined,
  provider: string,
): ProviderConnectionIR | undefined {
  const policy = bp?.subBackends?.find((s) => s.name === provider)?.policy;
  const own = (field: "tcp" | "http"): Rec | undefined => {
    const f = policy?.[field];
    if (f === undefined || "combined" in f || !isRec(f.value)) return undefined;
    return f.from.level === "subBackend" || f.from.level === "backendSection" ? f.value : undefined;
  };
  const tcp = own("tcp");
  const http = own("http");
  if (tcp === undefined && http === undefined) return undefined;
  return {
    ...(tcp !== undefined ? { tcp: tcpSettings(tcp) } : {}),
    ...(http !== undefined ? { http: httpSettings(http) } : {}),
  };
}

function withConnections(gw: GatewayIR): GatewayIR {
  const llm = gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm");
  if (llm.length === 0) return gw;
  // The provider levels are the same for every route reaching the GwBackend: the first route's backend policy says.
  const bps = new Map<string, BackendPolicyIR>();
  for (const r of routesOf(gw)) {
    for (const bp of r.policy?.backends ?? []) {
      if (bp.subBackends !== undefined && !bps.has(clusterVariantBase(bp.cluster))) {
        bps.set(clusterVariantBase(bp.cluster), bp);
      }
    }
  }
  let changed = false;
  const clusters = gw.clusters.map((c) => {
    if (c.kind !== "llm") return c;
    const bp = bps.get(clusterVariantBase(c.name));
    if (bp === undefined) return c;
    let any = false;
    const provider = (p: LlmProviderIR): LlmProviderIR => {
      const connection = providerConnectionOf(bp, p.name);
      if (connection === undefined) return p;
      any = true;
      return { ...p, connection };
    };
    const groups = c.groups.map((g) => g.map(provider));
    if (!any) return c;
    changed = true;
    return { ...c, groups };
  });
  return changed ? { ...gw, clusters } : gw;
}

/** The Gateways with each AI provider's own connection fields (those set at its own levels). */
export function withProviderConnections(gateways: readonly GatewayIR[]): GatewayIR[] {
  return gateways.map(withConnections);
}

/** The TCP settings a provider is reached with: its own `tcp`, else its cluster's (Envoy's 5 s connect timeout). */
export interface ProviderTcp {
  readonly connectTimeoutMs: number;
  readonly keepalive?: NonNullable<NonNullable<ProviderConnectionIR["tcp"]>["keepalive"]>;
}

/** What Sluice's own connections to provider `p` of `c` use (the Realtime relay), as Envoy's to it do. */
export function providerTcp(c: LlmClusterIR, p: LlmProviderIR): ProviderTcp {
  const tcp = p.connection?.tcp ?? c.connection;
  return {
    connectTimeoutMs: tcp?.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    ...(tcp?.keepalive !== undefined ? { keepalive: tcp.keepalive } : {}),
  };
}
