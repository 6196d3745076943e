// The status of each GwModel from its translation: one parent entry per parentRef (Sluice's controllerName), with
// Accepted, ResolvedRefs and, when the model has fields Sluice does not apply (or applies in part), a Warning naming
// each (NotYetSupported, or Ignored for a field that has no use where it is set), through the status helpers and Gateway API's route reasons.

import { SLUICE_CONTROLLER_NAME } from "../../api/gateway-api.js";
import { type Condition, condition, type ResourceStatus, RouteConditionReason } from "../status/conditions.js";
import type { ModelTranslation } from "./models.js";

const REASON_ORDER = ["NeverMatches", "Ignored", "NotYetSupported"] as const;

/** The status of every translated GwModel (invalid documents are reported by status/sluice-kinds.ts). */
export function modelStatuses(t: ModelTranslation): ResourceStatus[] {
  const out: ResourceStatus[] = [];
  for (const [id, p] of t.models) {
    const [namespace = "", name = ""] = id.split("/");
    const notes = p.notes.map((n) => `${n.field}: ${n.message}`);
    const reasons = new Set(p.notes.map((n) => n.reason ?? "NotYetSupported"));
    const reason = REASON_ORDER.find((r) => reasons.has(r)) ?? "NotYetSupported";
    const warning = notes.length > 0 ? condition("Warning", true, reason, notes.join("; ")) : undefined;
    const parents = (t.parents.get(id) ?? []).map((o) => {
      const conditions: Condition[] = [];
      if (o.problem !== undefined) {
        conditions.push(condition("Accepted", false, RouteConditionReason[o.problem.reason], o.problem.message));
      } else if (p.refused.length > 0) {
        conditions.push(condition("Accepted", false, RouteConditionReason.UnsupportedValue, p.refused.join("; ")));
      } else {
        const where = o.listeners.map((l) => l.sectionName).join(", ");
        conditions.push(condition("Accepted", true, RouteConditionReason.Accepted, `attached to listener ${where}`));
      }
      conditions.push(
        p.unresolved.length === 0
          ? condition("ResolvedRefs", true, RouteConditionReason.ResolvedRefs, "all references resolved")
          : condition("ResolvedRefs", false, RouteConditionReason.BackendNotFound, p.unresolved.join("; ")),
      );
      if (warning !== undefined) conditions.push(warning);
      return { parentRef: o.parentRef, controllerName: SLUICE_CONTROLLER_NAME, conditions };
    });
    out.push({ kind: "GwModel", namespace, name, status: { parents } });
  }
  return out;
}
