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

/** A short hex sha256 of `data`: 64 bits is plenty to tell versions of one resource apart. */
export function contentHash(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex").slice(0, VERSION_LENGTH);
}

export function xdsResource(typeUrl: string, name: string, value: Uint8Array): XdsResource {
  return { name, typeUrl, value, version: contentHash(value) };
}

/**
 * The version of a set of resources: a hash over their names and versions, independent of order. Used for a type
 * in a snapshot and for the subset a client subscribes to, so a client that already holds a set is recognised.
 */
export function setVersion(resources: Iterable<Pick<XdsResource, "name" | "version">>): string {
  const entries = [...resources].map((r) => `${r.name}\u0000${r.version}`).sort();
  return contentHash(entries.join("\n"));
}
