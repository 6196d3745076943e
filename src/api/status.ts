// The status model of the Sluice kinds, written only through these helpers: a closed set of condition types and
// reasons, bounded lists (policy ancestors with 1..8 conditions, backend conditions <= 8, model parents <= 16), and
// the messages the translator uses for configurations that are valid but surely wrong.

import { ParentReference } from "./common.js";
import { Arr, Enum, Int, Obj, Opt, type Static, Str } from "./schema-kit.js";

export const CONDITION_REASONS = {
  Accepted: ["Accepted", "Invalid", "Conflicted", "UnsupportedValue", "Pending"],
  Attached: ["Attached", "TargetNotFound", "NotAttached", "Overridden", "Merged"],
  ResolvedRefs: ["ResolvedRefs", "BackendNotFound", "RefNotPermitted", "InvalidKind", "SecretNotFound"],
  Programmed: ["Programmed", "Invalid", "Pending", "NoResources"],
  Warning: ["NeverMatches", "Deprecated", "Ignored", "NotYetSupported"],
} as const;

export type ConditionType = keyof typeof CONDITION_REASONS;
export type ConditionReason<T extends ConditionType = ConditionType> = (typeof CONDITION_REASONS)[T][number];
export const CONDITION_TYPES = Object.keys(CONDITION_REASONS) as ConditionType[];
const ALL_REASONS = [...new Set(Object.values(CONDITION_REASONS).flat())];

export const Condition = Obj(
  {
    type: Enum(CONDITION_TYPES),
    status: Enum(["True", "False", "Unknown"]),
    reason: Enum(ALL_REASONS),
    message: Str({ max: 32768 }),
    lastTransitionTime: Str({ min: 1, max: 64, description: "RFC 3339 time." }),
    observedGeneration: Opt(Int({ min: 0 })),
  },
  "A metav1.Condition with Sluice's closed set of types and reasons.",
);
export type Condition = Static<typeof Condition>;

export const CONTROLLER_NAME = "sluice.dev/gateway-controller";

export const PolicyAncestorStatus = Obj({
  ancestorRef: ParentReference,
  controllerName: Str({ min: 1, max: 253 }),
  conditions: Arr(Condition, { min: 1, max: 8 }),
});
export type PolicyAncestorStatus = Static<typeof PolicyAncestorStatus>;

export const GwPolicyStatus = Obj(
  { ancestors: Opt(Arr(PolicyAncestorStatus, { max: 16 })) },
  "Status per ancestor (Gateway) the policy applies under.",
);
export type GwPolicyStatus = Static<typeof GwPolicyStatus>;

export const GwBackendStatus = Obj({ conditions: Opt(Arr(Condition, { max: 8 })) }, "Conditions of the backend.");
export type GwBackendStatus = Static<typeof GwBackendStatus>;

export const ModelParentStatus = Obj({
  parentRef: ParentReference,
  controllerName: Str({ min: 1, max: 253 }),
  conditions: Arr(Condition, { min: 1, max: 8 }),
});
export type ModelParentStatus = Static<typeof ModelParentStatus>;

export const GwModelStatus = Obj({ parents: Opt(Arr(ModelParentStatus, { max: 16 })) }, "Status per parent.");
export type GwModelStatus = Static<typeof GwModelStatus>;

export interface ConditionInput<T extends ConditionType> {
  readonly type: T;
  readonly status: boolean | "Unknown";
  readonly reason: ConditionReason<T>;
  readonly message: string;
  readonly observedGeneration?: number;
  /** RFC 3339; the caller's clock, so that translation stays a pure function. */
  readonly lastTransitionTime: string;
}

const MAX_MESSAGE = 32768;

export function condition<T extends ConditionType>(c: ConditionInput<T>): Condition {
  const message = c.message.length > MAX_MESSAGE ? `${c.message.slice(0, MAX_MESSAGE - 3)}...` : c.message;
  return {
    type: c.type,
    status: c.status === "Unknown" ? "Unknown" : c.status ? "True" : "False",
    reason: c.reason,
    message,
    lastTransitionTime: c.lastTransitionTime,
    ...(c.observedGeneration !== undefined ? { observedGeneration: c.observedGeneration } : {}),
  };
}

function bounded<T>(what: string, xs: readonly T[], min: number, max: number): T[] {
  // Exceeding a bound here is a bug in the caller (the translator), not a user error.
  if (xs.length < min || xs.length > max) throw new RangeError(`${what}: ${xs.length} entries, want ${min}..${max}`);
  return [...xs];
}

/** Conditions sorted in the fixed order of CONDITION_TYPES, one per type (the last one given wins). */
function normalize(conditions: readonly Condition[]): Condition[] {
  const byType = new Map<string, Condition>();
  for (const c of conditions) byType.set(c.type, c);
  return CONDITION_TYPES.flatMap((t) => (byType.has(t) ? [byType.get(t)!] : []));
}

export function policyAncestor(
  ancestorRef: Static<typeof ParentReference>,
  conditions: readonly Condition[],
  controllerName: string = CONTROLLER_NAME,
): PolicyAncestorStatus {
  return {
    ancestorRef,
    controllerName,
    conditions: bounded("policy ancestor conditions", normalize(conditions), 1, 8),
  };
}

export function policyStatus(ancestors: readonly PolicyAncestorStatus[]): GwPolicyStatus {
  return { ancestors: bounded("policy ancestors", ancestors, 0, 16) };
}

export function backendStatus(conditions: readonly Condition[]): GwBackendStatus {
  return { conditions: bounded("backend conditions", normalize(conditions), 0, 8) };
}

export function modelParent(
  parentRef: Static<typeof ParentReference>,
  conditions: readonly Condition[],
  controllerName: string = CONTROLLER_NAME,
): ModelParentStatus {
  return { parentRef, controllerName, conditions: bounded("model parent conditions", normalize(conditions), 1, 8) };
}

export function modelStatus(parents: readonly ModelParentStatus[]): GwModelStatus {
  return { parents: bounded("model parents", parents, 0, 16) };
}

// ---- messages ----

export const messages = {
  /**
   * For an authorization rule that reads `jwt` where no JWT authentication applies: the policy is still Accepted and
   * Attached (the spec says so), and this explains what it will do.
   */
  jwtWithoutAuthentication(path: string, action: "Allow" | "Deny" | "Require" = "Allow"): string {
    const effect =
      action === "Deny"
        ? "so this Deny rule never matches and denies nothing"
        : "so its expressions never match and it denies all traffic";
    return `${path} reads jwt but no JWT authentication applies to its targets, ${effect}; add traffic.jwtAuthentication to a policy on the same targets`;
  },
  /** An expression that reads a context that does not exist where the policy applies (apiKey, extauthz, ...). */
  contextWithoutProvider(path: string, variable: string, provider: string): string {
    return `${path} reads ${variable} but no ${provider} applies to its targets, so its expressions never match`;
  },
  /** An authorization expression that reads `llm`: authorization runs before Sluice reads the LLM request. */
  llmInAuthorization(path: string): string {
    return `${path} reads llm, which authorization never sees (it runs before the LLM request is read; llm is available to token rate limit costs and descriptors and to AI transformations), so its expressions never match`;
  },
  /** A literal `request.headers` key with an uppercase letter: the map is keyed by lowercase names. */
  uppercaseHeaderKey(path: string, name: string): string {
    return `${path} looks up request.headers[${JSON.stringify(name)}], which is never present: header names are lowercase in request.headers; write ${JSON.stringify(name.toLowerCase())}`;
  },
  invalid(problems: readonly { readonly path: string; readonly message: string }[]): string {
    const shown = problems.slice(0, 5).map((p) => (p.path === "" ? p.message : `${p.path}: ${p.message}`));
    const more = problems.length > 5 ? ` (and ${problems.length - 5} more)` : "";
    return `${shown.join("; ")}${more}`;
  },
  targetNotFound(kind: string, name: string): string {
    return `target ${kind} ${name} not found`;
  },
  overridden(by: string, field: string): string {
    return `${field} is overridden by ${by}`;
  },
  deprecated(path: string, replacement: string): string {
    return `${path} is deprecated; use ${replacement}`;
  },
} as const;
