// ClusterIR → Envoy Cluster (+ ClusterLoadAssignment for EDS clusters).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import {
  type Cluster,
  Cluster_DiscoveryType,
  Cluster_LbPolicy,
  ClusterSchema,
} from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { HealthStatus } from "../../gen/envoy/config/core/v3/health_check_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../../gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { UpstreamCodecSchema } from "../../gen/envoy/extensions/filters/http/upstream_codec/v3/upstream_codec_pb.js";
import { HttpProtocolOptionsSchema } from "../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { durationFromMs } from "../duration.js";
import type { BackendConnectionIR, ClusterIR, EndpointIR } from "../ir.js";
import { socketAddress } from "./address.js";
import { credentialExtProc, credentialInjector } from "./backend-credential.js";
import { backendHealthFilter, HEALTH_FILTER_NAME, localOriginOutlierDetection } from "./backend-health.js";
import { upstreamTransformationFilter } from "./backend-transformation.js";
import { DFP_CLUSTER_TYPE, dfpClusterConfig } from "./filters/dynamic-forward-proxy.js";
import { buildLlmCluster, EVICTION_PANIC_PERCENT, llmLoadAssignment, pickedEndpointTargets } from "./llm.js";
import { throughTunnel } from "./tunnel.js";
import { upstreamTls } from "./upstream-tls.js";

const CONNECT_TIMEOUT_MS = 5000;
const HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

function loadAssignment(
  clusterName: string,
  endpoints: readonly EndpointIR[],
): MessageInitShape<typeof ClusterLoadAssignmentSchema> {
  return {
    clusterName,
    endpoints: [
      {
        lbEndpoints: endpoints.map((e) => ({
          hostIdentifier: { case: "endpoint", value: { address: socketAddress(e.address, e.port) } },
          healthStatus: e.ready ? HealthStatus.HEALTHY : HealthStatus.UNHEALTHY,
        })),
      },
    ],
  };
}

/**
 * The cluster's HTTP protocol options: HTTP/2 when the backend speaks it, and the upstream filters (the transformation
 * ext_proc, the credential_injector or ext_proc of `backend.auth`, then the codec); none when neither applies.
 */
function protocolOptions(
  cluster: string,
  http2: boolean,
  conn: BackendConnectionIR | undefined,
  dynamicHost = false,
): Pick<MessageInitShape<typeof ClusterSchema>, "typedExtensionProtocolOptions"> {
  const credential = conn?.credential;
  const minted = conn?.minted;
  // backend.tls offering both h2 and http/1.1 without http.version: the protocol ALPN agrees on.
  const alpn = conn?.tls?.alpn;
  const auto = conn?.http2 === undefined && alpn !== undefined && alpn.includes("h2") && alpn.includes("http/1.1");
  // TLS to hosts known per request (dynamic forward proxy): SNI, and unless verification is off the certificate's
  // name, from the request's host.
  const perHostTls = dynamicHost && conn?.tls !== undefined;
  const transformation = conn?.upstreamTransformation;
  // Upstream filters in order: the transformation (backend-transformation.ts), then the credential, which must see
  // the request as it leaves (SigV4 signs the final body), then the codec.
  const filters = [
    ...(transformation !== undefined
      ? [
          {
            name: "sluice.backend_transformation",
            configType: { case: "typedConfig" as const, value: upstreamTransformationFilter(transformation) },
          },
        ]
      : []),
    ...(credential !== undefined
      ? [
          {
            name: "sluice.credential_injector",
            configType: { case: "typedConfig" as const, value: credentialInjector(credential) },
          },
        ]
      : minted !== undefined
        ? [
            {
              name: "sluice.credential_ext_proc",
              configType: { case: "typedConfig" as const, value: credentialExtProc(minted) },
            },
          ]
        : []),
    // Last before the codec: it reports the response as the endpoint sent it (backend-health.ts).
    ...(conn?.healthScore !== undefined
      ? [
          {
            name: HEALTH_FILTER_NAME,
            configType: { case: "typedConfig" as const, value: backendHealthFilter(cluster, conn.healthScore) },
          },
        ]
      : []),
  ];
  if (!http2 && filters.length === 0 && !auto && !perHostTls) return {};
  return {
    typedExtensionProtocolOptions: {
      [HTTP_PROTOCOL_OPTIONS]: anyPack(
        HttpProtocolOptionsSchema,
        create(HttpProtocolOptionsSchema, {
          ...(perHostTls
            ? {
                upstreamHttpProtocolOptions: {
                  autoSni: conn?.tls?.sni === undefined,
                  autoSanValidation: conn?.tls?.insecure === undefined && (conn?.tls?.sans.length ?? 0) === 0,
                },
              }
            : {}),
          upstreamProtocolOptions: auto
            ? { case: "autoConfig", value: { httpProtocolOptions: {}, http2ProtocolOptions: {} } }
            : {
                case: "explicitHttpConfig",
                value: {
                  protocolConfig: http2
                    ? { case: "http2ProtocolOptions", value: {} }
                    : { case: "httpProtocolOptions", value: {} },
                },
              },
          ...(filters.length > 0
            ? {
                httpFilters: [
                  ...filters,
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
}

/**
 * Outlier detection beside Sluice's health scoring (backend-health.ts): local-origin errors only (connect failures,
 * resets, timeouts, which no filter sees as a response), `consecutiveFailures` of them in a row; the status codes are
 * Sluice's to judge, so neither 5xx counter nor the success rate ejects.
 */
function scoredOutlierDetection(
  consecutiveFailures: number,
  durationMs: number,
): Pick<MessageInitShape<typeof ClusterSchema>, "outlierDetection" | "commonLbConfig"> {
  return {
    outlierDetection: localOriginOutlierDetection(consecutiveFailures, durationMs),
    // Every endpoint evicted (by Sluice's EDS or outlier detection): Envoy's panic mode uses them all (llm.ts).
    commonLbConfig: { healthyPanicThreshold: { value: EVICTION_PANIC_PERCENT } },
  };
}

/** `llmUpstreamStage`: for an AI cluster, whether it keeps the upstream LLM ext_proc (llm/stages.ts). */
export function buildCluster(c: ClusterIR, llmUpstreamStage = true): Cluster {
  if (c.kind === "llm") {
    const t = c.transformation;
    return buildLlmCluster(c, llmUpstreamStage, t === undefined ? undefined : upstreamTransformationFilter(t));
  }
  if (c.kind === "mcp") throw new Error(`bug: MCP backend ${c.backend} has no Envoy cluster of its own`);
  const conn = c.connection;
  const http2 = conn?.http2 ?? c.http2;
  const base: MessageInitShape<typeof ClusterSchema> = {
    name: c.name,
    connectTimeout: durationFromMs(conn?.connectTimeoutMs ?? CONNECT_TIMEOUT_MS),
    ...(conn?.keepalive !== undefined
      ? {
          upstreamConnectionOptions: {
            tcpKeepalive: {
              keepaliveProbes: conn.keepalive.probes,
              keepaliveTime: Math.max(1, Math.round(conn.keepalive.timeMs / 1000)),
              keepaliveInterval: Math.max(1, Math.round(conn.keepalive.intervalMs / 1000)),
            },
          },
        }
      : {}),
    // Backend policy health.eviction: an endpoint that fails is ejected for the duration, times its ejections.
    ...(conn?.healthScore !== undefined
      ? scoredOutlierDetection(conn.eviction?.consecutiveFailures ?? 1, conn.healthScore.durationMs)
      : conn?.eviction !== undefined
        ? {
            outlierDetection: {
              consecutive5xx: conn.eviction.consecutiveFailures,
              consecutiveGatewayFailure: conn.eviction.consecutiveFailures,
              baseEjectionTime: durationFromMs(conn.eviction.durationMs),
              interval: durationFromMs(Math.min(1000, conn.eviction.durationMs)),
              maxEjectionPercent: 100,
            },
            // Spec: evicted endpoints return only when every endpoint is evicted. Envoy's panic mode (default below
            // 50 % healthy) would send traffic to them as soon as most are; at 1 % it starts when none is left (llm.ts).
            commonLbConfig: { healthyPanicThreshold: { value: EVICTION_PANIC_PERCENT } },
          }
        : {}),
    ...protocolOptions(c.name, http2, conn, c.kind === "dfp"),
    ...(conn?.tls !== undefined ? { transportSocket: throughTunnel(upstreamTls(conn.tls, http2), conn.tunnel) } : {}),
  };
  switch (c.kind) {
    case "eds":
      return create(ClusterSchema, {
        ...base,
        clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.EDS },
        edsClusterConfig: {
          serviceName: c.edsServiceName ?? c.name,
          edsConfig: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
        },
      });
    case "static":
      return create(ClusterSchema, {
        ...base,
        clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STATIC },
        loadAssignment: loadAssignment(c.name, c.endpoints),
      });
    case "dns":
      return create(ClusterSchema, {
        ...base,
        clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STRICT_DNS },
        loadAssignment: loadAssignment(c.name, [{ address: c.host, port: c.port, ready: true }]),
      });
    case "dfp":
      // Endpoints come from the DNS cache the route's dynamic forward proxy filter filled for the Host header.
      return create(ClusterSchema, {
        ...base,
        lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
        clusterDiscoveryType: {
          case: "clusterType",
          value: { name: DFP_CLUSTER_TYPE, typedConfig: dfpClusterConfig() },
        },
      });
    case "pool":
      // The picker names the model server per request; none is known here (filters/inference-pool.ts).
      return create(ClusterSchema, { ...base, ...pickedEndpointTargets() });
    case "unix":
      return create(ClusterSchema, {
        ...base,
        clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STATIC },
        loadAssignment: {
          clusterName: c.name,
          endpoints: [
            {
              lbEndpoints: [
                {
                  hostIdentifier: {
                    case: "endpoint",
                    value: { address: { address: { case: "pipe", value: { path: c.path } } } },
                  },
                },
              ],
            },
          ],
        },
      });
  }
}

/** The EDS resource of an EDS cluster; undefined for clusters with inline endpoints. */
export function buildLoadAssignment(c: ClusterIR): ClusterLoadAssignment | undefined {
  // An AI cluster Sluice scores: its providers, host names resolved at publication (llm.ts).
  if (c.kind === "llm") return llmLoadAssignment(c);
  // A variant reads its base cluster's endpoints.
  if (c.kind !== "eds" || c.edsServiceName !== undefined) return undefined;
  return create(
    ClusterLoadAssignmentSchema,
    loadAssignment(
      c.name,
      c.endpoints.filter((e) => e.ready),
    ),
  );
}
