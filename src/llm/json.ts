// Small JSON helpers shared by the LLM translators. Upstream and client bodies are untrusted, so every read goes
// through a guard instead of a cast, and parsing never throws.

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

export type ParseResult = { ok: true; value: unknown } | { ok: false; error: string };

export function parseJson(text: string): ParseResult {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

export function num(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

export function bool(v: unknown): boolean | undefined {
  return typeof v === "boolean" ? v : undefined;
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Parses a JSON string that should hold an object (tool arguments); anything else becomes `{}` so a model's
 * malformed arguments reach the other provider as an empty input instead of failing the whole request. */
export function parseObject(text: string | undefined): Record<string, unknown> {
  if (text === undefined || text === "") return {};
  const r = parseJson(text);
  return r.ok && isObject(r.value) ? r.value : {};
}

/** Copies `src[key]` to `dst[key]` only when it is defined: keeps objects valid under exactOptionalPropertyTypes. */
export function setIf<T extends object, K extends keyof T>(dst: T, key: K, value: T[K] | undefined): void {
  if (value !== undefined) dst[key] = value;
}

const te = new TextEncoder();
export function utf8(s: string): Uint8Array {
  return te.encode(s);
}
