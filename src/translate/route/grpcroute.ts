// GRPCRoute rules → route IR. A gRPC method is the HTTP/2 path `/<service>/<method>`, so method matches become path
// matches and the rest (headers, header modifiers, mirrors, weighted backends) is shared with HTTPRoute.
// Backends of a GRPCRoute are always reached over HTTP/2 (translateHTTPRouteRules with `http2`).

import type { GRPCMethodMatch, GRPCRoute, HTTPRoute, HTTPRouteMatch } from "../../api/gateway-api.js";

function escapeRegex(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The path match of a gRPC method match (Gateway API GRPCMethodMatch semantics). */
export function methodPath(m: GRPCMethodMatch | undefined): NonNullable<HTTPRouteMatch["path"]> {
  if (m === undefined || (m.service === undefined && m.method === undefined)) return { type: "PathPrefix", value: "/" };
  if ((m.type ?? "Exact") === "Exact") {
    if (m.service !== undefined && m.method !== undefined) return { type: "Exact", value: `/${m.service}/${m.method}` };
    if (m.service !== undefined) return { type: "PathPrefix", value: `/${m.service}` };
    return { type: "RegularExpression", value: `^/[^/]+/${escapeRegex(m.method ?? "")}$` };
  }
  return { type: "RegularExpression", value: `^/${m.service ?? "[^/]+"}/${m.method ?? "[^/]+"}$` };
}

/** The GRPCRoute seen as the HTTPRoute it is on the wire. */
export function asHTTPRoute(route: GRPCRoute): HTTPRoute {
  return {
    ...route,
    kind: "HTTPRoute",
    spec: {
      ...(route.spec.parentRefs !== undefined ? { parentRefs: route.spec.parentRefs } : {}),
      ...(route.spec.hostnames !== undefined ? { hostnames: route.spec.hostnames } : {}),
      rules: (route.spec.rules ?? []).map((rule) => ({
        ...rule,
        matches: (rule.matches ?? [{}]).map((m) => ({
          path: methodPath(m.method),
          ...(m.headers !== undefined ? { headers: m.headers } : {}),
        })),
      })),
    },
  };
}
