// "Native when possible": authorization rules whose expressions all map to Envoy RBAC principals are emitted as
// envoy.config.rbac.v3 instead of a call to Sluice.
//
// Supported leaves: header equality / prefix / presence (`request.headers['h'] == 'v'`, `.startsWith('p')`,
// `has(request.headers.h)`, `'h' in request.headers`), path equality and prefix, method and host equality, source CIDR
// (`cidr('...').containsIP(source.address)`), JWT claim string equality and inequality (`jwt.c == 'v'`, from the jwt_authn payload in
// dynamic metadata), boolean literals, and `&&`, `||`, `!` over them. Anything else returns undefined.
//
// CEL has three outcomes (true, false, error) and the spec says an erroring expression does not match; RBAC is
// two-valued. Each expression is therefore translated twice: T(e) "e evaluates to true" and F(e) "e evaluates to
// false", with CEL's error-absorbing logic:
//   leaf:   T = match              F = defined && !match   (a missing header or claim is an error: neither T nor F)
//   !a:     T = F(a)               F = T(a)
//   a && b: T = T(a) && T(b)       F = F(a) || F(b)        (false && error == false)
//   a || b: T = T(a) || T(b)       F = F(a) && F(b)        (true || error == true)
// and an expression matches exactly when T holds. So `!(request.headers['x'] == 'v')` becomes "x present and not v",
// never "x absent", matching the CEL path.

import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { CelExpressionConfigSchema } from "../gen/envoy/config/core/v3/cel_pb.js";
import {
  type PolicySchema,
  type Principal,
  PrincipalSchema,
  type RBAC,
  RBAC_Action,
  RBACSchema,
} from "../gen/envoy/config/rbac/v3/rbac_pb.js";
import { isFieldOf, isIdent, isLowercase, isRequestHeaders, requestHeaderName, stringConst } from "./ast.js";
import type { CompiledExpr } from "./env.js";
import { allOf, type EnvoyCondition, toEnvoyCondition } from "./envoy-condition.js";
import { parseCidr } from "./net.js";

/** Where the translator's jwt_authn filter writes the verified payload (`payload_in_metadata`). */
export const JWT_METADATA_NAMESPACE = "envoy.filters.http.jwt_authn";
export const JWT_PAYLOAD_KEY = "jwt_payload";

type P = Principal;

interface TF {
  readonly t: P;
  readonly f: P;
}

const any = (): P => create(PrincipalSchema, { identifier: { case: "any", value: true } });
const not = (p: P): P => create(PrincipalSchema, { identifier: { case: "notId", value: p } });
const and = (...ids: P[]): P => create(PrincipalSchema, { identifier: { case: "andIds", value: { ids } } });
const or = (...ids: P[]): P => create(PrincipalSchema, { identifier: { case: "orIds", value: { ids } } });
const never = (): P => not(any());

function stringPattern(match: { exact: string } | { prefix: string }) {
  return "exact" in match
    ? { case: "exact" as const, value: match.exact }
    : { case: "prefix" as const, value: match.prefix };
}

function header(name: string, match: { exact: string } | { prefix: string } | { present: true }): P {
  const specifier =
    "present" in match
      ? { case: "presentMatch" as const, value: true }
      : { case: "stringMatch" as const, value: { matchPattern: stringPattern(match) } };
  return create(PrincipalSchema, { identifier: { case: "header", value: { name, headerMatchSpecifier: specifier } } });
}

function urlPath(match: { exact: string } | { prefix: string }): P {
  return create(PrincipalSchema, {
    identifier: { case: "urlPath", value: { rule: { case: "path", value: { matchPattern: stringPattern(match) } } } },
  });
}

function claim(name: string, value: { exact: string } | { present: true }): P {
  return create(PrincipalSchema, {
    identifier: {
      case: "metadata",
      value: {
        filter: JWT_METADATA_NAMESPACE,
        path: [{ segment: { case: "key", value: JWT_PAYLOAD_KEY } }, { segment: { case: "key", value: name } }],
        value: {
          matchPattern:
            "present" in value
              ? { case: "presentMatch", value: true }
              : { case: "stringMatch", value: { matchPattern: { case: "exact", value: value.exact } } },
        },
      },
    },
  });
}

/** A leaf that is always defined (never errors). */
const total = (t: P): TF => ({ t, f: not(t) });
/** A leaf that errors when `defined` does not hold. */
const partial = (t: P, defined: P): TF => ({ t, f: and(defined, not(t)) });

/** The RBAC principal that matches exactly when the expression evaluates to true; undefined when not expressible. */
export function toRbacPrincipal(expr: CompiledExpr): Principal | undefined {
  return translate(expr.ast.expr)?.t;
}

function translate(e: Expr): TF | undefined {
  const k = e.exprKind;
  if (k.case === "constExpr" && k.value.constantKind.case === "boolValue") {
    return k.value.constantKind.value ? { t: any(), f: never() } : { t: never(), f: any() };
  }
  if (k.case === "selectExpr" && k.value.testOnly) {
    // has(request.headers.h)
    if (k.value.operand && isRequestHeaders(k.value.operand))
      return isLowercase(k.value.field) ? total(header(k.value.field, { present: true })) : undefined;
    // has(jwt.c): defined whenever jwt exists, which the jwt_authn payload metadata stands for.
    if (k.value.operand && isIdent(k.value.operand, "jwt")) return total(claim(k.value.field, { present: true }));
    return undefined;
  }
  if (k.case !== "callExpr") return undefined;
  const { function: fn, args, target } = k.value;
  switch (fn) {
    case "!_": {
      const a = args[0] && translate(args[0]);
      return a && { t: a.f, f: a.t };
    }
    case "_&&_":
    case "_||_": {
      const parts = args.map(translate);
      if (parts.some((p) => p === undefined) || parts.length !== 2) return undefined;
      const [a, b] = parts as [TF, TF];
      return fn === "_&&_" ? { t: and(a.t, b.t), f: or(a.f, b.f) } : { t: or(a.t, b.t), f: and(a.f, b.f) };
    }
    case "_==_":
    case "_!=_": {
      const [l, r] = args;
      if (!l || !r) return undefined;
      const lit = stringConst(r) ?? stringConst(l);
      const subject = stringConst(r) !== undefined ? l : r;
      const eq = lit === undefined ? undefined : equality(subject, lit);
      // a != b is !(a == b), errors included.
      return fn === "_==_" || eq === undefined ? eq : { t: eq.f, f: eq.t };
    }
    case "startsWith": {
      const prefix = args[0] && stringConst(args[0]);
      if (!target || prefix === undefined) return undefined;
      const h = requestHeaderName(target);
      if (h !== undefined) return partial(header(h, { prefix }), header(h, { present: true }));
      if (isRequestField(target, "path")) return total(urlPath({ prefix }));
      return undefined;
    }
    case "@in": {
      const [l, r] = args;
      const name = l && stringConst(l);
      if (name === undefined || !isLowercase(name) || !r || !isRequestHeaders(r)) return undefined;
      return total(header(name, { present: true }));
    }
    case "containsIP": {
      const text = target && cidrLiteral(target);
      const arg = args[0];
      if (text === undefined || !arg || !isSourceAddress(arg)) return undefined;
      const c = parseCidr(text);
      if (c === undefined) return undefined;
      const ip = create(PrincipalSchema, {
        // direct_remote_ip is the downstream peer, which is what ext_authz reports as the source address.
        identifier: {
          case: "directRemoteIp",
          value: { addressPrefix: text.slice(0, text.indexOf("/")), prefixLen: c.prefix },
        },
      });
      return total(ip);
    }
    default:
      return undefined;
  }
}

function equality(subject: Expr, value: string): TF | undefined {
  const h = requestHeaderName(subject);
  if (h !== undefined) return partial(header(h, { exact: value }), header(h, { present: true }));
  if (isRequestField(subject, "path")) return total(urlPath({ exact: value }));
  if (isRequestField(subject, "method")) return total(header(":method", { exact: value }));
  if (isRequestField(subject, "host")) return total(header(":authority", { exact: value }));
  const c = claimName(subject);
  if (c !== undefined) return partial(claim(c, { exact: value }), claim(c, { present: true }));
  return undefined;
}

const isRequestField = (e: Expr, field: string): boolean => isFieldOf(e, "request", field);
const isSourceAddress = (e: Expr): boolean => isFieldOf(e, "source", "address");

/** `jwt.c` or `jwt['c']`. */
function claimName(e: Expr): string | undefined {
  const k = e.exprKind;
  if (k.case === "selectExpr" && !k.value.testOnly && k.value.operand && isIdent(k.value.operand, "jwt"))
    return k.value.field;
  if (
    k.case === "callExpr" &&
    k.value.function === "_[_]" &&
    k.value.args.length === 2 &&
    isIdent(k.value.args[0]!, "jwt")
  ) {
    return stringConst(k.value.args[1]!);
  }
  return undefined;
}

function cidrLiteral(e: Expr): string | undefined {
  const k = e.exprKind;
  if (k.case !== "callExpr" || k.value.function !== "cidr" || k.value.target || k.value.args.length !== 1)
    return undefined;
  return stringConst(k.value.args[0]!);
}

/** A compiled rule as the authorization module holds it. */
export interface RbacRuleInput {
  readonly path: string;
  readonly action: "Allow" | "Deny" | "Require";
  readonly expressions: readonly CompiledExpr[];
}

/**
 * What one expression becomes in Envoy: principals and conditions that all hold exactly when it is true. A principal
 * when the whole expression is one; else each operand of a top-level `&&` is a principal or an Envoy CEL condition
 * (envoy-condition.ts): `a && b` is true exactly when both are.
 */
interface NativeExpr {
  readonly principals: readonly P[];
  readonly conditions: readonly EnvoyCondition[];
}

function nativeExpr(expr: CompiledExpr, withConditions: boolean): NativeExpr | undefined {
  const whole = toRbacPrincipal(expr);
  if (whole !== undefined) return { principals: [whole], conditions: [] };
  if (!withConditions) return undefined;
  const principals: P[] = [];
  const conditions: EnvoyCondition[] = [];
  for (const part of conjuncts(expr.ast.expr)) {
    const p = translate(part)?.t;
    if (p !== undefined) {
      principals.push(p);
      continue;
    }
    const c = toEnvoyCondition(part);
    if (c === undefined) return undefined;
    conditions.push(c);
  }
  return { principals, conditions };
}

function conjuncts(e: Expr): Expr[] {
  const k = e.exprKind;
  if (k.case === "callExpr" && k.value.function === "_&&_" && k.value.args.length === 2 && !k.value.target) {
    return k.value.args.flatMap(conjuncts);
  }
  return [e];
}

/** One RBAC policy matching exactly when every part holds. */
function policyOf(parts: readonly NativeExpr[]): RbacPolicyInit {
  const principals = parts.flatMap((p) => p.principals);
  const conditions = parts.flatMap((p) => p.conditions);
  const principal = principals.length === 0 ? any() : principals.length === 1 ? principals[0]! : and(...principals);
  if (conditions.length === 0) return policy(principal);
  const c = allOf(conditions);
  const withCondition: RbacPolicyInit = { ...policy(principal), condition: c.expr };
  if (!c.stringFunctions && !c.stringConcat) return withCondition;
  return {
    ...withCondition,
    celConfig: create(CelExpressionConfigSchema, {
      enableStringFunctions: c.stringFunctions,
      enableStringConcat: c.stringConcat,
    }),
  };
}

/**
 * The RBAC filters, in filter-chain order, equivalent to the rules; undefined when any expression is not expressible
 * (then the whole set goes to Sluice's ext_authz, so the two paths never split one decision).
 *
 * Mapping: Deny rules → one DENY filter, matching when any expression of any rule is true. Require rules → one ALLOW
 * filter with one policy matching when every expression is true. Allow rules (if any) → one ALLOW filter matching
 * when any expression is true. A rule whose expressions are all principals is one policy (their `or`); otherwise each
 * expression is its own policy (`<rule>.policy.matchExpressions[i]`), since a policy holds one condition. A condition that
 * fails to evaluate does not match its policy, which is the spec's "an expression that fails does not match". A
 * request passes only if it passes every filter; the filters are side-effect free and all deny with 403, so the
 * outcome is their conjunction, which is the spec's Deny → Require → Allow order (the order only decides which filter
 * reports the denial; we keep the spec's).
 */
export function buildRbacFilters(
  rules: readonly RbacRuleInput[],
  opts: { readonly conditions?: boolean } = {},
): RBAC[] | undefined {
  const deny: Record<string, RbacPolicyInit> = {};
  const allow: Record<string, RbacPolicyInit> = {};
  const require: NativeExpr[] = [];
  for (const r of rules) {
    const natives = r.expressions.map((e) => nativeExpr(e, opts.conditions !== false));
    if (natives.length === 0 || natives.some((n) => n === undefined)) return undefined;
    const defined = natives as NativeExpr[];
    if (r.action === "Require") {
      require.push(...defined);
      continue;
    }
    const into = r.action === "Deny" ? deny : allow;
    if (defined.every((n) => n.conditions.length === 0 && n.principals.length === 1)) {
      const ps = defined.map((n) => n.principals[0]!);
      into[r.path] = policy(ps.length === 1 ? ps[0]! : or(...ps));
    } else {
      defined.forEach((n, i) => {
        into[`${r.path}.policy.matchExpressions[${i}]`] = policyOf([n]);
      });
    }
  }
  const out: RBAC[] = [];
  if (Object.keys(deny).length > 0) out.push(create(RBACSchema, { action: RBAC_Action.DENY, policies: deny }));
  if (require.length > 0) {
    out.push(create(RBACSchema, { action: RBAC_Action.ALLOW, policies: { require: policyOf(require) } }));
  }
  if (Object.keys(allow).length > 0) out.push(create(RBACSchema, { action: RBAC_Action.ALLOW, policies: allow }));
  return out;
}

type RbacPolicyInit = MessageInitShape<typeof PolicySchema>;

function policy(principal: P): RbacPolicyInit {
  return { permissions: [{ rule: { case: "any" as const, value: true } }], principals: [principal] };
}
