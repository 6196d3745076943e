// HTTPRoute rules → route IR: matches, filters (header modifiers, redirect, rewrite, mirror), weighted backends.

import type { HTTPHeaderFilter, HTTPRoute, HTTPRouteFilter, HTTPRouteMatch } from "../../api/gateway-api.js";
import { GATEWAY_API_GROUP } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import { agentCoreOf } from "../backend/agent-core.js";
import type { BackendResolver } from "../backend/resolve.js";
import type { HeaderMutationIR, RouteActionIR, RouteIR, RouteMatchIR, WeightedBackendIR } from "../ir.js";
import { routeName } from "../names.js";
import type { RankedMatch } from "./precedence.js";

export interface TranslatedRule {
  readonly ranked: RankedMatch;
  readonly route: RouteIR;
}

export interface RouteRulesResult {
  readonly routes: readonly TranslatedRule[];
  readonly unresolved: readonly { readonly reason: string; readonly message: string }[];
}

const DEFAULT_MATCH: HTTPRouteMatch = { path: { type: "PathPrefix", value: "/" } };

export function headerMutation(f: HTTPHeaderFilter | undefined): HeaderMutationIR | undefined {
  if (f === undefined) return undefined;
  return {
    set: (f.set ?? []).map((h) => ({ name: h.name.toLowerCase(), value: h.value })),
    add: (f.add ?? []).map((h) => ({ name: h.name.toLowerCase(), value: h.value })),
    remove: (f.remove ?? []).map((h) => h.toLowerCase()),
  };
}

function matchIR(m: HTTPRouteMatch): RouteMatchIR {
  const type = m.path?.type ?? "PathPrefix";
  let value = m.path?.value ?? "/";
  // Gateway API prefixes match whole path segments and ignore a trailing slash.
  if (type === "PathPrefix" && value.length > 1 && value.endsWith("/")) value = value.replace(/\/+$/, "") || "/";
  // The first match for a header name wins; names are case-insensitive.
  const seen = new Set<string>();
  const headers = (m.headers ?? [])
    .filter((h) => {
      const n = h.name.toLowerCase();
      if (seen.has(n)) return false;
      seen.add(n);
      return true;
    })
    .map((h) => ({ name: h.name.toLowerCase(), type: h.type ?? "Exact", value: h.value }));
  const seenQ = new Set<string>();
  const queryParams = (m.queryParams ?? [])
    .filter((q) => {
      if (seenQ.has(q.name)) return false;
      seenQ.add(q.name);
      return true;
    })
    .map((q) => ({ name: q.name, type: q.type ?? "Exact", value: q.value }));
  return {
    path: { type, value },
    headers,
    queryParams,
    ...(m.method !== undefined ? { method: m.method } : {}),
  };
}

function filterOf<K extends keyof HTTPRouteFilter>(
  filters: readonly HTTPRouteFilter[] | undefined,
  type: string,
  key: K,
) {
  return filters?.find((f) => f.type === type)?.[key];
}

export interface RuleOptions {
  /** GRPCRoute backends are reached over HTTP/2 whatever the Service says. */
  readonly http2?: boolean;
  /** Route kind in Envoy route names (`httproute/...`, `grpcroute/...`). */
  readonly kind?: "httproute" | "grpcroute";
}

export function translateHTTPRouteRules(
  route: HTTPRoute,
  resolver: BackendResolver,
  opts: RuleOptions = {},
): RouteRulesResult {
  const ns = namespaceOf(route);
  const from = { group: GATEWAY_API_GROUP, kind: opts.kind === "grpcroute" ? "GRPCRoute" : "HTTPRoute", namespace: ns };
  const resolveOpts = opts.http2 ? { http2: true } : {};
  const routes: TranslatedRule[] = [];
  const unresolved: { reason: string; message: string }[] = [];
  const created = (route.metadata as { creationTimestamp?: string }).creationTimestamp ?? "";
  const routeKey = `${ns}/${route.metadata.name}`;

  (route.spec.rules ?? []).forEach((rule, ruleIndex) => {
    const filters = rule.filters;
    const requestHeaders = headerMutation(filterOf(filters, "RequestHeaderModifier", "requestHeaderModifier"));
    const responseHeaders = headerMutation(filterOf(filters, "ResponseHeaderModifier", "responseHeaderModifier"));
    const redirect = filterOf(filters, "RequestRedirect", "requestRedirect");
    const rewrite = filterOf(filters, "URLRewrite", "urlRewrite");

    const mirrors: { cluster: string; percent: number }[] = [];
    for (const f of filters ?? []) {
      if (f.type !== "RequestMirror" || f.requestMirror === undefined) continue;
      const r = resolver.resolve(f.requestMirror.backendRef, from, resolveOpts);
      if (!r.ok) {
        unresolved.push(r);
        continue;
      }
      const fr = f.requestMirror.fraction;
      const percent =
        f.requestMirror.percent ?? (fr !== undefined ? (100 * fr.numerator) / (fr.denominator ?? 100) : 100);
      mirrors.push({ cluster: r.cluster.name, percent });
    }

    let action: RouteActionIR;
    if (redirect !== undefined) {
      action = {
        kind: "redirect",
        statusCode: redirect.statusCode ?? 302,
        ...(redirect.scheme !== undefined ? { scheme: redirect.scheme } : {}),
        ...(redirect.hostname !== undefined ? { hostname: redirect.hostname } : {}),
        ...(redirect.port !== undefined ? { port: redirect.port } : {}),
        ...(redirect.path !== undefined ? { path: pathModifier(redirect.path) } : {}),
      };
    } else {
      const backends: WeightedBackendIR[] = [];
      let providers = 0;
      let longLived = false;
      for (const ref of rule.backendRefs ?? []) {
        const weight = ref.weight ?? 1;
        const r = resolver.resolve(ref, from, resolveOpts);
        if (!r.ok) {
          unresolved.push(r);
          continue;
        }
        if (weight === 0) continue;
        if (r.cluster.kind === "llm") providers = Math.max(providers, r.cluster.groups.flat().length);
        if (agentCoreOf(r.cluster) !== undefined) longLived = true;
        const reqH = headerMutation(filterOf(ref.filters, "RequestHeaderModifier", "requestHeaderModifier"));
        const resH = headerMutation(filterOf(ref.filters, "ResponseHeaderModifier", "responseHeaderModifier"));
        backends.push({
          cluster: r.cluster.name,
          weight,
          ...(reqH !== undefined ? { requestHeaders: reqH } : {}),
          ...(resH !== undefined ? { responseHeaders: resH } : {}),
        });
      }
      if (backends.length === 0) {
        // Gateway API: requests that would go to an invalid backend get a 500.
        action = { kind: "direct", status: 500 };
      } else {
        const timeout = rule.timeouts?.request;
        action = {
          kind: "forward",
          backends,
          mirrors,
          ...(timeout !== undefined ? { timeout } : {}),
          // Each further provider gets one try: failover inside a group, then to the next group. A single provider
          // gets the safe retries only (failoverRetryPolicy).
          ...(providers > 0 ? { failover: { retries: providers - 1 } } : {}),
          ...(longLived ? { longLived: true } : {}),
          ...(rewrite !== undefined
            ? {
                rewrite: {
                  ...(rewrite.hostname !== undefined ? { hostname: rewrite.hostname } : {}),
                  ...(rewrite.path !== undefined ? { path: pathModifier(rewrite.path) } : {}),
                },
              }
            : {}),
        };
      }
    }

    const matches = rule.matches && rule.matches.length > 0 ? rule.matches : [DEFAULT_MATCH];
    matches.forEach((m, matchIndex) => {
      const match = matchIR(m);
      const ir: RouteIR = {
        name: routeName(ns, route.metadata.name, ruleIndex, matchIndex, opts.kind),
        match,
        action,
        ...(requestHeaders !== undefined ? { requestHeaders } : {}),
        ...(responseHeaders !== undefined ? { responseHeaders } : {}),
      };
      routes.push({ ranked: { match, routeCreated: created, routeKey, rule: ruleIndex, matchIndex }, route: ir });
    });
  });
  return { routes, unresolved };
}

function pathModifier(p: {
  type: "ReplaceFullPath" | "ReplacePrefixMatch";
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}) {
  return {
    type: p.type,
    value: (p.type === "ReplaceFullPath" ? p.replaceFullPath : p.replacePrefixMatch) ?? "/",
  };
}
