// `spec.policies` of a concrete GwModel → the model table: what the LLM table has for a GwBackend provider is carried
// in its shape (transformations as AI policy, auth as written for the same compiler, health as eviction tuning), the
// rest as written. Every field that Sluice cannot apply yet is named in a note, so nothing accepted vanishes.

import { compileExpression, specEnvironmentWith } from "../../cel/index.js";
import { RESPONSE_ENVIRONMENT } from "../../extproc/transformation.js";
import { parseDurationMs } from "../duration.js";
import { LLM_CEL_VARIABLES } from "../llm/table.js";
import type { ModelHealthIR, ModelPoliciesIR } from "./ir.js";

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** A valid configuration Sluice does not apply (yet), or an expression that cannot match where it runs. */
export interface ModelNote {
  readonly field: string;
  readonly message: string;
  /** The Warning's reason; NotYetSupported when absent. */
  readonly reason?: "NeverMatches" | "Ignored" | "NotYetSupported";
}

export const DEFAULT_HEALTH: ModelHealthIR = {
  consecutiveFailures: 1,
  ejectionMs: 3000,
  healthThreshold: 0,
  restoreHealth: 100,
};

/**
 * Checks a CEL expression the LLM ext_proc evaluates: compiled with the spec's environment (plus `extra` variables),
 * reading only what that service has (llm/table.ts LLM_CEL_VARIABLES). Undefined when fine, else why.
 */
export function checkLlmExpression(text: string, extra: readonly string[] = []): string | undefined {
  const c = compileExpression(text, specEnvironmentWith(extra));
  if ("errors" in c) return `invalid CEL expression: ${c.errors.map((e) => e.message).join("; ")}`;
  const missing = [...c.ok.variables].filter((v) => !LLM_CEL_VARIABLES.includes(v) && !extra.includes(v));
  if (missing.length > 0) {
    return `reads ${missing.join(", ")}, which the LLM ext_proc does not have (only ${[...LLM_CEL_VARIABLES, ...extra].join(", ")}), so it never matches`;
  }
  return undefined;
}

function health(v: unknown, notes: ModelNote[]): ModelHealthIR {
  if (!isRec(v)) return DEFAULT_HEALTH;
  const e = isRec(v.eviction) ? v.eviction : {};
  const num = (x: unknown, d: number) => (typeof x === "number" ? x : d);
  let unhealthyCondition: string | undefined;
  if (typeof v.unhealthyCondition === "string") {
    // Judged on each attempt's response alone (src/health/service.ts), as a GwBackend's is.
    const c = compileExpression(v.unhealthyCondition, RESPONSE_ENVIRONMENT);
    const other = "ok" in c ? [...c.ok.variables].filter((x) => x !== "response") : [];
    if ("errors" in c) {
      notes.push({
        field: "spec.policies.health.unhealthyCondition",
        message: `invalid CEL expression: ${c.errors.map((e) => e.message).join("; ")}; left out, a 5xx, a timeout or a connection failure is a failure`,
      });
    } else if (other.length > 0) {
      notes.push({
        field: "spec.policies.health.unhealthyCondition",
        message: `reads ${other.join(", ")}: a response is judged on response alone (code, headers, body); left out, a 5xx, a timeout or a connection failure is a failure`,
      });
    } else unhealthyCondition = v.unhealthyCondition;
  }
  return {
    consecutiveFailures: num(e.consecutiveFailures, DEFAULT_HEALTH.consecutiveFailures),
    ejectionMs: (typeof e.duration === "string" ? parseDurationMs(e.duration) : undefined) ?? DEFAULT_HEALTH.ejectionMs,
    healthThreshold: num(e.healthThreshold, DEFAULT_HEALTH.healthThreshold),
    restoreHealth: num(e.restoreHealth, DEFAULT_HEALTH.restoreHealth),
    ...(unhealthyCondition !== undefined ? { unhealthyCondition } : {}),
  };
}

/**
 * The policies of a concrete model (`tunnel` is resolved into the provider by models.ts). Notes name the fields the
 * LLM ext_proc has no equivalent for yet, and expressions it cannot evaluate.
 */
export function translateModelPolicies(
  policies: unknown,
  notes: ModelNote[],
): { policies: ModelPoliciesIR; health: ModelHealthIR } {
  if (!isRec(policies)) return { policies: { ai: {} }, health: DEFAULT_HEALTH };
  const transformations: { field: string; expression: string }[] = [];
  (Array.isArray(policies.transformations) ? policies.transformations : []).forEach((t: unknown, i) => {
    if (!isRec(t) || typeof t.field !== "string" || typeof t.expression !== "string") return;
    const why = checkLlmExpression(t.expression);
    if (why !== undefined) notes.push({ field: `spec.policies.transformations[${i}].expression`, message: why });
    transformations.push({ field: t.field, expression: t.expression });
  });
  return {
    policies: {
      ai: transformations.length > 0 ? { transformations } : {},
      ...(policies.auth !== undefined ? { auth: policies.auth } : {}),
      ...(policies.authorization !== undefined ? { authorization: policies.authorization } : {}),
      ...(policies.headers !== undefined ? { headers: policies.headers } : {}),
      ...(policies.promptGuard !== undefined ? { promptGuard: policies.promptGuard } : {}),
      ...(policies.tls !== undefined ? { tls: policies.tls } : {}),
    },
    health: health(policies.health, notes),
  };
}
