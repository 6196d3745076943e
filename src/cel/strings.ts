// The CEL strings extension as policies get it: @bufbuild/cel's, with its `replace` swapped for one of ours. The
// library's rebuilds the whole string for every occurrence (quadratic: 1.4 s for a 64 KiB path with many matches), on
// input a client controls. Ours is one pass with cel-go's semantics (`n` < 0 or absent: every occurrence; an empty
// `old` matches before each code point and at the end), and refuses to build a result past MAX_REPLACE_RESULT.

import { type CelFunc, CelScalar, celMethod } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";

/** Characters (UTF-16 units) a `replace` may produce: above it the call is an error, not a slow allocation. */
export const MAX_REPLACE_RESULT = 4 * 1024 * 1024;

function tooLong(): Error {
  return new Error(`replace: the result would exceed ${MAX_REPLACE_RESULT} characters`);
}

/** `s` with the first `n` occurrences of `old` replaced by `repl` (`n` < 0: all), in time linear in the result. */
export function replaceLinear(s: string, old: string, repl: string, n: number): string {
  if (n === 0) return s;
  if (old !== "" && n < 0) {
    // Every occurrence: the engine's split and join, sized first.
    const parts = s.split(old);
    if (s.length + (parts.length - 1) * (repl.length - old.length) > MAX_REPLACE_RESULT) throw tooLong();
    return parts.join(repl);
  }
  let out = "";
  let count = 0;
  const add = (piece: string) => {
    if (out.length + piece.length > MAX_REPLACE_RESULT) throw tooLong();
    out += piece;
  };
  if (old === "") {
    // Before each code point, and at the end (Go's strings.Replace).
    let i = 0;
    while (n < 0 || count < n) {
      add(repl);
      count++;
      if (i === s.length) return out;
      const w = (s.codePointAt(i) as number) > 0xffff ? 2 : 1;
      add(s.slice(i, i + w));
      i += w;
    }
    add(s.slice(i));
    return out;
  }
  let from = 0;
  let at = s.indexOf(old);
  while (at !== -1 && count < n) {
    add(s.slice(from, at));
    add(repl);
    count++;
    from = at + old.length;
    at = s.indexOf(old, from);
  }
  add(s.slice(from));
  return out;
}

const { STRING, INT } = CelScalar;

/** @bufbuild/cel's strings extension with the linear `replace` in place of its own. */
export const specStrings: readonly CelFunc[] = [
  ...strings.filter((f) => f.name !== "replace"),
  celMethod("replace", STRING, [STRING, STRING], STRING, function (this: string, old: string, repl: string) {
    return replaceLinear(this, old, repl, -1);
  }),
  celMethod("replace", STRING, [STRING, STRING, INT], STRING, function (this: string, old, repl, n) {
    return replaceLinear(this, old, repl, Number(n));
  }),
];
