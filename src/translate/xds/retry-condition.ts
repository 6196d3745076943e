// `retry.condition` (CEL evaluated per response; retry when true) → Envoy's retriable status codes, when the
// expression reads nothing of the response but its status code: the codes are then known at translation time, by
// evaluating the expression itself for every status code (100..599), so the semantics are exactly the spec's (an
// expression that fails for a code, or is not `true`, does not retry on it). An expression that reads anything else
// (headers, body, the request) needs the response at hand, which Envoy's retry policy cannot give: it is reported.

import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { childrenOf, isFieldOf } from "../../cel/ast.js";
import { compileExpression, matches, specEnvironmentWith } from "../../cel/env.js";

const RESPONSE_ENVIRONMENT = specEnvironmentWith(["response"]);
const FIRST_CODE = 100;
const LAST_CODE = 599;

export type RetryCodes =
  | { readonly ok: true; readonly codes: readonly number[] }
  | { readonly ok: false; readonly why: string };

/** What `e` reads besides `response.code` (a variable or field name), if anything; comprehension variables are not reads. */
function otherRead(e: Expr | undefined, bound: ReadonlySet<string>): string | undefined {
  if (e === undefined) return undefined;
  if (isFieldOf(e, "response", "code")) return undefined;
  const k = e.exprKind;
  if (k.case === "identExpr") return bound.has(k.value.name) ? undefined : k.value.name;
  if (k.case === "selectExpr" && k.value.operand?.exprKind.case === "identExpr") {
    const name = k.value.operand.exprKind.value.name;
    if (name === "response") return `response.${k.value.field}`;
  }
  if (k.case === "comprehensionExpr") {
    const c = k.value;
    const inner = new Set([...bound, c.iterVar, c.accuVar, ...(c.iterVar2 !== "" ? [c.iterVar2] : [])]);
    const outer = otherRead(c.iterRange, bound) ?? otherRead(c.accuInit, bound);
    if (outer !== undefined) return outer;
    for (const x of [c.loopCondition, c.loopStep, c.result]) {
      const r = otherRead(x, inner);
      if (r !== undefined) return r;
    }
    return undefined;
  }
  for (const child of childrenOf(e)) {
    const r = otherRead(child, bound);
    if (r !== undefined) return r;
  }
  return undefined;
}

/** The status codes `text` retries on, or why it cannot be had natively. */
export function retryConditionCodes(text: string): RetryCodes {
  const c = compileExpression(text, RESPONSE_ENVIRONMENT);
  if (!("ok" in c)) return { ok: false, why: `does not compile: ${c.errors.map((e) => e.message).join("; ")}` };
  const read = otherRead(c.ok.ast.expr, new Set());
  if (read !== undefined) {
    return {
      ok: false,
      why: `reads ${read}; Envoy's retry policy can only follow the status code (response.code), so it is not applied`,
    };
  }
  const codes: number[] = [];
  for (let code = FIRST_CODE; code <= LAST_CODE; code++) {
    if (matches(c.ok, { response: { code: BigInt(code) } })) codes.push(code);
  }
  return { ok: true, codes };
}
