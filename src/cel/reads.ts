// What of the request an expression can read, found in its AST, so a check is sent only that (the HTTP ext_authz
// check, src/translate/xds/filters/ext-authz-sluice.ts): which headers — by literal name, or all of them when the map is
// used any other way — whether the scheme, and whether the source. Conservative: anything not recognised as a literal
// header lookup reads every header.

import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { childrenOf, isIdent, stringConst } from "./ast.js";
import type { CompiledExpr } from "./env.js";

export interface RequestReads {
  /** Lowercase header names read by literal key, or "all" (the map iterated, sized, tested with `in`, passed on ...). */
  readonly headers: ReadonlySet<string> | "all";
  /** `request.scheme` (or the `:scheme` pseudo-header, or every header, or the whole `request`). */
  readonly scheme: boolean;
  readonly source: boolean;
}

/** The union of what `exprs` read. */
export function requestReads(exprs: readonly CompiledExpr[]): RequestReads {
  const headers = new Set<string>();
  let all = false;
  let scheme = false;
  let source = false;
  const visit = (e: Expr | undefined, parent: Expr | undefined): void => {
    if (e === undefined) return;
    const k = e.exprKind;
    switch (k.case) {
      case "identExpr":
        if (k.value.name === "source") source = true;
        // The whole request used as a value (passed to a function, compared, ...): everything.
        if (k.value.name === "request" && !isSelectOn(parent, e)) {
          all = true;
          scheme = true;
        }
        return;
      case "selectExpr": {
        const operand = k.value.operand;
        if (operand !== undefined && isIdent(operand, "request")) {
          if (k.value.field === "scheme") scheme = true;
          if (k.value.field === "headers") {
            const name = literalKeyOf(parent, e);
            if (name === undefined) all = true;
            else {
              headers.add(name.toLowerCase());
              if (name === ":scheme") scheme = true;
            }
          }
          return;
        }
        visit(operand, e);
        return;
      }
      case "callExpr":
        visit(k.value.target, e);
        for (const a of k.value.args) visit(a, e);
        return;
      case "listExpr":
        for (const x of k.value.elements) visit(x, e);
        return;
      case "structExpr":
        for (const entry of k.value.entries) {
          if (entry.keyKind.case === "mapKey") visit(entry.keyKind.value, e);
          visit(entry.value, e);
        }
        return;
      case "comprehensionExpr": {
        const c = k.value;
        // A comprehension variable named like a spec variable would hide it: read conservatively.
        if ([c.iterVar, c.iterVar2, c.accuVar].some((v) => v === "request" || v === "source")) {
          all = true;
          scheme = true;
          source = true;
        }
        for (const x of [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]) visit(x, e);
        return;
      }
      default:
        return;
    }
  };
  for (const x of exprs) visit(x.ast.expr, undefined);
  // The whole map has the `:scheme` pseudo-header too.
  return { headers: all ? "all" : headers, scheme: scheme || all, source };
}

function isSelectOn(parent: Expr | undefined, child: Expr): boolean {
  return parent?.exprKind.case === "selectExpr" && parent.exprKind.value.operand === child;
}

/** The header name when `headers` (the select `request.headers`) is looked up by a literal: `[…]`, `.name`, has(). */
function literalKeyOf(parent: Expr | undefined, headers: Expr): string | undefined {
  const k = parent?.exprKind;
  if (k === undefined) return undefined;
  if (k.case === "selectExpr" && k.value.operand === headers) return k.value.field;
  if (k.case === "callExpr" && (k.value.function === "_[_]" || k.value.function === "_[?_]")) {
    const [target, key] = k.value.args;
    return target === headers && key !== undefined ? stringConst(key) : undefined;
  }
  return undefined;
}

/**
 * The header names, as written, that an expression looks `request.headers` up with by a literal: `[…]`, `[?…]`,
 * `.name`, `has()` and `'name' in request.headers`. The map is keyed by lowercase names, so a name with an uppercase
 * letter is never present (reported at translation).
 */
export function literalHeaderKeys(expr: CompiledExpr): string[] {
  const out: string[] = [];
  const visit = (e: Expr | undefined, parent: Expr | undefined): void => {
    if (e === undefined) return;
    const k = e.exprKind;
    if (k.case === "selectExpr" && k.value.field === "headers" && !k.value.testOnly && k.value.operand !== undefined) {
      if (isIdent(k.value.operand, "request")) {
        const name = literalKeyOf(parent, e) ?? inKeyOf(parent, e);
        if (name !== undefined) out.push(name);
        return;
      }
    }
    // A comprehension variable named `request` hides the spec's: its reads are not the request's headers.
    if (k.case === "comprehensionExpr" && [k.value.iterVar, k.value.iterVar2, k.value.accuVar].includes("request")) {
      visit(k.value.iterRange, e);
      return;
    }
    for (const c of childrenOf(e)) visit(c, e);
  };
  visit(expr.ast.expr, undefined);
  return out;
}

/** The literal name of `'name' in request.headers` (`headers` being the select `request.headers`). */
function inKeyOf(parent: Expr | undefined, headers: Expr): string | undefined {
  const k = parent?.exprKind;
  if (k?.case !== "callExpr" || k.value.function !== "@in") return undefined;
  const [key, target] = k.value.args;
  return target === headers && key !== undefined ? stringConst(key) : undefined;
}
