// API key authentication: the key store built from Secret / ConfigMap data, and the per-request check.
//
// Keys are kept only as SHA-256 digests. A presented key is hashed and compared against every digest with
// crypto.timingSafeEqual, without stopping at the first match, so the time taken says nothing about which entry (or
// how much of it) matched. Keys and digests never appear in problems or logs; entries are named by source and entry.

import { createHash, timingSafeEqual } from "node:crypto";
import type { CelActivation } from "../cel/index.js";
import type { Problem } from "./authorization.js";
import { type CompiledLocation, compileLocation, type ExtractionLocation, extractCredential } from "./credentials.js";

export type ApiKeyMode = "Strict" | "Optional" | "Permissive";

/** One Secret or ConfigMap selected by secretRef / secretSelector / configMapSelector; Secret data already decoded. */
export interface ApiKeySource {
  readonly kind: "Secret" | "ConfigMap";
  /** For problems and for naming entries, e.g. `default/api-keys`. */
  readonly name: string;
  readonly data: Readonly<Record<string, string>>;
}

export interface ApiKeyEntry {
  /** `<kind>/<namespace>/<name>/<entry>`: names the key without revealing it. */
  readonly id: string;
  /** Metadata of the entry as JSON (an object becomes `apiKey.<field>` in CEL); `{}` when absent. */
  readonly metadata: unknown;
}

interface StoredKey {
  readonly digest: Buffer;
  /** What lookups return: never the digest. */
  readonly entry: ApiKeyEntry;
}

export interface ApiKeyStore {
  readonly size: number;
  /** The entry whose key equals `presented`, compared in constant time over the whole store. */
  lookup(presented: string): ApiKeyEntry | undefined;
}

const HASH_RE = /^sha256:([0-9a-fA-F]{64})$/;

/** Builds the store; every invalid entry is reported and left out, the rest still work. */
export function buildApiKeyStore(sources: readonly ApiKeySource[]): {
  readonly store: ApiKeyStore;
  readonly problems: readonly Problem[];
} {
  const keys: StoredKey[] = [];
  const problems: Problem[] = [];
  for (const source of sources) {
    for (const [entry, raw] of Object.entries(source.data)) {
      const path = `${source.kind}/${source.name}.data.${entry}`;
      const parsed = parseEntry(source.kind, raw);
      if ("problem" in parsed) {
        problems.push({ path, message: parsed.problem });
        continue;
      }
      const duplicate = keys.find((k) => timingSafeEqual(k.digest, parsed.digest));
      if (duplicate !== undefined) {
        // The spec leaves duplicates undefined; keeping the first is deterministic, and saying so helps the user.
        problems.push({
          path,
          message: `the same key is already defined by ${duplicate.entry.id}; this entry is ignored`,
        });
        continue;
      }
      keys.push({
        digest: parsed.digest,
        entry: { id: `${source.kind}/${source.name}/${entry}`, metadata: parsed.metadata },
      });
    }
  }
  return { store: new DigestStore(keys), problems };
}

function parseEntry(
  kind: ApiKeySource["kind"],
  raw: string,
): { readonly digest: Buffer; readonly metadata: unknown } | { readonly problem: string } {
  const text = raw.trim();
  if (!text.startsWith("{")) {
    if (kind === "ConfigMap") {
      return {
        problem: 'ConfigMap entries must be JSON objects with "keyHash" ("sha256:<hex>"); a raw key is rejected',
      };
    }
    // A trailing newline from `kubectl create secret --from-file` is not part of the key.
    if (text === "") return { problem: "empty key" };
    return { digest: sha256(text), metadata: {} };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { problem: 'invalid JSON; expected {"key": ...} or {"keyHash": "sha256:<hex>"} with optional "metadata"' };
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    return { problem: "expected a JSON object" };
  }
  const o = json as Record<string, unknown>;
  const hasKey = o["key"] !== undefined;
  const hasHash = o["keyHash"] !== undefined;
  if (hasKey === hasHash) return { problem: 'exactly one of "key" and "keyHash" is required' };
  if (kind === "ConfigMap" && hasKey) {
    return { problem: 'ConfigMap entries must use "keyHash" ("sha256:<hex>"); a raw "key" is rejected' };
  }
  const metadata = o["metadata"] ?? {};
  if (hasKey) {
    if (typeof o["key"] !== "string" || o["key"] === "") return { problem: '"key" must be a non-empty string' };
    return { digest: sha256(o["key"]), metadata };
  }
  const m = typeof o["keyHash"] === "string" ? HASH_RE.exec(o["keyHash"]) : null;
  if (m === null) return { problem: '"keyHash" must be "sha256:" followed by 64 hex digits' };
  return { digest: Buffer.from(m[1]!, "hex"), metadata };
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s, "utf8").digest();
}

class DigestStore implements ApiKeyStore {
  constructor(private readonly keys: readonly StoredKey[]) {}
  get size(): number {
    return this.keys.length;
  }
  lookup(presented: string): ApiKeyEntry | undefined {
    const digest = sha256(presented);
    let found: StoredKey | undefined;
    // No early exit: every digest is compared whatever matched.
    for (const k of this.keys) {
      if (timingSafeEqual(k.digest, digest) && found === undefined) found = k;
    }
    return found?.entry;
  }
}

/** The spec's API key authentication, compiled. */
export interface ApiKeyAuth {
  readonly mode: ApiKeyMode;
  readonly location: CompiledLocation;
  readonly store: ApiKeyStore;
}

export interface ApiKeyAuthSpec {
  readonly mode?: ApiKeyMode;
  readonly location?: ExtractionLocation;
}

export function compileApiKeyAuth(
  spec: ApiKeyAuthSpec,
  sources: readonly ApiKeySource[],
  path: string,
): { readonly auth?: ApiKeyAuth; readonly problems: readonly Problem[] } {
  const problems: Problem[] = [];
  const mode = spec.mode ?? "Strict";
  if (mode !== "Strict" && mode !== "Optional" && mode !== "Permissive") {
    problems.push({ path: `${path}.mode`, message: `unknown mode "${String(mode)}"; Strict, Optional or Permissive` });
  }
  const loc = compileLocation(spec.location, "Bearer", `${path}.location`);
  problems.push(...loc.problems);
  const built = buildApiKeyStore(sources);
  problems.push(...built.problems);
  if (loc.location === undefined || problems.some((p) => p.path.startsWith(`${path}.`))) return { problems };
  return { auth: { mode, location: loc.location, store: built.store }, problems };
}

export type ApiKeyResult =
  | { readonly outcome: "authenticated"; readonly entry: ApiKeyEntry }
  | { readonly outcome: "anonymous" }
  | { readonly outcome: "denied"; readonly reason: "missing" | "invalid" };

/**
 * Strict: a valid key is required. Optional: no key is fine, a wrong key is not. Permissive: never rejects; a valid
 * key still provides `apiKey` metadata for later steps.
 */
export function checkApiKey(auth: ApiKeyAuth, activation: CelActivation): ApiKeyResult {
  const presented = extractCredential(auth.location, activation);
  if (presented === undefined) {
    return auth.mode === "Strict" ? { outcome: "denied", reason: "missing" } : ANONYMOUS;
  }
  const entry = auth.store.lookup(presented);
  if (entry !== undefined) return { outcome: "authenticated", entry };
  return auth.mode === "Permissive" ? ANONYMOUS : { outcome: "denied", reason: "invalid" };
}

const ANONYMOUS: ApiKeyResult = { outcome: "anonymous" };
