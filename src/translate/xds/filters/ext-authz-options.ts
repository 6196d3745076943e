// The options of a user's `extAuth` as Envoy's ext_authz, or Sluice calling the service, apply them: the HTTP and gRPC
// options with constants taken out of the CEL, and where Sluice calls the service. A leaf of the translator (types and
// a CEL literal only), shared by the route's ext_authz (ext-authz.ts) and the LLM table's per-provider extAuth
// (llm/provider-ext-auth.ts), so the LLM table does not import the filter builders.

import type { ExtAuth } from "../../../api/auth.js";
import type { Static } from "../../../api/schema-kit.js";
import type { UnaryTarget, UserExtAuthHttp } from "../../../extauthz/user-ext-auth.js";
import type { UserExtAuthExpressions } from "../../../extauthz/user-ext-auth-cel.js";
import type { ClusterIR } from "../../ir.js";
import { celStringLiteral } from "./cel-literal.js";

type ExtAuthT = Static<typeof ExtAuth>;
export type Note = (field: string, message: string, reason?: "NeverMatches" | "Ignored") => void;

/**
 * The HTTP options Envoy (or Sluice on its behalf) applies as they are; constants are taken out of the CEL, and what
 * needs evaluating per request goes to `expressions` (then Sluice fronts the service).
 */
export function httpOptions(h: NonNullable<ExtAuthT["http"]>, expressions: Expressions, note: Note): UserExtAuthHttp {
  const path = h.path !== undefined ? celStringLiteral(h.path) : undefined;
  if (h.path !== undefined && path === undefined) expressions.path = h.path;
  if (h.redirect !== undefined) expressions.redirect = h.redirect;
  if (h.body !== undefined) expressions.body = h.body;
  if (h.responseMetadata !== undefined && Object.keys(h.responseMetadata).length > 0) {
    expressions.responseMetadata = { ...h.responseMetadata };
  }
  const headersToAdd: { key: string; value: string }[] = [];
  for (const [name, expr] of Object.entries(h.addRequestHeaders ?? {})) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
      note(`http.addRequestHeaders.${name}`, "not an HTTP header name; left out", "Ignored");
      continue;
    }
    const v = celStringLiteral(expr);
    if (v === undefined) expressions.headers = { ...expressions.headers, [name.toLowerCase()]: expr };
    else headersToAdd.push({ key: name, value: v });
  }
  return {
    ...(path !== undefined ? { path } : {}),
    // The spec's default sends only Authorization (Envoy adds the pseudo-headers it always sends).
    allowedRequestHeaders: (h.allowedRequestHeaders ?? ["authorization"]).map((n) => n.toLowerCase()),
    headersToAdd,
    allowedUpstreamHeaders: (h.allowedResponseHeaders ?? []).map((n) => n.toLowerCase()),
  };
}

export type Expressions = { -readonly [K in keyof UserExtAuthExpressions]: UserExtAuthExpressions[K] };

/** Names gRPC and HTTP/2 keep for themselves: a requestMetadata entry cannot set them. */
const RESERVED_METADATA = /^(:|grpc-)|^(content-type|te|user-agent|host|connection|transfer-encoding|upgrade)$/;

export function grpcMetadata(g: NonNullable<ExtAuthT["grpc"]>, expressions: Expressions, note: Note): void {
  const out: Record<string, string> = {};
  for (const [name, expr] of Object.entries(g.requestMetadata ?? {})) {
    const key = name.toLowerCase();
    if (RESERVED_METADATA.test(key) || !/^[0-9a-z_.-]+$/.test(key)) {
      note(`grpc.requestMetadata.${name}`, "not a metadata name a gRPC call can carry; left out", "Ignored");
      continue;
    }
    out[key] = expr;
  }
  if (Object.keys(out).length > 0) expressions.grpcMetadata = out;
}

/** Where Sluice calls an authorization service of `cluster` (its ready endpoints), or why it cannot. */
export function unaryTargets(
  cluster: ClusterIR | undefined,
  name: string,
): { targets: UnaryTarget[] } | { problem: string; reason?: "Ignored" } {
  switch (cluster?.kind) {
    case "eds":
    case "static":
      return { targets: cluster.endpoints.filter((e) => e.ready).map((e) => ({ host: e.address, port: e.port })) };
    case "dns":
      return { targets: [{ host: cluster.host, port: cluster.port }] };
    case "unix":
      return { targets: [{ unixPath: cluster.path }] };
    case "llm":
    case "mcp":
    case "pool":
    case "dfp":
      return {
        problem:
          "an AI or MCP backend, an InferencePool or a dynamic forward proxy cannot be an authorization service; calls fail (the failure mode applies)",
        reason: "Ignored",
      };
    case undefined:
      return { problem: `cluster ${name} not found; calls fail (the failure mode applies)` };
  }
}
