// Credential extraction shared by API keys and basic auth: the spec's AuthorizationExtractionLocation.

import { type CelActivation, type CompiledExpr, compileExpression, evaluate } from "../cel/index.js";
import type { Problem } from "./authorization.js";

/** Exactly one of the four, as the spec's `AuthorizationExtractionLocation`. */
export type ExtractionLocation =
  | { readonly header: { readonly name: string; readonly prefix?: string } }
  | { readonly queryParameter: { readonly name: string } }
  | { readonly cookie: { readonly name: string } }
  | { readonly expression: string };

export type CompiledLocation =
  | { readonly kind: "header"; readonly name: string; readonly prefix: string | undefined }
  | { readonly kind: "query"; readonly name: string }
  | { readonly kind: "cookie"; readonly name: string }
  | { readonly kind: "expression"; readonly expr: CompiledExpr };

export function compileLocation(
  location: ExtractionLocation | undefined,
  defaultPrefix: string,
  path: string,
): { readonly location?: CompiledLocation; readonly problems: Problem[] } {
  if (location === undefined)
    return { location: { kind: "header", name: "authorization", prefix: defaultPrefix }, problems: [] };
  const set = (["header", "queryParameter", "cookie", "expression"] as const).filter(
    (k) => (location as Record<string, unknown>)[k] !== undefined,
  );
  if (set.length !== 1) {
    return {
      problems: [{ path, message: `exactly one of header, queryParameter, cookie, expression; got ${set.length}` }],
    };
  }
  if ("header" in location) {
    // Header names are case-insensitive; Envoy hands them over lowercased.
    return {
      location: { kind: "header", name: location.header.name.toLowerCase(), prefix: location.header.prefix },
      problems: [],
    };
  }
  if ("queryParameter" in location)
    return { location: { kind: "query", name: location.queryParameter.name }, problems: [] };
  if ("cookie" in location) return { location: { kind: "cookie", name: location.cookie.name }, problems: [] };
  const r = compileExpression(location.expression);
  if ("ok" in r) return { location: { kind: "expression", expr: r.ok }, problems: [] };
  return { problems: r.errors.map((e) => ({ path: `${path}.expression`, message: e.message })) };
}

/**
 * The credential at `location`, or undefined when absent. A header prefix (an auth scheme such as `Bearer`) is matched
 * case-insensitively, as RFC 9110 makes schemes; a header that does not start with it carries no credential.
 */
export function extractCredential(location: CompiledLocation, activation: CelActivation): string | undefined {
  const request = activation.request;
  switch (location.kind) {
    case "header": {
      const value = request?.headers.get(location.name);
      if (value === undefined) return undefined;
      if (location.prefix === undefined || location.prefix === "") return nonEmpty(value.trim());
      const prefix = location.prefix.trim();
      if (value.length < prefix.length || value.slice(0, prefix.length).toLowerCase() !== prefix.toLowerCase()) {
        return undefined;
      }
      const rest = value.slice(prefix.length);
      // `Bearer` must be followed by whitespace: `Bearerabc` is not a Bearer credential.
      if (/^[A-Za-z0-9]$/.test(prefix.slice(-1)) && rest !== "" && !/^\s/.test(rest)) return undefined;
      return nonEmpty(rest.trim());
    }
    case "query":
      return nonEmpty(request?.query.get(location.name));
    case "cookie":
      return nonEmpty(cookieValue(request?.headers.get("cookie"), location.name));
    case "expression": {
      const r = evaluate(location.expr, activation);
      if ("value" in r && typeof r.value === "string") return nonEmpty(r.value);
      return undefined;
    }
  }
}

function nonEmpty(s: string | undefined): string | undefined {
  return s === undefined || s === "" ? undefined : s;
}

/** The value of cookie `name` in a Cookie header (`a=1; b="2"`, quotes taken off); undefined when absent. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    if (part.slice(0, eq).trim() === name) {
      let v = part.slice(eq + 1).trim();
      if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) v = v.slice(1, -1);
      return v;
    }
  }
  return undefined;
}

/** Query parameters of a path (`/p?a=1&b=2`), first value wins, as a Map (never a prototype-bearing object). */
export function parseQuery(path: string): Map<string, string> {
  const out = new Map<string, string>();
  const q = path.indexOf("?");
  if (q < 0) return out;
  const end = path.indexOf("#", q);
  const search = path.slice(q + 1, end < 0 ? undefined : end);
  for (const [k, v] of new URLSearchParams(search)) if (!out.has(k)) out.set(k, v);
  return out;
}
