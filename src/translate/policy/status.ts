// GwPolicy status, Gateway API policy attachment style: one entry per ancestor with Sluice's controllerName and the
// conditions Accepted and Attached. The ancestor is the Gateway a target is reached through; a target that reaches no
// Gateway (not found, not allowed, not attached) is its own ancestor, and an invalid policy without targets names
// itself, so every problem has a place in status.

import { GATEWAY_API_GROUP, SLUICE_CONTROLLER_NAME } from "../../api/gateway-api.js";
import { type Condition, condition, type ResourceStatus } from "../status/conditions.js";
import type { NotApplied } from "./merge.js";
import { type AncestorRef, type Attachment, type Rejection, SLUICE_GROUP } from "./targets.js";
import type { PolicyView } from "./view.js";

/** The closed set of policy condition reasons: Gateway API's own, plus the ones attachment needs. */
export const PolicyConditionReason = {
  Accepted: "Accepted",
  Invalid: "Invalid",
  TargetNotFound: "TargetNotFound",
  NotAllowed: "NotAllowed",
  Attached: "Attached",
  /** Every value it sets is replaced by a more specific policy, or an Override policy excludes it. */
  Overridden: "Overridden",
  /** Every value it sets loses to another policy at the same level. */
  Conflicted: "Conflicted",
  /** Accepted, but no Gateway served by Sluice is reached through its targets. */
  NotAttached: "NotAttached",
} as const;

/** Gateway API caps PolicyStatus.ancestors at 16. */
const MAX_ANCESTORS = 16;

interface GatewayUse {
  readonly applied: Set<string>;
  readonly notApplied: NotApplied[];
}

export interface PolicyStatusTracker {
  reach(a: Attachment, gateway: string): void;
  applied(view: PolicyView, gateway: string, field: string): void;
  notApplied(view: PolicyView, gateway: string, n: NotApplied): void;
  reachedFrom(a: Attachment): ReadonlySet<string>;
  use(view: PolicyView, gateway: string): GatewayUse | undefined;
}

export function trackerFor(): PolicyStatusTracker {
  const reached = new Map<Attachment, Set<string>>();
  const uses = new Map<PolicyView, Map<string, GatewayUse>>();
  const useOf = (view: PolicyView, gateway: string): GatewayUse => {
    const byGw = uses.get(view) ?? new Map<string, GatewayUse>();
    uses.set(view, byGw);
    let u = byGw.get(gateway);
    if (u === undefined) {
      u = { applied: new Set(), notApplied: [] };
      byGw.set(gateway, u);
    }
    return u;
  };
  return {
    reach(a, gateway) {
      const set = reached.get(a) ?? new Set<string>();
      set.add(gateway);
      reached.set(a, set);
    },
    applied(view, gateway, field) {
      useOf(view, gateway).applied.add(field);
    },
    notApplied(view, gateway, n) {
      useOf(view, gateway).notApplied.push(n);
    },
    reachedFrom: (a) => reached.get(a) ?? new Set(),
    use: (view, gateway) => uses.get(view)?.get(gateway),
  };
}

export interface PolicyStatusInput {
  readonly views: readonly PolicyView[];
  readonly attachments: readonly Attachment[];
  readonly rejections: readonly Rejection[];
  readonly servedGateways: ReadonlySet<string>;
  readonly tracker: PolicyStatusTracker;
}

function gatewayRef(gateway: string): AncestorRef {
  const [namespace = "", name = ""] = gateway.split("/");
  return { group: GATEWAY_API_GROUP, kind: "Gateway", namespace, name };
}

function refKey(r: AncestorRef): string {
  return [r.group, r.kind, r.namespace, r.name, r.sectionName ?? "", r.port ?? ""].join("|");
}

function notAttachedMessage(a: Attachment): string {
  switch (a.point.kind) {
    case "Gateway":
      return `${a.target} is not served by Sluice (its GatewayClass is not Sluice's, or it has no valid listener)`;
    case "ListenerSet":
    case "HTTPRoute":
      return `${a.target} is not attached to any Gateway served by Sluice`;
    default:
      return `no route of a Gateway served by Sluice sends traffic to ${a.target}`;
  }
}

/** Attached condition of a policy at a Gateway it reaches. */
function attachedCondition(use: GatewayUse | undefined): Condition {
  const applied = [...(use?.applied ?? [])].sort();
  const lost = use?.notApplied ?? [];
  if (applied.length > 0) {
    const excluded = lost.find((n) => n.kind === "excluded");
    const note =
      excluded !== undefined
        ? `; its traffic section is ${excluded.reason} (see sluice explain)`
        : lost.length > 0
          ? "; some values are replaced by other policies at some points (see sluice explain)"
          : "";
    return condition("Attached", true, PolicyConditionReason.Attached, `applies ${applied.join(", ")}${note}`);
  }
  if (lost.length === 0) {
    return condition(
      "Attached",
      true,
      PolicyConditionReason.Attached,
      "attached; no route, backend or port served through this target uses it yet",
    );
  }
  const excluded = lost.find((n) => n.kind === "excluded");
  if (excluded !== undefined) return condition("Attached", false, PolicyConditionReason.Overridden, excluded.reason);
  const overridden = lost.find((n) => n.kind === "overridden");
  if (overridden !== undefined) {
    return condition(
      "Attached",
      false,
      PolicyConditionReason.Overridden,
      `every value it sets is replaced; ${overridden.field ?? "its section"}: ${overridden.reason}`,
    );
  }
  const first = lost[0];
  return condition(
    "Attached",
    false,
    PolicyConditionReason.Conflicted,
    `every value it sets loses a conflict; ${first?.field ?? "its section"}: ${first?.reason ?? ""}`,
  );
}

export function policyStatuses(input: PolicyStatusInput): ResourceStatus[] {
  const out: ResourceStatus[] = [];
  const views = [...input.views].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  // Grouped by policy once: scanning every rejection and attachment per policy is quadratic in the policy count.
  const rejectionsOf = groupBy(input.rejections, (r) => r.view);
  const attachmentsOf = groupBy(input.attachments, (a) => a.view);
  for (const view of views) {
    const ancestors = new Map<string, { ref: AncestorRef; conditions: Condition[] }>();
    const put = (ref: AncestorRef, conditions: Condition[]) => {
      const key = refKey(ref);
      const prev = ancestors.get(key);
      // Two targets resolving to the same ancestor with different outcomes: the problem is what the user must see.
      if (prev === undefined || (prev.conditions[0]?.status === "True" && conditions[0]?.status === "False")) {
        ancestors.set(key, { ref, conditions });
      }
    };

    if (view.problems.length > 0) {
      const message = view.problems.join("; ");
      const refs: AncestorRef[] = view.targets.map((t) => ({
        group: t.group,
        kind: t.kind,
        namespace: view.namespace,
        name: t.name ?? "(selector)",
      }));
      if (refs.length === 0)
        refs.push({ group: SLUICE_GROUP, kind: "GwPolicy", namespace: view.namespace, name: view.name });
      for (const ref of refs) put(ref, [condition("Accepted", false, PolicyConditionReason.Invalid, message)]);
    }
    for (const r of rejectionsOf.get(view) ?? []) {
      put(r.targetRef, [condition("Accepted", false, r.reason, r.message)]);
    }
    for (const a of attachmentsOf.get(view) ?? []) {
      const gateways = new Set(input.tracker.reachedFrom(a));
      if (a.gateway !== undefined && input.servedGateways.has(a.gateway)) gateways.add(a.gateway);
      if (gateways.size === 0) {
        put(a.targetRef, [
          condition("Accepted", true, PolicyConditionReason.Accepted, "accepted"),
          condition("Attached", false, PolicyConditionReason.NotAttached, notAttachedMessage(a)),
        ]);
        continue;
      }
      for (const gw of gateways) {
        put(gatewayRef(gw), [
          condition("Accepted", true, PolicyConditionReason.Accepted, "accepted"),
          attachedCondition(input.tracker.use(view, gw)),
        ]);
      }
    }

    const entries = [...ancestors.entries()]
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, MAX_ANCESTORS)
      .map(([, v]) => ({ ancestorRef: v.ref, controllerName: SLUICE_CONTROLLER_NAME, conditions: v.conditions }));
    out.push({ kind: "GwPolicy", namespace: view.namespace, name: view.name, status: { ancestors: entries } });
  }
  return out;
}

function groupBy<T, K>(items: readonly T[], key: (item: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list === undefined) out.set(k, [item]);
    else list.push(item);
  }
  return out;
}
