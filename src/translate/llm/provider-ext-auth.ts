// A GwPolicy's `backend.extAuth` targeting one provider of an AI GwBackend (`targetRefs[].sectionName` = the
// provider's name) → the provider's entry in the LLM table, which the LLM ext_proc checks once per attempt to that
// provider (extproc/llm/provider-ext-auth.ts), on the client's request, before the provider work.
//
// Envoy cannot: its ext_authz is a downstream filter only (Envoy 1.40 refuses it among a cluster's upstream filters)
// and a route-level filter runs before the load balancer picks the provider of an attempt. Sluice's upstream LLM stage
// knows the attempt's provider and holds the client's request, and Sluice already calls users' services itself
// (extauthz/user-ext-auth.ts): the same call, cache and failure mode serve here.
//
// A GwBackend's own `spec.policies.extAuth` and a GwPolicy targeting the whole GwBackend stay the route's ext_authz
// (xds/backend-ext-auth.ts): they check every request, whatever its provider.

import type { ExtAuth } from "../../api/auth.js";
import type { Static } from "../../api/schema-kit.js";
import { DEFAULT_MAX_ENTRIES, DecisionCache } from "../../extauthz/decision-cache.js";
import type { UnaryTarget, UserExtAuthConfig } from "../../extauthz/user-ext-auth.js";
import { compileUserExtAuthExpressions } from "../../extauthz/user-ext-auth-cel.js";
import { parseByteSize } from "../bytes.js";
import type { BackendPolicyIR, ClusterIR, PolicySourceIR, RouteIR, RoutePolicyIR } from "../ir.js";
import { type Expressions, grpcMetadata, httpOptions, unaryTargets } from "../xds/filters/ext-authz-options.js";
import type { GuardNote } from "./guards.js";

type ExtAuthT = Static<typeof ExtAuth>;

/** A provider's extAuth as the LLM ext_proc calls it: the user's service, its options, and how to cache. */
export interface ProviderExtAuthConfig extends Omit<UserExtAuthConfig, "jwt"> {
  /** Decisions are cached by `scope` (everything but the targets), so a config update keeps them. */
  readonly scope: string;
  readonly cache?: { readonly key: readonly string[]; readonly ttl: string; readonly maxEntries: number };
  /** `forwardBody.maxSize` in bytes: the client's body goes to the service; a larger one is refused with 413. */
  readonly forwardBody?: number;
  /** The policy that set it (`GwPolicy ns/name`), for logs. */
  readonly policy: string;
}

/**
 * The deadline of a provider's check: within the 5 s Envoy gives the LLM stage per message (filters/sluice-stage.ts),
 * with room for the provider work after it, so the failure mode is Sluice's to apply rather than Envoy's timeout.
 */
export const PROVIDER_CHECK_TIMEOUT_MS = 3000;

/** The CEL variables the check's expressions see: the LLM ext_proc's, and `source` (Envoy's request attributes). */
const SEEN = ["request", "llm", "source", "jwt", "apiKey", "basicAuth", "extauthz"];

/**
 * The router-level LLM stage's request attributes of the client's connection (xds/llm.ts), which a provider's check
 * carries as the CheckRequest's `source` / `destination` and CEL's `source`.
 */
export const PEER_ATTRIBUTES = ["source.address", "source.port", "destination.address", "destination.port"] as const;

/** Where a provider's extAuth backendRef resolves in RoutePolicyIR.refs (`.backendRef` appended). */
export function providerExtAuthPath(cluster: string, provider: string): string {
  return `backend[${cluster}].providers[${provider}].extAuth`;
}

/** A provider's own extAuth: a GwPolicy targeting the provider (`sectionName`); undefined for any other level. */
function providerField(
  b: BackendPolicyIR,
  provider: string,
): { readonly value: ExtAuthT; readonly from: PolicySourceIR } | undefined {
  const f = b.subBackends?.find((s) => s.name === provider)?.policy["extAuth"];
  if (f === undefined || "combined" in f || f.from.level !== "backendSection") return undefined;
  return { value: f.value as ExtAuthT, from: f.from };
}

/** The provider extAuth values of a route's backends, with where their backendRefs resolve (refs.ts). */
export function providerExtAuthRefs(
  policy: RoutePolicyIR,
): { readonly path: string; readonly value: ExtAuthT; readonly from: PolicySourceIR }[] {
  const out: { path: string; value: ExtAuthT; from: PolicySourceIR }[] = [];
  for (const b of policy.backends ?? []) {
    for (const s of b.subBackends ?? []) {
      const f = providerField(b, s.name);
      if (f !== undefined) out.push({ path: providerExtAuthPath(b.cluster, s.name), ...f });
    }
  }
  return out;
}

/**
 * The extAuth of provider `provider` of AI cluster `cluster` on `route`, compiled for the LLM ext_proc, or undefined
 * when none targets the provider. What cannot be served as written is reported in `notes` on the policy.
 */
export function compileProviderExtAuth(
  route: RouteIR,
  b: BackendPolicyIR | undefined,
  provider: string,
  clusters: ReadonlyMap<string, ClusterIR>,
  notes: GuardNote[],
  scopeOf: (content: unknown) => string,
): ProviderExtAuthConfig | undefined {
  const f = b === undefined ? undefined : providerField(b, provider);
  if (b === undefined || f === undefined) return undefined;
  const a = f.value;
  const note = (field: string, message: string, reason?: GuardNote["reason"]) =>
    notes.push({
      from: f.from,
      field: `backend.extAuth${field === "" ? "" : `.${field}`}`,
      message,
      ...(reason !== undefined ? { reason } : {}),
    });
  const expressions: Expressions = {};
  const http = a.http === undefined ? undefined : httpOptions(a.http, expressions, (p, m, r) => note(p, m, r));
  if (http === undefined && a.grpc !== undefined) grpcMetadata(a.grpc, expressions, (p, m, r) => note(p, m, r));
  const cel = compileUserExtAuthExpressions(expressions);
  for (const p of cel.problems) note(p.path, `${p.message}; left out`, "Ignored");
  // (A Realtime session through Sluice's relay is checked by the relay with the same variables: the relay route
  // passes the client's address and the route's identity on in headers, xds/realtime-relay.ts.)
  for (const v of cel.compiled.variables) {
    if (SEEN.includes(v)) continue;
    note(
      http === undefined ? "grpc.requestMetadata" : "http",
      `an expression reads ${v}, which the check of a provider's attempt does not see (it sees ${SEEN.join(", ")}): it fails to evaluate, and the attempt is denied`,
      "NeverMatches",
    );
  }
  let cache: ProviderExtAuthConfig["cache"];
  if (a.cache !== undefined) {
    const c = DecisionCache.compile<Uint8Array>(a.cache, "spec.backend.extAuth.cache");
    for (const p of c.problems) {
      note(
        "cache",
        `${p.path}: ${p.message}; the cache is not used, every attempt is checked by the service`,
        "Ignored",
      );
    }
    for (const v of c.cache?.keyVariables ?? []) {
      if (SEEN.includes(v)) continue;
      note(
        "cache.key",
        `reads ${v}, which the check of a provider's attempt does not see: nothing is cached`,
        "NeverMatches",
      );
    }
    if (c.cache !== undefined) {
      cache = { key: [...a.cache.key], ttl: a.cache.ttl, maxEntries: a.cache.maxEntries ?? DEFAULT_MAX_ENTRIES };
    }
  }
  const ref = a.backendRef;
  const ns = ref.namespace ?? f.from.name.split("/")[0] ?? "";
  const forwardBody = a.forwardBody === undefined ? undefined : parseByteSize(a.forwardBody.maxSize);
  const config = {
    service: `${ref.kind ?? "Service"} ${ns}/${ref.name}${ref.port !== undefined ? ` port ${ref.port}` : ""}`,
    protocol: http === undefined ? ("grpc" as const) : ("http" as const),
    authority: ref.name,
    contextExtensions: http === undefined ? { ...(a.grpc?.contextExtensions ?? {}) } : {},
    timeoutMs: PROVIDER_CHECK_TIMEOUT_MS,
    failureMode: a.failureMode ?? "FailClosed",
    ...(http !== undefined ? { http } : {}),
    ...(Object.keys(expressions).length > 0 ? { expressions } : {}),
    ...(cache !== undefined ? { cache } : {}),
    ...(forwardBody !== undefined ? { forwardBody } : {}),
    policy: `${f.from.kind} ${f.from.name}`,
  };
  const resolved = route.policy?.refs?.[`${providerExtAuthPath(b.cluster, provider)}.backendRef`];
  let targets: UnaryTarget[] = [];
  if (resolved === undefined || "error" in resolved) {
    note(
      "backendRef",
      `${resolved?.error ?? "not resolved"}; checks of attempts to provider ${provider} fail until it resolves (the failure mode applies)`,
    );
  } else {
    const t = unaryTargets(clusters.get(resolved.cluster), resolved.cluster);
    if ("problem" in t) note("backendRef", t.problem, t.reason);
    else targets = t.targets;
  }
  return { ...config, scope: scopeOf({ providerExtAuthScope: config }), targets };
}
