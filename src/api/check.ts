// The validator: interprets the structural JSON Schema subset the kinds are written in, reports every problem at its
// field path, applies defaults (as the API server would) and runs the cross-field rules on the defaulted value.
// A hand-written interpreter rather than a generic JSON Schema engine, so that messages say what would be valid,
// unknown fields get a "did you mean", and the cost is one pass over the document. Never throws on input.

import { error, type Problem, warning } from "./problems.js";
import { DEPRECATED, FORMAT, LIST_MAP_KEYS, LIST_TYPE, PATTERN_MESSAGE, RULES, type Rule } from "./schema-kit.js";
import { formatError } from "./string-formats.js";

type Schema = Record<string, unknown>;

const IDENT = /^[A-Za-z_$][\w$-]*$/;

export function childPath(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  if (IDENT.test(key)) return path === "" ? key : `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}

const regexCache = new Map<string, RegExp | null>();
function regex(pattern: string): RegExp | null {
  let r = regexCache.get(pattern);
  if (r === undefined) {
    try {
      r = new RegExp(pattern, "u");
    } catch {
      r = null;
    }
    regexCache.set(pattern, r);
  }
  return r;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "a mapping";
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v)}`;
  return `${typeof v === "number" ? "the number" : typeof v} ${String(v)}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function clone(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clone);
  if (isRecord(v)) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = clone(x);
    return out;
  }
  return v;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length]!;
}

function suggestion(key: string, known: readonly string[]): string {
  const lower = key.toLowerCase();
  const hit =
    known.find((k) => k.toLowerCase() === lower) ?? known.find((k) => editDistance(k.toLowerCase(), lower) <= 2);
  if (hit !== undefined) return `; did you mean ${hit}?`;
  return known.length > 0 && known.length <= 12 ? `; known fields: ${known.join(", ")}` : "";
}

function plural(n: number, one: string): string {
  if (n === 1) return `1 ${one}`;
  return one.endsWith("y") ? `${n} ${one.slice(0, -1)}ies` : `${n} ${one}s`;
}

/**
 * Checks `value` against `schema`, pushing problems; returns the value with defaults applied (a copy).
 * `null` counts as absent, as with the API server (which prunes nulls and then defaults).
 */
export function checkValue(schema: Schema, value: unknown, path: string, problems: Problem[]): unknown {
  const deprecated = schema[DEPRECATED];
  if (typeof deprecated === "string") {
    problems.push(warning(path, `deprecated: use ${deprecated} instead`));
  }
  if (schema["x-kubernetes-int-or-string"] === true) return checkIntOrString(schema, value, path, problems);
  const type = schema["type"];
  if (type === undefined) return clone(value); // any JSON (x-kubernetes-preserve-unknown-fields)
  switch (type) {
    case "object":
      return checkObject(schema, value, path, problems);
    case "array":
      return checkArray(schema, value, path, problems);
    case "string":
      if (typeof value !== "string") {
        problems.push(error(path, `must be a string, not ${describe(value)}`));
        return value;
      }
      checkString(schema, value, path, problems);
      return value;
    case "integer":
      if (typeof value !== "number" || !Number.isInteger(value)) {
        problems.push(error(path, `must be an integer, not ${describe(value)}`));
        return value;
      }
      checkNumber(schema, value, path, problems);
      return value;
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) {
        problems.push(error(path, `must be a number, not ${describe(value)}`));
        return value;
      }
      checkNumber(schema, value, path, problems);
      return value;
    case "boolean":
      if (typeof value !== "boolean") problems.push(error(path, `must be true or false, not ${describe(value)}`));
      return value;
    default:
      return value;
  }
}

function checkIntOrString(schema: Schema, value: unknown, path: string, problems: Problem[]): unknown {
  if (typeof value === "number") {
    if (!Number.isInteger(value)) problems.push(error(path, `must be an integer or a string, not ${describe(value)}`));
    else checkNumber(schema, value, path, problems);
  } else if (typeof value === "string") {
    checkString(schema, value, path, problems);
  } else {
    problems.push(error(path, `must be an integer or a string, not ${describe(value)}`));
  }
  return value;
}

function checkString(schema: Schema, value: string, path: string, problems: Problem[]): void {
  const min = schema["minLength"];
  const max = schema["maxLength"];
  if (typeof min === "number" && value.length < min) {
    problems.push(error(path, min === 1 ? "must not be empty" : `must be at least ${plural(min, "character")}`));
    return;
  }
  if (typeof max === "number" && value.length > max) {
    problems.push(error(path, `must be at most ${plural(max, "character")} (got ${value.length})`));
    return;
  }
  const en = schema["enum"];
  if (Array.isArray(en) && !en.includes(value)) {
    // (An empty value, the core group, is written "" so the message still says what is valid.)
    const valid = en.map((v) => (v === "" ? '""' : v)).join(", ");
    problems.push(error(path, `must be one of ${valid} (got ${JSON.stringify(value)})`));
    return;
  }
  const pattern = schema["pattern"];
  if (typeof pattern === "string") {
    const r = regex(pattern);
    if (r !== null && !r.test(value)) {
      const m = schema[PATTERN_MESSAGE];
      problems.push(
        error(path, `${typeof m === "string" ? m : `must match ${pattern}`} (got ${JSON.stringify(value)})`),
      );
      return;
    }
  }
  const e = formatError(schema[FORMAT], value);
  if (e !== undefined) problems.push(error(path, e));
}

function checkNumber(schema: Schema, value: number, path: string, problems: Problem[]): void {
  const min = schema["minimum"];
  const max = schema["maximum"];
  const tooLow = typeof min === "number" && value < min;
  const tooHigh = typeof max === "number" && value > max;
  if (!tooLow && !tooHigh) return;
  if (typeof min === "number" && typeof max === "number")
    problems.push(error(path, `must be between ${min} and ${max} (got ${value})`));
  else if (tooLow) problems.push(error(path, `must be at least ${min} (got ${value})`));
  else problems.push(error(path, `must be at most ${max} (got ${value})`));
}

function checkArray(schema: Schema, value: unknown, path: string, problems: Problem[]): unknown {
  if (!Array.isArray(value)) {
    problems.push(error(path, `must be a list, not ${describe(value)}`));
    return value;
  }
  const min = schema["minItems"];
  const max = schema["maxItems"];
  if (typeof min === "number" && value.length < min)
    problems.push(error(path, min === 1 ? "must not be empty" : `must have at least ${plural(min, "entry")}`));
  if (typeof max === "number" && value.length > max)
    problems.push(error(path, `must have at most ${plural(max, "entry")} (got ${value.length})`));
  const items = schema["items"] as Schema | undefined;
  const out = items === undefined ? clone(value) : value.map((v, i) => checkValue(items, v, `${path}[${i}]`, problems));
  if (schema[LIST_TYPE] === "map" && Array.isArray(out)) duplicateKeys(schema[LIST_MAP_KEYS], out, path, problems);
  if (schema[LIST_TYPE] === "set" && Array.isArray(out)) duplicateValues(out, path, problems);
  runRules(schema, out, path, problems);
  return out;
}

/** `x-kubernetes-list-type: set`: a value already in the list is refused, as the API server does. */
function duplicateValues(list: readonly unknown[], path: string, problems: Problem[]): void {
  const seen = new Map<string, number>();
  list.forEach((v, i) => {
    const id = JSON.stringify(v);
    const first = seen.get(id);
    if (first === undefined) seen.set(id, i);
    else problems.push(error(`${path}[${i}]`, `must be unique: ${id} is already at [${first}]`));
  });
}

/** `x-kubernetes-list-type: map`: a later entry with the keys of an earlier one is refused, as the API server does. */
function duplicateKeys(keys: unknown, list: readonly unknown[], path: string, problems: Problem[]): void {
  if (!Array.isArray(keys)) return;
  const seen = new Map<string, number>();
  list.forEach((entry, i) => {
    if (!isRecord(entry)) return;
    const values = keys.map((k: string) => entry[k]);
    if (values.some((v) => v === undefined)) return;
    const id = JSON.stringify(values);
    const first = seen.get(id);
    if (first === undefined) {
      seen.set(id, i);
      return;
    }
    const what = keys.map((k: string, j) => `${k} ${JSON.stringify(values[j])}`).join(", ");
    problems.push(error(`${path}[${i}]`, `must be unique: ${what} is already at [${first}]`));
  });
}

function checkObject(schema: Schema, value: unknown, path: string, problems: Problem[]): unknown {
  if (!isRecord(value)) {
    problems.push(error(path, `must be a mapping, not ${describe(value)}`));
    return value;
  }
  const props = schema["properties"] as Record<string, Schema> | undefined;
  const additional = schema["additionalProperties"] as Schema | undefined;
  const preserve = schema["x-kubernetes-preserve-unknown-fields"] === true;
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const key of Object.keys(value)) {
    const v = value[key];
    if (v === null || v === undefined) continue;
    count++;
    const p = props?.[key];
    if (p !== undefined) out[key] = checkValue(p, v, childPath(path, key), problems);
    else if (additional !== undefined && typeof additional === "object")
      out[key] = checkValue(additional, v, childPath(path, key), problems);
    else if (preserve) out[key] = clone(v);
    else
      problems.push(error(childPath(path, key), `unknown field "${key}"${suggestion(key, Object.keys(props ?? {}))}`));
  }
  if (props !== undefined) {
    for (const key of Object.keys(props)) {
      if (key in out) continue;
      const p = props[key]!;
      if (p["default"] !== undefined) out[key] = checkValue(p, clone(p["default"]), childPath(path, key), []);
    }
  }
  const required = schema["required"];
  if (Array.isArray(required)) {
    for (const key of required as string[]) {
      if (!(key in out)) problems.push(error(childPath(path, key), "required field is missing"));
    }
  }
  const minP = schema["minProperties"];
  const maxP = schema["maxProperties"];
  if (typeof minP === "number" && count < minP)
    problems.push(error(path, minP === 1 ? "must not be empty" : `must have at least ${plural(minP, "entry")}`));
  if (typeof maxP === "number" && count > maxP)
    problems.push(error(path, `must have at most ${plural(maxP, "entry")} (got ${count})`));
  runRules(schema, out, path, problems);
  return out;
}

function runRules(schema: Schema, value: unknown, path: string, problems: Problem[]): void {
  const rules = schema[RULES] as readonly Rule[] | undefined;
  if (rules === undefined) return;
  for (const r of rules) {
    let ok = true;
    try {
      ok = r.check(value);
    } catch {
      ok = true; // malformed data a structural error already covers
    }
    if (ok) continue;
    let where = r.fieldPath;
    try {
      where = r.locate?.(value) ?? where;
    } catch {
      // keep fieldPath
    }
    problems.push(error(where === undefined ? path : `${path}${where}`, r.message));
  }
}
