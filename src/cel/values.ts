// JSON ↔ CEL values, for variables that come from JSON (metadata, LLM bodies) and results that go back to JSON.

import { isCelList, isCelMap, isCelUint } from "@bufbuild/cel";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** JSON → CEL: integers become int, objects maps. */
export function toCel(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(toCel);
  if (typeof v === "number") return Number.isInteger(v) ? BigInt(v) : v;
  if (isObj(v)) return new Map(Object.entries(v).map(([k, x]) => [k, toCel(x)]));
  return v;
}

/** CEL → JSON. */
export function fromCel(v: unknown): unknown {
  if (typeof v === "bigint") return Number(v);
  if (isCelUint(v)) return Number(v.value);
  if (isCelList(v)) return [...v].map(fromCel);
  if (isCelMap(v)) return Object.fromEntries([...v].map(([k, x]) => [String(k), fromCel(x)]));
  if (v instanceof Uint8Array) return new TextDecoder().decode(v);
  return v;
}
