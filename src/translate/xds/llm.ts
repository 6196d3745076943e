// Envoy side of AI backends (ARCHITECTURE.md, "Envoy filter chain"):
// - the cluster: one locality per priority group, one endpoint per provider whose metadata names it, per-provider TLS
//   (transport_socket_matches), outlier detection for eviction, and, while a route reaching it needs two stages
//   (llm/stages.ts), an upstream ext_proc → Sluice that translates the request for the provider Envoy picked (so a
//   retry can fail over to a provider speaking another format);
// - the router-level ext_proc → Sluice's hot-path gRPC server (route type, token limits, response translation, and
//   the provider work on routes served in one stage), enabled per route with the id of the route's LLM table entry in
//   its gRPC metadata;
// - the retry policy that moves a failed attempt to another provider and then to the next priority group.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Any, anyPack } from "@bufbuild/protobuf/wkt";
import { JWT_METADATA_NAMESPACE } from "../../cel/rbac.js";
import { EXTAUTHZ_METADATA_NAMESPACE } from "../../extauthz/user-ext-auth.js";
import {
  type Cluster,
  Cluster_DiscoveryType,
  Cluster_LbPolicy,
  ClusterSchema,
} from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import type { RetryPolicySchema } from "../../gen/envoy/config/route/v3/route_components_pb.js";
import {
  type ExternalProcessor,
  ExternalProcessorSchema,
  ExtProcPerRouteSchema,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { UpstreamCodecSchema } from "../../gen/envoy/extensions/filters/http/upstream_codec/v3/upstream_codec_pb.js";
import { PreviousHostsPredicateSchema } from "../../gen/envoy/extensions/retry/host/previous_hosts/v3/previous_hosts_pb.js";
import { PreviousPrioritiesConfigSchema } from "../../gen/envoy/extensions/retry/priority/previous_priorities/v3/previous_priorities_config_pb.js";
import { UpstreamTlsContextSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import { HttpProtocolOptionsSchema } from "../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { durationFromMs } from "../duration.js";
import type { LlmClusterIR, LlmProviderIR, RouteIR } from "../ir.js";
import { PEER_ATTRIBUTES } from "../llm/provider-ext-auth.js";
import {
  LLM_CLUSTER_ATTRIBUTE,
  LLM_ENTRY_METADATA,
  LLM_METADATA_NAMESPACE,
  LLM_PROVIDER_ATTRIBUTE,
  LLM_SINGLE_PROVIDER_ATTRIBUTE,
  LLM_SINGLE_PROVIDER_KEY,
} from "../llm/table.js";
import { socketAddress } from "./address.js";
import { backendHealthFilter, HEALTH_FILTER_NAME, localOriginOutlierDetection } from "./backend-health.js";
import { extProcOnRoute } from "./filters/ext-proc-route.js";
import { sluiceStageProcessor } from "./filters/sluice-stage.js";
import { type FilterInstance, FilterOrder, type HttpFilterBuilder } from "./filters/types.js";
import {
  hopOwner,
  providerHopAddress,
  providerHops,
  providerTransportSocket,
  tcpKeepalive,
} from "./llm-provider-hop.js";

const HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
export const LLM_ROUTER_FILTER = "sluice.llm_ext_proc";
const LLM_UPSTREAM_FILTER = "sluice.llm_upstream_ext_proc";
/** A Service's is named the same (cluster.ts): one filter, one name in stats and config dumps. */
const LLM_TRANSFORMATION_FILTER = "sluice.backend_transformation";
/**
 * Envoy's healthy panic threshold on clusters that evict (outlier detection): below this share of healthy endpoints
 * Envoy sends traffic to every endpoint, evicted or not. Envoy's default is 50 %; the spec returns evicted endpoints
 * only when every one is evicted. Envoy compares whole percents (healthy share × its 1.4 overprovisioning factor), so
 * 1 % holds until the last endpoint is evicted for clusters of fewer than 140 endpoints; 0 would disable the fallback.
 */
export const EVICTION_PANIC_PERCENT = 1;
/** Upstream (per attempt): headers only; the body comes from the router-level stream's state and is replaced. */
function upstreamExtProc(): ExternalProcessor {
  return create(ExternalProcessorSchema, {
    // A provider's latency is not counted in the 5 s per message.
    ...sluiceStageProcessor("upstream"),
    requestAttributes: [LLM_PROVIDER_ATTRIBUTE, LLM_CLUSTER_ATTRIBUTE],
    // What a provider's extAuth told, as `extauthz` for the filters after (extproc/llm/provider-ext-auth.ts).
    metadataOptions: { receivingNamespaces: { untyped: [EXTAUTHZ_METADATA_NAMESPACE] } },
    // The translated request goes to another host and path; its length is the translated body's.
    mutationRules: { allowAllRouting: true, allowEnvoy: false },
    allowContentLengthHeader: true,
  });
}

/**
 * Router level: the whole request body once; response headers, then the body buffered or streamed per response. On a
 * route served in one stage it also sets the provider's path and authority (headers Envoy's router reads after it;
 * the route is not selected again, as no response asks to clear the route cache).
 */
export function routerExtProc(): ExternalProcessor {
  return create(ExternalProcessorSchema, {
    ...sluiceStageProcessor("router", {
      requestBodyMode: ProcessingMode_BodySendMode.BUFFERED,
      responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
      responseBodyMode: ProcessingMode_BodySendMode.BUFFERED,
    }),
    allowModeOverride: true,
    // The cluster Envoy routes to, and its one provider when it has no upstream stage (see singleOf in the service);
    // the client's connection, which a provider's extAuth check carries (extproc/llm/provider-ext-auth.ts).
    requestAttributes: [LLM_CLUSTER_ATTRIBUTE, LLM_SINGLE_PROVIDER_ATTRIBUTE, ...PEER_ATTRIBUTES],
    // `envoy.lb`: an InferencePool's ready Pod with FailOpen, which the pool's picker, after this filter, replaces.
    metadataOptions: {
      receivingNamespaces: {
        untyped: [LLM_METADATA_NAMESPACE, EXTAUTHZ_METADATA_NAMESPACE, PICKED_ENDPOINT_METADATA.namespace],
      },
    },
    // One stage: the provider's `:authority` (a routing header, refused without this) and the translated length.
    mutationRules: { allowAllRouting: true, allowEnvoy: false },
    allowContentLengthHeader: true,
  });
}

/** Dynamic metadata namespaces holding a request's identity (`jwt`, and `apiKey`/`basicAuth`/`extauthz`). */
export const IDENTITY_NAMESPACES = [JWT_METADATA_NAMESPACE, EXTAUTHZ_METADATA_NAMESPACE];
const IDENTITY_FIELDS = ["jwtAuthentication", "apiKeyAuthentication", "basicAuthentication", "extAuth"];

/** Whether something on the route leaves an identity in the dynamic metadata (JWT, API key, basic auth, extAuth). */
function hasIdentity(route: RouteIR): boolean {
  const p = route.policy;
  return IDENTITY_FIELDS.some((f) => p?.traffic?.[f] !== undefined || p?.preRouting?.[f] !== undefined);
}

function endpointMetadata(provider: string) {
  return { filterMetadata: { [LLM_METADATA_NAMESPACE]: { provider }, "envoy.transport_socket_match": { provider } } };
}

/** Where an InferencePool's endpoint picker names the model server for a request (the inference extension's protocol). */
export const PICKED_ENDPOINT_METADATA = { namespace: "envoy.lb", key: "x-gateway-destination-endpoint" } as const;

/**
 * The cluster of an AI backend. A single provider with an InferencePool has no endpoints: Envoy connects to the
 * address the pool's endpoint picker left in the dynamic metadata (ORIGINAL_DST). Only filters write dynamic metadata,
 * so a client cannot choose the address (a header would let it).
 */
type ClusterInit = Exclude<MessageInitShape<typeof ClusterSchema>, Cluster>;

/** ORIGINAL_DST on the endpoint an InferencePool's picker left in the dynamic metadata (PICKED_ENDPOINT_METADATA). */
export function pickedEndpointTargets(): Pick<ClusterInit, "clusterDiscoveryType" | "lbPolicy" | "lbConfig"> {
  return {
    clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.ORIGINAL_DST },
    lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
    lbConfig: {
      case: "originalDstLbConfig",
      value: {
        metadataKey: {
          key: PICKED_ENDPOINT_METADATA.namespace,
          path: [{ segment: { case: "key", value: PICKED_ENDPOINT_METADATA.key } }],
        },
      },
    },
  };
}

function llmClusterTargets(
  c: LlmClusterIR,
): Pick<ClusterInit, "clusterDiscoveryType" | "lbPolicy" | "lbConfig" | "loadAssignment" | "edsClusterConfig"> {
  const pool = c.groups.flat()[0]?.pool;
  if (pool !== undefined) return pickedEndpointTargets();
  // With a provider's hop too (an internal address, which DNS clusters do not take: llm-provider-hop.ts).
  if (c.health !== undefined || providerHops(c).hops.size > 0) {
    // Scored by Sluice: EDS, where it marks evicted providers; it resolves their host names (health/provider-dns.ts).
    return {
      clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.EDS },
      edsClusterConfig: {
        // A variant scored as the cluster it was made from reads that cluster's endpoints, marks included; any other
        // its own (its own marks, or its own hops: llm-health.ts).
        serviceName: hopOwner(c),
        edsConfig: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
      },
    };
  }
  return {
    // Providers are host names (api.openai.com ...); IP literals resolve to themselves.
    clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STRICT_DNS },
    loadAssignment: providerAssignment(c),
  };
}

/**
 * The EDS resource of an AI cluster Sluice scores or with a provider's hop (undefined for the others, and for a variant
 * scored as its cluster, which reads the cluster's: hopOwner): the providers as the STRICT_DNS cluster lists them, host names
 * included (a hop's internal address instead); Sluice resolves those when it publishes (health/provider-dns.ts), so
 * Envoy only ever gets addresses.
 */
export function llmLoadAssignment(c: LlmClusterIR): ClusterLoadAssignment | undefined {
  if (c.groups.flat()[0]?.pool !== undefined || hopOwner(c) !== c.name) return undefined;
  if (c.health === undefined && providerHops(c).hops.size === 0) return undefined;
  return create(ClusterLoadAssignmentSchema, providerAssignment(c));
}

/** Whether a cluster's providers carry weights (a weighted GwModel): each is then a locality of its own. */
const weighted = (c: LlmClusterIR) => c.groups.some((g) => g.some((p) => p.weight !== undefined));

/**
 * One locality per priority group, one endpoint per provider (or per ready endpoint of its Service). With weights,
 * one locality per provider, weighted: its share does not grow with the addresses its host name resolves to.
 */
function providerAssignment(c: LlmClusterIR): MessageInitShape<typeof ClusterLoadAssignmentSchema> {
  const { hops } = providerHops(c);
  const groups: { priority: number; providers: readonly LlmProviderIR[]; subZone: string; weight?: number }[] =
    weighted(c)
      ? c.groups.flatMap((g, priority) =>
          g.map((p) => ({ priority, providers: [p], subZone: `group-${priority}/${p.name}`, weight: p.weight ?? 1 })),
        )
      : c.groups.map((g, priority) => ({ priority, providers: g, subZone: `group-${priority}` }));
  return {
    clusterName: c.name,
    endpoints: groups.map(({ priority, providers: g, subZone, weight }) => ({
      priority,
      locality: { subZone },
      ...(weight !== undefined ? { loadBalancingWeight: weight } : {}),
      // A provider is one endpoint, or (custom provider with a Service) one per ready endpoint of the Service.
      lbEndpoints: g.flatMap((p) =>
        // A provider with connection settings of its own: one endpoint, its hop (llm-provider-hop.ts).
        (hops.has(p.name) ? [undefined] : (p.endpoints ?? [{ address: p.address, port: p.port }])).map((e) => ({
          hostIdentifier: {
            case: "endpoint" as const,
            value: {
              // A tunnel's CONNECT asks the proxy for the endpoint's host name, else its address: the provider's own
              // name, or a Service endpoint's address.
              hostname: p.tunnel === undefined ? p.name : p.endpoints === undefined ? p.address : "",
              address: e === undefined ? providerHopAddress(hopOwner(c), p.name) : socketAddress(e.address, e.port),
            },
          },
          metadata: endpointMetadata(p.name),
        })),
      ),
    })),
  };
}

/**
 * `upstreamStage`: whether the cluster keeps the upstream LLM ext_proc (some route reaching it needs two stages).
 * `transformation`: the `backend.transformation` filter config (llm-transformation.ts), placed after the LLM filter so
 * it sees the provider's request as written for it, and the provider's response before it is translated back.
 */
export function buildLlmCluster(c: LlmClusterIR, upstreamStage: boolean, transformation?: Any): Cluster {
  // Providers with connection settings of their own are reached through a hop each, with their TLS and tunnel there
  // (llm-provider-hop.ts); the cluster's settings are the rest's (all the providers' when they agree).
  const { cluster: settings, hops } = providerHops(c);
  const tlsProviders = c.groups.flat().filter((p) => p.tls !== undefined && !hops.has(p.name));
  const only = upstreamStage ? undefined : c.groups.flat()[0];
  // `policies.http.version` of the GwBackend; without it, HTTP/1.1. Never Envoy's automatic choice by ALPN: it needs
  // every endpoint of the cluster to speak TLS (Envoy refuses the cluster otherwise), and providers may be plain HTTP.
  const http2 = settings.http2;
  const init: MessageInitShape<typeof ClusterSchema> = {
    name: c.name,
    connectTimeout: durationFromMs(settings.connectTimeoutMs),
    ...llmClusterTargets(c),
    ...(settings.keepalive !== undefined
      ? { upstreamConnectionOptions: { tcpKeepalive: tcpKeepalive(settings.keepalive) } }
      : {}),
    // Each TLS provider's own transport socket: its `tls` policy resolved as a Service's (upstream-tls.ts).
    transportSocketMatches: tlsProviders.map((p) => ({
      name: `provider-${p.name}`,
      match: { provider: p.name },
      transportSocket: providerTransportSocket(p, http2),
    })),
    // Eviction (spec Health): a provider that fails is ejected for `duration`, times the number of ejections. Scored
    // by Sluice (llm-health.ts), the responses are Sluice's to judge: Envoy keeps the connection failures alone.
    outlierDetection:
      c.health !== undefined
        ? localOriginOutlierDetection(c.health.consecutiveFailures ?? 1, c.health.durationMs)
        : {
            consecutive5xx: c.eviction.consecutiveFailures,
            consecutiveGatewayFailure: c.eviction.consecutiveFailures,
            baseEjectionTime: durationFromMs(c.eviction.durationMs),
            interval: durationFromMs(Math.min(1000, c.eviction.durationMs)),
            maxEjectionPercent: 100,
          },
    // Spec: when every provider is evicted, the evicted ones are used rather than failing ("in rotation (fallback)").
    // Envoy's panic mode does exactly that; a 1 % threshold enters it only when (almost) nothing healthy is left, so a
    // healthy lower-priority group still takes over from an evicted higher one.
    commonLbConfig: {
      healthyPanicThreshold: { value: EVICTION_PANIC_PERCENT },
      // A weighted GwModel: Envoy picks a target's locality by its weight.
      ...(weighted(c) ? { localityConfigSpecifier: { case: "localityWeightedLbConfig", value: {} } } : {}),
    },
    // Without the upstream stage the router-level stage serves every request to it, whatever entry its route names.
    ...(only === undefined
      ? {}
      : { metadata: { filterMetadata: { [LLM_METADATA_NAMESPACE]: { [LLM_SINGLE_PROVIDER_KEY]: only.name } } } }),
    typedExtensionProtocolOptions: {
      [HTTP_PROTOCOL_OPTIONS]: anyPack(
        HttpProtocolOptionsSchema,
        create(HttpProtocolOptionsSchema, {
          upstreamProtocolOptions: {
            case: "explicitHttpConfig",
            value: {
              protocolConfig: http2
                ? { case: "http2ProtocolOptions", value: {} }
                : { case: "httpProtocolOptions", value: {} },
            },
          },
          // Close idle provider connections before providers typically do, so Envoy does not reuse one just closed.
          commonHttpProtocolOptions: { idleTimeout: durationFromMs(30_000) },
          // Without the upstream stage nor a transformation, Envoy's default upstream filter chain (the codec alone).
          ...(upstreamStage || transformation !== undefined || c.health !== undefined
            ? {
                httpFilters: [
                  ...(upstreamStage
                    ? [
                        {
                          name: LLM_UPSTREAM_FILTER,
                          configType: {
                            case: "typedConfig" as const,
                            value: anyPack(ExternalProcessorSchema, upstreamExtProc()),
                          },
                        },
                      ]
                    : []),
                  ...(transformation !== undefined
                    ? [
                        {
                          name: LLM_TRANSFORMATION_FILTER,
                          configType: { case: "typedConfig" as const, value: transformation },
                        },
                      ]
                    : []),
                  // Last before the codec: it reports each attempt's response as the provider sent it.
                  ...(c.health !== undefined
                    ? [
                        {
                          name: HEALTH_FILTER_NAME,
                          configType: {
                            case: "typedConfig" as const,
                            value: backendHealthFilter(hopOwner(c), c.health, true),
                          },
                        },
                      ]
                    : []),
                  {
                    name: "envoy.filters.http.upstream_codec",
                    configType: {
                      case: "typedConfig",
                      value: anyPack(UpstreamCodecSchema, create(UpstreamCodecSchema)),
                    },
                  },
                ],
              }
            : {}),
        }),
      ),
    },
  };
  return create(ClusterSchema, init);
}

/**
 * Whether a route to AI backends serves the Realtime route type (its backend's AI policy `routes` name it): such a
 * route accepts websocket upgrades, which Envoy then passes through to the provider. Only these routes: the HCM keeps
 * upgrades off, so no other route changes behaviour.
 */
export function servesRealtime(route: RouteIR): boolean {
  return (route.policy?.backends ?? []).some((b) => {
    const ai = b.policy?.ai;
    if (ai === undefined || "combined" in ai) return false;
    const routes = (ai.value as { routes?: unknown } | undefined)?.routes;
    return typeof routes === "object" && routes !== null && Object.values(routes).includes("Realtime");
  });
}

/** Retries that fail over: another host, and after a priority's hosts are tried, the next priority. */
export function failoverRetryPolicy(retries: number): MessageInitShape<typeof RetryPolicySchema> {
  if (retries === 0) {
    // One provider: retry it once, but only when nothing reached it (connection refused, or a reused connection the
    // provider had just closed), so a request is never sent twice.
    return { retryOn: "connect-failure,reset-before-request", numRetries: 1 };
  }
  return {
    retryOn: "5xx,reset,connect-failure,retriable-status-codes",
    retriableStatusCodes: [429],
    numRetries: retries,
    retryPriority: {
      name: "envoy.retry_priorities.previous_priorities",
      configType: {
        case: "typedConfig",
        value: anyPack(PreviousPrioritiesConfigSchema, create(PreviousPrioritiesConfigSchema, { updateFrequency: 1 })),
      },
    },
    retryHostPredicate: [
      {
        name: "envoy.retry_host_predicates.previous_hosts",
        configType: {
          case: "typedConfig",
          value: anyPack(PreviousHostsPredicateSchema, create(PreviousHostsPredicateSchema)),
        },
      },
    ],
    hostSelectionRetryMaxAttempts: BigInt(5),
    retryBackOff: { baseInterval: durationFromMs(5), maxInterval: durationFromMs(50) },
  };
}

/** Enables the router-level LLM ext_proc on routes that have an LLM table entry. */
export const llmExtProcBuilder: HttpFilterBuilder = {
  id: "llm-ext-proc",
  schemas: [
    ExternalProcessorSchema,
    ExtProcPerRouteSchema,
    UpstreamCodecSchema,
    UpstreamTlsContextSchema,
    PreviousHostsPredicateSchema,
    PreviousPrioritiesConfigSchema,
  ],
  forRoute(route: RouteIR, ctx) {
    const id = ctx.llmEntry?.(route.name);
    if (id === undefined) return undefined;
    const filter: FilterInstance = {
      name: LLM_ROUTER_FILTER,
      order: FilterOrder.sluiceExtProc,
      config: anyPack(ExternalProcessorSchema, routerExtProc()),
      perRoute: extProcOnRoute({
        grpcInitialMetadata: [{ key: LLM_ENTRY_METADATA, value: id }],
        // The identity CEL reads as jwt, apiKey, basicAuth, extauthz (only where the route has a source of it:
        // Envoy sends these namespaces with every message).
        ...(hasIdentity(route) ? { metadataOptions: { forwardingNamespaces: { untyped: IDENTITY_NAMESPACES } } } : {}),
      }),
    };
    return { filters: [filter] };
  },
};
