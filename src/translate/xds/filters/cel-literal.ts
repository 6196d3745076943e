// A CEL expression that is a string literal, read as its value (a leaf: no translator imports).

/** The value of `expr` when it is a single- or double-quoted string literal without escapes; else undefined. */
export function celStringLiteral(expr: string): string | undefined {
  const m = /^\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*$/.exec(expr);
  return m === null ? undefined : (m[1] ?? m[2]);
}
