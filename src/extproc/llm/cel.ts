// CEL for the LLM ext_proc: expressions compiled once per text, JSON ↔ CEL values, and the `request` and `llm`
// variables of the spec's environment as this service knows them.

import {
  type CelEnvironment,
  type CompiledExpr,
  compileExpression,
  evaluate,
  fromCel,
  specEnvironment,
  toCel,
} from "../../cel/index.js";
import { JWT_METADATA_NAMESPACE, JWT_PAYLOAD_KEY } from "../../cel/rbac.js";
import { EXTAUTHZ_METADATA_KEY, EXTAUTHZ_METADATA_NAMESPACE } from "../../extauthz/user-ext-auth.js";

export { toCel };

const compiled = new Map<CelEnvironment, Map<string, CompiledExpr | undefined>>();

/**
 * The compiled expression, or undefined when it does not compile (the translator has reported it already). Cached per
 * text and environment (the spec's, or one with more variables such as `response`).
 */
export function compileCached(text: string, environment: CelEnvironment = specEnvironment): CompiledExpr | undefined {
  let cache = compiled.get(environment);
  if (cache === undefined) {
    cache = new Map();
    compiled.set(environment, cache);
  }
  if (!cache.has(text)) {
    const r = compileExpression(text, environment);
    cache.set(text, "ok" in r ? r.ok : undefined);
  }
  return cache.get(text);
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The HTTP request as the spec's `request` variable (from the request headers the router stage saw). */
export function requestVariable(headers: Readonly<Record<string, string>>): Obj {
  const path = headers[":path"] ?? "/";
  const q = path.indexOf("?");
  return {
    method: headers[":method"] ?? "POST",
    path: q < 0 ? path : path.slice(0, q),
    host: headers[":authority"] ?? "",
    scheme: headers[":scheme"] ?? "http",
    headers: new Map(Object.entries(headers).filter(([k]) => !k.startsWith(":"))),
    query: new Map(q < 0 ? [] : new URLSearchParams(path.slice(q + 1))),
  };
}

/** Evaluates `text` with `vars`; undefined when it does not compile or fails. */
export function evaluateText(text: string, vars: Obj, environment: CelEnvironment = specEnvironment): unknown {
  const expr = compileCached(text, environment);
  if (expr === undefined) return undefined;
  const r = evaluate(expr, vars as Parameters<typeof evaluate>[1]);
  return "value" in r ? fromCel(r.value) : undefined;
}

/**
 * `jwt`, `apiKey`, `basicAuth` and `extauthz` from the dynamic metadata the route forwards to the LLM ext_proc
 * (llm.ts): the JWT filter's payload, and what Sluice's ext_authz left (authentication identity, the user extAuth's
 * answer). A variable whose source did not run is absent, so an expression reading it fails (as in authorization).
 */
export function identityVariables(metadata: { readonly [namespace: string]: unknown } | undefined): Obj {
  const out: Obj = {};
  if (metadata === undefined) return out;
  const jwt = (metadata[JWT_METADATA_NAMESPACE] as Obj | undefined)?.[JWT_PAYLOAD_KEY];
  if (isObj(jwt)) out["jwt"] = toCel(jwt);
  const authz = metadata[EXTAUTHZ_METADATA_NAMESPACE] as Obj | undefined;
  for (const [variable, key] of [
    ["apiKey", "apiKey"],
    ["basicAuth", "basicAuth"],
    ["extauthz", EXTAUTHZ_METADATA_KEY],
  ] as const) {
    const v = authz?.[key];
    if (isObj(v)) out[variable] = toCel(v);
  }
  return out;
}

/**
 * `identity` with `extauthz` as a provider's extAuth check left it: what that service told, over what the route's
 * extAuth told (a key both name: the provider's, the later check).
 */
export function withExtauthz(identity: Readonly<Obj>, told: Readonly<Obj>): Obj {
  const mine = toCel(told) as Map<string, unknown>;
  const route = identity["extauthz"];
  return { ...identity, extauthz: route instanceof Map ? new Map([...route, ...mine]) : mine };
}
