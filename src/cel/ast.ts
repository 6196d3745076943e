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
