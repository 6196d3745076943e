// Status of GwBackend and GwModel resources (GwPolicy status comes from the attachment engine). Timestamp-free, like
// every translator output; a status writer adds lastTransitionTime when it writes to an API server.

import { namespaceOf } from "../../api/resource.js";
import { resolveAgentCore } from "../backend/agent-core.js";
import type { InvalidResource, TranslationInput } from "../input.js";
import type { AuthProblem } from "../llm/table.js";
import type { ModelTranslation } from "../model/models.js";
import { modelStatuses } from "../model/status.js";
import { type Condition, condition, type ResourceStatus } from "./conditions.js";

/** The GwBackend variants the translator turns into clusters today. */
const SERVED_BACKEND_VARIANTS: ReadonlySet<string> = new Set([
  "static",
  "ai",
  "dynamicForwardProxy",
  "mcp",
  "a2a",
  "cloudA",
]);

function variantOf(spec: unknown): string | undefined {
  if (typeof spec !== "object" || spec === null) return undefined;
  return Object.keys(spec).find((k) => k !== "policies");
}

function invalidStatus(r: InvalidResource, conditions: (c: Condition) => unknown): ResourceStatus {
  return {
    kind: r.kind,
    namespace: namespaceOf(r.document),
    name: r.document.metadata.name,
    status: conditions(condition("Accepted", false, "Invalid", r.problems.join("; "))),
  };
}

/**
 * `backendProblems`: credential problems of AI backends' providers by `namespace/name` (llm/table.ts): a Secret that
 * is missing or malformed is `ResolvedRefs: False` (SecretNotFound), the rest (expressions) a `NeverMatches` warning.
 * `models`: the GwModels' translation (model/models.ts), the one translate.ts serves, so the status tells of the same
 * attachment (with the same implied GatewayClass) as the routes Envoy gets.
 */
export function sluiceKindStatuses(
  input: TranslationInput,
  servedVariants = SERVED_BACKEND_VARIANTS,
  backendProblems: ReadonlyMap<string, readonly AuthProblem[]>,
  models: ModelTranslation,
): ResourceStatus[] {
  const out: ResourceStatus[] = [];
  for (const be of input.backends) {
    const variant = variantOf(be.spec) ?? "none";
    const conditions: Condition[] = [condition("Accepted", true, "Accepted", `${variant} backend accepted`)];
    if (variant === "cloudA") {
      // The agent runtime's ARN and qualifier, checked as the cluster is built (backend/agent-core.ts).
      const core = resolveAgentCore(be.spec.cloudA, `${namespaceOf(be)}/${be.metadata.name}`);
      if (!core.ok) conditions[0] = condition("Accepted", false, "Invalid", `${core.field}: ${core.message}`);
    }
    if (!servedVariants.has(variant)) {
      conditions.push(
        condition("Warning", true, "NotYetSupported", `the ${variant} backend type is accepted but not served yet`),
      );
    }
    const problems = backendProblems.get(`${namespaceOf(be)}/${be.metadata.name}`) ?? [];
    const secrets = problems.filter((p) => p.kind === "secret").map((p) => p.message);
    const others = problems.filter((p) => p.kind !== "secret").map((p) => p.message);
    if (secrets.length > 0) {
      conditions.push(
        condition(
          "ResolvedRefs",
          false,
          "SecretNotFound",
          `${secrets.join("; ")}; requests to these providers fail (500) until it is fixed`,
        ),
      );
    }
    if (others.length > 0) {
      conditions.push(
        condition(
          "Warning",
          true,
          // A minted credential's configuration (credentials/resolve.ts) is invalid, not an expression that never matches.
          problems.some((p) => p.kind === "invalid") ? "InvalidParameters" : "NeverMatches",
          `${others.join("; ")}; requests to these providers fail (500) until it is fixed`,
        ),
      );
    }
    out.push({ kind: "GwBackend", namespace: namespaceOf(be), name: be.metadata.name, status: { conditions } });
  }
  out.push(...modelStatuses(models));
  for (const r of input.invalid) {
    if (r.kind === "GwBackend") out.push(invalidStatus(r, (c) => ({ conditions: [c] })));
    if (r.kind === "GwModel") out.push(invalidStatus(r, (c) => ({ parents: [], conditions: [c] })));
  }
  return out.sort((a, b) => (a.kind + a.namespace + a.name < b.kind + b.namespace + b.name ? -1 : 1));
}
