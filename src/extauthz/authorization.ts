// The spec's Authorization decision (traffic.authorization, frontend.networkAuthorization, backend.mcp.authorization).
//
// Rules come from possibly several GwPolicy resources on one target; their union is evaluated in the spec's order:
//   1. Deny: any matching Deny rule denies.
//   2. Require: every expression of every Require rule must be true.
//   3. Allow: only when at least one Allow rule exists, at least one must match.
// An expression that fails to evaluate (missing claim, absent variable, non-boolean result) does not match, which
// makes Deny not fire and Require false.
//
// Within one rule the spec gives Allow OR semantics ("at least one expression matches") and Require AND semantics;
// Deny "denies when an expression matches", so it is OR as well. The spec notes the schema text reads the list as
// jointly true; users are told to use single-expression rules where that matters, and then both readings agree.

import {
  type CelActivation,
  type CompiledExpr,
  compileExpression,
  matches,
  type PreparedActivation,
  prepareActivation,
  referencedVariables,
  type SpecVariable,
} from "../cel/index.js";

export type AuthorizationAction = "Allow" | "Deny" | "Require";

/** The `Authorization` object of the spec, as the validator hands it over. */
export interface AuthorizationSpec {
  readonly action?: AuthorizationAction;
  readonly policy: { readonly matchExpressions: readonly string[] };
}

/** One rule to compile, with the field path used in problems and decisions (e.g. `default/p1: spec.traffic.authorization`). */
export interface AuthorizationInput {
  readonly path: string;
  readonly rule: AuthorizationSpec;
}

export interface Problem {
  readonly path: string;
  readonly message: string;
}

export interface CompiledRule {
  readonly path: string;
  readonly action: AuthorizationAction;
  readonly expressions: readonly CompiledExpr[];
}

/** Compiled rules of one target, split by action so the decision never re-sorts per request. */
export interface CompiledAuthorization {
  readonly deny: readonly CompiledRule[];
  readonly require: readonly CompiledRule[];
  readonly allow: readonly CompiledRule[];
}

export type AuthorizationDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly reason: "Deny" | "Require" | "NoAllowMatched"; readonly rule: string };

export const EMPTY_AUTHORIZATION: CompiledAuthorization = { deny: [], require: [], allow: [] };

/**
 * Compiles the rules of one target. Every invalid expression is reported (not just the first); a rule with an invalid
 * expression is left out, and the caller marks its policy invalid.
 */
export function compileAuthorization(inputs: readonly AuthorizationInput[]): {
  readonly authorization: CompiledAuthorization;
  readonly problems: readonly Problem[];
} {
  const deny: CompiledRule[] = [];
  const require: CompiledRule[] = [];
  const allow: CompiledRule[] = [];
  const problems: Problem[] = [];
  for (const { path, rule } of inputs) {
    const action = rule.action ?? "Allow";
    if (action !== "Allow" && action !== "Deny" && action !== "Require") {
      problems.push({ path: `${path}.action`, message: `unknown action "${String(action)}"; Allow, Deny or Require` });
      continue;
    }
    const texts = rule.policy?.matchExpressions;
    if (!Array.isArray(texts) || texts.length === 0) {
      problems.push({ path: `${path}.policy.matchExpressions`, message: "at least one expression is required" });
      continue;
    }
    const expressions: CompiledExpr[] = [];
    let valid = true;
    texts.forEach((text, i) => {
      const r = compileExpression(text);
      if ("ok" in r) {
        expressions.push(r.ok);
        return;
      }
      valid = false;
      for (const e of r.errors) {
        const at = e.position ? ` (line ${e.position.line}, column ${e.position.column})` : "";
        problems.push({ path: `${path}.policy.matchExpressions[${i}]`, message: `${e.message}${at}` });
      }
    });
    if (!valid) continue;
    const compiled: CompiledRule = { path, action, expressions };
    (action === "Deny" ? deny : action === "Require" ? require : allow).push(compiled);
  }
  return { authorization: { deny, require, allow }, problems };
}

/**
 * Warnings for rules that read variables the target can never provide (e.g. `jwt` with no JWT authentication): the
 * policy stays Accepted as the spec requires, and the status explains why the expression can never match.
 */
export function unavailableVariableWarnings(
  authorization: CompiledAuthorization,
  available: ReadonlySet<SpecVariable | string>,
): Problem[] {
  const out: Problem[] = [];
  for (const rule of [...authorization.deny, ...authorization.require, ...authorization.allow]) {
    rule.expressions.forEach((expr, i) => {
      for (const v of referencedVariables(expr)) {
        if (!available.has(v)) {
          out.push({
            path: `${rule.path}.policy.matchExpressions[${i}]`,
            message: `reads \`${v}\` but no ${describeVariable(v)} applies to this target, so this expression can never match`,
          });
        }
      }
    });
  }
  return out;
}

function describeVariable(v: string): string {
  switch (v) {
    case "jwt":
      return "JWT authentication";
    case "apiKey":
      return "API key authentication";
    case "basicAuth":
      return "basic authentication";
    case "extauthz":
      return "external authorization (extAuth) with responseMetadata";
    case "llm":
      return "AI backend";
    default:
      return `source of \`${v}\``;
  }
}

/** The decision for one request. Allocation-free on the allow path. */
export function authorize(
  authorization: CompiledAuthorization,
  celActivation: CelActivation | PreparedActivation,
): AuthorizationDecision {
  if (isEmptyAuthorization(authorization)) return ALLOWED;
  const activation = prepareActivation(celActivation);
  for (const rule of authorization.deny) {
    for (const expr of rule.expressions) {
      if (matches(expr, activation)) return { allowed: false, reason: "Deny", rule: rule.path };
    }
  }
  for (const rule of authorization.require) {
    for (const expr of rule.expressions) {
      if (!matches(expr, activation)) return { allowed: false, reason: "Require", rule: rule.path };
    }
  }
  if (authorization.allow.length === 0) return ALLOWED;
  for (const rule of authorization.allow) {
    for (const expr of rule.expressions) {
      if (matches(expr, activation)) return ALLOWED;
    }
  }
  return { allowed: false, reason: "NoAllowMatched", rule: authorization.allow[0]!.path };
}

const ALLOWED: AuthorizationDecision = { allowed: true };

/** True when there is nothing to evaluate. */
export function isEmptyAuthorization(a: CompiledAuthorization): boolean {
  return a.deny.length === 0 && a.require.length === 0 && a.allow.length === 0;
}
