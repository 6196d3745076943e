// A narrow, defensive view of the GwPolicy fields the attachment engine reads. The schema-derived types of the
// Sluice kinds live in src/api; this view does not depend on them, so it reads `unknown` and never throws: anything
// it cannot use becomes a problem on the policy's status.

import { namespaceOf } from "../../api/resource.js";
import type { GwPolicy } from "../../api/sluice.js";

export type PolicySection = "frontend" | "traffic" | "backend";
export const POLICY_SECTIONS: readonly PolicySection[] = ["frontend", "traffic", "backend"];

export type Inheritance = "Default" | "Override";
export type Phase = "PreRouting" | "PostRouting";

/** One entry of `targetRefs` (with `name`) or `targetSelectors` (with `matchLabels`). */
export interface PolicyTargetView {
  /** `spec.targetRefs[0]`, for messages. */
  readonly path: string;
  readonly group: string;
  readonly kind: string;
  readonly name?: string;
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly sectionName?: string;
  readonly port?: number;
}

export interface PolicyView {
  readonly policy: GwPolicy;
  readonly namespace: string;
  readonly name: string;
  /** `namespace/name`. */
  readonly key: string;
  /** creationTimestamp in ms since the epoch; undefined when absent (file mode) or unparseable. */
  readonly created: number | undefined;
  readonly targets: readonly PolicyTargetView[];
  readonly inheritance: Inheritance;
  readonly phase: Phase;
  /** Section fields; `traffic` without `phase`, which selects the merge rather than being merged. */
  readonly sections: Readonly<Partial<Record<PolicySection, Readonly<Record<string, unknown>>>>>;
  /** Reasons the policy as a whole is invalid (`path: message`); an invalid policy attaches nowhere. */
  readonly problems: readonly string[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function createdAt(meta: unknown): number | undefined {
  const ts = isRecord(meta) ? meta["creationTimestamp"] : undefined;
  const ms = ts instanceof Date ? ts.getTime() : typeof ts === "string" ? Date.parse(ts) : Number.NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

function readTarget(v: unknown, path: string, selector: boolean, problems: string[]): PolicyTargetView | undefined {
  if (!isRecord(v)) {
    problems.push(`${path}: must be a mapping`);
    return undefined;
  }
  const group = v["group"];
  const kind = v["kind"];
  const name = v["name"];
  const matchLabels = v["matchLabels"];
  const sectionName = v["sectionName"];
  const port = v["port"];
  const before = problems.length;
  // The core group is written "" by Kubernetes convention; a missing group is only accepted as that.
  if (group !== undefined && typeof group !== "string") problems.push(`${path}.group: must be a string`);
  if (typeof kind !== "string" || kind === "") problems.push(`${path}.kind: is required`);
  if (selector) {
    if (!isRecord(matchLabels) || !Object.values(matchLabels).every((x) => typeof x === "string")) {
      problems.push(`${path}.matchLabels: is required, a map of label names to values`);
    }
  } else if (typeof name !== "string" || name === "") {
    problems.push(`${path}.name: is required`);
  }
  if (sectionName !== undefined && (typeof sectionName !== "string" || sectionName === "")) {
    problems.push(`${path}.sectionName: must be a non-empty string`);
  }
  if (port !== undefined && (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535)) {
    problems.push(`${path}.port: must be an integer 1..65535`);
  }
  if (sectionName !== undefined && port !== undefined) {
    problems.push(`${path}: set at most one of sectionName and port`);
  }
  if (problems.length > before) return undefined;
  return {
    path,
    group: typeof group === "string" ? group : "",
    kind: kind as string,
    ...(selector ? { matchLabels: matchLabels as Record<string, string> } : { name: name as string }),
    ...(typeof sectionName === "string" ? { sectionName } : {}),
    ...(typeof port === "number" ? { port } : {}),
  };
}

function readTargets(spec: Record<string, unknown>, problems: string[]): PolicyTargetView[] {
  const refs = spec["targetRefs"];
  const selectors = spec["targetSelectors"];
  if ((refs === undefined) === (selectors === undefined)) {
    problems.push("spec: set exactly one of targetRefs and targetSelectors");
  }
  const out: PolicyTargetView[] = [];
  for (const [field, list, selector] of [
    ["targetRefs", refs, false],
    ["targetSelectors", selectors, true],
  ] as const) {
    if (list === undefined) continue;
    if (!Array.isArray(list) || list.length < 1 || list.length > 16) {
      problems.push(`spec.${field}: must be a list of 1 to 16 entries`);
      continue;
    }
    list.forEach((v, i) => {
      const t = readTarget(v, `spec.${field}[${i}]`, selector, problems);
      if (t !== undefined) out.push(t);
    });
  }
  return out;
}

/**
 * Reads a GwPolicy into the view the engine uses; never throws. `invalid` carries the validator's findings for a
 * policy the source left out, so its status says why it is not applied.
 */
export function readPolicy(policy: GwPolicy, invalid: readonly string[] = []): PolicyView {
  const problems: string[] = [...invalid];
  const namespace = namespaceOf(policy);
  const name = policy.metadata.name;
  const spec: Record<string, unknown> = isRecord(policy.spec) ? policy.spec : {};
  if (!isRecord(policy.spec)) problems.push("spec: is required and must be a mapping");
  const targets = readTargets(spec, problems);

  const sections: Partial<Record<PolicySection, Readonly<Record<string, unknown>>>> = {};
  for (const s of POLICY_SECTIONS) {
    const v = spec[s];
    if (v === undefined) continue;
    if (!isRecord(v)) {
      problems.push(`spec.${s}: must be a mapping`);
      continue;
    }
    if (s === "traffic") {
      const { phase: _phase, ...rest } = v;
      sections[s] = rest;
    } else {
      sections[s] = v;
    }
  }
  if (Object.keys(sections).length === 0 && problems.length === 0) {
    problems.push("spec: set at least one of frontend, traffic and backend");
  }

  let phase: Phase = "PostRouting";
  const rawPhase = isRecord(spec["traffic"]) ? spec["traffic"]["phase"] : undefined;
  if (rawPhase === "PreRouting" || rawPhase === "PostRouting") phase = rawPhase;
  else if (rawPhase !== undefined) problems.push("spec.traffic.phase: must be PreRouting or PostRouting");

  let inheritance: Inheritance = "Default";
  const strategy = spec["strategy"];
  if (strategy !== undefined) {
    const raw = isRecord(strategy) ? strategy["inheritance"] : strategy;
    if (raw === "Default" || raw === "Override") inheritance = raw;
    else if (raw !== undefined) problems.push("spec.strategy.inheritance: must be Default or Override");
    // The spec: strategy is "valid only on traffic policies".
    if (sections.traffic === undefined)
      problems.push("spec.strategy: is valid only on policies with a traffic section");
  }

  return {
    policy,
    namespace,
    name,
    key: `${namespace}/${name}`,
    created: createdAt(policy.metadata),
    targets,
    inheritance,
    phase,
    sections,
    problems,
  };
}

/**
 * Same-level order, winner first: the oldest creationTimestamp wins (resources without one count as newest), then
 * `namespace/name` in alphabetical order. This is the Gateway API's rule for conflicting routes and policies.
 */
export function comparePolicyAge(a: PolicyView, b: PolicyView): number {
  const ca = a.created ?? Number.POSITIVE_INFINITY;
  const cb = b.created ?? Number.POSITIVE_INFINITY;
  if (ca !== cb) return ca < cb ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}
