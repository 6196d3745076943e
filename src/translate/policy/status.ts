// GwPolicy status, Gateway API policy attachment style: one entry per ancestor with Sluice's controllerName and the
// conditions Accepted and Attached. The ancestor is the Gateway a target is reached through; a target that reaches no
// Gateway (not found, not allowed, not attached) is its own ancestor, and an invalid policy without targets names
// itself, so every problem has a place in status.

import { GATEWAY_API_GROUP, SLUICE_CONTROLLER_NAME } from "../../api/gateway-api.js";
import { type Condition, condition, type ResourceStatus } from "../status/conditions.js";
import { sameItems } from "./memo.js";
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
  readonly gateway: string;
  /** Fields applied (`traffic.timeouts`), each once. */
  readonly applied: string[];
  readonly notApplied: NotApplied[];
}

export interface PolicyStatusTracker {
  reach(a: Attachment, gateway: string): void;
  applied(view: PolicyView, gateway: string, field: string): void;
  notApplied(view: PolicyView, gateway: string, n: NotApplied): void;
  /** The Gateways an attachment was reached from, in the order they first were. */
  reachedFrom(a: Attachment): readonly string[];
  use(view: PolicyView, gateway: string): Readonly<GatewayUse> | undefined;
}

const NO_GATEWAYS: readonly string[] = [];

/**
 * Built again on every translation, for thousands of policies: arrays rather than sets and maps (policies reach one
 * Gateway, or a few), so that the bookkeeping is a few objects per policy.
 */
export function trackerFor(): PolicyStatusTracker {
  const reached = new Map<Attachment, string[]>();
  const uses = new Map<PolicyView, GatewayUse[]>();
  const useOf = (view: PolicyView, gateway: string): GatewayUse => {
    let list = uses.get(view);
    if (list === undefined) {
      list = [];
      uses.set(view, list);
    }
    let u = list.find((x) => x.gateway === gateway);
    if (u === undefined) {
      u = { gateway, applied: [], notApplied: [] };
      list.push(u);
    }
    return u;
  };
  return {
    reach(a, gateway) {
      const gateways = reached.get(a);
      if (gateways === undefined) reached.set(a, [gateway]);
      else if (!gateways.includes(gateway)) gateways.push(gateway);
    },
    applied(view, gateway, field) {
      const u = useOf(view, gateway);
      if (!u.applied.includes(field)) u.applied.push(field);
    },
    notApplied(view, gateway, n) {
      useOf(view, gateway).notApplied.push(n);
    },
    reachedFrom: (a) => reached.get(a) ?? NO_GATEWAYS,
    use: (view, gateway) => uses.get(view)?.find((x) => x.gateway === gateway),
  };
}

export interface PolicyStatusInput {
  readonly views: readonly PolicyView[];
  readonly attachments: readonly Attachment[];
  readonly rejections: readonly Rejection[];
  readonly servedGateways: ReadonlySet<string>;
  readonly tracker: PolicyStatusTracker;
  readonly memo?: PolicyStatusMemo;
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
    case "GRPCRoute":
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
    // What the status of this policy is made of, besides the view itself: when it is what it was last time, so is
    // the status (the memo keeps it; policies are many and their status objects would be rebuilt on every reload).
    const rejections = rejectionsOf.get(view) ?? [];
    const attachments = attachmentsOf.get(view) ?? [];
    const reached = attachments.map((a) => {
      const gateways = new Set(input.tracker.reachedFrom(a));
      if (a.gateway !== undefined && input.servedGateways.has(a.gateway)) gateways.add(a.gateway);
      return [...gateways].map((gw) => [gw, attachedCondition(input.tracker.use(view, gw))] as const);
    });
    const signature =
      input.memo === undefined
        ? ""
        : reached
            .map((gws) =>
              gws.map(([gw, c]) => `${gw}\u0000${c.status}\u0000${c.reason}\u0000${c.message}`).join("\u0001"),
            )
            .join("\u0002");
    const known = input.memo?.get(view);
    if (
      known !== undefined &&
      known.signature === signature &&
      sameItems(known.rejections, rejections) &&
      sameItems(known.attachments, attachments)
    ) {
      out.push(known.status);
      continue;
    }

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
    for (const r of rejections) {
      put(r.targetRef, [condition("Accepted", false, r.reason, r.message)]);
    }
    attachments.forEach((a, i) => {
      const gateways = reached[i] ?? [];
      if (gateways.length === 0) {
        put(a.targetRef, [
          condition("Accepted", true, PolicyConditionReason.Accepted, "accepted"),
          condition("Attached", false, PolicyConditionReason.NotAttached, notAttachedMessage(a)),
        ]);
        return;
      }
      for (const [gw, attached] of gateways) {
        put(gatewayRef(gw), [condition("Accepted", true, PolicyConditionReason.Accepted, "accepted"), attached]);
      }
    });

    const entries = [...ancestors.entries()]
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, MAX_ANCESTORS)
      .map(([, v]) => ({ ancestorRef: v.ref, controllerName: SLUICE_CONTROLLER_NAME, conditions: v.conditions }));
    const status = { kind: "GwPolicy", namespace: view.namespace, name: view.name, status: { ancestors: entries } };
    input.memo?.set(view, { signature, rejections, attachments, status });
    out.push(status);
  }
  return out;
}

/** The status of each policy last time and what it was made of (see policyStatuses). */
export type PolicyStatusMemo = WeakMap<
  PolicyView,
  {
    readonly signature: string;
    readonly rejections: readonly Rejection[];
    readonly attachments: readonly Attachment[];
    readonly status: ResourceStatus;
  }
>;

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
