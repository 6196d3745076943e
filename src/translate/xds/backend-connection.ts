// Backend policy connection fields on Service and static backends (`backend.tcp`, `backend.http.version`,
// `backend.health.eviction`, `backend.tunnel` (backend/tunnel.ts), `backend.auth` injected by the cluster:
// backend-credential.ts, and the health scoring Sluice keeps: backend-health.ts) → Envoy cluster settings. A backend's
// effective policy can differ per route (a route-level policy with a backend section), while Envoy clusters are shared;
// so each distinct setting gets its own cluster, `<cluster>~<hash>`, which the routes with that policy use. An EDS
// variant reads the same endpoints (its EDS service name is the base cluster's), but for a scored one, whose endpoints
// Sluice marks when it evicts them: it has its own (and a static backend's scored variant is EDS too). AI backends are
// not changed here (their clusters are the LLM table's). A credential or TLS setting that cannot be had is left on the
// route (backendProblems) for traffic-route.ts to report and answer 503.

import { createHash } from "node:crypto";
import { agentCoreCredential, agentCoreOf } from "../backend/agent-core.js";
import { tunnelRefs } from "../backend/resolve.js";
import type { TunnelIR } from "../backend/tunnel.js";
import { resolveTunnel, TUNNEL_NEEDS_TLS } from "../backend/tunnel.js";
import { parseDurationMs } from "../duration.js";
import type { TranslationInput } from "../input.js";
import type {
  BackendConnectionIR,
  BackendPolicyIR,
  BackendProblemIR,
  ClusterIR,
  EffectivePolicyIR,
  GatewayIR,
  PolicyRefIR,
  RouteIR,
} from "../ir.js";
import { keepaliveSettings } from "../keepalive.js";
import { clusterVariantName } from "../names.js";
import { backendCredential } from "./backend-credential.js";
import { backendHealthScore } from "./backend-health.js";
import { backendTls, destinationHost, resolveBackendTls } from "./backend-tls.js";
import { serviceTransformation, sluiceRetryCondition } from "./backend-transformation.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const ms = (v: unknown) => (typeof v === "string" ? parseDurationMs(v) : undefined);

function fieldValue(p: EffectivePolicyIR, name: string): Rec | undefined {
  const f = p[name];
  return f === undefined || "combined" in f || !isRec(f.value) ? undefined : f.value;
}

/** The connection settings of a backend's effective policy; undefined when it sets none. */
export function backendConnection(p: EffectivePolicyIR): BackendConnectionIR | undefined {
  const out: { -readonly [K in keyof BackendConnectionIR]: BackendConnectionIR[K] } = {};
  const tcp = fieldValue(p, "tcp");
  const connectTimeout = ms(tcp?.connectTimeout);
  if (connectTimeout !== undefined) out.connectTimeoutMs = connectTimeout;
  if (isRec(tcp?.keepalive)) {
    out.keepalive = keepaliveSettings(tcp.keepalive);
  }
  const http = fieldValue(p, "http");
  if (http?.version === "HTTP2") out.http2 = true;
  else if (http?.version === "HTTP1") out.http2 = false;
  const eviction = fieldValue(p, "health")?.eviction;
  if (isRec(eviction)) {
    out.eviction = {
      consecutiveFailures:
        typeof eviction.consecutiveFailures === "number" && eviction.consecutiveFailures > 0
          ? eviction.consecutiveFailures
          : 1,
      durationMs: ms(eviction.duration) ?? 3000,
    };
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** The fields `backendConnection` applies, for the status of what is not (traffic-route.ts). */
export const APPLIED_CONNECTION_FIELDS: Readonly<Record<string, (v: Rec) => string[]>> = {
  tcp: () => [],
  // Problems are backendProblems (withBackendConnections).
  tunnel: () => [],
  // requestTimeout: the route's timeout (traffic-route.ts).
  http: () => [],
  // Problems are backendProblems (backend-transformation.ts).
  transformation: () => [],
  // The route's ext_authz (backend-ext-auth.ts), which reports what it cannot do per backend.
  extAuth: () => [],
  // Eviction: outlier detection; the score: Sluice (backend-health.ts), which reports the backends it cannot score.
  health: () => [],
};

/**
 * `<base>~<hash of the settings>`. Secret material (a credential's key, a client certificate's key and chain) is left
 * out of the hash: cluster names show in stats and admin output, and a changed key reaches Envoy through its SDS
 * secret anyway, under the same name.
 */
function variantName(base: string, c: BackendConnectionIR): string {
  const { credential, tls, minted, ...rest } = c;
  const clientCert = tls?.clientCert;
  const visible = {
    ...rest,
    ...(minted !== undefined ? { minted: minted.id } : {}),
    ...(credential !== undefined ? { credential: { ...credential, value: undefined } } : {}),
    ...(tls !== undefined
      ? { tls: { ...tls, clientCert: clientCert === undefined ? undefined : clientCert.secret } }
      : {}),
  };
  const h = createHash("sha256").update(JSON.stringify(visible)).digest("hex").slice(0, 10);
  return clusterVariantName(base, h);
}

/**
 * `gw` with a cluster per distinct backend connection setting, and the routes whose backends have one pointing at it.
 * Routes and clusters without such a setting are the same objects as before (the route memo keeps them).
 */
export function withBackendConnections(gw: GatewayIR, input?: TranslationInput): GatewayIR {
  const clusters = new Map(gw.clusters.map((c) => [c.name, c]));
  const variants = new Map<string, ClusterIR>();
  /** The name of `base`'s variant with `connection`, made on first use. */
  const variant = (base: ClusterIR, connection: BackendConnectionIR): string => {
    const name = variantName(base.name, connection);
    if (!variants.has(name)) {
      // A scored variant has endpoints of its own (EDS, also for a static backend): Sluice marks its evicted ones.
      const scored = connection.healthScore !== undefined && (base.kind === "eds" || base.kind === "static");
      variants.set(name, {
        ...base,
        name,
        connection,
        ...(scored ? { kind: "eds" } : base.kind === "eds" ? { edsServiceName: base.name } : {}),
      } as ClusterIR);
    }
    return name;
  };
  /**
   * `r` with the backendRefs of its traffic fields whose Service has a connection policy pointed at a variant of that
   * Service's cluster with it (TLS, TCP, HTTP version), or at why it cannot be had (the filter then reports it and its
   * failure mode applies, as for a ref that does not resolve).
   */
  const refsOf = (r: RouteIR): RouteIR => {
    const refs = r.policy?.refs;
    if (refs === undefined || !Object.values(refs).some((x) => "connection" in x && x.connection !== undefined))
      return r;
    const next: Record<string, PolicyRefIR> = {};
    const unserved: BackendProblemIR[] = [];
    for (const [path, ref] of Object.entries(refs)) {
      const base = "cluster" in ref ? clusters.get(ref.cluster) : undefined;
      // AI and MCP clusters are the LLM and MCP tables' (a traffic field naming one is reported by its filter).
      if (
        !("cluster" in ref) ||
        ref.connection === undefined ||
        base === undefined ||
        base.kind === "llm" ||
        base.kind === "mcp"
      ) {
        next[path] = ref;
        continue;
      }
      const { backend, policy } = ref.connection;
      for (const u of ref.connection.unserved) {
        unserved.push({
          from: u.from,
          field: `backend.${u.field}`,
          message: `not applied to Envoy's calls to ${backend} as the service of ${path}: only tls, tcp and http.version apply there (routes that send traffic to ${backend} apply it)`,
          fatal: false,
        });
      }
      const tlsField = policy.tls !== undefined && !("combined" in policy.tls) ? policy.tls : undefined;
      const tls =
        tlsField !== undefined
          ? resolveBackendTls(
              tlsField.value,
              tlsField.from.name.split("/")[0] ?? "",
              destinationHost(backend, base),
              input,
            )
          : undefined;
      if (tls?.ok === false && tlsField !== undefined) {
        // Never called without it: the field's filter reports the ref and its failure mode applies; the TLS's own
        // policy says which of its fields is missing.
        next[path] = { error: `backend.tls.${tls.field} of ${backend}: ${tls.message}` };
        unserved.push({
          from: tlsField.from,
          field: `backend.tls.${tls.field}`,
          message: `${tls.message}; Envoy's calls to ${backend} as the service of ${path} fail until it is (that field's failure mode applies)`,
          fatal: false,
        });
        continue;
      }
      const settings = backendConnection(policy);
      const connection = { ...settings, ...(tls?.ok === true ? { tls: tls.tls } : {}) };
      next[path] =
        Object.keys(connection).length === 0 ? { cluster: ref.cluster } : { cluster: variant(base, connection) };
    }
    return {
      ...r,
      policy: { ...r.policy, refs: next },
      ...(unserved.length > 0 ? { backendProblems: [...(r.backendProblems ?? []), ...unserved] } : {}),
    };
  };
  const routeOf = (given: RouteIR): RouteIR => {
    const r = refsOf(given);
    const a = r.action;
    // A retry.condition Sluice evaluates needs the upstream processor on every backend of the route.
    const retry = a.kind === "forward" ? sluiceRetryCondition(r) : undefined;
    if (a.kind !== "forward" || (r.policy?.backends === undefined && retry === undefined)) return r;
    let changed = false;
    const transformationProblems: BackendProblemIR[] = [];
    // Credentials first, then TLS, each in backend order.
    const credentialProblems: BackendProblemIR[] = [];
    const tlsProblems: BackendProblemIR[] = [];
    const tunnelProblems: BackendProblemIR[] = [];
    const backends = a.backends.map((b) => {
      const bp: BackendPolicyIR | undefined = r.policy?.backends?.find((x) => x.cluster === b.cluster);
      const base = clusters.get(b.cluster);
      // AI backends: the AI cluster's upstream transformation evaluates it (llm-transformation.ts).
      if (retry !== undefined && base?.kind === "mcp") {
        transformationProblems.push({
          from: retry.from,
          field: "retry.condition",
          message: `reads more than response.code, which Sluice evaluates per attempt on Service, static and AI backends only; the route's MCP backend GwBackend ${base.backend} is retried on connection failures and resets alone`,
          fatal: false,
        });
      }
      if (
        (bp === undefined && retry === undefined) ||
        base === undefined ||
        base.kind === "llm" ||
        base.kind === "mcp"
      ) {
        return b;
      }
      const ut = serviceTransformation(r, bp?.policy);
      transformationProblems.push(...ut.problems);
      // An agent runtime's cluster always carries its TLS and invocation plan (backend/agent-core.ts).
      const core = agentCoreOf(base);
      const kept = core !== undefined ? base.connection : undefined;
      if (bp === undefined) {
        if (ut.ir === undefined) return b;
        changed = true;
        return { ...b, cluster: variant(base, { ...kept, upstreamTransformation: ut.ir }) };
      }
      const settings = backendConnection(bp.policy);
      const auth = bp.policy.auth;
      const credential =
        auth !== undefined && !("combined" in auth)
          ? core !== undefined
            ? agentCoreCredential(core, auth.value, auth.from, input)
            : backendCredential(auth.value, auth.from, bp.backend, input)
          : undefined;
      const tlsField = bp.policy.tls;
      const tls =
        tlsField !== undefined && !("combined" in tlsField)
          ? backendTls(tlsField.value, tlsField.from, bp.backend, base, input)
          : undefined;
      if (credential?.ok === false) {
        const { from, field, message, fatal } = credential;
        credentialProblems.push({ from, field, message, fatal });
      } else if (credential !== undefined) credentialProblems.push(...credential.notes);
      if (tls?.ok === false) tlsProblems.push({ from: tls.from, field: tls.field, message: tls.message, fatal: true });
      const tunnelField = bp.policy.tunnel;
      let tunnel: TunnelIR | undefined;
      if (tunnelField !== undefined && !("combined" in tunnelField)) {
        const from = tunnelField.from;
        const ns = from.name.split("/")[0] ?? "";
        const r = resolveTunnel(tunnelField.value, ns, tunnelRefs(input, ns));
        // Never around the proxy: a tunnel that cannot be had answers 503.
        const fail = (message: string) =>
          tunnelProblems.push({
            from,
            field: "backend.tunnel",
            message: `${message}; requests to ${bp.backend} are answered 503 until it is`,
            fatal: true,
          });
        if (!r.ok) fail(r.message);
        else if (tls?.ok !== true) fail(TUNNEL_NEEDS_TLS);
        else tunnel = r.tunnel;
      }
      const health = backendHealthScore(bp.policy);
      transformationProblems.push(...health.problems);
      if (health.ir !== undefined && base.kind !== "eds" && base.kind !== "static") {
        const f = bp.policy.health;
        if (f !== undefined && !("combined" in f)) {
          transformationProblems.push({
            from: f.from,
            field: "backend.health",
            message: `unhealthyCondition, eviction.restoreHealth and eviction.healthThreshold are not applied to ${bp.backend}: Sluice scores endpoints it names in EDS, and this backend's addresses are ${base.kind === "dns" ? "resolved by Envoy (a hostname)" : "not endpoints Sluice lists"}; eviction.duration and consecutiveFailures apply (outlier detection)`,
            fatal: false,
          });
        }
      }
      const extra = {
        ...(health.ir !== undefined && (base.kind === "eds" || base.kind === "static")
          ? { healthScore: health.ir }
          : {}),
        ...(credential?.ok === true && credential.credential !== undefined
          ? { credential: credential.credential }
          : {}),
        ...(credential?.ok === true && credential.minted !== undefined ? { minted: credential.minted } : {}),
        ...(tls?.ok === true ? { tls: tls.tls } : {}),
        ...(tunnel !== undefined ? { tunnel } : {}),
        ...(ut.ir !== undefined ? { upstreamTransformation: ut.ir } : {}),
      };
      const connection =
        kept !== undefined
          ? { ...kept, ...settings, ...extra }
          : Object.keys(extra).length > 0
            ? { ...settings, ...extra }
            : settings;
      if (connection === undefined) return b;
      changed = true;
      return { ...b, cluster: variant(base, connection) };
    });
    const backendProblems = [...credentialProblems, ...tlsProblems, ...tunnelProblems, ...transformationProblems];
    if (!changed && backendProblems.length === 0) return r;
    return {
      ...r,
      ...(changed ? { action: { ...a, backends } } : {}),
      // Added to what an earlier pass found (backend/ai-policy-tls.ts), never in place of it.
      ...(backendProblems.length > 0 ? { backendProblems: [...(r.backendProblems ?? []), ...backendProblems] } : {}),
    };
  };
  let touched = false;
  const routeConfigs = gw.routeConfigs.map((rc) => {
    let rcChanged = false;
    const virtualHosts = rc.virtualHosts.map((vh) => {
      const routes = vh.routes.map(routeOf);
      if (routes.every((r, i) => r === vh.routes[i])) return vh;
      rcChanged = true;
      return { ...vh, routes };
    });
    if (!rcChanged) return rc;
    touched = true;
    return { ...rc, virtualHosts };
  });
  if (!touched) return gw;
  return { ...gw, routeConfigs, clusters: [...gw.clusters, ...variants.values()] };
}
