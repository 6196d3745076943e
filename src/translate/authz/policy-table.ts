// The ext_authz policy table: immutable, content-addressed compiled policies that Envoy names by id
// (context_extensions `sluice.policy`, or the `x-sluice-policy` gRPC metadata of a network ext_authz call).
//
// The id is a hash of everything the decision depends on (rule texts, authentication settings, key digests, password
// hashes), so the same content always gets the same id, identical policies of several routes share one entry, and a
// changed policy gets a new id: an Envoy still holding the old id during a rollout is never answered with the new one.
// Secret values enter the hash only as SHA-256 digests.

import { createHash } from "node:crypto";
import type { ExtAuthzPolicy, PolicyTable } from "../../extauthz/server.js";

/** Where the translator puts compiled policies: the builder below, or a wrapper that records what is added. */
export interface PolicyTableSink {
  /** The id of the policy with this content; `compile` runs only the first time a content is seen. */
  add(content: unknown, compile: () => ExtAuthzPolicy): string;
  /** A policy compiled earlier, under the id `add` gave it (replayed from a cache). */
  addCompiled(id: string, policy: ExtAuthzPolicy): void;
  get(id: string): ExtAuthzPolicy | undefined;
}

export class PolicyTableBuilder implements PolicyTableSink {
  readonly #policies = new Map<string, ExtAuthzPolicy>();

  add(content: unknown, compile: () => ExtAuthzPolicy): string {
    const id = policyId(content);
    if (!this.#policies.has(id)) this.#policies.set(id, compile());
    return id;
  }

  addCompiled(id: string, policy: ExtAuthzPolicy): void {
    if (!this.#policies.has(id)) this.#policies.set(id, policy);
  }

  get(id: string): ExtAuthzPolicy | undefined {
    return this.#policies.get(id);
  }

  /** The finished table, sorted by id; never mutated afterwards. */
  build(): PolicyTable {
    return new Map([...this.#policies].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

export function policyId(content: unknown): string {
  return `p-${createHash("sha256").update(canonicalJson(content)).digest("hex").slice(0, 32)}`;
}

/** JSON with object keys sorted, so equal content hashes equally. */
export function canonicalJson(v: unknown): string {
  if (v === null || typeof v !== "object") return JSON.stringify(v) ?? "null";
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(v as Record<string, unknown>)
    .filter(([, x]) => x !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(",")}}`;
}

/** A digest standing for a secret value in policy content. */
export function secretDigest(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}
