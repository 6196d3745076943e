// Resolves the backendRefs written inside traffic policy fields (a remote JWKS server, a rate limit service, a user
// ext_authz or ext_proc service) to clusters, the same way route backendRefs resolve. The xDS builders then only look
// the cluster up by field path; a ref that does not resolve is reported in the policy status by the builder.

import type { BackendObjectReference } from "../../api/gateway-api.js";
import type { BackendResolver } from "../backend/resolve.js";
import type { ClusterIR, EffectivePolicyIR, PolicyRefIR, PolicySourceIR, RoutePolicyIR } from "../ir.js";
import { providerExtAuthRefs } from "../llm/provider-ext-auth.js";
import type { TranslatedRule } from "../route/httproute.js";
import { backendExtAuthRefs } from "../xds/backend-ext-auth.js";
import { refBackendKey } from "./engine.js";

/** Fields whose services Envoy calls over gRPC, so their clusters need HTTP/2. */
function speaksGrpc(field: string, parent: Record<string, unknown>): boolean {
  if (field === "extProc" || field === "rateLimit") return true;
  // ext_authz is gRPC unless `http` is set.
  return field === "extAuth" && parent["http"] === undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function collect(
  section: string,
  policy: EffectivePolicyIR | undefined,
  visit: (path: string, field: string, parent: Record<string, unknown>, from: PolicySourceIR) => void,
): void {
  if (policy === undefined) return;
  for (const [field, f] of Object.entries(policy)) {
    // Combined fields (authorization) carry no backendRefs.
    if ("combined" in f) continue;
    const walk = (v: unknown, path: string): void => {
      if (Array.isArray(v)) {
        for (const [i, x] of v.entries()) walk(x, `${path}[${i}]`);
      } else if (isRecord(v)) {
        if (isRecord(v["backendRef"])) visit(`${path}.backendRef`, field, v, f.from);
        for (const [k, x] of Object.entries(v)) if (k !== "backendRef") walk(x, `${path}.${k}`);
      }
    };
    walk(f.value, `${section}.${field}`);
  }
}

/** The spec: a remote key source is a Service or a static Backend; an AI, MCP, A2A or agent runtime GwBackend is not. */
function staticServer(ref: unknown, cluster: ClusterIR): boolean {
  const kind = isRecord(ref) ? ref["kind"] : undefined;
  if (kind !== "GwBackend" && kind !== "Backend") return true;
  return (
    (cluster.kind === "static" || cluster.kind === "dns" || cluster.kind === "unix") &&
    !("a2a" in cluster && cluster.a2a === true) &&
    !("agentCore" in cluster && cluster.agentCore !== undefined)
  );
}

function resolveRefs(policy: RoutePolicyIR, resolver: BackendResolver): RoutePolicyIR {
  const refs: Record<string, PolicyRefIR> = {};
  const visit = (path: string, field: string, parent: Record<string, unknown>, from: PolicySourceIR) => {
    const namespace = from.name.split("/")[0] ?? "default";
    const r = resolver.resolve(
      parent["backendRef"] as BackendObjectReference,
      { group: "sluice.dev", kind: from.kind, namespace },
      { http2: speaksGrpc(field, parent) },
    );
    const ref = parent["backendRef"] as BackendObjectReference;
    const own = r.ok
      ? policy.refBackends?.[refBackendKey({ ...ref, namespace: ref.namespace ?? namespace })]
      : undefined;
    const backend =
      (ref.group ?? "") === "" && (ref.kind ?? "Service") === "Service"
        ? `Service ${ref.namespace ?? namespace}/${ref.name} port ${ref.port}`
        : `GwBackend ${ref.namespace ?? namespace}/${ref.name}`;
    refs[path] = r.ok
      ? { cluster: r.cluster.name, ...(own !== undefined ? { connection: { backend, ...own } } : {}) }
      : { error: r.message };
    if (r.ok && path.endsWith(".jwks.remote.backendRef") && !staticServer(parent["backendRef"], r.cluster)) {
      refs[path] = { error: "a remote JWKS server is a Service or a static GwBackend (host and port, or unixPath)" };
    }
  };
  collect("preRouting", policy.preRouting, visit);
  collect("traffic", policy.traffic, visit);
  // backend.extAuth is served by a route-level filter (xds/backend-ext-auth.ts), its service resolved here too.
  for (const b of backendExtAuthRefs(policy)) visit(`${b.path}.backendRef`, "extAuth", b.value, b.from);
  // A GwPolicy's extAuth for one AI provider is called by the LLM ext_proc (llm/provider-ext-auth.ts).
  for (const b of providerExtAuthRefs(policy)) visit(`${b.path}.backendRef`, "extAuth", b.value, b.from);
  return Object.keys(refs).length === 0 ? policy : { ...policy, refs };
}

/** The rules with the backendRefs of their traffic policies resolved (clusters registered with `resolver`). */
export function resolvePolicyRefs(rules: readonly TranslatedRule[], resolver: BackendResolver): TranslatedRule[] {
  return rules.map((r) => {
    const policy = r.route.policy;
    if (policy === undefined) return r;
    const resolved = resolveRefs(policy, resolver);
    return resolved === policy ? r : { ranked: r.ranked, route: { ...r.route, policy: resolved } };
  });
}
