// Small readers of the parsed CEL AST, shared by the native translations (rbac.ts, envoy-condition.ts, frontend.ts).

import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";

export function isIdent(e: Expr, name: string): boolean {
  return e.exprKind.case === "identExpr" && e.exprKind.value.name === name;
}

/** `<variable>.<field>` read (not a has() test), e.g. `request.headers`, `source.address`. */
export function isFieldOf(e: Expr, variable: string, field: string): boolean {
  const k = e.exprKind;
  return (
    k.case === "selectExpr" &&
    !k.value.testOnly &&
    k.value.field === field &&
    k.value.operand !== undefined &&
    isIdent(k.value.operand, variable)
  );
}

export function stringConst(e: Expr): string | undefined {
  const k = e.exprKind;
  return k.case === "constExpr" && k.value.constantKind.case === "stringValue" ? k.value.constantKind.value : undefined;
}

/** A literal's value: strings, booleans and numbers (ints as numbers); undefined for anything else. */
export function constValue(e: Expr): string | boolean | number | undefined {
  if (e.exprKind.case !== "constExpr") return undefined;
  const c = e.exprKind.value.constantKind;
  switch (c.case) {
    case "stringValue":
    case "boolValue":
    case "doubleValue":
      return c.value;
    case "int64Value":
    case "uint64Value":
      return Number(c.value);
    default:
      return undefined;
  }
}

export function isRequestHeaders(e: Expr): boolean {
  return isFieldOf(e, "request", "headers");
}

/**
 * The spec's header map is keyed by lowercase name, so `request.headers['X-A']` is a missing key there (an error),
 * while Envoy's header matchers ignore case: only lowercase names mean the same on both paths.
 */
export function isLowercase(name: string): boolean {
  return name === name.toLowerCase();
}

/** `request.headers['h']` or `request.headers.h`, with a lowercase name (see isLowercase()). */
export function requestHeaderName(e: Expr): string | undefined {
  const k = e.exprKind;
  if (k.case === "selectExpr" && !k.value.testOnly && k.value.operand && isRequestHeaders(k.value.operand)) {
    return isLowercase(k.value.field) ? k.value.field : undefined;
  }
  if (
    k.case === "callExpr" &&
    k.value.function === "_[_]" &&
    k.value.args.length === 2 &&
    isRequestHeaders(k.value.args[0]!)
  ) {
    const name = stringConst(k.value.args[1]!);
    return name !== undefined && isLowercase(name) ? name : undefined;
  }
  return undefined;
}

/** The direct subexpressions of `e`. */
export function childrenOf(e: Expr): (Expr | undefined)[] {
  const k = e.exprKind;
  switch (k.case) {
    case "selectExpr":
      return [k.value.operand];
    case "callExpr":
      return [k.value.target, ...k.value.args];
    case "listExpr":
      return k.value.elements;
    case "structExpr":
      return k.value.entries.flatMap((x) => [x.keyKind.case === "mapKey" ? x.keyKind.value : undefined, x.value]);
    case "comprehensionExpr": {
      const c = k.value;
      return [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result];
    }
    default:
      return [];
  }
}
