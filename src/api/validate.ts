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
    const near = [...KINDS.keys()].find((k) => k.toLowerCase() === kind.toLowerCase());
    const hint =
      near !== undefined
        ? `did you mean ${near}? (kinds are CamelCase)`
        : `known kinds: ${[...KINDS.keys()].sort().join(", ")}`;
    return { problems: [error("kind", `unknown kind "${kind}"; ${hint}`)] };
  }
  const problems: Problem[] = [];
  if (apiVersion === undefined || apiVersion === null) {
    problems.push(error("apiVersion", `apiVersion is required; use ${def.apiVersions.join(" or ")}`));
  } else if (typeof apiVersion !== "string" || !def.apiVersions.includes(apiVersion)) {
    problems.push(
      error(
        "apiVersion",
        `apiVersion ${JSON.stringify(apiVersion)} is not served for ${kind}; use ${def.apiVersions.join(" or ")}`,
      ),
    );
  }
  const meta = doc["metadata"];
  if (kind !== "GwModelList" && (!isRecord(meta) || typeof meta["name"] !== "string" || meta["name"] === "")) {
    problems.push(error("metadata.name", "metadata.name is required"));
  }
  // Keep going after envelope errors so that one run reports every problem of the document.
  let result: ValidationResult;
  try {
    result = def.validate(doc);
  } catch (e) {
    // A bug of ours, never the user's: report it on the document instead of taking the caller down.
    result = {
      problems: [error("", `internal error while validating: ${e instanceof Error ? e.message : String(e)}`)],
    };
  }
  if (problems.length === 0) return result;
  const seen = new Set(problems.map((p) => `${p.path}\n${p.message}`));
  for (const p of result.problems) if (!seen.has(`${p.path}\n${p.message}`)) problems.push(p);
  return { problems };
}
