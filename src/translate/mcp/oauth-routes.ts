// MCP OAuth in Envoy's routes (docs/mcp.md, "OAuth"). A route to an MCP GwBackend with `jwtAuthentication.mcp` (or
// the deprecated `backend.mcp.authentication`) gets twins before it that take the discovery paths of its path, so a
// client without a token reaches them: `/.well-known/oauth-protected-resource<path>` (RFC 9728),
// `/.well-known/oauth-authorization-server<path>` (RFC 8414, and the client registration under it) and
// `/.well-known/openid-configuration<path>`. The twins go to Sluice's MCP service like the route itself, with no filter
// of the route (no JWT, authorization or rate limit: metadata is public). The route is marked in its metadata, so the
// listener's local reply mapper (xds/listener.ts) adds `WWW-Authenticate: Bearer resource_metadata="..."` to its 401.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { RouteSchema } from "../../gen/envoy/config/route/v3/route_components_pb.js";
import type { RouteIR } from "../ir.js";
import { isMcpClusterName } from "../names.js";
import { SLUICE_ROUTE_METADATA } from "../xds/filters/types.js";

type Init = MessageInitShape<typeof RouteSchema>;

/** Route metadata key (namespace `sluice`) marking a route whose 401 points to its protected resource metadata. */
export const MCP_OAUTH_METADATA_KEY = "mcp_oauth";

export const PROTECTED_RESOURCE_PREFIX = "/.well-known/oauth-protected-resource";
export const AUTHORIZATION_SERVER_PREFIX = "/.well-known/oauth-authorization-server";
export const OPENID_CONFIGURATION_PREFIX = "/.well-known/openid-configuration";

/**
 * The `WWW-Authenticate` value of a 401 on a marked route, in Envoy's formatter syntax: the protected resource
 * metadata of the very URL the client asked for (its path after the well-known prefix, RFC 9728 §3.1).
 */
export const MCP_OAUTH_CHALLENGE = `Bearer resource_metadata="%REQ(x-forwarded-proto)%://%REQ(:authority)%${PROTECTED_RESOURCE_PREFIX}%REQ(:path)%"`;

/** Whether `r` forwards to MCP backends only and one of its policies turns MCP OAuth on. */
export function servesMcpOAuth(r: RouteIR): boolean {
  if (r.action.kind !== "forward" || r.action.backends.length === 0) return false;
  if (!r.action.backends.every((b) => isMcpClusterName(b.cluster))) return false;
  for (const phase of ["preRouting", "traffic"] as const) {
    const f = r.policy?.[phase]?.["jwtAuthentication"];
    if (f !== undefined && !("combined" in f) && (f.value as { mcp?: unknown }).mcp !== undefined) return true;
  }
  return (r.policy?.backends ?? []).some((b) => {
    const f = b.policy["mcp"];
    const values = f === undefined ? [] : "combined" in f ? f.combined : [f];
    return values.some((v) => (v.value as { authentication?: unknown } | null)?.authentication !== undefined);
  });
}

/** The path the discovery paths are built on: a PathPrefix's or Exact match's value; none for a regular expression. */
export function oauthBasePath(r: RouteIR): string | undefined {
  const p = r.match.path;
  if (p.type === "RegularExpression") return undefined;
  return p.value.replace(/\/+$/, "");
}

/** Marks the built route (its 401 gets the resource metadata pointer). */
export function markMcpOAuthRoute(r: RouteIR, out: Init): void {
  if (!servesMcpOAuth(r)) return;
  const md = out.metadata?.filterMetadata ?? {};
  const ns = md[SLUICE_ROUTE_METADATA] ?? {};
  out.metadata = { filterMetadata: { ...md, [SLUICE_ROUTE_METADATA]: { ...ns, [MCP_OAUTH_METADATA_KEY]: true } } };
}

/** The discovery twins of a built route (empty when the route serves no MCP OAuth or matches a regex). */
export function buildMcpOAuthRoutes(r: RouteIR, built: Init): Init[] {
  if (!servesMcpOAuth(r) || built.action?.case !== "route") return [];
  const base = oauthBasePath(r);
  if (base === undefined) return [];
  // Only where the route sends requests (with the MCP header); not its path rewrites, which would change the
  // discovery path Sluice reads the resource from, nor its mirrors or retries.
  const clusterSpecifier = built.action.value.clusterSpecifier;
  return [PROTECTED_RESOURCE_PREFIX, AUTHORIZATION_SERVER_PREFIX, OPENID_CONFIGURATION_PREFIX].map((prefix, i) => ({
    name: `${r.name}/mcp-oauth/${i}`,
    match: { pathSpecifier: { case: "pathSeparatedPrefix" as const, value: `${prefix}${base}` } },
    action: { case: "route" as const, value: { ...(clusterSpecifier !== undefined ? { clusterSpecifier } : {}) } },
  }));
}
