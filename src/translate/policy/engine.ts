// The policy attachment engine. Built once per translation from every GwPolicy; the Gateway translator asks it for
// the effective policy of each Gateway port and of each route rule through the listener it is served on. It records
// what it was asked, so policy status and `sluice explain` come out of the same pass.

import type { Service } from "../../api/core.js";
import type { Gateway, HTTPRoute, HTTPRouteRule, Listener } from "../../api/gateway-api.js";
import { GATEWAY_API_GROUP } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import type { GwBackend, GwPolicy } from "../../api/sluice.js";
import { referenceAllowed } from "../backend/resolve.js";
import type { TranslationInput } from "../input.js";
import type {
  BackendPolicyIR,
  EffectivePolicyIR,
  ListenerPolicyIR,
  PolicySourceIR,
  RefBackendIR,
  RoutePolicyIR,
  SubBackendPolicyIR,
} from "../ir.js";
import { findNamed } from "../lookup.js";
import { backendClusterName, serviceClusterName } from "../names.js";
import type { TranslatedRule } from "../route/httproute.js";
import type { ResourceStatus } from "../status/conditions.js";
import { type PolicyChanges, type PolicyMemo, sameItems } from "./memo.js";
import { type Contribution, mergeContributions, type NotApplied } from "./merge.js";
import { type PolicyStatusTracker, policyStatuses, trackerFor } from "./status.js";
import {
  type AncestorRef,
  type Attachment,
  type AttachmentPoint,
  indexByPoint,
  pointKey,
  type Rejection,
  resolveTargets,
  SLUICE_GROUP,
  subBackendsOf,
} from "./targets.js";
import { type PolicySection, type PolicyView, readPolicy } from "./view.js";

/** The listener a route is served through (structurally the Gateway translator's attached listener). */
export interface ListenerRef {
  readonly listener: Listener;
  readonly sectionName: string;
  readonly fromListenerSet: boolean;
}

/** Which merged policy a not-applied entry belongs to. */
export type SiteSection = "frontend" | "preRouting" | "traffic" | "backend";

export interface SiteNotApplied {
  readonly section: SiteSection;
  /** For the backend section: the backend (and sub-backend) it concerns. */
  readonly backend?: string;
  readonly subBackend?: string;
  readonly from: PolicySourceIR;
  readonly field?: string;
  readonly kind: NotApplied["kind"];
  readonly reason: string;
}

/** The effective policy of one route rule served through one Gateway listener, with what did not apply. */
export interface RouteSite {
  readonly gateway: string;
  /** `http` for a Gateway listener, `ListenerSet ns/name listener http` for a ListenerSet's. */
  readonly listener: string;
  readonly port: number;
  readonly route: string;
  readonly rule: number;
  readonly ruleName?: string;
  readonly policy: RoutePolicyIR;
  readonly notApplied: readonly SiteNotApplied[];
}

export interface ListenerSite {
  readonly gateway: string;
  readonly port: number;
  readonly policy: ListenerPolicyIR;
  readonly notApplied: readonly SiteNotApplied[];
}

/** A target a policy names but does not attach to (not found, not allowed, or the policy is invalid). */
export interface RejectedTarget {
  readonly policy: string;
  readonly targetRef: AncestorRef;
  readonly reason: string;
  readonly message: string;
}

export interface PolicyReport {
  readonly routes: readonly RouteSite[];
  readonly listeners: readonly ListenerSite[];
  readonly rejected: readonly RejectedTarget[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function nonEmpty(p: EffectivePolicyIR): boolean {
  return Object.keys(p).length > 0;
}

export class PolicyEngine {
  readonly #input: TranslationInput;
  readonly #views: readonly PolicyView[];
  readonly #byPoint: ReadonlyMap<string, readonly Attachment[]>;
  readonly #attachments: Attachment[] = [];
  readonly #rejections: Rejection[] = [];
  readonly #tracker: PolicyStatusTracker = trackerFor();
  readonly #routeSites = new Map<string, RouteSite>();
  readonly #listenerSites = new Map<string, ListenerSite>();
  readonly #servedGateways = new Set<string>();

  /** `memo` keeps views and attachments of unchanged policies between translations (src/translate/memo.ts). */
  constructor(input: TranslationInput, memo?: PolicyMemo) {
    this.#input = input;
    this.#views = [
      ...input.policies.map((p) => memo?.view(p) ?? readPolicy(p)),
      // Policies that failed validation attach nowhere, but still get a status saying why.
      ...input.invalid.filter((r) => r.kind === "GwPolicy").map((r) => readPolicy(r.document as GwPolicy, r.problems)),
    ];
    for (const view of this.#views) {
      if (view.problems.length > 0) continue;
      const { attachments, rejections } = memo?.targets(input, view) ?? resolveTargets(input, view);
      this.#rejections.push(...rejections);
      this.#attachments.push(...attachments);
    }
    const index = memo?.index(this.#attachments);
    this.#byPoint = index?.byPoint ?? indexByPoint(this.#attachments);
    this.#changes = index === undefined ? undefined : memo?.changes(input, index);
    this.#memo = memo;
  }

  readonly #memo: PolicyMemo | undefined;

  /** What changed since the last memoized translation; undefined without a memo. */
  readonly #changes: PolicyChanges | undefined;

  /** Ids of attachments, for memo keys. */
  readonly #ids = new Map<Attachment, number>();
  /** Merges of the same attachments are the same: most rules only see Gateway- and listener-level policies. */
  readonly #merges = new Map<string, ReturnType<typeof mergeContributions>>();

  #merged(
    reached: readonly Attachment[],
    section: PolicySection,
    phase?: string,
  ): ReturnType<typeof mergeContributions> {
    let key = `${section}|${phase ?? ""}`;
    for (const a of reached) {
      let id = this.#ids.get(a);
      if (id === undefined) {
        id = this.#ids.size;
        this.#ids.set(a, id);
      }
      key += `|${id}`;
    }
    let merged = this.#merges.get(key);
    if (merged === undefined) {
      merged = mergeContributions(this.#contributions(reached, section, phase), section === "traffic");
      this.#merges.set(key, merged);
    }
    return merged;
  }

  #at(point: AttachmentPoint): readonly Attachment[] {
    const key = pointKey(point);
    const found = this.#byPoint.get(key) ?? NONE;
    this.#trace?.points.push(key, found);
    return found;
  }

  #service(namespace: string, name: string) {
    const found = findNamed(this.#input.services, namespace, name);
    this.#trace?.objects.push(["Service", namespace, name, objectView("Service", found)]);
    return found;
  }

  #backend(namespace: string, name: string) {
    const found = findNamed(this.#input.backends, namespace, name);
    this.#trace?.objects.push(["GwBackend", namespace, name, objectView("GwBackend", found)]);
    return found;
  }

  #reach(a: Attachment, gateway: string): void {
    this.#trace?.ops.push({ op: "reach", a, gateway });
    this.#tracker.reach(a, gateway);
  }

  // ---- Tracing, for the translation memo: what attaching one route read and did, to be checked and replayed.

  #trace:
    | {
        points: (string | readonly Attachment[])[];
        objects: EngineTrace["objects"][number][];
        ops: EngineOp[];
      }
    | undefined;

  /** Starts recording what the engine reads and does, until stopTrace(). */
  startTrace(): void {
    this.#trace = { points: [], objects: [], ops: [] };
  }

  stopTrace(): EngineTrace {
    const trace = this.#trace ?? { points: [], objects: [], ops: [] };
    this.#trace = undefined;
    // Reaching an attachment and applying a field are set additions: the same ones from many routes (everything a
    // Gateway- or listener-level policy does) are replayed once per translation, recognised by their key.
    const idOf = (o: object) => this.#memo?.idOf(o) ?? 0;
    const shared: EngineOp[] = [];
    const own: EngineOp[] = [];
    const sites: RouteSiteOp[] = [];
    const keys: string[] = [];
    for (const o of trace.ops) {
      if (o.op === "reach") keys.push(`r${idOf(o.a)}|${o.gateway}`);
      else if (o.op === "applied") keys.push(`a${idOf(o.view)}|${o.gateway}|${o.field}`);
      else if (o.op === "site") {
        sites.push(o);
        continue;
      } else {
        own.push(o);
        continue;
      }
      shared.push(o);
    }
    const key = keys.join("\n");
    return {
      points: trace.points,
      objects: trace.objects,
      shared: this.#memo?.interned(key, shared) ?? { key, ops: shared },
      own: own.length > 0 ? own : NO_OPS,
      sites,
    };
  }

  /** Whether everything `trace` read is unchanged in this engine's input; no side effects. */
  unchanged(trace: EngineTrace): boolean {
    const changed = this.#changes?.points;
    if (changed === undefined) {
      const p = trace.points;
      for (let i = 0; i < p.length; i += 2) {
        if (!sameItems(this.#byPoint.get(p[i] as string) ?? NONE, p[i + 1] as readonly Attachment[])) return false;
      }
    } else if (changed.size > 0) {
      for (let i = 0; i < trace.points.length; i += 2) if (changed.has(trace.points[i] as string)) return false;
    }
    if (this.#changes?.objectsSame === true) return true;
    for (const [kind, ns, name, view] of trace.objects) {
      const found =
        kind === "Service" ? findNamed(this.#input.services, ns, name) : findNamed(this.#input.backends, ns, name);
      if (objectView(kind, found) !== view) return false;
    }
    return true;
  }

  /** Does again what the traced calls did (status bookkeeping and route sites), for an unchanged trace. */
  replay(trace: EngineTrace): void {
    if (!this.#replayed.has(trace.shared.key)) {
      this.#replayed.add(trace.shared.key);
      this.#apply(trace.shared.ops);
    }
    this.#apply(trace.own);
    // Route sites are only read by report(), which adds these then.
    this.#replayedSites.push(trace.sites);
  }

  /** Keys of the shared operations replayed in this translation. */
  readonly #replayed = new Set<string>();
  readonly #replayedSites: (readonly RouteSiteOp[])[] = [];

  #apply(ops: readonly EngineOp[]): void {
    for (const o of ops) {
      switch (o.op) {
        case "reach":
          this.#tracker.reach(o.a, o.gateway);
          break;
        case "applied":
          this.#tracker.applied(o.view, o.gateway, o.field);
          break;
        case "notApplied":
          this.#tracker.notApplied(o.view, o.gateway, o.n);
          break;
        case "site":
          this.#routeSites.set(o.key, o.site);
          break;
      }
    }
  }

  #contributions(attachments: readonly Attachment[], section: PolicySection, phase?: string): Contribution[] {
    const out: Contribution[] = [];
    for (const a of attachments) {
      const fields = a.view.sections[section];
      if (fields === undefined) continue;
      if (phase !== undefined && a.view.phase !== phase) continue;
      out.push({
        source: { kind: "GwPolicy", name: a.view.key, level: a.level, target: a.target },
        view: a.view,
        fields,
        override: section === "traffic" && a.view.inheritance === "Override",
      });
    }
    return out;
  }

  /** Records a merge for status: which policies reached the Gateway, what applied, what did not and why. */
  #record(
    gateway: string,
    reached: readonly Attachment[],
    section: SiteSection,
    merged: ReturnType<typeof mergeContributions>,
    into: SiteNotApplied[],
    extra: { backend?: string; subBackend?: string } = {},
  ): void {
    const statusSection = section === "preRouting" ? "traffic" : section;
    for (const a of reached) this.#reach(a, gateway);
    for (const { view, field } of merged.applied) {
      if (view === undefined) continue;
      const f = `${statusSection}.${field}`;
      this.#trace?.ops.push({ op: "applied", view, gateway, field: f });
      this.#tracker.applied(view, gateway, f);
    }
    for (const n of merged.notApplied) {
      if (n.view !== undefined) {
        this.#trace?.ops.push({ op: "notApplied", view: n.view, gateway, n });
        this.#tracker.notApplied(n.view, gateway, n);
      }
      into.push({
        section,
        ...extra,
        from: n.from,
        ...(n.field !== undefined ? { field: n.field } : {}),
        kind: n.kind,
        reason: n.reason,
      });
    }
  }

  /** The frontend policy of a Gateway on one port, as the fields to spread into its ListenerIR. */
  listenerFields(gw: Gateway, port: number): { readonly policy?: ListenerPolicyIR } {
    const ns = namespaceOf(gw);
    const gateway = `${ns}/${gw.metadata.name}`;
    this.#servedGateways.add(gateway);
    const reached = [
      ...this.#at({ kind: "Gateway", namespace: ns, name: gw.metadata.name }),
      ...this.#at({ kind: "Gateway", namespace: ns, name: gw.metadata.name, port }),
    ];
    const merged = this.#merged(reached, "frontend");
    const notApplied: SiteNotApplied[] = [];
    this.#record(
      gateway,
      reached.filter((a) => a.view.sections.frontend !== undefined),
      "frontend",
      merged,
      notApplied,
    );
    const collectors = this.#collectorBackends(gateway, merged.policy, notApplied);
    if (!nonEmpty(merged.policy) && notApplied.length === 0) return {};
    const policy: ListenerPolicyIR = {
      frontend: merged.policy,
      ...(collectors !== undefined ? { refBackends: collectors } : {}),
    };
    this.#listenerSites.set(`${gateway}|${port}`, { gateway, port, policy, notApplied });
    return nonEmpty(merged.policy) ? { policy } : {};
  }

  /**
   * The rules of `route` served through `listener` of `gw`, each with its effective policy. The policy depends on the
   * listener, so each attachment of a route gets its own copies of the rule IR.
   */
  attachToRules(
    gw: Gateway,
    listener: ListenerRef,
    route: HTTPRoute,
    rules: readonly TranslatedRule[],
    routeKind: "HTTPRoute" | "GRPCRoute" = "HTTPRoute",
  ): readonly TranslatedRule[] {
    const cache = new Map<number, RoutePolicyIR | undefined>();
    return rules.map((r) => {
      const ruleIndex = r.ranked.rule;
      if (!cache.has(ruleIndex)) cache.set(ruleIndex, this.#routeSite(gw, listener, route, ruleIndex, routeKind));
      const policy = cache.get(ruleIndex);
      return policy === undefined ? r : { ranked: r.ranked, route: { ...r.route, policy } };
    });
  }

  /**
   * The traffic policy of requests a listener serves through no route rule (GwModel routes, model/serve.ts): what the
   * Gateway- and listener-level GwPolicies give every rule of that listener (authentication, authorization, rate
   * limits ...). Not memoized: computed on each translation.
   */
  listenerTraffic(gw: Gateway, l: ListenerRef): RoutePolicyIR | undefined {
    const gateway = `${namespaceOf(gw)}/${gw.metadata.name}`;
    const reached = this.#listenerReached(gw, l);
    const notApplied: SiteNotApplied[] = [];
    const { pre, post } = this.#trafficPhases(gateway, reached, notApplied);
    return nonEmptyRoutePolicy({
      ...(nonEmpty(pre.policy) ? { preRouting: pre.policy } : {}),
      ...(nonEmpty(post.policy) ? { traffic: post.policy } : {}),
    });
  }

  /** The traffic sections of the attachments a site reaches, merged per phase, each recorded against its attachments. */
  #trafficPhases(
    gateway: string,
    reached: readonly Attachment[],
    notApplied: SiteNotApplied[],
  ): { pre: ReturnType<typeof mergeContributions>; post: ReturnType<typeof mergeContributions> } {
    const withTraffic = reached.filter((a) => a.view.sections.traffic !== undefined);
    const pre = this.#merged(reached, "traffic", "PreRouting");
    const inPhase = (phase: string) => withTraffic.filter((a) => a.view.phase === phase);
    this.#record(gateway, inPhase("PreRouting"), "preRouting", pre, notApplied);
    const post = this.#merged(reached, "traffic", "PostRouting");
    this.#record(gateway, inPhase("PostRouting"), "traffic", post, notApplied);
    return { pre, post };
  }

  /** The attachments a listener's rules reach before their route's own: the Gateway's, the listener's. */
  #listenerReached(gw: Gateway, l: ListenerRef): Attachment[] {
    const gwNs = namespaceOf(gw);
    const ls = l.fromListenerSet ? this.#listenerSetOf(l.listener) : undefined;
    const reached: Attachment[] = [...this.#at({ kind: "Gateway", namespace: gwNs, name: gw.metadata.name })];
    if (ls === undefined) {
      reached.push(...this.#at({ kind: "Gateway", namespace: gwNs, name: gw.metadata.name, section: l.sectionName }));
    } else {
      reached.push(...this.#at({ kind: "ListenerSet", namespace: ls.namespace, name: ls.name }));
      reached.push(
        ...this.#at({ kind: "ListenerSet", namespace: ls.namespace, name: ls.name, section: l.sectionName }),
      );
    }
    return reached;
  }

  #listenerSetOf(listener: Listener): { namespace: string; name: string } | undefined {
    // The Gateway translator does not carry the ListenerSet of a listener; the listener object itself identifies it.
    const ls = this.#input.listenerSets.find((s) => (s.spec?.listeners ?? []).includes(listener));
    return ls === undefined ? undefined : { namespace: namespaceOf(ls), name: ls.metadata.name };
  }

  /** `route` is a GRPCRoute seen as the HTTPRoute it is on the wire when `kind` says so; policies name its kind. */
  #routeSite(
    gw: Gateway,
    l: ListenerRef,
    route: HTTPRoute,
    ruleIndex: number,
    kind: "HTTPRoute" | "GRPCRoute",
  ): RoutePolicyIR | undefined {
    const gwNs = namespaceOf(gw);
    const gateway = `${gwNs}/${gw.metadata.name}`;
    const routeNs = namespaceOf(route);
    const rule: HTTPRouteRule | undefined = route.spec.rules?.[ruleIndex];
    const ls = l.fromListenerSet ? this.#listenerSetOf(l.listener) : undefined;
    const listenerLabel =
      ls !== undefined ? `ListenerSet ${ls.namespace}/${ls.name} listener ${l.sectionName}` : l.sectionName;
    const siteKey = `${gateway}|${listenerLabel}|${kind === "HTTPRoute" ? "" : `${kind} `}${routeNs}/${route.metadata.name}|${ruleIndex}`;
    const known = this.#routeSites.get(siteKey);
    if (known !== undefined) return nonEmptyRoutePolicy(known.policy);

    const reached = this.#listenerReached(gw, l);
    reached.push(...this.#at({ kind, namespace: routeNs, name: route.metadata.name }));
    if (rule?.name !== undefined) {
      reached.push(...this.#at({ kind, namespace: routeNs, name: route.metadata.name, section: rule.name }));
    }

    const notApplied: SiteNotApplied[] = [];
    const { pre, post } = this.#trafficPhases(gateway, reached, notApplied);

    const routeBackend = reached.filter((a) => a.view.sections.backend !== undefined);
    const backends: BackendPolicyIR[] = [];
    for (const ref of rule?.backendRefs ?? []) {
      const b = this.#backendPolicy(gateway, routeNs, ref, routeBackend, notApplied);
      if (b !== undefined) backends.push(b);
    }
    // A Gateway/route-level backend policy applies even to rules without backends the engine can name (redirects).
    if (rule?.backendRefs === undefined || rule.backendRefs.length === 0) {
      for (const a of routeBackend) this.#reach(a, gateway);
    }

    const refBackends = this.#refBackendPolicies(gateway, [pre.policy, post.policy], notApplied);
    const policy: RoutePolicyIR = {
      ...(nonEmpty(pre.policy) ? { preRouting: pre.policy } : {}),
      ...(nonEmpty(post.policy) ? { traffic: post.policy } : {}),
      ...(backends.length > 0 ? { backends } : {}),
      ...(refBackends !== undefined ? { refBackends } : {}),
    };
    // Every site is kept, with or without policy, so `sluice explain` can show where a route is served.
    const site: RouteSite = {
      gateway,
      listener: listenerLabel,
      port: l.listener.port,
      route: `${routeNs}/${route.metadata.name}`,
      rule: ruleIndex,
      ...(rule?.name !== undefined ? { ruleName: rule.name } : {}),
      policy,
      notApplied: notApplied.length > 0 ? notApplied : NOTHING_NOT_APPLIED,
    };
    this.#trace?.ops.push({ op: "site", key: siteKey, site });
    this.#routeSites.set(siteKey, site);
    return nonEmptyRoutePolicy(policy);
  }

  /**
   * The connection fields (REF_CONNECTION_FIELDS) of the GwPolicies targeting each Service a traffic field's backendRef
   * names (a remote JWKS server, an ext_authz, ext_proc or rate limit service): Envoy's calls to it are made through
   * that Service's cluster, so its backend policy's TLS, TCP and HTTP version are theirs (the spec: "TLS to a remote key
   * source is set by a backend policy on that Service"). Keyed `<namespace>/<name>/<port>`. Its other fields are for
   * routes sending traffic to the Service, not recorded here.
   */
  #refBackendPolicies(
    gateway: string,
    policies: readonly (EffectivePolicyIR | undefined)[],
    notApplied: SiteNotApplied[],
  ): Readonly<Record<string, RefBackendIR>> | undefined {
    let out: Record<string, RefBackendIR> | undefined;
    for (const policy of policies) {
      for (const f of Object.values(policy ?? {})) {
        if ("combined" in f) continue;
        const policyNs = f.from.name.split("/")[0] ?? "";
        for (const ref of backendRefsIn(f.value)) {
          const key = refBackendKey({ ...ref, namespace: ref.namespace ?? policyNs });
          if (out?.[key] !== undefined) continue;
          const own = this.#refBackend(gateway, ref, policyNs, notApplied);
          if (own !== undefined) out = { ...out, [key]: own };
        }
      }
    }
    return out;
  }

  /**
   * The connection part of the backend policies of the Service or static GwBackend `ref` names (a traffic field's
   * backendRef, or a frontend collector's), recorded for status against `gateway`; undefined when there is none.
   */
  #refBackend(
    gateway: string,
    ref: RefInValue,
    policyNs: string,
    notApplied: SiteNotApplied[],
  ): RefBackendIR | undefined {
    const ns = ref.namespace ?? policyNs;
    const group = ref.group ?? "";
    const kind = ref.kind ?? "Service";
    const isService = group === "" && kind === "Service";
    const isBackend = (group === SLUICE_GROUP && kind === "GwBackend") || (group === "" && kind === "Backend");
    if ((isService && ref.port === undefined) || (!isService && !isBackend)) return undefined;
    const be = isBackend ? this.#backend(ns, ref.name) : undefined;
    if (isService ? this.#service(ns, ref.name) === undefined : be === undefined) return undefined;
    const connecting = (a: Attachment) =>
      Object.keys(a.view.sections.backend ?? {}).some((k) => REF_CONNECTION_FIELDS.has(k));
    const own = (
      isService
        ? [
            ...this.#at({ kind: "Service", namespace: ns, name: ref.name }),
            ...this.#at({ kind: "Service", namespace: ns, name: ref.name, section: String(ref.port) }),
          ]
        : this.#at({ kind: "GwBackend", namespace: ns, name: ref.name })
    ).filter(connecting);
    const backend = isService ? `Service ${ns}/${ref.name} port ${ref.port}` : `GwBackend ${ns}/${ref.name}`;
    // A GwBackend's own spec.policies come after the GwPolicies targeting it, as for its routes.
    const embedded = be !== undefined ? embeddedContribution(be, backend) : undefined;
    const contributions = [...this.#contributions(own, "backend"), ...(embedded !== undefined ? [embedded] : [])]
      .map((c) => ({
        ...c,
        fields: Object.fromEntries(Object.entries(c.fields).filter(([k]) => REF_CONNECTION_FIELDS.has(k))),
      }))
      .filter((c) => Object.keys(c.fields).length > 0);
    if (contributions.length === 0) return undefined;
    const merged = mergeContributions(contributions, false);
    this.#record(gateway, own, "backend", merged, notApplied, { backend });
    // What else those GwPolicies set does nothing on these calls: said in status (xds/backend-connection.ts).
    const unserved = own.flatMap((a) =>
      Object.keys(a.view.sections.backend ?? {})
        .filter((k) => !REF_CONNECTION_FIELDS.has(k))
        .map((field) => ({
          from: { kind: "GwPolicy" as const, name: a.view.key, level: a.level, target: a.target },
          field,
        })),
    );
    return nonEmpty(merged.policy) ? { policy: merged.policy, unserved } : undefined;
  }

  /**
   * The connection part of the backend policies of the OTLP collectors a Gateway port's frontend policy names
   * (`tracing.backendRef`, `accessLog.otlp.backendRef`), keyed by refBackendKey: Envoy's exports (and Sluice's span
   * relay) reach the collector with its Service's or static GwBackend's TLS, TCP and HTTP version
   * (xds/frontend-collector.ts).
   */
  #collectorBackends(
    gateway: string,
    frontend: EffectivePolicyIR,
    notApplied: SiteNotApplied[],
  ): Readonly<Record<string, RefBackendIR>> | undefined {
    let out: Record<string, RefBackendIR> | undefined;
    for (const [field, at] of COLLECTOR_REFS) {
      const f = frontend[field];
      if (f === undefined || "combined" in f) continue;
      const value = at(f.value);
      if (!isRecord(value) || typeof value.name !== "string") continue;
      const policyNs = f.from.name.split("/")[0] ?? "";
      // A collector's GwBackend may leave its group out (xds/frontend-collector.ts reads it so).
      const ref: RefInValue = {
        ...(value as unknown as RefInValue),
        ...(value.kind === "GwBackend" && value.group === undefined ? { group: SLUICE_GROUP } : {}),
      };
      const key = refBackendKey({ ...ref, namespace: ref.namespace ?? policyNs });
      if (out?.[key] !== undefined) continue;
      const own = this.#refBackend(gateway, ref, policyNs, notApplied);
      if (own !== undefined) out = { ...out, [key]: own };
    }
    return out;
  }

  #backendPolicy(
    gateway: string,
    routeNs: string,
    ref: { group?: string; kind?: string; name: string; namespace?: string; port?: number },
    routeLevel: readonly Attachment[],
    notApplied: SiteNotApplied[],
  ): BackendPolicyIR | undefined {
    const group = ref.group ?? "";
    const kind = ref.kind ?? "Service";
    const ns = ref.namespace ?? routeNs;
    const isService = group === "" && kind === "Service";
    const isBackend = (group === SLUICE_GROUP && kind === "GwBackend") || (group === "" && kind === "Backend");
    if (!isService && !isBackend) return undefined;
    // Policies follow traffic: a backendRef the route may not use (no ReferenceGrant) carries none.
    const refKind = isService ? "Service" : "GwBackend";
    const to = { group: isService ? "" : SLUICE_GROUP, kind: refKind, namespace: ns, name: ref.name };
    if (!referenceAllowed(this.#input, { group: GATEWAY_API_GROUP, kind: "HTTPRoute", namespace: routeNs }, to)) {
      return undefined;
    }

    if (isService) {
      const svc = this.#service(ns, ref.name);
      if (svc === undefined || ref.port === undefined) return undefined;
      const own = [
        ...this.#at({ kind: "Service", namespace: ns, name: ref.name }),
        ...this.#at({ kind: "Service", namespace: ns, name: ref.name, section: String(ref.port) }),
      ];
      const backend = `Service ${ns}/${ref.name} port ${ref.port}`;
      const reached = [...routeLevel, ...own];
      const merged = this.#merged(reached, "backend");
      this.#record(gateway, reached, "backend", merged, notApplied, { backend });
      if (!nonEmpty(merged.policy)) return undefined;
      return { backend, cluster: serviceClusterName(ns, ref.name, ref.port), policy: merged.policy };
    }

    const be = this.#backend(ns, ref.name);
    if (be === undefined) return undefined;
    const backend = `GwBackend ${ns}/${ref.name}`;
    const whole = [...routeLevel, ...this.#at({ kind: "GwBackend", namespace: ns, name: ref.name })];
    const embedded = embeddedContribution(be, backend);
    const base = [...this.#contributions(whole, "backend"), ...(embedded !== undefined ? [embedded] : [])];
    const merged = mergeContributions(base, false);
    this.#record(gateway, whole, "backend", merged, notApplied, { backend });

    const subBackends: SubBackendPolicyIR[] = [];
    for (const sub of subBackendsOf(be)) {
      const own = this.#at({ kind: "GwBackend", namespace: ns, name: ref.name, section: sub.name });
      const contributions = [...base, ...this.#contributions(own, "backend")];
      if (sub.policies !== undefined) {
        contributions.push({
          source: {
            kind: "GwBackend",
            name: `${ns}/${ref.name}`,
            level: "subBackend",
            target: `${backend} ${sub.type} ${sub.name}`,
          },
          fields: sub.policies,
          override: false,
        });
      }
      const subMerged = mergeContributions(contributions, false);
      // Only the sub-backend's own attachments are recorded here; the shared ones were recorded with `merged`.
      const subOnly = { ...subMerged, applied: subMerged.applied.filter((x) => own.some((a) => a.view === x.view)) };
      this.#record(gateway, own, "backend", subOnly, [], {});
      // Values that already lost for the backend as a whole are reported once, there.
      const known = new Set(merged.notApplied.map(notAppliedId));
      for (const n of subMerged.notApplied) {
        if (known.has(notAppliedId(n))) continue;
        notApplied.push({
          section: "backend",
          backend,
          subBackend: sub.name,
          from: n.from,
          ...(n.field !== undefined ? { field: n.field } : {}),
          kind: n.kind,
          reason: n.reason,
        });
      }
      if (nonEmpty(subMerged.policy)) subBackends.push({ name: sub.name, policy: subMerged.policy });
    }
    if (!nonEmpty(merged.policy) && subBackends.length === 0) return undefined;
    return {
      backend,
      cluster: backendClusterName(ns, ref.name),
      policy: merged.policy,
      ...(subBackends.length > 0 ? { subBackends } : {}),
    };
  }

  /** Status of every GwPolicy, one entry per ancestor (Gateway API policy attachment). */
  statuses(): ResourceStatus[] {
    return policyStatuses({
      views: this.#views,
      attachments: this.#attachments,
      rejections: this.#rejections,
      servedGateways: this.#servedGateways,
      tracker: this.#tracker,
      ...(this.#memo !== undefined ? { memo: this.#memo.statuses } : {}),
    });
  }

  /** Everything `sluice explain` shows: the effective policy per route rule and listener, and rejected targets. */
  report(): PolicyReport {
    const rejected: RejectedTarget[] = this.#rejections.map((r) => ({
      policy: r.view.key,
      targetRef: r.targetRef,
      reason: r.reason,
      message: r.message,
    }));
    for (const v of this.#views) {
      if (v.problems.length === 0) continue;
      for (const t of v.targets) {
        rejected.push({
          policy: v.key,
          targetRef: { group: t.group, kind: t.kind, namespace: v.namespace, name: t.name ?? "(selector)" },
          reason: "Invalid",
          message: v.problems.join("; "),
        });
      }
    }
    const str = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    for (const sites of this.#replayedSites.splice(0)) for (const o of sites) this.#routeSites.set(o.key, o.site);
    const routes = [...this.#routeSites.values()].sort(
      (a, b) => str(a.route, b.route) || a.rule - b.rule || str(a.gateway, b.gateway) || str(a.listener, b.listener),
    );
    const listeners = [...this.#listenerSites.values()].sort((a, b) => str(a.gateway, b.gateway) || a.port - b.port);
    rejected.sort((a, b) => str(a.policy, b.policy) || str(JSON.stringify(a.targetRef), JSON.stringify(b.targetRef)));
    return { routes, listeners, rejected };
  }
}

const NONE: readonly Attachment[] = [];

/**
 * What the engine reads of a Service (that it exists) or a GwBackend (its own policies and sub-backends) named by a
 * backendRef, so a trace is still valid when the object changed elsewhere (ports, endpoints, addresses).
 */
function objectView(kind: "Service" | "GwBackend", o: Service | GwBackend | undefined): string {
  if (o === undefined) return "";
  if (kind === "Service") return "exists";
  const spec: unknown = o.spec;
  return JSON.stringify([isRecord(spec) ? spec["policies"] : undefined, subBackendsOf(o as GwBackend)]) ?? "";
}

type RouteSiteOp = { readonly op: "site"; readonly key: string; readonly site: RouteSite };

type EngineOp =
  | { readonly op: "reach"; readonly a: Attachment; readonly gateway: string }
  | { readonly op: "applied"; readonly view: PolicyView; readonly gateway: string; readonly field: string }
  | { readonly op: "notApplied"; readonly view: PolicyView; readonly gateway: string; readonly n: NotApplied }
  | RouteSiteOp;

const NO_OPS: readonly EngineOp[] = [];
const NOTHING_NOT_APPLIED: readonly SiteNotApplied[] = [];

/** What the engine read (attachment points, Services and GwBackends by name) and did while tracing. */
export interface EngineTrace {
  /** Attachment points looked up and what was found there: key, attachments, key, attachments... (one flat list). */
  readonly points: readonly (string | readonly Attachment[])[];
  /** Services and GwBackends looked up by namespace and name, with what was read of them (objectView). */
  readonly objects: readonly (readonly ["Service" | "GwBackend", string, string, string])[];
  /** Set additions (reach, applied), with a key that tells equal lists apart from others. */
  readonly shared: { readonly key: string; readonly ops: readonly EngineOp[] };
  /** Not-applied entries, in order. */
  readonly own: readonly EngineOp[];
  /** The route sites recorded (for `sluice explain`). */
  readonly sites: readonly RouteSiteOp[];
}

function notAppliedId(n: NotApplied): string {
  return `${n.from.kind}|${n.from.name}|${n.from.level}|${n.field ?? ""}|${n.reason}`;
}

function nonEmptyRoutePolicy(p: RoutePolicyIR): RoutePolicyIR | undefined {
  return Object.keys(p).length > 0 ? p : undefined;
}

/** A GwBackend's own `spec.policies`, which win over GwPolicy resources (spec: Merge and precedence rule 6). */
function embeddedContribution(be: GwBackend, backend: string): Contribution | undefined {
  const spec: unknown = be.spec;
  const policies = isRecord(spec) ? spec["policies"] : undefined;
  if (!isRecord(policies)) return undefined;
  return {
    source: { kind: "GwBackend", name: `${namespaceOf(be)}/${be.metadata.name}`, level: "gwBackend", target: backend },
    fields: policies,
    override: false,
  };
}

/** The key of a traffic field's backendRef in RoutePolicyIR.refBackends (policy/refs.ts looks it up). */
export function refBackendKey(ref: {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace: string;
  readonly port?: number;
}): string {
  const service = (ref.group ?? "") === "" && (ref.kind ?? "Service") === "Service";
  return service ? `Service/${ref.namespace}/${ref.name}/${ref.port}` : `GwBackend/${ref.namespace}/${ref.name}`;
}

/** The frontend fields that name an OTLP collector, and where their backendRef is (#collectorBackends). */
const COLLECTOR_REFS: readonly (readonly [string, (v: unknown) => unknown])[] = [
  ["tracing", (v) => (isRecord(v) ? v["backendRef"] : undefined)],
  ["accessLog", (v) => (isRecord(v) && isRecord(v["otlp"]) ? v["otlp"]["backendRef"] : undefined)],
];

/** Backend policy fields that apply to Envoy's calls to a service a traffic field names (#refBackendPolicies). */
const REF_CONNECTION_FIELDS: ReadonlySet<string> = new Set(["tls", "tcp", "http"]);

interface RefInValue {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
}

/** Every `backendRef` object inside a traffic field's value (as policy/refs.ts finds them). */
function backendRefsIn(v: unknown): RefInValue[] {
  const out: RefInValue[] = [];
  const walk = (x: unknown): void => {
    if (Array.isArray(x)) for (const y of x) walk(y);
    else if (typeof x === "object" && x !== null) {
      for (const [k, y] of Object.entries(x)) {
        if (k === "backendRef" && typeof y === "object" && y !== null && typeof (y as RefInValue).name === "string") {
          out.push(y as RefInValue);
        } else walk(y);
      }
    }
  };
  walk(v);
  return out;
}
