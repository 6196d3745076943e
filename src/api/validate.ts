// Entry point of resource validation: envelope checks, then the per-kind validator from the registry.
// The per-kind schemas live next to this file; every kind Sluice reads is registered in ./kinds.ts.

import { KINDS } from "./kinds.js";
import { error, type Problem } from "./problems.js";
import type { Resource } from "./resource.js";

export interface ValidationResult {
  /** Set when the document has no errors (warnings allowed); defaults applied. */
  readonly resource?: Resource;
  readonly problems: readonly Problem[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function validateResource(doc: unknown): ValidationResult {
  if (!isRecord(doc))
    return { problems: [error("", "a resource must be a YAML mapping with apiVersion, kind and metadata")] };
  const kind = doc["kind"];
  const apiVersion = doc["apiVersion"];
  if (typeof kind !== "string" || kind === "") return { problems: [error("kind", "kind is required")] };
  const def = KINDS.get(kind);
  if (def === undefined) {
    return { problems: [error("kind", `unknown kind "${kind}"; known kinds: ${[...KINDS.keys()].sort().join(", ")}`)] };
  }
  const problems: Problem[] = [];
  if (typeof apiVersion !== "string" || !def.apiVersions.includes(apiVersion)) {
    problems.push(
      error(
        "apiVersion",
        `apiVersion ${JSON.stringify(apiVersion)} is not served for ${kind}; use ${def.apiVersions.join(" or ")}`,
      ),
    );
  }
  const meta = doc["metadata"];
  if (!isRecord(meta) || typeof meta["name"] !== "string" || meta["name"] === "") {
    problems.push(error("metadata.name", "metadata.name is required"));
  }
  if (problems.length > 0) return { problems };
  const result = def.validate(doc);
  return result;
}
