// Parse-level check of CEL expressions. The spec's CEL environment (variables, functions, type checking) lives in
// src/cel/; this only answers "does it parse", so that `sluice validate` can point at a broken expression.

import { parse } from "@bufbuild/cel";

const cache = new Map<string, string | undefined>();
const CACHE_LIMIT = 20000;

/** The syntax error of `expr`, or undefined when it parses. Never throws. */
export function celSyntaxError(expr: string): string | undefined {
  if (cache.has(expr)) return cache.get(expr);
  let result: string | undefined;
  try {
    parse(expr);
  } catch (e) {
    const text = e instanceof Error ? e.message : String(e);
    // "<input>:1:8: found = but expecting ..." -> "1:8: found = but expecting ..."
    result = text.replace(/^<input>:/, "").split("\n")[0] ?? text;
  }
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(expr, result);
  return result;
}
