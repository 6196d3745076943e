// A GwPolicy's `backend.tls` and `backend.tunnel` reaching the providers of an AI GwBackend: each provider's TLS
// (its own transport socket in the AI cluster, transport_socket_matches) and CONNECT tunnel, resolved as the GwBackend's
// own `spec.policies` are (backend/ai.ts). The spec merges per top-level field, GwPolicy first (one for the whole
// GwBackend, then one for the provider by sectionName), then the GwBackend's own, then the provider's own: a GwPolicy's
// value is the provider's only where neither the GwBackend nor the provider sets that field.
//
// Applied to the Gateways' IR before the LLM table and the xDS are made from it, so Envoy's sockets and Sluice's own
// connections to providers (the Realtime relay) agree. One Envoy cluster holds every provider of the GwBackend: it gets
// what the GwBackend's levels give (a GwPolicy targeting the GwBackend or a provider), or what every route asks when
// they agree; a route asking another (a route-level GwPolicy) gets a variant of the cluster with its providers' TLS and
// tunnel (xds/llm-passes.ts withLlmVariants). Sluice's Realtime relay dials the providers of the cluster the route
// reaches (its relay route names the variant), so it agrees with Envoy on every route. A TLS or tunnel that cannot be
// resolved fails the routes asking it (503), naming the field, as a Service backend's does.

import type { TranslationInput } from "../input.js";
import type { BackendProblemIR, GatewayIR, LlmClusterIR, LlmProviderIR, RouteIR } from "../ir.js";
import { resolveBackendTls } from "../xds/backend-tls.js";
import { type LlmVariantFields, llmClusterUses, ROUTE_LEVELS, withLlmVariants } from "../xds/llm-passes.js";
import { tunnelRefs } from "./resolve.js";
import { resolveTunnel, TUNNEL_NEEDS_TLS } from "./tunnel.js";

const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]+:[0-9a-fA-F:]*)$/;
const FIELDS = ["tls", "tunnel"] as const;

interface Use {
  readonly route: RouteIR;
  /** Per provider, the GwPolicy values of `tls` / `tunnel` that are its effective ones. */
  readonly wanted: Record<string, Partial<Record<(typeof FIELDS)[number], unknown>>>;
  readonly from: { field: string; from: BackendProblemIR["from"] }[];
  readonly key: string;
}

function useOf(c: LlmClusterIR, r: RouteIR): Use {
  const bp = r.policy?.backends?.find((x) => x.cluster === c.name);
  const wanted: Use["wanted"] = {};
  const from: Use["from"] = [];
  for (const p of c.groups.flat()) {
    // A provider without policies of its own level (a single `provider`) has the backend's.
    const policy = bp?.subBackends?.find((x) => x.name === p.name)?.policy ?? bp?.policy;
    for (const field of FIELDS) {
      const f = policy?.[field];
      if (f === undefined || "combined" in f || f.from.kind !== "GwPolicy") continue;
      wanted[p.name] = { ...wanted[p.name], [field]: f.value };
      if (!from.some((x) => x.field === field && JSON.stringify(x.from) === JSON.stringify(f.from))) {
        from.push({ field, from: f.from });
      }
    }
  }
  return { route: r, wanted, from, key: Object.keys(wanted).length === 0 ? "" : JSON.stringify(wanted) };
}

/** The Gateways with the providers' TLS and tunnels from GwPolicies, and the routes' problems with them. */
export function withAiPolicyTls(gateways: readonly GatewayIR[], input: TranslationInput): GatewayIR[] {
  return gateways.map((gw) => {
    const own = new Map<string, LlmVariantFields>();
    const routes = new Map<RouteIR, Map<string, LlmVariantFields>>();
    const problems = new Map<RouteIR, BackendProblemIR[]>();
    const add = (r: RouteIR, p: BackendProblemIR) => problems.set(r, [...(problems.get(r) ?? []), p]);
    for (const { cluster: c, uses } of llmClusterUses(gw, useOf).values()) {
      if (uses.every((u) => u.key === "")) continue;
      // The cluster's own: what every route asks when they agree, else what the GwBackend's levels give.
      const keys = new Set(uses.map((u) => u.key));
      const base =
        keys.size === 1 ? uses[0] : uses.find((u) => u.from.every(({ from }) => !ROUTE_LEVELS.has(from.level)));
      const ownKey = base?.key ?? "";
      const resolved = new Map<string, Resolved>();
      const resolve = (u: Use): Resolved => {
        const known = resolved.get(u.key);
        if (known !== undefined) return known;
        const r = resolveGroups(c, u, input);
        resolved.set(u.key, r);
        return r;
      };
      for (const u of uses) {
        const r = resolve(u);
        if (r.failures.length > 0) {
          // As a Service backend's TLS that cannot be had: the route answers 503 and says why, nothing half-applied.
          for (const f of r.failures) {
            const src = u.from.find((x) => f.field.startsWith(x.field))?.from ?? u.from[0]?.from;
            if (src !== undefined)
              add(u.route, { from: src, field: `backend.${f.field}`, message: f.message, fatal: true });
          }
          continue;
        }
        if (u.key === ownKey) {
          if (ownKey !== "") own.set(c.name, { groups: r.groups });
          continue;
        }
        routes.set(
          u.route,
          (routes.get(u.route) ?? new Map<string, LlmVariantFields>()).set(c.name, { groups: r.groups }),
        );
      }
    }
    return withLlmVariants(gw, { own, routes, problems });
  });
}

interface Resolved {
  readonly groups: LlmClusterIR["groups"];
  readonly failures: readonly { field: string; message: string }[];
}

/** The providers of `c` with the TLS and tunnel `u` asks of them. */
function resolveGroups(c: LlmClusterIR, u: Use, input: TranslationInput): Resolved {
  const ns = c.backend.split("/")[0] ?? "";
  const failures: { field: string; message: string }[] = [];
  const providers = (p: LlmProviderIR): LlmProviderIR => {
    const w = u.wanted[p.name];
    if (w === undefined) return p;
    let out = p;
    if ("tls" in w) {
      const t = resolveBackendTls(w.tls, ns, IP.test(p.address) ? undefined : p.address, input);
      if (!t.ok) {
        failures.push({ field: `tls.${t.field}`, message: `provider ${p.name}: ${t.message}` });
        return p;
      }
      out = { ...out, tls: t.tls };
    }
    if ("tunnel" in w) {
      const t = resolveTunnel(w.tunnel, ns, tunnelRefs(input, ns));
      if (!t.ok) failures.push({ field: "tunnel", message: `provider ${p.name}: ${t.message}` });
      else if (out.tls === undefined)
        failures.push({ field: "tunnel", message: `provider ${p.name}: ${TUNNEL_NEEDS_TLS}` });
      else out = { ...out, tunnel: t.tunnel };
    }
    return out;
  };
  return { groups: c.groups.map((g) => g.map(providers)), failures };
}
