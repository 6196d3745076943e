// GatewayIR → the xDS resources of that Gateway.

import { fromBinary } from "@bufbuild/protobuf";
import type { CredentialPlan } from "../../credentials/plan.js";
import { type RouteConfiguration, RouteConfigurationSchema } from "../../gen/envoy/config/route/v3/route_pb.js";
import type { Secret } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import type { AuthzContext } from "../authz/plan.js";
import type { BackendTlsIR, GatewayIR, ListenerIR, LlmClusterIR, RouteIR } from "../ir.js";
import { buildMcpOAuthRoutes, servesMcpOAuth } from "../mcp/oauth-routes.js";
import { clusterVariantBase } from "../names.js";
import { withBackendConnections } from "./backend-connection.js";
import { credentialSecret } from "./backend-credential.js";
import { buildCluster, buildLoadAssignment } from "./cluster.js";
import { earlyRequestHeaders } from "./early-headers.js";
import { buildFilterChain } from "./filters/chain.js";
import { HTTP_FILTER_BUILDERS } from "./filters/registry.js";
import type { BuildContext, PolicyNote } from "./filters/types.js";
import { type FrontendOptions, frontendOptions } from "./frontend.js";
import { buildListener } from "./listener.js";
import { withLlmConnections } from "./llm-connection.js";
import { withLlmHealth } from "./llm-health.js";
import { buildProviderHops } from "./llm-provider-hop.js";
import { withLlmTransformations } from "./llm-transformation.js";
import type { XdsMemo } from "./memo.js";
import { buildNetworkAuthorization } from "./network-authz.js";
import { buildRealtimeRelayRoute, realtimeToPool, relaysRealtime } from "./realtime-relay.js";
import type { XdsResources } from "./resources.js";
import { buildConnectRoute, buildRoute, buildSelfTunnelRoutes } from "./route.js";
import {
  encodeRoute,
  encodeRouteConfiguration,
  encodeVhdsRouteConfiguration,
  encodeVirtualHost,
  joinBytes,
} from "./route-bytes.js";
import { buildSecret } from "./secret.js";

export interface BuildResult {
  readonly xds: XdsResources;
  /** Policy fields accepted but not applied (yet), for status. */
  readonly notes: readonly PolicyNote[];
  /** The backend credentials Sluice mints for this Gateway's clusters (src/credentials/), by plan id. */
  readonly credentialPlans: readonly CredentialPlan[];
  /**
   * The AI clusters as Envoy reaches them, route-level variants included (after the passes above): what Sluice's
   * Realtime relay dials, by the cluster name its relay route gives.
   */
  readonly llmClusters: readonly LlmClusterIR[];
  /** The TLS of its OTLP collectors' clusters, by cluster name (frontend-collector.ts), for Sluice's span relay. */
  readonly collectorTls: ReadonlyMap<string, BackendTlsIR>;
}

export interface BuildOptions {
  /** Translation-wide authentication/authorization state (policy table, Secrets). */
  readonly authz?: Omit<AuthzContext, "note">;
  /** LLM table entry id by route name (this Gateway's routes to AI backends). */
  readonly llmEntries?: ReadonlyMap<string, string>;
  /** The AI clusters that keep the upstream LLM ext_proc (llm/stages.ts); without it, all of them do. */
  readonly llmUpstreamClusters?: ReadonlySet<string>;
  /** Builds of earlier translations (src/translate/memo.ts); the result is the same with or without it. */
  readonly memo?: XdsMemo;
}

function credentialPlans(gw: GatewayIR): CredentialPlan[] {
  const out = new Map<string, CredentialPlan>();
  for (const c of gw.clusters) {
    const p = c.kind === "llm" || c.kind === "mcp" ? undefined : c.connection?.minted;
    if (p !== undefined) out.set(p.id, p);
  }
  return [...out.values()];
}

/**
 * The SDS secrets of the backend credentials the clusters inject (backend-credential.ts), and of the client
 * certificates of their TLS and of the OTLP collectors' (`collectorTls`), once each.
 */
function credentialSecrets(gw: GatewayIR, collectorTls: Iterable<BackendTlsIR>): Secret[] {
  const out = new Map<string, Secret>();
  const certificate = (cert: BackendTlsIR["clientCert"]) => {
    if (cert !== undefined && !out.has(cert.secret)) {
      out.set(cert.secret, buildSecret({ name: cert.secret, certificateChain: cert.chain, privateKey: cert.key }));
    }
  };
  for (const c of gw.clusters) {
    const cred = c.kind === "llm" ? undefined : c.connection?.credential;
    if (cred !== undefined && !out.has(cred.secret)) out.set(cred.secret, credentialSecret(cred));
    // backend.tls client certificates (mTLS), as the listeners' certificates are; on AI backends, each provider's.
    const certs =
      c.kind === "llm"
        ? c.groups.flat().map((p) => p.tls?.clientCert)
        : c.kind === "mcp"
          ? []
          : [c.connection?.tls?.clientCert];
    for (const cert of certs) certificate(cert);
  }
  for (const t of collectorTls) certificate(t.clientCert);
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

export function buildXds(ir: GatewayIR, opts: BuildOptions = {}): BuildResult {
  // Backend policy connection settings: cluster variants, and the routes that use them.
  // And AI clusters' backend.transformation (llm-transformation.ts).
  // And their health scoring by Sluice (llm-health.ts).
  // Health last: its variants carry every other difference of a route, and it decides which EDS resource each reads.
  const gw = withLlmHealth(withLlmTransformations(withLlmConnections(withBackendConnections(ir, opts.authz?.input))));
  const notes: PolicyNote[] = [];
  const seen = new Set<string>();
  const note: BuildContext["note"] = (from, field, message, reason) => {
    const key = `${from.kind}|${from.name}|${field}|${message}`;
    if (seen.has(key)) return;
    seen.add(key);
    notes.push({ from, field, message, ...(reason !== undefined ? { reason } : {}) });
  };
  const clusterIRs = new Map(gw.clusters.map((c) => [c.name, c]));
  const gatewayCtx: BuildContext = {
    note,
    ...(opts.authz !== undefined ? { authz: { ...opts.authz, note } } : {}),
    llmEntry: (routeName) => opts.llmEntries?.get(routeName),
    cluster: (name) => clusterIRs.get(name),
  };
  const memo = opts.memo?.forGateway(gatewayCtx, opts.llmEntries);
  const ctx = memo?.ctx ?? gatewayCtx;
  const contributions = memo !== undefined ? memo.contributions.bind(memo) : undefined;
  const hostContributions = memo !== undefined ? memo.hostContributions.bind(memo) : undefined;
  const configs = new Map(gw.routeConfigs.map((rc) => [rc.name, rc]));
  // Each filter chain serves exactly one route configuration; its HTTP filters come from that configuration's routes.
  const chains = new Map(
    gw.listeners.flatMap((l) =>
      l.filterChains.map((c) => {
        const rc = configs.get(c.routeConfigName);
        return [
          c.name,
          buildFilterChain(rc === undefined ? [] : [rc], ctx, HTTP_FILTER_BUILDERS, contributions, hostContributions),
        ] as const;
      }),
    ),
  );
  // PreRouting request headers shared by a whole route configuration run in its HCM (early-headers.ts); its routes
  // then leave them out. That depends on the sibling routes, so such routes are not taken from the memo.
  const early = new Map(gw.routeConfigs.map((rc) => [rc.name, earlyRequestHeaders(rc)]));
  const encode = (earlyHeaders: boolean) => (r: RouteIR) => encodeRoute(buildRoute(r, perRoute, ctx, earlyHeaders));
  // A guarded Realtime route's relay twin (or one to an InferencePool), which takes its websocket upgrades, goes before
  // it (realtime-relay.ts).
  const relayTwin = (r: RouteIR, earlyHeaders: boolean): Uint8Array[] => {
    // An MCP route with OAuth: its discovery paths' twins (mcp/oauth-routes.ts).
    if (servesMcpOAuth(r)) return buildMcpOAuthRoutes(r, buildRoute(r, perRoute, ctx, earlyHeaders)).map(encodeRoute);
    if (!relaysRealtime(r) && !realtimeToPool(r, ctx)) return [];
    const twin = buildRealtimeRelayRoute(r, buildRoute(r, perRoute, ctx, earlyHeaders), ctx);
    return twin === undefined ? [] : [encodeRoute(twin)];
  };
  const routeBytes = (r: RouteIR, earlyHeaders: boolean): Uint8Array =>
    memo !== undefined && !earlyHeaders
      ? memo.routeBytes(r, perRoute.get(r.name), encode(false))
      : encode(earlyHeaders)(r);
  const joined = (name: string, key: string, parts: readonly Uint8Array[], join: () => Uint8Array) =>
    memo !== undefined ? memo.joined(name, key, parts, join) : join();
  const perRoute = new Map([...chains.values()].flatMap((c) => [...c.perRoute]));
  const extraClusters = new Map([...chains.values()].flatMap((c) => c.clusters.map((cl) => [cl.name, cl] as const)));
  const upstream = opts.llmUpstreamClusters;
  // MCP backends are Sluice's bootstrap cluster (names.ts SLUICE_MCP_CLUSTER), not clusters of their own.
  const envoyClusters = gw.clusters.filter((c) => c.kind !== "mcp");
  const clusters = envoyClusters.map((c) =>
    buildCluster(c, upstream === undefined || upstream.has(clusterVariantBase(c.name))),
  );
  for (const c of clusters) extraClusters.delete(c.name);
  // AI providers with connection settings of their own: an internal listener and a cluster each (llm-provider-hop.ts).
  const hops = envoyClusters.map((c) => (c.kind === "llm" ? buildProviderHops(c) : { listeners: [], clusters: [] }));
  for (const cl of hops.flatMap((h) => h.clusters)) extraClusters.set(cl.name, cl);
  const endpoints = envoyClusters.flatMap((c) => {
    const la = buildLoadAssignment(c);
    return la === undefined ? [] : [la];
  });
  const frontends = new Map(gw.listeners.map((l) => [l.name, frontendOptions(l, ctx)] as const));
  const collectorTls = new Map<string, BackendTlsIR>();
  for (const f of frontends.values()) {
    for (const cl of f.clusters ?? []) if (!extraClusters.has(cl.name)) extraClusters.set(cl.name, cl);
    for (const [name, tls] of f.collectorTls ?? []) if (!collectorTls.has(name)) collectorTls.set(name, tls);
  }
  // A listener with an MCP OAuth route points its 401s to the protected resource metadata (listener.ts).
  const oauthRouteConfigs = new Set(
    gw.routeConfigs.filter((rc) => rc.virtualHosts.some((vh) => vh.routes.some(servesMcpOAuth))).map((rc) => rc.name),
  );
  const mcpOAuthListener = (f: FrontendOptions | undefined, l: ListenerIR) =>
    f !== undefined && l.filterChains.some((c) => oauthRouteConfigs.has(c.routeConfigName))
      ? { ...f, mcpOAuth: true }
      : f;
  const listeners = gw.listeners.map((l) =>
    buildListener(
      l,
      (chain) => chains.get(chain)?.httpFilters ?? [],
      buildNetworkAuthorization(l, ctx),
      (routeConfigName) => early.get(routeConfigName),
      mcpOAuthListener(frontends.get(l.name), l),
    ),
  );
  listeners.push(...hops.flatMap((h) => h.listeners));
  // Route configurations served by a listener whose frontend.connect mode is Route: their routes that take CONNECT get
  // a tunnelling twin (route.ts buildConnectRoute). The twins depend on the listener, not the routes: never memoized.
  const connectRoute = new Set(
    gw.listeners
      .filter((l) => frontends.get(l.name)?.connect === "Route")
      .flatMap((l) => l.filterChains.map((c) => c.routeConfigName)),
  );
  // Listeners whose frontend.connect mode is Tunnel: a CONNECT to any port of this Gateway goes back into that port's
  // listener through a cluster to its own address (loopback when it binds every address).
  const connectTunnel = new Set(
    gw.listeners
      .filter((l) => frontends.get(l.name)?.connect === "Tunnel")
      .flatMap((l) => l.filterChains.map((c) => c.routeConfigName)),
  );
  const selfBinds = gw.listeners.map((l) => ({ port: l.port, cluster: `connect-tunnel/${l.name}` }));
  if (connectTunnel.size > 0) {
    for (const l of gw.listeners) {
      const address =
        l.address === "0.0.0.0" || l.address === "" ? "127.0.0.1" : l.address === "::" ? "::1" : l.address;
      const name = `connect-tunnel/${l.name}`;
      extraClusters.set(
        name,
        buildCluster({ kind: "static", name, endpoints: [{ address, port: l.port, ready: true }], http2: false }),
      );
    }
  }
  const encodedRoutes = gw.routeConfigs.map((rc) => {
    const earlyHeaders = early.get(rc.name) !== undefined;
    const tunnels = connectRoute.has(rc.name) || connectTunnel.has(rc.name);
    const hosts = rc.virtualHosts.map((vh) => {
      const each = () => [
        ...vh.routes.flatMap((r) => [...relayTwin(r, earlyHeaders), routeBytes(r, earlyHeaders)]),
        ...(connectRoute.has(rc.name)
          ? vh.routes.flatMap((r) => {
              const twin = buildConnectRoute(r, perRoute, ctx);
              return twin === undefined ? [] : [encodeRoute(twin)];
            })
          : []),
        ...(connectTunnel.has(rc.name) ? buildSelfTunnelRoutes(selfBinds).map(encodeRoute) : []),
      ];
      const routes =
        memo !== undefined && !earlyHeaders && !tunnels
          ? memo.hostRouteBytes(
              vh.routes,
              vh.routes.map((r) => perRoute.get(r.name)),
              each,
            )
          : each();
      return joined(vh.name, vh.domains.join("\n"), routes, () => encodeVirtualHost(vh.name, vh.domains, routes));
    });
    return {
      name: rc.name,
      parts: encodeRouteConfiguration(rc.name, hosts),
      virtualHosts: rc.virtualHosts.map((vh, i) => ({ name: vh.name, value: hosts[i] as Uint8Array })),
      vhds: encodeVhdsRouteConfiguration(rc.name),
    };
  });
  let routes: RouteConfiguration[] | undefined;
  const xds: XdsResources = {
    clusters: [...clusters, ...[...extraClusters.values()].sort((a, b) => (a.name < b.name ? -1 : 1))],
    endpoints,
    listeners,
    encodedRoutes,
    // Decoded the first time someone asks (printing, tests); serving over ADS uses the bytes.
    get routes() {
      routes ??= encodedRoutes.map((r) => fromBinary(RouteConfigurationSchema, joinBytes(r.parts)));
      return routes;
    },
    secrets: [...gw.secrets.map(buildSecret), ...credentialSecrets(gw, collectorTls.values())],
  };
  return {
    xds,
    notes,
    credentialPlans: credentialPlans(gw),
    llmClusters: gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm"),
    collectorTls,
  };
}
