// The CEL of a user's extAuth that Envoy cannot evaluate, for Sluice to apply when it fronts the service
// (user-ext-auth.ts): the HTTP call's path, added headers and body, the redirect of a denial, the metadata read from
// the answer (exposed to later steps as `extauthz`), and the gRPC call's metadata.
//
// Compiled once per table entry. Per request, a value that fails to evaluate or has the wrong type rejects the
// request (403): the call cannot be made as configured, and that is not the service failing, so FailOpen does not
// apply. A responseMetadata entry that fails is left out of `extauthz` (as a missing claim is absent from `jwt`).

import { validateHeaderValue } from "node:http";
import {
  type CelActivation,
  type CompiledExpr,
  compileExpression,
  evaluate,
  fromCel,
  specEnvironment,
  specEnvironmentWith,
} from "../cel/index.js";

/** The expressions as written (the table entry's content; hashed into its id). */
export interface UserExtAuthExpressions {
  /** http.path when not a constant. */
  readonly path?: string;
  readonly body?: string;
  readonly redirect?: string;
  /** http.addRequestHeaders that are not constants, by lowercase name. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly responseMetadata?: Readonly<Record<string, string>>;
  /** grpc.requestMetadata, by lowercase name. */
  readonly grpcMetadata?: Readonly<Record<string, string>>;
}

export interface CompiledUserExtAuth {
  readonly path?: CompiledExpr;
  readonly body?: CompiledExpr;
  readonly redirect?: CompiledExpr;
  readonly headers: readonly (readonly [string, CompiledExpr])[];
  readonly responseMetadata: readonly (readonly [string, CompiledExpr])[];
  readonly grpcMetadata: readonly (readonly [string, CompiledExpr])[];
  /** Top-level variables any of them reads (`response` aside). */
  readonly variables: ReadonlySet<string>;
}

/** The variable responseMetadata expressions read the service's answer from: `code`, `headers`, `body`. */
export const RESPONSE_VARIABLE = "response";
const responseEnvironment = specEnvironmentWith([RESPONSE_VARIABLE]);

export interface ExpressionProblem {
  /** Under the extAuth field: `http.path`, `http.addRequestHeaders.x-tenant` ... */
  readonly path: string;
  readonly message: string;
}

/** Compiles every expression; those that fail are left out and reported. */
export function compileUserExtAuthExpressions(e: UserExtAuthExpressions): {
  compiled: CompiledUserExtAuth;
  problems: ExpressionProblem[];
} {
  const problems: ExpressionProblem[] = [];
  const variables = new Set<string>();
  const one = (path: string, text: string, response = false): CompiledExpr | undefined => {
    const r = compileExpression(text, response ? responseEnvironment : specEnvironment);
    if ("errors" in r) {
      problems.push({ path, message: r.errors.map((p) => p.message).join("; ") });
      return undefined;
    }
    for (const v of r.ok.variables) if (v !== RESPONSE_VARIABLE) variables.add(v);
    return r.ok;
  };
  const map = (path: string, m: Readonly<Record<string, string>> | undefined, response = false) => {
    const out: (readonly [string, CompiledExpr])[] = [];
    for (const [k, text] of Object.entries(m ?? {})) {
      const c = one(`${path}.${k}`, text, response);
      if (c !== undefined) out.push([k, c]);
    }
    return out;
  };
  const path = e.path === undefined ? undefined : one("http.path", e.path);
  const body = e.body === undefined ? undefined : one("http.body", e.body);
  const redirect = e.redirect === undefined ? undefined : one("http.redirect", e.redirect);
  const compiled: CompiledUserExtAuth = {
    ...(path !== undefined ? { path } : {}),
    ...(body !== undefined ? { body } : {}),
    ...(redirect !== undefined ? { redirect } : {}),
    headers: map("http.addRequestHeaders", e.headers),
    responseMetadata: map("http.responseMetadata", e.responseMetadata, true),
    grpcMetadata: map("grpc.requestMetadata", e.grpcMetadata),
    variables,
  };
  return { compiled, problems };
}

export type Evaluated<T> = { readonly value: T } | { readonly error: string };

/** A string for a path, header or metadata value: strings, and numbers or booleans written out. */
export function evalString(expr: CompiledExpr, activation: CelActivation, field: string): Evaluated<string> {
  const r = evaluate(expr, activation);
  if ("error" in r) return { error: `${field} failed to evaluate: ${r.error}` };
  const v = fromCel(r.value);
  if (typeof v === "string") return { value: v };
  if (typeof v === "number" || typeof v === "boolean") return { value: String(v) };
  return { error: `${field} must be a string, got ${v === null ? "null" : typeof v}` };
}

/**
 * A header (or gRPC metadata) value: what evalString gives, refused when HTTP cannot carry it (CR, LF, NUL ...). Checked
 * here, not left to the client library: its refusal would count as the service failing, and FailOpen would then let
 * in a request whose own data (a decoded query parameter, say) made the value invalid.
 */
export function evalHeaderValue(expr: CompiledExpr, activation: CelActivation, field: string): Evaluated<string> {
  const v = evalString(expr, activation, field);
  if ("error" in v) return v;
  try {
    validateHeaderValue("x", v.value);
  } catch {
    return { error: `${field} is not a valid header value` };
  }
  return v;
}

/** A request path: starts with "/", visible ASCII only (as a request line carries it); else refused, as above. */
export function evalPath(expr: CompiledExpr, activation: CelActivation, field: string): Evaluated<string> {
  const v = evalString(expr, activation, field);
  if ("error" in v) return v;
  if (!/^\/[\x21-\x7e]*$/.test(v.value)) return { error: `${field} must start with "/" and hold visible ASCII only` };
  return v;
}

/** The call's body: strings and bytes as they are, other values as JSON (as directResponse bodies). */
export function evalBody(expr: CompiledExpr, activation: CelActivation): Evaluated<Buffer> {
  const r = evaluate(expr, activation);
  if ("error" in r) return { error: `http.body failed to evaluate: ${r.error}` };
  if (r.value instanceof Uint8Array) return { value: Buffer.from(r.value) };
  const v = fromCel(r.value);
  return { value: Buffer.from(typeof v === "string" ? v : JSON.stringify(v)) };
}

/** The answer as `response`. */
export interface AnswerVariable {
  readonly code: bigint;
  /** Lowercase names; repeated headers joined with ",". */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: string;
}

/** `extauthz`: each responseMetadata entry that evaluates, as JSON. */
export function evalResponseMetadata(
  compiled: CompiledUserExtAuth,
  activation: CelActivation,
  answer: AnswerVariable,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (compiled.responseMetadata.length === 0) return out;
  const withAnswer: CelActivation = { ...activation, [RESPONSE_VARIABLE]: answer };
  for (const [k, expr] of compiled.responseMetadata) {
    const r = evaluate(expr, withAnswer);
    if ("value" in r) out[k] = fromCel(r.value);
  }
  return out;
}
