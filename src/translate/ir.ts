// The intermediate representation: per Gateway, plain readonly data with no Envoy or Kubernetes types.
// translate<Kind> functions produce it from resources; build<EnvoyThing> functions turn it into xDS.

import type { CredentialPlan } from "../credentials/plan.js";
import type { TransformationSpec } from "../extproc/transformation.js";
import type { TunnelIR } from "./backend/tunnel.js";

export interface GatewayIR {
  /** `namespace/name` of the Gateway; also the xDS node group its Envoys belong to. */
  readonly key: string;
  readonly listeners: readonly ListenerIR[];
  readonly routeConfigs: readonly RouteConfigIR[];
  readonly clusters: readonly ClusterIR[];
  readonly secrets: readonly SecretIR[];
}

/** One Envoy listener: one bind address and port, shared by every Gateway listener on that port. */
export interface ListenerIR {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  readonly protocol: "HTTP" | "HTTPS";
  /** HTTP: one chain for the port. HTTPS: one chain per Gateway listener, chosen by SNI. */
  readonly filterChains: readonly FilterChainIR[];
  /** Effective frontend policy of the Gateway on this port; absent when no policy applies. */
  readonly policy?: ListenerPolicyIR;
}

export interface FilterChainIR {
  readonly name: string;
  /** SNI names this chain answers (`*.suffix` allowed); empty = any (the default chain). */
  readonly serverNames: readonly string[];
  /** TLS termination with these certificates (SDS secret names), several for RSA + ECDSA. */
  readonly tls?: { readonly secrets: readonly string[] };
  /** Route configuration (RDS) of this chain. */
  readonly routeConfigName: string;
}

export interface RouteConfigIR {
  readonly name: string;
  readonly virtualHosts: readonly VirtualHostIR[];
}

/** A TLS certificate and its key, served to Envoy over SDS. */
export interface SecretIR {
  readonly name: string;
  readonly certificateChain: string;
  readonly privateKey: string;
}

export interface VirtualHostIR {
  readonly name: string;
  /** Host names (lowercase, `*` or `*.suffix` wildcards) this virtual host answers. */
  readonly domains: readonly string[];
  readonly routes: readonly RouteIR[];
}

export interface StringMatchIR {
  readonly type: "Exact" | "RegularExpression";
  readonly value: string;
}

export interface RouteMatchIR {
  readonly path: { readonly type: "Exact" | "PathPrefix" | "RegularExpression"; readonly value: string };
  readonly headers: readonly (StringMatchIR & { readonly name: string })[];
  readonly queryParams: readonly (StringMatchIR & { readonly name: string })[];
  readonly method?: string;
}

export interface HeaderMutationIR {
  readonly set: readonly { readonly name: string; readonly value: string }[];
  readonly add: readonly { readonly name: string; readonly value: string }[];
  readonly remove: readonly string[];
}

export interface WeightedBackendIR {
  readonly cluster: string;
  readonly weight: number;
  readonly requestHeaders?: HeaderMutationIR;
  readonly responseHeaders?: HeaderMutationIR;
}

export interface PathRewriteIR {
  readonly type: "ReplaceFullPath" | "ReplacePrefixMatch";
  readonly value: string;
}

export type RouteActionIR =
  | {
      readonly kind: "forward";
      readonly backends: readonly WeightedBackendIR[];
      readonly timeout?: string;
      readonly rewrite?: { readonly hostname?: string; readonly path?: PathRewriteIR };
      readonly mirrors: readonly { readonly cluster: string; readonly percent: number }[];
      /** AI backends: retries that move to the next provider / priority group (ARCHITECTURE.md). */
      readonly failover?: { readonly retries: number };
      /** A backend whose answers take minutes (an agent runtime): no 15 s default timeout. */
      readonly longLived?: true;
    }
  | {
      readonly kind: "redirect";
      readonly scheme?: string;
      readonly hostname?: string;
      readonly port?: number;
      readonly path?: PathRewriteIR;
      readonly statusCode: number;
    }
  | { readonly kind: "direct"; readonly status: number; readonly body?: string };

export interface RouteIR {
  /** Names the route back to its source: `httproute/<ns>/<name>/rule/<i>/match/<j>`. */
  readonly name: string;
  readonly match: RouteMatchIR;
  readonly action: RouteActionIR;
  readonly requestHeaders?: HeaderMutationIR;
  readonly responseHeaders?: HeaderMutationIR;
  /** Effective traffic and backend policies of this rule, through the listener it is served on; absent when none. */
  readonly policy?: RoutePolicyIR;
  /**
   * `backend.auth` / `backend.tls` of this route's backends that could not be applied (xds/backend-connection.ts):
   * reported, and a fatal one makes the route answer 503.
   */
  readonly backendProblems?: readonly BackendProblemIR[];
}

export interface BackendProblemIR {
  readonly from: PolicySourceIR;
  readonly field: string;
  readonly message: string;
  readonly fatal: boolean;
}

export interface EndpointIR {
  readonly address: string;
  readonly port: number;
  readonly ready: boolean;
}

/** Backend policy connection settings of a Service or static backend (xds/backend-connection.ts). */
export interface BackendConnectionIR {
  readonly connectTimeoutMs?: number;
  readonly keepalive?: { readonly timeMs: number; readonly intervalMs: number; readonly probes: number };
  /** `http.version`: HTTP/2 or HTTP/1.1 toward the backend, whatever the Service port says. */
  readonly http2?: boolean;
  readonly eviction?: { readonly consecutiveFailures: number; readonly durationMs: number };
  /** `backend.tls`: TLS from Envoy to the backend (xds/backend-tls.ts). */
  readonly tls?: BackendTlsIR;
  /** `backend.tunnel`: the HTTP CONNECT proxy the TLS connections go through (backend/tunnel.ts). */
  readonly tunnel?: TunnelIR;
  /** `backend.auth` injected by Envoy on this cluster's requests (xds/backend-credential.ts). */
  readonly credential?: {
    readonly secret: string;
    readonly value: string;
    readonly header: string;
    readonly prefix: string;
  };
  /** `backend.auth` Sluice mints per request (src/credentials/): the plan its upstream ext_proc serves. */
  readonly minted?: CredentialPlan;
  /**
   * `backend.transformation` and a `retry.condition` Sluice evaluates: Sluice's transformation ext_proc as an upstream
   * filter of this cluster, per attempt (xds/backend-transformation.ts).
   */
  readonly upstreamTransformation?: UpstreamTransformationIR;
  /**
   * `health.unhealthyCondition`, `eviction.restoreHealth`, `eviction.healthThreshold`: Sluice scores each endpoint from
   * the responses its upstream ext_proc sees and evicts through this cluster's own EDS (xds/backend-health.ts).
   */
  readonly healthScore?: HealthScoreIR;
}

/** What Sluice's endpoint health scoring of a cluster needs (src/health/endpoint-health.ts). */
export interface HealthScoreIR {
  /** CEL over `response`; absent: any 5xx is unhealthy. */
  readonly condition?: string;
  /** Whether the condition reads `response.body` (Envoy then streams the body to Sluice). */
  readonly responseBody: boolean;
  /** Unhealthy responses in a row that evict; absent when unset (or 0). */
  readonly consecutiveFailures?: number;
  /** Health (0..100) below which an endpoint is evicted; absent when unset. */
  readonly healthThreshold?: number;
  /** Health an endpoint returns with; absent: the health it held when evicted. */
  readonly restoreHealth?: number;
  /** Base eviction time; the n-th eviction lasts n times this. */
  readonly durationMs: number;
  /** An AI cluster: a provider's own `health`, which replaces this one as a whole for that provider (xds/llm-health.ts). */
  readonly providers?: Readonly<Record<string, HealthScoreIR>>;
}

/** What the upstream transformation ext_proc of a cluster carries. */
export interface UpstreamTransformationIR {
  readonly spec: TransformationSpec;
  /** Whether an expression reads `source` (Envoy then sends the peer's address). */
  readonly source: boolean;
  /** Whether an expression reads an identity (`jwt`, ...): the downstream filters' metadata is forwarded. */
  readonly identity: boolean;
}

export interface BackendTlsIR {
  readonly sni?: string;
  /** Names the backend's certificate must carry (empty: no name check). */
  readonly sans: readonly string[];
  /** PEM CA bundle; absent: the system bundle. */
  readonly ca?: string;
  readonly insecure?: "All" | "Hostname";
  readonly alpn?: readonly string[];
  readonly curves?: readonly string[];
  /** mTLS: the client certificate, served to Envoy as an SDS secret. */
  readonly clientCert?: { readonly secret: string; readonly chain: string; readonly key: string };
}

/**
 * The agent runtime a GwBackend `cloudA.agentCore` names, resolved: every request to its cluster is rewritten to the
 * runtime's InvokeAgentRuntime call (`:path`, `:authority`) and signed (or given the backend's own credential) by
 * Sluice's credential ext_proc; the cluster's connection always carries that plan.
 */
export interface AgentCoreIR {
  /** `namespace/name` of the GwBackend. */
  readonly backend: string;
  /** The ARN's region: the signing region. */
  readonly region: string;
  /** `/runtimes/<ARN, percent-encoded>/invocations`, with `?qualifier=` when set. */
  readonly path: string;
  /** The endpoint's host (with its port when not the scheme's). */
  readonly authority: string;
}

/** A cluster variant made for a backend policy's connection settings; the base cluster's EDS name when EDS. */
interface ConnectionVariant {
  readonly connection?: BackendConnectionIR;
  readonly edsServiceName?: string;
}

export type ClusterIR =
  | ({
      readonly kind: "eds";
      readonly name: string;
      readonly endpoints: readonly EndpointIR[];
      readonly http2: boolean;
    } & ConnectionVariant)
  | ({
      readonly kind: "dns";
      readonly name: string;
      readonly host: string;
      readonly port: number;
      readonly http2: boolean;
      /** A GwBackend `a2a`: its agent card is served with the Gateway's address (filters/a2a.ts). */
      readonly a2a?: true;
      /** A GwBackend `cloudA.agentCore` (backend/agent-core.ts). */
      readonly agentCore?: AgentCoreIR;
    } & ConnectionVariant)
  | ({
      readonly kind: "static";
      readonly name: string;
      readonly endpoints: readonly EndpointIR[];
      readonly http2: boolean;
      readonly a2a?: true;
      readonly agentCore?: AgentCoreIR;
    } & ConnectionVariant)
  | ({
      readonly kind: "unix";
      readonly name: string;
      readonly path: string;
      readonly http2: boolean;
    } & ConnectionVariant)
  | ({
      /** A GwBackend `dynamicForwardProxy`: each request to the host its Host header names (filters/dynamic-forward-proxy.ts). */
      readonly kind: "dfp";
      readonly name: string;
      readonly http2: boolean;
    } & ConnectionVariant)
  | ({
      /**
       * An HTTPRoute's InferencePool backendRef: no endpoints; Envoy connects to the model server the pool's endpoint
       * picker names per request (ORIGINAL_DST on the picked endpoint's dynamic metadata), on the pool's target port.
       */
      readonly kind: "pool";
      readonly name: string;
      readonly pool: InferencePoolIR;
      readonly http2: boolean;
    } & ConnectionVariant)
  | LlmClusterIR
  | McpClusterIR;

/**
 * An MCP GwBackend as one Gateway reaches it: served by Sluice's MCP service (src/mcp/), not an Envoy cluster; its
 * targets are in the MCP table (translate/mcp/table.ts) under this name.
 */
export interface McpClusterIR {
  readonly kind: "mcp";
  readonly name: string;
  readonly http2: false;
  /** `namespace/name` of the Gateway and of the GwBackend. */
  readonly gateway: string;
  readonly backend: string;
  readonly connection?: undefined;
}

/**
 * The cluster of an AI GwBackend: one locality per priority group, one endpoint per provider (its metadata names the
 * provider, for the upstream Sluice ext_proc), outlier detection for eviction and an upstream ext_proc filter.
 */
export interface LlmClusterIR {
  readonly kind: "llm";
  readonly name: string;
  readonly http2: false;
  /** `namespace/name` of the GwBackend. */
  readonly backend: string;
  /** Priority groups in order; a single `provider` is one group of one provider named `default`. */
  readonly groups: readonly (readonly LlmProviderIR[])[];
  readonly eviction: { readonly consecutiveFailures: number; readonly durationMs: number };
  /** The GwBackend's own `policies.tcp` and `policies.http.version`, for the whole cluster (backend/ai.ts). */
  readonly connection?: Pick<BackendConnectionIR, "connectTimeoutMs" | "keepalive" | "http2">;
  /** `backend.transformation` of every route reaching it: an upstream filter after the LLM one (xds/llm-transformation.ts). */
  readonly transformation?: UpstreamTransformationIR;
  /**
   * Sluice's health scoring of the providers (xds/llm-health.ts): the cluster is then EDS, its providers' host names
   * resolved by Sluice (health/provider-dns.ts), and evicted providers marked UNHEALTHY there.
   */
  readonly health?: HealthScoreIR;
  /**
   * A scored variant with its cluster's scoring and endpoints: the cluster whose EDS resource it reads and whose
   * scoring it reports to (absent: its own, keyed by its name; xds/llm-health.ts).
   */
  readonly edsOf?: string;
}

/** Wire protocol family of a provider (src/llm/providers.ts ProviderSettings kinds, plus `custom`). */
export type LlmProviderKind =
  | "openai"
  | "azure-openai"
  | "azure-foundry"
  | "anthropic"
  | "gemini"
  | "vertex"
  | "bedrock"
  | "custom";

export interface LlmProviderIR {
  readonly name: string;
  readonly kind: LlmProviderKind;
  /** The provider's host and port (SNI, ID token audience); where Envoy connects unless `endpoints` is set. */
  readonly address: string;
  readonly port: number;
  /** A `custom` provider with a Service backendRef: the Service's ready endpoints, where Envoy connects instead. */
  readonly endpoints?: readonly { readonly address: string; readonly port: number }[];
  /**
   * TLS (real provider hosts on 443, or a `tls` policy): the GwBackend's or the provider's own `policies.tls` resolved
   * as a Service's is (xds/backend-tls.ts); without `sans`, the system CAs with the SNI as the name to check; absent =
   * plain HTTP.
   */
  readonly tls?: Omit<BackendTlsIR, "sans"> & { readonly sni?: string; readonly sans?: readonly string[] };
  /** The provider's `tunnel` policy: its TLS connections go through this HTTP CONNECT proxy (backend/tunnel.ts). */
  readonly tunnel?: TunnelIR;
  /** `:authority` sent to the provider. */
  readonly authority: string;
  /** The provider variant's own settings as written (model, endpoint, deploymentName, region, formats ...). */
  readonly settings: Readonly<Record<string, unknown>>;
  readonly path?: string;
  readonly pathPrefix?: string;
  /**
   * A GwModel `baseURL`'s path for a provider whose API version is part of its own path (Gemini's `/v1beta`, Vertex
   * AI's `/v1/projects/...`, Bedrock's `/model/...`, Azure's `/openai/...`, a custom provider's format paths): put
   * before every path the provider is sent, as those providers' SDKs do with a custom base URL.
   */
  readonly basePath?: string;
  /**
   * A `custom` provider with an InferencePool backendRef: Envoy connects to the model server the pool's endpoint
   * picker names per request (an ORIGINAL_DST cluster reading its answer), after calling the picker over ext_proc.
   */
  readonly pool?: InferencePoolIR;
  /**
   * The provider's own `tcp` / `http` (its `policies`, or a GwPolicy targeting it by sectionName), each replacing the
   * cluster's as a whole (backend/ai-provider-connection.ts); served through a hop of its own where it differs from
   * the cluster's (xds/llm-provider-hop.ts).
   */
  readonly connection?: ProviderConnectionIR;
  /** Its share of its priority group's requests (Envoy's load balancing weight); absent = 1. */
  readonly weight?: number;
}

/** A provider's own connection fields: a field present replaces the cluster's whole (spec: merge per top-level field). */
export interface ProviderConnectionIR {
  readonly tcp?: Pick<BackendConnectionIR, "connectTimeoutMs" | "keepalive">;
  readonly http?: { readonly http2?: boolean; readonly requestTimeoutMs?: number };
}

export interface InferencePoolIR {
  /** `namespace/name` of the InferencePool. */
  readonly name: string;
  /** The endpoint picker's cluster (HTTP/2, gRPC) and the Service it was resolved from. */
  readonly picker: {
    readonly cluster: string;
    readonly service: string;
    readonly endpoints: readonly EndpointIR[];
  };
  /** FailOpen: a request goes on when the picker cannot be reached, to one of `fallback` (see docs/llm.md). */
  readonly failOpen: boolean;
  /** With FailOpen: the pool's ready Pods, `ip:port` at its first target port, sorted (backend/ai.ts poolFallback). */
  readonly fallback?: readonly string[];
}

// ---- Effective policies (src/translate/policy/). Each field keeps the policy it came from, for `sluice explain`.

/**
 * Where a policy field was attached, least to most specific. `port`: a frontend policy on one port of a Gateway.
 * `backend`/`backendSection`: a GwPolicy on a Service or GwBackend, or on one Service port / sub-backend of it.
 * `gwBackend`: the GwBackend's own `spec.policies`; `subBackend`: a provider's or MCP target's own `policies`.
 */
export type PolicyLevel =
  | "gateway"
  | "port"
  | "listener"
  | "route"
  | "rule"
  | "backend"
  | "backendSection"
  | "gwBackend"
  | "subBackend";

export interface PolicySourceIR {
  /** `GwPolicy` for policy resources, `GwBackend` for policies embedded in a GwBackend. */
  readonly kind: "GwPolicy" | "GwBackend";
  /** `namespace/name` of that resource. */
  readonly name: string;
  readonly level: PolicyLevel;
  /** The attachment point, e.g. `HTTPRoute default/api rule read` or `Gateway default/gw listener http`. */
  readonly target: string;
}

export interface PolicyValueIR {
  /** The field's value exactly as written in the policy (JSON). */
  readonly value: unknown;
  readonly from: PolicySourceIR;
}

/** One top-level field: a single value, or for authorization fields the combined rules of several policies. */
export type PolicyFieldIR = PolicyValueIR | { readonly combined: readonly PolicyValueIR[] };

/** A merged policy section: top-level field name → field, keys sorted. */
export type EffectivePolicyIR = Readonly<Record<string, PolicyFieldIR>>;

export interface ListenerPolicyIR {
  readonly frontend: EffectivePolicyIR;
  /**
   * The connection fields (`tls`, `tcp`, `http`) of the backend policies of the OTLP collectors `frontend` names
   * (tracing, accessLog.otlp), keyed by policy/engine.ts refBackendKey: Envoy's exports to them, and Sluice's span
   * relay, get them (xds/frontend-collector.ts).
   */
  readonly refBackends?: Readonly<Record<string, RefBackendIR>>;
}

export interface SubBackendPolicyIR {
  /** Provider name (AI backends) or target name (MCP backends). */
  readonly name: string;
  readonly policy: EffectivePolicyIR;
}

export interface BackendPolicyIR {
  /** `Service ns/name port 8080` or `GwBackend ns/name`. */
  readonly backend: string;
  /** Name of the cluster the backendRef resolves to (absent from `clusters` while its backend type is not served). */
  readonly cluster: string;
  /** Backend policy for the backend as a whole. */
  readonly policy: EffectivePolicyIR;
  /** Per provider / MCP target of a GwBackend, in declaration order; each includes `policy` plus its own levels. */
  readonly subBackends?: readonly SubBackendPolicyIR[];
}

export interface RoutePolicyIR {
  /** Traffic policies with `phase: PreRouting` (Gateway and listener levels only); never merged with `traffic`. */
  readonly preRouting?: EffectivePolicyIR;
  /** Traffic policies with `phase: PostRouting` (the default). */
  readonly traffic?: EffectivePolicyIR;
  /** One entry per backendRef of the rule that some backend policy applies to, in backendRef order. */
  readonly backends?: readonly BackendPolicyIR[];
  /**
   * backendRefs inside the preRouting/traffic fields (JWKS servers, rate limit, ext_authz and ext_proc services),
   * resolved to clusters, keyed by field path (`traffic.extAuth.backendRef`).
   */
  readonly refs?: Readonly<Record<string, PolicyRefIR>>;
  /**
   * The connection fields (`tls`, `tcp`, `http`) of the backend policies of the Services and GwBackends those
   * backendRefs name, keyed by policy/engine.ts refBackendKey: Envoy's calls to them get them
   * (xds/backend-connection.ts).
   */
  readonly refBackends?: Readonly<Record<string, RefBackendIR>>;
}

/** A backend policy's part for Envoy's calls to a service a traffic field names (RoutePolicyIR.refBackends). */
export interface RefBackendIR {
  /** Its `tls`, `tcp` and `http`. */
  readonly policy: EffectivePolicyIR;
  /** The other backend fields of the same GwPolicies: they do nothing on those calls (reported). */
  readonly unserved: readonly { readonly from: PolicySourceIR; readonly field: string }[];
}

/** A backendRef of a policy field: the cluster it resolves to, or why it does not resolve. */
export type PolicyRefIR =
  | {
      readonly cluster: string;
      /** The Service's connection policy (RoutePolicyIR.refBackends), applied by a variant of `cluster`. */
      readonly connection?: { readonly backend: string } & RefBackendIR;
    }
  | { readonly error: string };
