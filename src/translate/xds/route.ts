// ListenerIR → RouteConfiguration: virtual hosts per host name, routes in Gateway API precedence order.

import type { create, MessageInitShape } from "@bufbuild/protobuf";
import type { Any } from "@bufbuild/protobuf/wkt";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../cel/rbac.js";
import {
  HeaderValueOption_HeaderAppendAction,
  type HeaderValueOptionSchema,
} from "../../gen/envoy/config/core/v3/base_pb.js";
import {
  RedirectAction_RedirectResponseCode,
  type RedirectActionSchema,
  type RouteActionSchema,
  type RouteMatchSchema,
  type RouteSchema,
} from "../../gen/envoy/config/route/v3/route_components_pb.js";
import { FractionalPercent_DenominatorType } from "../../gen/envoy/type/v3/percent_pb.js";
import { durationFromMs, parseDurationMs } from "../duration.js";
import type { HeaderMutationIR, PathRewriteIR, RouteIR, RouteMatchIR, WeightedBackendIR } from "../ir.js";
import { markMcpOAuthRoute } from "../mcp/oauth-routes.js";
import { isMcpClusterName, MCP_APIKEY_HEADER, MCP_JWT_HEADER, MCP_ROUTE_HEADER, SLUICE_MCP_CLUSTER } from "../names.js";
import type { BuildContext } from "./filters/types.js";
import { failoverRetryPolicy, servesRealtime } from "./llm.js";
import { relaysRealtime } from "./realtime-relay.js";
import { applyTrafficToRoute } from "./traffic-route.js";

type Init<T extends Parameters<typeof create>[0]> = MessageInitShape<T>;

function stringMatch(type: "Exact" | "RegularExpression", value: string) {
  return type === "Exact"
    ? { matchPattern: { case: "exact" as const, value } }
    : { matchPattern: { case: "safeRegex" as const, value: { regex: value } } };
}

function buildMatch(m: RouteMatchIR): Init<typeof RouteMatchSchema> {
  let pathSpecifier: Init<typeof RouteMatchSchema>["pathSpecifier"];
  switch (m.path.type) {
    case "Exact":
      pathSpecifier = { case: "path", value: m.path.value };
      break;
    case "RegularExpression":
      pathSpecifier = { case: "safeRegex", value: { regex: m.path.value } };
      break;
    case "PathPrefix":
      pathSpecifier =
        m.path.value === "/" ? { case: "prefix", value: "/" } : { case: "pathSeparatedPrefix", value: m.path.value };
      break;
  }
  const headers = m.headers.map((h) => ({
    name: h.name,
    headerMatchSpecifier: { case: "stringMatch" as const, value: stringMatch(h.type, h.value) },
  }));
  if (m.method !== undefined) {
    headers.push({
      name: ":method",
      headerMatchSpecifier: { case: "stringMatch", value: stringMatch("Exact", m.method) },
    });
  }
  return {
    pathSpecifier,
    headers,
    queryParameters: m.queryParams.map((q) => ({
      name: q.name,
      queryParameterMatchSpecifier: { case: "stringMatch" as const, value: stringMatch(q.type, q.value) },
    })),
  };
}

function headerOptions(m: HeaderMutationIR | undefined): Init<typeof HeaderValueOptionSchema>[] {
  if (m === undefined) return [];
  return [
    ...m.set.map((h) => ({
      header: { key: h.name, value: h.value },
      appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    })),
    ...m.add.map((h) => ({
      header: { key: h.name, value: h.value },
      appendAction: HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD,
    })),
  ];
}

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Path rewrites with Gateway API semantics (whole segments, no doubled or lost slashes). */
function pathRewrite(rw: PathRewriteIR, match: RouteMatchIR): Partial<Init<typeof RouteActionSchema>> {
  if (rw.type === "ReplaceFullPath") {
    return { regexRewrite: { pattern: { regex: "^/.*$" }, substitution: rw.value } };
  }
  const prefix = match.path.type === "PathPrefix" ? match.path.value : "/";
  if (prefix === "/") {
    const to = rw.value.endsWith("/") ? rw.value : `${rw.value}/`;
    return { regexRewrite: { pattern: { regex: "^/" }, substitution: to } };
  }
  if (rw.value === "/") {
    return { regexRewrite: { pattern: { regex: `^${escapeRegex(prefix)}/*` }, substitution: "/" } };
  }
  return { prefixRewrite: rw.value.replace(/\/+$/, "") };
}

const REDIRECT_CODES: Readonly<Record<number, RedirectAction_RedirectResponseCode>> = {
  301: RedirectAction_RedirectResponseCode.MOVED_PERMANENTLY,
  302: RedirectAction_RedirectResponseCode.FOUND,
  303: RedirectAction_RedirectResponseCode.SEE_OTHER,
  307: RedirectAction_RedirectResponseCode.TEMPORARY_REDIRECT,
  308: RedirectAction_RedirectResponseCode.PERMANENT_REDIRECT,
};

/** The backend, or the weighted backends with their own header modifiers. */
function clusterSpecifier(
  targets: readonly WeightedBackendIR[],
): NonNullable<Init<typeof RouteActionSchema>["clusterSpecifier"]> {
  const backends = targets.map(toMcpService);
  const only = backends.length === 1 ? backends[0] : undefined;
  if (only !== undefined && only.requestHeaders === undefined && only.responseHeaders === undefined) {
    return { case: "cluster", value: only.cluster };
  }
  return {
    case: "weightedClusters",
    value: {
      clusters: backends.map((b) => ({
        name: b.cluster,
        weight: b.weight,
        requestHeadersToAdd: headerOptions(b.requestHeaders),
        requestHeadersToRemove: [...(b.requestHeaders?.remove ?? [])],
        responseHeadersToAdd: headerOptions(b.responseHeaders),
        responseHeadersToRemove: [...(b.responseHeaders?.remove ?? [])],
      })),
    },
  };
}

/**
 * An MCP GwBackend is served by Sluice's MCP service: the route names the backend in a header it sets, overwriting
 * any copy the client sent, so the service can trust it.
 */
function toMcpService(b: WeightedBackendIR): WeightedBackendIR {
  if (!isMcpClusterName(b.cluster)) return b;
  const h = b.requestHeaders;
  const ours = (name: string) => MCP_HEADERS.includes(name.toLowerCase());
  return {
    ...b,
    cluster: SLUICE_MCP_CLUSTER,
    requestHeaders: {
      set: [
        ...(h?.set ?? []).filter((x) => !ours(x.name)),
        { name: MCP_ROUTE_HEADER, value: b.cluster },
        // What the authorization rules read of the identity, from Envoy's own dynamic metadata.
        { name: MCP_JWT_HEADER, value: `%DYNAMIC_METADATA(${JWT_METADATA_NAMESPACE}:${JWT_PAYLOAD_KEY})%` },
        { name: MCP_APIKEY_HEADER, value: `%DYNAMIC_METADATA(${EXTAUTHZ_NAMESPACE}:apiKey)%` },
      ],
      add: (h?.add ?? []).filter((x) => !ours(x.name)),
      // Removed before the above are set: an empty value (no metadata) is not added, and no client copy survives.
      remove: [...(h?.remove ?? []).filter((x) => !ours(x)), ...MCP_HEADERS],
    },
  };
}

const MCP_HEADERS = [MCP_ROUTE_HEADER, MCP_JWT_HEADER, MCP_APIKEY_HEADER];
/** Where Sluice's ext_authz authentication puts the API key's metadata (src/extauthz/server.ts). */
const EXTAUTHZ_NAMESPACE = "envoy.filters.http.ext_authz";

/** One Envoy route of `r`; `perRoute` holds the typed_per_filter_config of every route, by route name. */
export function buildRoute(
  r: RouteIR,
  perRoute: ReadonlyMap<string, Readonly<Record<string, Any>>>,
  ctx: BuildContext | undefined,
  earlyHeaders: boolean,
): Init<typeof RouteSchema> {
  const out = buildGatewayApiRoute(r, perRoute);
  applyTrafficToRoute(r, out, ctx, earlyHeaders);
  markMcpOAuthRoute(r, out);
  return out;
}

function buildGatewayApiRoute(
  r: RouteIR,
  perRoute: ReadonlyMap<string, Readonly<Record<string, Any>>>,
): Init<typeof RouteSchema> {
  const filterConfigs = perRoute.get(r.name);
  const base: Init<typeof RouteSchema> = {
    name: r.name,
    ...(filterConfigs !== undefined ? { typedPerFilterConfig: { ...filterConfigs } } : {}),
    match: buildMatch(r.match),
    requestHeadersToAdd: headerOptions(r.requestHeaders),
    requestHeadersToRemove: [...(r.requestHeaders?.remove ?? [])],
    responseHeadersToAdd: headerOptions(r.responseHeaders),
    responseHeadersToRemove: [...(r.responseHeaders?.remove ?? [])],
  };
  const a = r.action;
  switch (a.kind) {
    case "direct":
      return {
        ...base,
        action: {
          case: "directResponse",
          value: {
            status: a.status,
            ...(a.body !== undefined ? { body: { specifier: { case: "inlineString", value: a.body } } } : {}),
          },
        },
      };
    case "redirect": {
      const redirect: Init<typeof RedirectActionSchema> = {
        responseCode: REDIRECT_CODES[a.statusCode] ?? RedirectAction_RedirectResponseCode.FOUND,
        ...(a.scheme !== undefined ? { schemeRewriteSpecifier: { case: "schemeRedirect", value: a.scheme } } : {}),
        ...(a.hostname !== undefined ? { hostRedirect: a.hostname } : {}),
        ...(a.port !== undefined ? { portRedirect: a.port } : {}),
      };
      if (a.path !== undefined) {
        if (a.path.type === "ReplaceFullPath") {
          redirect.pathRewriteSpecifier = { case: "pathRedirect", value: a.path.value };
        } else {
          const rw = pathRewrite(a.path, r.match);
          redirect.pathRewriteSpecifier =
            rw.regexRewrite !== undefined
              ? { case: "regexRewrite", value: rw.regexRewrite }
              : { case: "prefixRewrite", value: rw.prefixRewrite ?? "/" };
        }
      }
      return { ...base, action: { case: "redirect", value: redirect } };
    }
    case "forward": {
      const route: Init<typeof RouteActionSchema> = {
        clusterSpecifier: clusterSpecifier(a.backends),
        requestMirrorPolicies: a.mirrors.map((m) => ({
          cluster: m.cluster,
          runtimeFraction: {
            defaultValue: {
              numerator: Math.round(m.percent * 10_000),
              denominator: FractionalPercent_DenominatorType.MILLION,
            },
          },
        })),
      };
      if (a.timeout !== undefined) {
        const ms = parseDurationMs(a.timeout);
        if (ms !== undefined) route.timeout = durationFromMs(ms);
      } else if (
        a.failover !== undefined ||
        a.longLived === true ||
        a.backends.some((b) => isMcpClusterName(b.cluster))
      ) {
        // An MCP client's GET stream and a long tool call's SSE answer last as long as they need (no 15 s default);
        // so does an LLM answer (AI backends: `failover`) or an agent runtime's (`longLived`), whose stream Envoy's
        // default would cut at 15 s however healthy. A backend that stalls is ended by the stream idle timeout
        // (docs/faults.md).
        route.timeout = durationFromMs(0);
      }
      if (a.failover !== undefined) route.retryPolicy = failoverRetryPolicy(a.failover.retries);
      // Realtime is a websocket to the provider: the upgrade is enabled on this route only, unless prompt guards or
      // token counting send it through Sluice's relay (realtime-relay.ts: a twin route before this one takes upgrades).
      if (a.failover !== undefined && servesRealtime(r) && !relaysRealtime(r)) {
        route.upgradeConfigs = [{ upgradeType: "websocket", enabled: true }];
      }
      if (a.rewrite?.hostname !== undefined) {
        route.hostRewriteSpecifier = { case: "hostRewriteLiteral", value: a.rewrite.hostname };
      }
      if (a.rewrite?.path !== undefined) Object.assign(route, pathRewrite(a.rewrite.path, r.match));
      return { ...base, action: { case: "route", value: route } };
    }
  }
}

/**
 * The RouteConfiguration fields besides name and virtual hosts. Virtual hosts match on the host name alone, whatever
 * port the client put in Host; hosts no route claims get a plain 404 from Envoy.
 */
export const ROUTE_CONFIGURATION_FIELDS = { ignorePortInHostMatching: true } as const;

/**
 * `frontend.connect.mode: Tunnel`: a CONNECT to one of the Gateway's own ports (`:authority` ending in `:<port>`) is a
 * raw TCP tunnel to that port's listener, where its stream arrives as a new downstream connection (the spec's
 * "re-enters the addressed gateway bind"). A CONNECT naming another port matches no route (404).
 */
export function buildSelfTunnelRoutes(
  binds: readonly { readonly port: number; readonly cluster: string }[],
): Init<typeof RouteSchema>[] {
  return binds.map((b) => ({
    name: `connect-tunnel/${b.port}`,
    match: {
      pathSpecifier: { case: "connectMatcher", value: {} },
      headers: [
        {
          name: ":authority",
          headerMatchSpecifier: {
            case: "stringMatch",
            value: { matchPattern: { case: "suffix", value: `:${b.port}` } },
          },
        },
      ],
    },
    action: {
      case: "route",
      value: {
        clusterSpecifier: { case: "cluster", value: b.cluster },
        timeout: durationFromMs(0),
        upgradeConfigs: [{ upgradeType: "CONNECT", connectConfig: {} }],
      },
    },
  }));
}

/**
 * `frontend.connect.mode: Route`: a CONNECT request is routed like any request, then its stream is a raw TCP tunnel to
 * the backend (Envoy terminates the CONNECT: `connect_matcher` and the route's CONNECT upgrade). A rule takes CONNECT
 * when it forwards, matches every path (PathPrefix `/`, as a CONNECT has none), no query, and any method or CONNECT;
 * its header matches and per-route filter settings (authorization ...) apply to the CONNECT request as they are. Not
 * to AI backends or InferencePools (they speak HTTP), nor a route whose backend settings cannot be had.
 */
export function buildConnectRoute(
  r: RouteIR,
  perRoute: ReadonlyMap<string, Readonly<Record<string, Any>>>,
  ctx: BuildContext | undefined,
): Init<typeof RouteSchema> | undefined {
  const a = r.action;
  const m = r.match;
  if (a.kind !== "forward" || a.backends.length === 0) return undefined;
  if (m.path.type !== "PathPrefix" || m.path.value !== "/" || m.queryParams.length > 0) return undefined;
  if (m.method !== undefined && m.method !== "CONNECT") return undefined;
  if (r.backendProblems?.some((p) => p.fatal) === true) return undefined;
  const kinds = a.backends.map((b) => ctx?.cluster?.(b.cluster)?.kind);
  if (kinds.some((k) => k === "llm" || k === "pool")) return undefined;
  const filterConfigs = perRoute.get(r.name);
  return {
    name: `${r.name}/connect`,
    ...(filterConfigs !== undefined ? { typedPerFilterConfig: { ...filterConfigs } } : {}),
    match: {
      pathSpecifier: { case: "connectMatcher", value: {} },
      headers: buildMatch(m).headers ?? [],
    },
    action: {
      case: "route",
      value: {
        clusterSpecifier: clusterSpecifier(a.backends),
        // A tunnel lasts as long as its client keeps it: no route deadline (the stream idle timeout still applies).
        timeout: durationFromMs(0),
        upgradeConfigs: [{ upgradeType: "CONNECT", connectConfig: {} }],
      },
    },
  };
}
