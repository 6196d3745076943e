// A provider's own connection settings (`LlmProviderIR.connection`: its own `tcp` / `http`, or a GwPolicy's targeting
// it by sectionName) served through Envoy. The AI cluster holds every provider of the GwBackend (one locality per
// priority group, llm.ts) so that Envoy's priorities fail over between them, but the connect timeout, TCP keepalive and
// HTTP protocol are a cluster's. A provider whose settings differ from the cluster's keeps its endpoint in the AI
// cluster (same priority, same metadata naming the provider, which the LLM ext_proc reads), but that endpoint is an
// internal address: an internal listener of its own, whose HTTP connection manager sends everything to a cluster of
// the provider alone with its connect timeout, keepalive, HTTP/1.1 or HTTP/2, its TLS and tunnel, and its address:
//
//   router → AI cluster (upstream filters: LLM stage, transformation, health) → endpoint
//     ├─ provider with the cluster's settings: the provider's address, as before
//     └─ provider with its own: internal listener llm-provider/<cluster>/<provider> → HCM → its own cluster → provider
//
// The inner HCM is transparent: it appends no x-forwarded-for, keeps x-request-id, adds no x-envoy-* headers, keeps
// the provider's `server` header, passes websocket upgrades (Realtime), streams bodies, has no deadline of its own
// but the provider's `http.requestTimeout` (a per-attempt deadline: the route's own covers every attempt), and writes
// no access log (the outer listener's logs the request).
//
// A provider's failure through the hop: a connect failure or timeout, or a reset, is the inner router's 503 (a
// requestTimeout its 504), which the AI route's failover retries (`5xx`) on the next provider, Envoy's outlier
// detection counts (consecutive 5xx / gateway failures), and Sluice's health scoring judges as a response (a 5xx is
// unhealthy unless `unhealthyCondition` says otherwise). A stale pooled connection is retried once by the inner
// router; a connect failure too when the provider is the cluster's only one (as the route's own retry policy does,
// llm.ts failoverRetryPolicy), since the route no longer sees a connect failure but a 503.
//
// Only providers with settings of their own get a hop. When every provider of the cluster has the same, they are the
// cluster's own (no hop); a provider's `http.requestTimeout` is always served by its hop, being a deadline per attempt.
// Envoy's DNS clusters take socket addresses only, so an AI cluster with a hop is EDS, its providers' host names
// resolved by Sluice as for a scored one (health/provider-dns.ts); a hop's cluster resolves its provider itself.
// The internal listeners need Envoy's `envoy.bootstrap.internal_listener` bootstrap extension
// (deploy/envoy/bootstrap.yaml has it).

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { type Cluster, Cluster_DiscoveryType, ClusterSchema } from "../../gen/envoy/config/cluster/v3/cluster_pb.js";
import type { AddressSchema } from "../../gen/envoy/config/core/v3/address_pb.js";
import { type Listener, ListenerSchema } from "../../gen/envoy/config/listener/v3/listener_pb.js";
import { RouterSchema } from "../../gen/envoy/extensions/filters/http/router/v3/router_pb.js";
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManager_ServerHeaderTransformation,
  HttpConnectionManagerSchema,
} from "../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { HttpProtocolOptionsSchema } from "../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { DEFAULT_CONNECT_TIMEOUT_MS } from "../backend/ai-provider-connection.js";
import { durationFromMs } from "../duration.js";
import type { BackendConnectionIR, LlmClusterIR, LlmProviderIR } from "../ir.js";
import { providerHopName } from "../names.js";
import { socketAddress } from "./address.js";
import { throughTunnel } from "./tunnel.js";
import { upstreamTls } from "./upstream-tls.js";

const HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
/** Idle provider connections are closed before providers typically close them (as the AI cluster's are, llm.ts). */
const PROVIDER_IDLE_MS = 30_000;

/** The connection settings a provider is reached with (the cluster's, or its own field by field). */
export interface ProviderSettings {
  readonly connectTimeoutMs: number;
  readonly keepalive?: NonNullable<BackendConnectionIR["keepalive"]>;
  readonly http2: boolean;
  /** A deadline per attempt to this provider (only ever the provider's own). */
  readonly requestTimeoutMs?: number;
}

/** What the cluster's own connection settings give (the GwBackend's, a GwPolicy's for it: llm-connection.ts). */
function clusterSettings(c: LlmClusterIR): ProviderSettings {
  return {
    connectTimeoutMs: c.connection?.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    ...(c.connection?.keepalive !== undefined ? { keepalive: c.connection.keepalive } : {}),
    http2: c.connection?.http2 === true,
  };
}

/** A provider's settings: its own `tcp` and `http` each replace the cluster's field as a whole. */
export function providerSettings(c: LlmClusterIR, p: LlmProviderIR): ProviderSettings {
  const base = clusterSettings(c);
  const tcp = p.connection?.tcp;
  const http = p.connection?.http;
  const keepalive = tcp !== undefined ? tcp.keepalive : base.keepalive;
  return {
    connectTimeoutMs: tcp !== undefined ? (tcp.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS) : base.connectTimeoutMs,
    ...(keepalive !== undefined ? { keepalive } : {}),
    http2: http !== undefined ? http.http2 === true : base.http2,
    ...(http?.requestTimeoutMs !== undefined ? { requestTimeoutMs: http.requestTimeoutMs } : {}),
  };
}

export interface ProviderHops {
  /** The settings of the AI cluster itself. */
  readonly cluster: ProviderSettings;
  /** The providers reached through a hop of their own, with their settings. */
  readonly hops: ReadonlyMap<string, ProviderSettings>;
}

/**
 * Which providers of `c` need a hop: those with connection fields of their own, unless every provider has the same
 * (then they are the cluster's, but a request timeout, which is per attempt). Decided from the providers' own fields
 * alone, so a variant of the cluster (llm-connection.ts, llm-transformation.ts) decides as its cluster does: a
 * variant scored as its cluster reads the cluster's endpoints (llm-health.ts). An InferencePool provider never has one
 * (a GwBackend's single `provider`, which has no policies of its own; its cluster connects where the picker says).
 */
export function providerHops(c: LlmClusterIR): ProviderHops {
  const providers = c.groups.flat().filter((p) => p.pool === undefined);
  const first = providers[0];
  const same = providers.every((p) => JSON.stringify(p.connection) === JSON.stringify(first?.connection));
  if (first === undefined || (same && first.connection?.http?.requestTimeoutMs === undefined)) {
    const { requestTimeoutMs: _, ...cluster } = first !== undefined ? providerSettings(c, first) : clusterSettings(c);
    return { cluster, hops: new Map() };
  }
  return {
    cluster: clusterSettings(c),
    hops: new Map(providers.filter((p) => p.connection !== undefined).map((p) => [p.name, providerSettings(c, p)])),
  };
}

/**
 * The AI cluster whose EDS resource (and so whose hops) `c` reads, and whose scoring its health filter reports to: its
 * own, or for a scored variant with its cluster's scoring and endpoints, that cluster's (llm-health.ts).
 */
export function hopOwner(c: LlmClusterIR): string {
  return c.edsOf ?? c.name;
}

/** The internal address an AI cluster's endpoint has for a provider reached through its hop. */
export function providerHopAddress(cluster: string, provider: string): MessageInitShape<typeof AddressSchema> {
  return {
    address: {
      case: "envoyInternalAddress",
      value: { addressNameSpecifier: { case: "serverListenerName", value: providerHopName(cluster, provider) } },
    },
  };
}

/** TCP keepalive as Envoy's cluster option (seconds, at least 1). */
export function tcpKeepalive(k: NonNullable<BackendConnectionIR["keepalive"]>) {
  return {
    keepaliveProbes: k.probes,
    keepaliveTime: Math.max(1, Math.round(k.timeMs / 1000)),
    keepaliveInterval: Math.max(1, Math.round(k.intervalMs / 1000)),
  };
}

/** A provider's TLS socket (its `tls` resolved as a Service's), inside its tunnel when it has one. */
export function providerTransportSocket(p: LlmProviderIR, http2: boolean) {
  const protocol = http2 ? "h2" : "http/1.1";
  return throughTunnel(
    upstreamTls(
      {
        ...p.tls,
        sans: p.tls?.sans ?? [p.tls?.sni ?? p.address],
        // ALPN offers the protocol Envoy speaks to the provider (the policy's default list offers both).
        alpn: p.tls?.alpn === undefined || p.tls.alpn.includes(protocol) ? [protocol] : p.tls.alpn,
      },
      http2,
    ),
    p.tunnel,
  );
}

/** The cluster of one provider behind its hop: its address (or its Service's endpoints), TLS, tunnel and settings. */
function providerCluster(name: string, p: LlmProviderIR, s: ProviderSettings): Cluster {
  return create(ClusterSchema, {
    name,
    connectTimeout: durationFromMs(s.connectTimeoutMs),
    // Host names (IP literals resolve to themselves); the AI cluster's EDS, when Sluice scores it, names the hop.
    clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STRICT_DNS },
    loadAssignment: {
      clusterName: name,
      endpoints: [
        {
          lbEndpoints: (p.endpoints ?? [{ address: p.address, port: p.port }]).map((e) => ({
            hostIdentifier: {
              case: "endpoint" as const,
              value: {
                // A tunnel's CONNECT asks the proxy for the provider's host name, else a Service endpoint's address.
                hostname: p.tunnel === undefined ? p.name : p.endpoints === undefined ? p.address : "",
                address: socketAddress(e.address, e.port),
              },
            },
          })),
        },
      ],
    },
    ...(s.keepalive !== undefined ? { upstreamConnectionOptions: { tcpKeepalive: tcpKeepalive(s.keepalive) } } : {}),
    ...(p.tls !== undefined ? { transportSocket: providerTransportSocket(p, s.http2) } : {}),
    typedExtensionProtocolOptions: {
      [HTTP_PROTOCOL_OPTIONS]: anyPack(
        HttpProtocolOptionsSchema,
        create(HttpProtocolOptionsSchema, {
          upstreamProtocolOptions: {
            case: "explicitHttpConfig",
            value: {
              protocolConfig: s.http2
                ? { case: "http2ProtocolOptions", value: {} }
                : { case: "httpProtocolOptions", value: {} },
            },
          },
          commonHttpProtocolOptions: { idleTimeout: durationFromMs(PROVIDER_IDLE_MS) },
        }),
      ),
    },
  });
}

/** The internal listener of one provider's hop: an HCM that passes every request on to the provider's cluster. */
function providerListener(name: string, s: ProviderSettings, onlyProvider: boolean): Listener {
  const hcm = create(HttpConnectionManagerSchema, {
    statPrefix: name,
    codecType: HttpConnectionManager_CodecType.AUTO,
    // Transparent: the outer listener already wrote these headers as the provider is to get them.
    skipXffAppend: true,
    preserveExternalRequestId: true,
    serverHeaderTransformation: HttpConnectionManager_ServerHeaderTransformation.PASS_THROUGH,
    // The outer listener's limits and timeouts govern: nothing here cuts a request it let through.
    maxRequestHeadersKb: 8192,
    commonHttpProtocolOptions: { maxHeadersCount: 4096 },
    streamIdleTimeout: durationFromMs(0),
    // Realtime: the outer route passes a websocket upgrade only where it serves Realtime (llm.ts servesRealtime); over
    // HTTP/2 from the AI cluster an upgrade is an extended CONNECT.
    upgradeConfigs: [{ upgradeType: "websocket" }],
    http2ProtocolOptions: { allowConnect: true },
    routeSpecifier: {
      case: "routeConfig",
      value: {
        name,
        virtualHosts: [
          {
            name,
            domains: ["*"],
            routes: [
              {
                match: { pathSpecifier: { case: "prefix", value: "/" } },
                action: {
                  case: "route",
                  value: {
                    clusterSpecifier: { case: "cluster", value: name },
                    // The provider's own request timeout, per attempt; without it none (the route's own covers all).
                    timeout: durationFromMs(s.requestTimeoutMs ?? 0),
                    // A pooled connection the provider had just closed is retried here, not failed over; a connect
                    // failure too when the provider is its cluster's only one (llm.ts failoverRetryPolicy).
                    retryPolicy: {
                      retryOn: onlyProvider ? "connect-failure,reset-before-request" : "reset-before-request",
                      numRetries: 1,
                    },
                  },
                },
              },
            ],
          },
        ],
      },
    },
    httpFilters: [
      {
        name: "envoy.filters.http.router",
        // No x-envoy-* headers of its own on the provider's request or the response.
        configType: {
          case: "typedConfig",
          value: anyPack(RouterSchema, create(RouterSchema, { suppressEnvoyHeaders: true })),
        },
      },
    ],
  });
  return create(ListenerSchema, {
    name,
    listenerSpecifier: { case: "internalListener", value: {} },
    filterChains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            configType: { case: "typedConfig", value: anyPack(HttpConnectionManagerSchema, hcm) },
          },
        ],
      },
    ],
  });
}

/** The internal listeners and clusters of the hops of `c`'s providers (none when no provider needs one). */
export function buildProviderHops(c: LlmClusterIR): { listeners: Listener[]; clusters: Cluster[] } {
  if (hopOwner(c) !== c.name) return { listeners: [], clusters: [] };
  const { hops } = providerHops(c);
  const listeners: Listener[] = [];
  const clusters: Cluster[] = [];
  const onlyProvider = c.groups.flat().length === 1;
  for (const p of c.groups.flat()) {
    const s = hops.get(p.name);
    if (s === undefined) continue;
    const name = providerHopName(c.name, p.name);
    listeners.push(providerListener(name, s, onlyProvider));
    clusters.push(providerCluster(name, p, s));
  }
  return { listeners, clusters };
}
