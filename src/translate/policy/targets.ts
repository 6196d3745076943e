// Policy targets → attachments. Resolves targetRefs and targetSelectors (in the policy's own namespace) to the
// objects they name, checks which sections may attach there, and indexes the result by attachment point.

import type { Service } from "../../api/core.js";
import {
  GATEWAY_API_GROUP,
  GATEWAY_API_X_GROUP,
  type Gateway,
  type GRPCRoute,
  type HTTPRoute,
  type ListenerSet,
} from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import type { GwBackend } from "../../api/sluice.js";
import type { TranslationInput } from "../input.js";
import type { PolicyLevel } from "../ir.js";
import type { PolicySection, PolicyTargetView, PolicyView } from "./view.js";

export const SLUICE_GROUP = "sluice.dev";

/** The kinds a policy target may name, with the group each is served under. */
export type TargetKind = "Gateway" | "ListenerSet" | "HTTPRoute" | "GRPCRoute" | "Service" | "GwBackend";

/** Where an attachment applies; `section` is a listener, rule name, Service port number or sub-backend name. */
export interface AttachmentPoint {
  readonly kind: TargetKind;
  readonly namespace: string;
  readonly name: string;
  readonly section?: string;
  readonly port?: number;
}

export function pointKey(p: AttachmentPoint): string {
  return `${p.kind}|${p.namespace}|${p.name}|${p.section ?? ""}|${p.port ?? ""}`;
}

/** Attachments by attachment point (pointKey), each list in policy order. */
export function indexByPoint(attachments: readonly Attachment[]): Map<string, Attachment[]> {
  const byPoint = new Map<string, Attachment[]>();
  for (const a of attachments) {
    const key = pointKey(a.point);
    const list = byPoint.get(key);
    if (list === undefined) byPoint.set(key, [a]);
    else list.push(a);
  }
  return byPoint;
}

/** Ancestor reference written into policy status (Gateway API ParentReference shape). */
export interface AncestorRef {
  readonly group: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly sectionName?: string;
  readonly port?: number;
}

export interface Attachment {
  readonly view: PolicyView;
  readonly point: AttachmentPoint;
  readonly level: PolicyLevel;
  /** `HTTPRoute default/api rule read`: how messages and `sluice explain` name the attachment point. */
  readonly target: string;
  /** The target as an ancestorRef, used in status when no Gateway is reached through it. */
  readonly targetRef: AncestorRef;
  /** `ns/name` of the Gateway for Gateway and ListenerSet targets: their status ancestor is known up front. */
  readonly gateway?: string;
}

export const RejectReason = { TargetNotFound: "TargetNotFound", NotAllowed: "NotAllowed" } as const;

export interface Rejection {
  readonly view: PolicyView;
  readonly targetRef: AncestorRef;
  readonly target: string;
  readonly reason: (typeof RejectReason)[keyof typeof RejectReason];
  readonly message: string;
}

export interface SubBackend {
  readonly name: string;
  /** `provider` of an AI backend's priority groups, or `target` of an MCP backend. */
  readonly type: "provider" | "target";
  /** The sub-backend's own `policies`, when it has a mapping there. */
  readonly policies?: Readonly<Record<string, unknown>>;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function asArray(v: unknown): readonly unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Named providers of an AI GwBackend and targets of an MCP GwBackend, in declaration order. */
export function subBackendsOf(be: GwBackend): SubBackend[] {
  const out: SubBackend[] = [];
  const spec: unknown = be.spec;
  if (!isRecord(spec)) return out;
  const ai = spec["ai"];
  if (isRecord(ai)) {
    for (const g of asArray(ai["groups"])) {
      for (const p of asArray(isRecord(g) ? g["providers"] : undefined)) {
        if (!isRecord(p) || typeof p["name"] !== "string") continue;
        const policies = p["policies"];
        out.push({ name: p["name"], type: "provider", ...(isRecord(policies) ? { policies } : {}) });
      }
    }
  }
  const mcp = spec["mcp"];
  if (isRecord(mcp)) {
    for (const t of asArray(mcp["targets"])) {
      if (!isRecord(t) || typeof t["name"] !== "string") continue;
      // Only static (host-based) targets carry policies; selector targets have none.
      const st = t["static"];
      const policies = isRecord(st) ? st["policies"] : undefined;
      out.push({ name: t["name"], type: "target", ...(isRecord(policies) ? { policies } : {}) });
    }
  }
  return out;
}

export function kindOf(t: PolicyTargetView): TargetKind | undefined {
  const gatewayGroups = [GATEWAY_API_GROUP, GATEWAY_API_X_GROUP];
  if (t.group === GATEWAY_API_GROUP && (t.kind === "Gateway" || t.kind === "HTTPRoute" || t.kind === "GRPCRoute")) {
    return t.kind;
  }
  if (gatewayGroups.includes(t.group) && (t.kind === "ListenerSet" || t.kind === "XListenerSet")) return "ListenerSet";
  if ((t.group === "" || t.group === "core") && t.kind === "Service") return "Service";
  // The spec calls the kind `Backend`; Sluice's kind is GwBackend. Both name the same object.
  if (t.group === SLUICE_GROUP && (t.kind === "GwBackend" || t.kind === "Backend")) return "GwBackend";
  return undefined;
}

const VALID_TARGETS =
  "Gateway, HTTPRoute, GRPCRoute (gateway.networking.k8s.io), ListenerSet, Service (core) or GwBackend (sluice.dev)";

const SECTIONS_ALLOWED: Readonly<Record<TargetKind, readonly PolicySection[]>> = {
  Gateway: ["frontend", "traffic", "backend"],
  ListenerSet: ["traffic", "backend"],
  HTTPRoute: ["traffic", "backend"],
  GRPCRoute: ["traffic", "backend"],
  Service: ["backend"],
  GwBackend: ["backend"],
};

/** Why a policy's sections cannot attach at this point, or undefined when they all can. */
function notAllowed(view: PolicyView, kind: TargetKind, t: PolicyTargetView): string | undefined {
  const present = Object.keys(view.sections) as PolicySection[];
  const reasons: string[] = [];
  const bad = present.filter((s) => !SECTIONS_ALLOWED[kind].includes(s));
  for (const s of bad) {
    reasons.push(
      s === "frontend"
        ? `frontend policies may only target a Gateway, not ${kind}`
        : `${s} policies may not target ${kind}; they may target ${s === "traffic" ? "a Gateway, ListenerSet, HTTPRoute or GRPCRoute" : "a Gateway, ListenerSet, HTTPRoute, GRPCRoute, Service or GwBackend"}`,
    );
  }
  if (kind === "Gateway" && t.sectionName !== undefined && present.includes("frontend")) {
    reasons.push(
      "frontend policies apply to a whole Gateway, optionally one port; a listener (sectionName) is not allowed",
    );
  }
  if (t.port !== undefined && (kind !== "Gateway" || present.some((s) => s !== "frontend"))) {
    reasons.push(
      kind === "Gateway"
        ? `port is only valid on frontend policies; this policy has ${present.filter((s) => s !== "frontend").join(" and ")}`
        : `port is only valid on frontend policies that target a Gateway${kind === "Service" ? "; a Service port is named with sectionName" : ""}`,
    );
  }
  if (present.includes("traffic") && view.phase === "PreRouting" && (kind === "HTTPRoute" || kind === "GRPCRoute")) {
    reasons.push(
      "phase PreRouting requires a Gateway or listener target; PreRouting policies run before a route is chosen",
    );
  }
  return reasons.length > 0 ? reasons.join("; ") : undefined;
}

function labelsMatch(labels: Readonly<Record<string, string>> | undefined, want: Readonly<Record<string, string>>) {
  return Object.entries(want).every(([k, v]) => labels?.[k] === v);
}

interface Named {
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
}

function objectsOf(input: TranslationInput, kind: TargetKind): readonly Named[] {
  switch (kind) {
    case "Gateway":
      return input.gateways;
    case "ListenerSet":
      return input.listenerSets;
    case "HTTPRoute":
      return input.httpRoutes;
    case "GRPCRoute":
      return input.grpcRoutes;
    case "Service":
      return input.services;
    case "GwBackend":
      return input.backends;
  }
}

interface NamespaceIndex {
  readonly all: Named[];
  readonly byName: Map<string, Named[]>;
}

/** Objects by namespace and name, per list of the input: resolving targets must not scan every route per policy. */
const INDEX = new WeakMap<readonly Named[], Map<string, NamespaceIndex>>();

/** Objects of `kind` in `ns`, or only the one called `name` when given. */
function objectsIn(input: TranslationInput, kind: TargetKind, ns: string, name?: string): readonly Named[] {
  const list = objectsOf(input, kind);
  let index = INDEX.get(list);
  if (index === undefined) {
    index = new Map();
    for (const o of list) {
      const ons = namespaceOf(o);
      let inNs = index.get(ons);
      if (inNs === undefined) {
        inNs = { all: [], byName: new Map() };
        index.set(ons, inNs);
      }
      inNs.all.push(o);
      const named = inNs.byName.get(o.metadata.name);
      if (named === undefined) inNs.byName.set(o.metadata.name, [o]);
      else named.push(o);
    }
    INDEX.set(list, index);
  }
  const inNs = index.get(ns);
  return (name === undefined ? inNs?.all : inNs?.byName.get(name)) ?? [];
}

function describe(kind: TargetKind, ns: string, name: string): string {
  return `${kind} ${ns}/${name}`;
}

/**
 * What resolving the targets of `view` reads from the input: for each target the objects it may name (all objects of
 * its kind in the namespace for a selector). Equal lists (same objects) resolve to the same attachments.
 */
export function targetCandidates(input: TranslationInput, view: PolicyView): readonly (readonly object[])[] {
  return view.targets.map((t) => {
    const kind = kindOf(t);
    if (kind === undefined) return [];
    return t.matchLabels !== undefined
      ? objectsIn(input, kind, view.namespace)
      : objectsIn(input, kind, view.namespace, t.name);
  });
}

export interface ResolvedTargets {
  readonly attachments: readonly Attachment[];
  readonly rejections: readonly Rejection[];
}

/** Resolves every target of a valid policy; each target either attaches somewhere or is rejected with a reason. */
export function resolveTargets(input: TranslationInput, view: PolicyView): ResolvedTargets {
  const attachments: Attachment[] = [];
  const rejections: Rejection[] = [];
  const ns = view.namespace;

  for (const t of view.targets) {
    const baseRef: AncestorRef = {
      group: t.group,
      kind: t.kind,
      namespace: ns,
      name:
        t.name ??
        `(selector ${Object.entries(t.matchLabels ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(",")})`,
      ...(t.sectionName !== undefined ? { sectionName: t.sectionName } : {}),
      ...(t.port !== undefined ? { port: t.port } : {}),
    };
    const kind = kindOf(t);
    if (kind === undefined) {
      rejections.push({
        view,
        targetRef: baseRef,
        target: `${t.kind} ${ns}/${baseRef.name}`,
        reason: RejectReason.NotAllowed,
        message:
          t.group === GATEWAY_API_GROUP && (t.kind === "TCPRoute" || t.kind === "TLSRoute")
            ? `${t.path}: Sluice serves no ${t.kind} (its Gateways serve HTTPRoute and GRPCRoute), so a policy cannot attach to one; valid targets: ${VALID_TARGETS}`
            : `${t.path}: ${t.group === "" ? "" : `${t.group}/`}${t.kind} cannot be a policy target; valid targets: ${VALID_TARGETS}`,
      });
      continue;
    }
    const why = notAllowed(view, kind, t);
    if (why !== undefined) {
      rejections.push({
        view,
        targetRef: baseRef,
        target: describe(kind, ns, baseRef.name),
        reason: RejectReason.NotAllowed,
        message: `${t.path}: ${why}`,
      });
      continue;
    }

    const matched =
      t.matchLabels !== undefined
        ? objectsIn(input, kind, ns).filter((o) => labelsMatch(o.metadata.labels, t.matchLabels ?? {}))
        : objectsIn(input, kind, ns, t.name);
    if (matched.length === 0) {
      rejections.push({
        view,
        targetRef: baseRef,
        target: describe(kind, ns, baseRef.name),
        reason: RejectReason.TargetNotFound,
        message:
          t.matchLabels !== undefined
            ? `${t.path}: no ${kind} in namespace ${ns} has the labels ${JSON.stringify(t.matchLabels)}`
            : `${t.path}: ${kind} ${ns}/${t.name} not found (targets must be in the policy's namespace)`,
      });
      continue;
    }
    for (const obj of [...matched].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1))) {
      const r = attachTo(view, t, kind, obj);
      if ("reason" in r) rejections.push(r);
      else attachments.push(r);
    }
  }
  return { attachments, rejections };
}

function attachTo(view: PolicyView, t: PolicyTargetView, kind: TargetKind, obj: Named): Attachment | Rejection {
  const ns = view.namespace;
  const name = obj.metadata.name;
  const targetRef: AncestorRef = {
    group: t.group,
    kind: t.kind,
    namespace: ns,
    name,
    ...(t.sectionName !== undefined ? { sectionName: t.sectionName } : {}),
    ...(t.port !== undefined ? { port: t.port } : {}),
  };
  const whole = describe(kind, ns, name);
  const notFound = (message: string): Rejection => ({
    view,
    targetRef,
    target: whole,
    reason: RejectReason.TargetNotFound,
    message: `${t.path}: ${message}`,
  });
  const section = t.sectionName;

  switch (kind) {
    case "Gateway": {
      const gw = obj as Gateway;
      const gateway = `${ns}/${name}`;
      if (t.port !== undefined) {
        if (!(gw.spec.listeners ?? []).some((l) => l.port === t.port)) {
          return notFound(`Gateway ${gateway} has no listener on port ${t.port}`);
        }
        const point = { kind, namespace: ns, name, port: t.port };
        return { view, point, level: "port", target: `${whole} port ${t.port}`, targetRef, gateway };
      }
      if (section !== undefined) {
        if (!(gw.spec.listeners ?? []).some((l) => l.name === section)) {
          return notFound(`Gateway ${gateway} has no listener named ${section}`);
        }
        const point = { kind, namespace: ns, name, section };
        return { view, point, level: "listener", target: `${whole} listener ${section}`, targetRef, gateway };
      }
      return { view, point: { kind, namespace: ns, name }, level: "gateway", target: whole, targetRef, gateway };
    }
    case "ListenerSet": {
      const ls = obj as ListenerSet;
      const p = ls.spec?.parentRef;
      const gateway = p !== undefined ? `${p.namespace ?? ns}/${p.name}` : undefined;
      if (section !== undefined && !(ls.spec?.listeners ?? []).some((l) => l.name === section)) {
        return notFound(`ListenerSet ${ns}/${name} has no listener named ${section}`);
      }
      const point = { kind, namespace: ns, name, ...(section !== undefined ? { section } : {}) };
      const target = section !== undefined ? `${whole} listener ${section}` : whole;
      return { view, point, level: "listener", target, targetRef, ...(gateway !== undefined ? { gateway } : {}) };
    }
    case "HTTPRoute":
    case "GRPCRoute": {
      if (section === undefined) {
        return { view, point: { kind, namespace: ns, name }, level: "route", target: whole, targetRef };
      }
      const route = obj as HTTPRoute | GRPCRoute;
      if (!(route.spec.rules ?? []).some((r) => r.name === section)) {
        return notFound(`${kind} ${ns}/${name} has no rule named ${section} (rules are named with rules[].name)`);
      }
      return {
        view,
        point: { kind, namespace: ns, name, section },
        level: "rule",
        target: `${whole} rule ${section}`,
        targetRef,
      };
    }
    case "Service": {
      if (section === undefined) {
        return { view, point: { kind, namespace: ns, name }, level: "backend", target: whole, targetRef };
      }
      // sectionName names a Service port by name or by number; the index uses the number, which backendRefs carry.
      const port = ((obj as Service).spec?.ports ?? []).find((p) => p.name === section || String(p.port) === section);
      if (port === undefined) return notFound(`Service ${ns}/${name} has no port named or numbered ${section}`);
      return {
        view,
        point: { kind, namespace: ns, name, section: String(port.port) },
        level: "backendSection",
        target: `${whole} port ${section}`,
        targetRef,
      };
    }
    case "GwBackend": {
      if (section === undefined) {
        return { view, point: { kind, namespace: ns, name }, level: "backend", target: whole, targetRef };
      }
      const subs = subBackendsOf(obj as GwBackend);
      if (!subs.some((s) => s.name === section)) {
        return notFound(
          `GwBackend ${ns}/${name} has no provider or MCP target named ${section}${subs.length > 0 ? ` (it has ${subs.map((s) => s.name).join(", ")})` : ""}`,
        );
      }
      return {
        view,
        point: { kind, namespace: ns, name, section },
        level: "backendSection",
        target: `${whole} ${subs.find((s) => s.name === section)?.type ?? "section"} ${section}`,
        targetRef,
      };
    }
  }
}
