// One xDS resource as served: already serialized, versioned by a hash of its bytes, so equal content means equal
// version on every Sluice replica and across restarts.
import { createHash } from "node:crypto";

export interface XdsResource {
  readonly name: string;
  readonly typeUrl: string;
  /** The serialized message (the `value` of the Any sent to the client). */
  readonly value: Uint8Array;
  /** Content hash of `value`. */
  readonly version: string;
}

const VERSION_LENGTH = 16;

/** A short hex sha256 of `data` (or of its parts, one after the other): 64 bits tell versions of a resource apart. */
export function contentHash(data: Uint8Array | string | readonly Uint8Array[]): string {
  const hash = createHash("sha256");
  if (Array.isArray(data)) for (const part of data) hash.update(part);
  else hash.update(data as Uint8Array | string);
  return hash.digest("hex").slice(0, VERSION_LENGTH);
}

/**
 * Hashes of serialized values by identity: the translation memo hands unchanged bytes (a virtual host's, say) over as
 * the same object, so a reload hashes only what changed. Bytes are never mutated once serialized.
 */
const hashes = new WeakMap<Uint8Array, string>();

function bytesHash(value: Uint8Array): string {
  let h = hashes.get(value);
  if (h === undefined) {
    h = contentHash(value);
    hashes.set(value, h);
  }
  return h;
}

/**
 * `value` may be given in parts (a route configuration made of its virtual hosts' bytes): the parts are kept and
 * joined each time `value` is read, for a response. A large resource then lives in the snapshot as parts shared
 * with the last one, not as a new copy of the whole on every change (which would be garbage until a full collection).
 */
export function xdsResource(typeUrl: string, name: string, value: Uint8Array | readonly Uint8Array[]): XdsResource {
  if (!Array.isArray(value))
    return { name, typeUrl, value: value as Uint8Array, version: bytesHash(value as Uint8Array) };
  const parts = value as readonly Uint8Array[];
  return {
    name,
    typeUrl,
    version: contentHash(parts),
    get value() {
      return joinParts(parts);
    },
  };
}

export function joinParts(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1 && parts[0] !== undefined) return parts[0];
  let length = 0;
  for (const p of parts) length += p.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * The version of a set of resources: a hash over their names and versions, independent of order. Used for a type
 * in a snapshot and for the subset a client subscribes to, so a client that already holds a set is recognised.
 */
export function setVersion(resources: Iterable<Pick<XdsResource, "name" | "version">>): string {
  const entries = [...resources].map((r) => `${r.name}\u0000${r.version}`).sort();
  return contentHash(entries.join("\n"));
}
