// The optional decision cache of a user's `extAuth` (`cache: {key, ttl, maxEntries}`).
//
// The key is the list of values of the `key` expressions; if any of them fails to evaluate, the request is still
// sent to the service and its result is not cached (spec). `ttl` is a duration string (`30s`), an RFC 3339
// timestamp (absolute expiry), or a CEL expression evaluated when the decision is stored, returning a duration, a
// duration string, a timestamp or a number of seconds; a failing ttl expression also means "don't cache".

import { type CelValue, isCelList, isCelMap, isCelUint } from "@bufbuild/cel";
import { toBinary } from "@bufbuild/protobuf";
import { isReflectMessage } from "@bufbuild/protobuf/reflect";
import { type CelActivation, type CompiledExpr, compileExpression, evaluate } from "../cel/index.js";
import type { Problem } from "./authorization.js";
import { LruCache } from "./lru.js";

export interface ExtAuthCacheSpec {
  readonly key: readonly string[];
  readonly ttl: string;
  readonly maxEntries?: number;
}

export const DEFAULT_MAX_ENTRIES = 10000;

const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;

/** Milliseconds since the epoch of an RFC 3339 timestamp, undefined when not one. */
export function parseTimestamp(text: string): number | undefined {
  if (!TIMESTAMP_RE.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

const DURATION_RE = /^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$/;

/** Milliseconds of a Go-style duration string (`1h30m`, `500ms`), undefined when not one. */
export function parseDuration(text: string): number | undefined {
  if (!DURATION_RE.test(text)) return undefined;
  const unit: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6 };
  let ms = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * unit[m[2]!]!;
  return ms;
}

type Ttl = { readonly fixedMs: number } | { readonly expiresAt: number } | { readonly expr: CompiledExpr };

export class DecisionCache<V> {
  private readonly lru: LruCache<string, V>;

  private constructor(
    private readonly keys: readonly CompiledExpr[],
    private readonly ttl: Ttl,
    maxEntries: number,
  ) {
    this.lru = new LruCache(maxEntries);
  }

  static compile<V>(spec: ExtAuthCacheSpec, path: string): { cache?: DecisionCache<V>; problems: Problem[] } {
    const problems: Problem[] = [];
    if (!Array.isArray(spec.key) || spec.key.length < 1 || spec.key.length > 16) {
      problems.push({ path: `${path}.key`, message: "1 to 16 expressions are required" });
    }
    const keys: CompiledExpr[] = [];
    (spec.key ?? []).forEach((text, i) => {
      const r = compileExpression(text);
      if ("ok" in r) keys.push(r.ok);
      else for (const e of r.errors) problems.push({ path: `${path}.key[${i}]`, message: e.message });
    });
    let ttl: Ttl | undefined;
    const fixed = typeof spec.ttl === "string" ? parseDuration(spec.ttl) : undefined;
    const at = typeof spec.ttl === "string" ? parseTimestamp(spec.ttl) : undefined;
    if (fixed !== undefined) ttl = { fixedMs: fixed };
    else if (at !== undefined) ttl = { expiresAt: at };
    else {
      const r = compileExpression(spec.ttl);
      if ("ok" in r) ttl = { expr: r.ok };
      else
        for (const e of r.errors) {
          problems.push({ path: `${path}.ttl`, message: `not a duration or timestamp, and ${e.message}` });
        }
    }
    const maxEntries = spec.maxEntries ?? DEFAULT_MAX_ENTRIES;
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      problems.push({ path: `${path}.maxEntries`, message: "must be an integer >= 1" });
    }
    if (problems.length > 0 || ttl === undefined) return { problems };
    return { cache: new DecisionCache<V>(keys, ttl, maxEntries), problems };
  }

  get size(): number {
    return this.lru.size;
  }

  /** The CEL variables the key expressions read. */
  get keyVariables(): ReadonlySet<string> {
    return new Set(this.keys.flatMap((k) => [...k.variables]));
  }

  /** The CEL variables the ttl expression reads (none for a fixed ttl). */
  get ttlVariables(): ReadonlySet<string> {
    return "expr" in this.ttl ? this.ttl.expr.variables : new Set();
  }

  /** The cache key for a request, or undefined ("don't cache") when a key expression fails. */
  keyFor(activation: CelActivation): string | undefined {
    const parts: string[] = [];
    for (const k of this.keys) {
      const r = evaluate(k, activation);
      if ("error" in r) return undefined;
      const s = serialize(r.value);
      if (s === undefined) return undefined;
      parts.push(s);
    }
    return parts.join(",");
  }

  get(key: string, now: number = Date.now()): V | undefined {
    return this.lru.get(key, now);
  }

  /** Stores a decision; returns false when the ttl could not be computed (then nothing is cached). */
  set(key: string, value: V, activation: CelActivation, now: number = Date.now()): boolean {
    const expiresAt = this.expiry(activation, now);
    if (expiresAt === undefined || expiresAt <= now) return false;
    this.lru.set(key, value, expiresAt);
    return true;
  }

  private expiry(activation: CelActivation, now: number): number | undefined {
    if ("fixedMs" in this.ttl) return now + this.ttl.fixedMs;
    if ("expiresAt" in this.ttl) return this.ttl.expiresAt;
    const r = evaluate(this.ttl.expr, activation);
    if ("error" in r) return undefined;
    const v = r.value;
    if (typeof v === "string") {
      const ms = parseDuration(v);
      return ms === undefined ? parseTimestamp(v) : now + ms;
    }
    if (typeof v === "bigint") return now + Number(v) * 1000;
    if (typeof v === "number" && Number.isFinite(v)) return now + v * 1000;
    if (isReflectMessage(v)) {
      const m = v.message as unknown as { seconds?: bigint; nanos?: number };
      const ms = Number(m.seconds ?? 0n) * 1000 + (m.nanos ?? 0) / 1e6;
      if (v.desc.typeName === "google.protobuf.Duration") return now + ms;
      if (v.desc.typeName === "google.protobuf.Timestamp") return ms;
    }
    return undefined;
  }
}

/** An unambiguous text form of a CEL value (type-tagged, length-safe through JSON quoting). */
function serialize(v: CelValue): string | undefined {
  if (v === null) return "n";
  switch (typeof v) {
    case "string":
      return `s${JSON.stringify(v)}`;
    case "bigint":
      return `i${v}`;
    case "number":
      return `d${v}`;
    case "boolean":
      return v ? "t" : "f";
  }
  if (v instanceof Uint8Array) return `b${Buffer.from(v).toString("base64")}`;
  if (isCelUint(v)) return `u${v.value}`;
  if (isCelList(v)) {
    const items: string[] = [];
    for (const e of v) {
      const s = serialize(e);
      if (s === undefined) return undefined;
      items.push(s);
    }
    return `[${items.join(",")}]`;
  }
  if (isCelMap(v)) {
    const items: string[] = [];
    for (const [k, e] of v) {
      const ks = serialize(k as CelValue);
      const es = serialize(e);
      if (ks === undefined || es === undefined) return undefined;
      items.push(`${ks}:${es}`);
    }
    return `{${items.sort().join(",")}}`;
  }
  if (isReflectMessage(v)) return `m${v.desc.typeName}:${Buffer.from(toBinary(v.desc, v.message)).toString("base64")}`;
  return undefined;
}
