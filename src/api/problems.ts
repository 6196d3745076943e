// Problems found in user input. Validators and translators return these; they never throw on user input.

export type Severity = "error" | "warning";

export interface Problem {
  /** Field path inside the resource, e.g. `spec.rules[0].matches[1].path.value`; empty for the whole document. */
  readonly path: string;
  readonly message: string;
  readonly severity: Severity;
}

export function error(path: string, message: string): Problem {
  return { path, message, severity: "error" };
}

export function warning(path: string, message: string): Problem {
  return { path, message, severity: "warning" };
}

/** `spec.rules[0].name` -> ["spec", "rules", 0, "name"]; the inverse of joinPath. */
export function splitPath(path: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]|\["([^"]*)"\]/g)) {
    if (m[2] !== undefined) out.push(Number(m[2]));
    else if (m[3] !== undefined) out.push(m[3]);
    else if (m[1] !== undefined) out.push(m[1]);
  }
  return out;
}

export function joinPath(segments: readonly (string | number)[]): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(s)) out += out === "" ? s : `.${s}`;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out;
}
