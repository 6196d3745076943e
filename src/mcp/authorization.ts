// `backend.mcp.authorization`: the spec's Authorization rules evaluated per item. Lists leave out the items the rules
// deny; a call, get or read of a denied item is refused. The CEL sees `mcp.tool`, `mcp.prompt` or `mcp.resource`
// (the target's own name or URI, and the target), `jwt` and `apiKey` as Envoy found them, and `request`.

import { type CelActivation, compileExpression, specEnvironmentWith } from "../cel/index.js";
import { authorize, type CompiledAuthorization, type CompiledRule } from "../extauthz/authorization.js";
import type { McpAuthorizationRule } from "../translate/mcp/table.js";

const MCP_ENVIRONMENT = specEnvironmentWith(["mcp"]);

export type McpItem =
  | { readonly kind: "tool" | "prompt"; readonly target: string; readonly name: string }
  | { readonly kind: "resource"; readonly target: string; readonly uri: string };

/** What a request brings to the rules besides the item. */
export interface McpRequestContext {
  readonly request: NonNullable<CelActivation["request"]>;
  readonly jwt?: unknown;
  readonly apiKey?: unknown;
}

const compiled = new WeakMap<readonly McpAuthorizationRule[], CompiledAuthorization>();

/**
 * The rules compiled once per table entry. The translator has checked the expressions; one that does not compile here
 * is left out of its rule, and a rule left with none never matches (Allow does not grant, Require denies).
 */
export function compileMcpAuthorization(rules: readonly McpAuthorizationRule[]): CompiledAuthorization {
  const hit = compiled.get(rules);
  if (hit !== undefined) return hit;
  const deny: CompiledRule[] = [];
  const require: CompiledRule[] = [];
  const allow: CompiledRule[] = [];
  for (const r of rules) {
    const expressions = r.matchExpressions.flatMap((text) => {
      const c = compileExpression(text, MCP_ENVIRONMENT);
      return "ok" in c ? [c.ok] : [];
    });
    const rule: CompiledRule = { path: r.path, action: r.action, expressions };
    if (r.action === "Require" && expressions.length < r.matchExpressions.length) {
      // An expression that cannot be evaluated is false: the Require rule denies.
      const never = compileExpression("false", MCP_ENVIRONMENT);
      if ("ok" in never) expressions.push(never.ok);
    }
    (r.action === "Deny" ? deny : r.action === "Require" ? require : allow).push(rule);
  }
  const out = { deny, require, allow };
  compiled.set(rules, out);
  return out;
}

export function itemAllowed(rules: CompiledAuthorization, ctx: McpRequestContext, item: McpItem): boolean {
  const mcp =
    item.kind === "resource"
      ? { resource: { uri: item.uri, target: item.target } }
      : { [item.kind]: { name: item.name, target: item.target } };
  const activation: CelActivation = {
    request: ctx.request,
    ...(ctx.jwt !== undefined ? { jwt: ctx.jwt as never } : {}),
    ...(ctx.apiKey !== undefined ? { apiKey: ctx.apiKey as never } : {}),
    mcp,
  };
  return authorize(rules, activation).allowed;
}

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * A URI with percent-encoded unreserved characters decoded and other escapes in upper case (RFC 3986 §6.2.2), so a
 * rule on `mem://a/info` also holds for `mem://a/%69nfo`. The target gets the normalized URI too.
 */
export function normalizeUri(uri: string): string {
  return uri.replace(/%([0-9A-Fa-f]{2})/g, (m, hex: string) => {
    const c = String.fromCharCode(Number.parseInt(hex, 16));
    return UNRESERVED.test(c) ? c : m.toUpperCase();
  });
}
