// Spec CEL → a condition Envoy's RBAC filter evaluates itself (envoy.config.rbac.v3.Policy.condition, Envoy's CEL
// runtime), for the part of the language whose meaning is the same in both: strings, ints and booleans read from the
// request, compared, tested and combined. What RBAC principals cannot say (rbac.ts) but Envoy's CEL can —
// `request.headers['x'].lowerAscii() == 'yes'`, `request.path.endsWith('.json')`, `request.method in ['GET', 'HEAD']`,
// `size(request.headers['x']) > 2` — then runs in Envoy instead of a call to Sluice.
//
// The accepted subset is checked node by node, with the type of each node known without running it, so that both
// runtimes give the same value, or both an error:
//   reads     request.method | host | scheme | path (Envoy's request.url_path: the spec's path has no query) → string,
//             request.headers['<lowercase name>'] or request.headers.<name> → string (repeated values joined with ",",
//             as both sides do; a missing header is an error on both), has(request.headers.<name>) → bool,
//             source.port → int
//   literals  string, int, bool
//   calls     == != between operands of one type; < <= > >= between two ints; && || ! over bools;
//             c ? a : b with branches of one type; x in [literals of x's type]; size(), startsWith(), endsWith(),
//             contains() on strings; lowerAscii() and upperAscii() (Envoy's string functions, switched on per policy);
//             string + string (Envoy's string concatenation, switched on per policy)
// Anything else (source.address, which is an IP here and `ip:port` in Envoy; request.query, a map here and the raw
// query in Envoy; jwt claims, whose JSON number types the two runtimes convert differently; regular expressions,
// RE2 in Envoy; macros over maps; mixed-type comparisons, false here and an error there) is not translated.

import { type Expr, ExprSchema } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Expr as EnvoyExpr, ExprSchema as EnvoyExprSchema } from "../gen/google/api/expr/v1alpha1/syntax_pb.js";
import { isIdent, isLowercase, isRequestHeaders, stringConst } from "./ast.js";

/** A condition for Envoy's RBAC, with the CEL features its policy must switch on. */
export interface EnvoyCondition {
  readonly expr: EnvoyExpr;
  /** lowerAscii() / upperAscii(): CelExpressionConfig.enable_string_functions. */
  readonly stringFunctions: boolean;
  /** string + string: CelExpressionConfig.enable_string_concat. */
  readonly stringConcat: boolean;
}

type Type = "string" | "int" | "bool";

const REQUEST_STRINGS: Readonly<Record<string, string>> = {
  method: "method",
  host: "host",
  scheme: "scheme",
  // The spec's request.path is the path without the query; Envoy's request.path has the query.
  path: "url_path",
};

const COMPARISONS = new Set(["_<_", "_<=_", "_>_", "_>=_"]);
const STRING_TESTS = new Set(["startsWith", "endsWith", "contains"]);
const CASE_FUNCTIONS = new Set(["lowerAscii", "upperAscii"]);

class Walk {
  stringFunctions = false;
  stringConcat = false;

  /** The static type of `e`, or undefined when `e` is outside the subset. Renames request.path in place. */
  type(e: Expr): Type | undefined {
    const k = e.exprKind;
    switch (k.case) {
      case "constExpr": {
        const c = k.value.constantKind.case;
        return c === "stringValue" ? "string" : c === "int64Value" ? "int" : c === "boolValue" ? "bool" : undefined;
      }
      case "selectExpr": {
        const operand = k.value.operand;
        if (operand === undefined) return undefined;
        if (k.value.testOnly) return isRequestHeaders(operand) && isHeaderName(k.value.field) ? "bool" : undefined;
        if (isIdent(operand, "request")) {
          const renamed = REQUEST_STRINGS[k.value.field];
          if (renamed === undefined) return undefined;
          k.value.field = renamed;
          return "string";
        }
        if (isIdent(operand, "source")) return k.value.field === "port" ? "int" : undefined;
        return isRequestHeaders(operand) && isHeaderName(k.value.field) ? "string" : undefined;
      }
      case "callExpr":
        return this.#call(k.value.function, k.value.target, k.value.args);
      default:
        return undefined;
    }
  }

  #call(fn: string, target: Expr | undefined, args: readonly Expr[]): Type | undefined {
    const [a, b, c] = args;
    if (target !== undefined) {
      if (this.type(target) !== "string") return undefined;
      if (fn === "size" && args.length === 0) return "int";
      if (STRING_TESTS.has(fn) && args.length === 1 && a && this.type(a) === "string") return "bool";
      if (CASE_FUNCTIONS.has(fn) && args.length === 0) {
        this.stringFunctions = true;
        return "string";
      }
      return undefined;
    }
    switch (fn) {
      case "_[_]": {
        const name = b ? stringConst(b) : undefined;
        return args.length === 2 && a && isRequestHeaders(a) && name !== undefined && isHeaderName(name)
          ? "string"
          : undefined;
      }
      case "size":
        return args.length === 1 && a && this.type(a) === "string" ? "int" : undefined;
      case "!_":
        return args.length === 1 && a && this.type(a) === "bool" ? "bool" : undefined;
      case "_&&_":
      case "_||_":
        return args.length === 2 && a && b && this.type(a) === "bool" && this.type(b) === "bool" ? "bool" : undefined;
      case "_==_":
      case "_!=_": {
        if (args.length !== 2 || !a || !b) return undefined;
        const t = this.type(a);
        return t !== undefined && this.type(b) === t ? "bool" : undefined;
      }
      case "_?_:_": {
        if (args.length !== 3 || !a || !b || !c || this.type(a) !== "bool") return undefined;
        const t = this.type(b);
        return t !== undefined && this.type(c) === t ? t : undefined;
      }
      case "_+_": {
        if (args.length !== 2 || !a || !b || this.type(a) !== "string" || this.type(b) !== "string") return undefined;
        this.stringConcat = true;
        return "string";
      }
      case "@in": {
        if (args.length !== 2 || !a || !b || b.exprKind.case !== "listExpr") return undefined;
        const t = this.type(a);
        if (t !== "string" && t !== "int") return undefined;
        const items = b.exprKind.value.elements;
        return items.length > 0 && items.every((x) => x.exprKind.case === "constExpr" && this.type(x) === t)
          ? "bool"
          : undefined;
      }
      default: {
        // Ints only: strings order by UTF-8 bytes in Envoy and may order by UTF-16 units here (beyond U+FFFF).
        if (!COMPARISONS.has(fn) || args.length !== 2 || !a || !b) return undefined;
        return this.type(a) === "int" && this.type(b) === "int" ? "bool" : undefined;
      }
    }
  }
}

/** The Envoy RBAC condition meaning exactly `e` (true where it is true), or undefined when outside the subset. */
export function toEnvoyCondition(e: Expr): EnvoyCondition | undefined {
  const copy = fromBinary(ExprSchema, toBinary(ExprSchema, e));
  const walk = new Walk();
  if (walk.type(copy) !== "bool") return undefined;
  return {
    expr: fromBinary(EnvoyExprSchema, toBinary(ExprSchema, copy)),
    stringFunctions: walk.stringFunctions,
    stringConcat: walk.stringConcat,
  };
}

/** The conjunction of conditions, as one condition (`a && b && ...`), with node ids made unique again. */
export function allOf(conditions: readonly EnvoyCondition[]): EnvoyCondition {
  const [first, ...rest] = conditions;
  if (first === undefined) throw new Error("allOf needs at least one condition");
  let expr = first.expr;
  for (const c of rest) {
    expr = create(EnvoyExprSchema, {
      exprKind: { case: "callExpr", value: { function: "_&&_", args: [expr, c.expr] } },
    });
  }
  if (rest.length > 0) {
    // The parts keep their own ids; the copy gets fresh ones.
    expr = fromBinary(EnvoyExprSchema, toBinary(EnvoyExprSchema, expr));
    renumber(expr, { next: 1 });
  }
  return {
    expr,
    stringFunctions: conditions.some((c) => c.stringFunctions),
    stringConcat: conditions.some((c) => c.stringConcat),
  };
}

/** Gives every node of `e` a fresh id (ids of the parts joined by allOf would repeat). */
function renumber(e: EnvoyExpr, counter: { next: number }): void {
  e.id = BigInt(counter.next++);
  const k = e.exprKind;
  switch (k.case) {
    case "selectExpr":
      if (k.value.operand) renumber(k.value.operand, counter);
      break;
    case "callExpr":
      if (k.value.target) renumber(k.value.target, counter);
      for (const a of k.value.args) renumber(a, counter);
      break;
    case "listExpr":
      for (const x of k.value.elements) renumber(x, counter);
      break;
    default:
      break;
  }
}

/**
 * A key the spec's header map can hold: the map is keyed by lowercase name, so `request.headers['X-A']` is a missing
 * key (an error), while Envoy would find `x-a`. Only lowercase keys mean the same on both sides.
 */
function isHeaderName(name: string): boolean {
  return name !== "" && isLowercase(name);
}
