// Small readers of the parsed CEL AST, shared by the native translations (rbac.ts, envoy-condition.ts).

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
