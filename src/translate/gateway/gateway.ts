// Gateway (+ ListenerSet) and HTTPRoute → IR, with Gateway API status. Pure: never does I/O, never throws on input.

import {
  GATEWAY_API_GROUP,
  GATEWAY_API_X_GROUP,
  type Gateway,
  type GRPCRoute,
  type HTTPRoute,
  type Listener,
  type ListenerSet,
  type ParentReference,
  SLUICE_CONTROLLER_NAME,
} from "../../api/gateway-api.js";
import { describeResource, namespaceOf } from "../../api/resource.js";
import { BackendResolver } from "../backend/resolve.js";
import type { TranslationInput } from "../input.js";
import type { FilterChainIR, GatewayIR, ListenerIR, RouteConfigIR, RouteIR, SecretIR, VirtualHostIR } from "../ir.js";
import { gatewayKey, listenerChainName, listenerName, routeConfigName, virtualHostName } from "../names.js";
import type { PolicyEngine } from "../policy/engine.js";
import { resolvePolicyRefs } from "../policy/refs.js";
import { asHTTPRoute } from "../route/grpcroute.js";
import { intersectHostnames } from "../route/hostnames.js";
import { type TranslatedRule, translateHTTPRouteRules } from "../route/httproute.js";
import { compareMatches, type RankedMatch } from "../route/precedence.js";
import {
  type Condition,
  condition,
  GatewayConditionReason,
  ListenerConditionReason,
  type ResourceStatus,
  RouteConditionReason,
} from "../status/conditions.js";
import { gatewayAddresses } from "./addresses.js";
import { resolveCertificates } from "./certificates.js";
import { gatewayClassStatuses } from "./class-status.js";
import { inferencePoolStatuses } from "./inference-pool-status.js";
import type { GatewayRouteMemo, RouteOutcome } from "./route-memo.js";

export interface GatewayTranslateOptions {
  /** File mode: a GatewayClass named `sluice` with Sluice's controller is implied when the input defines none. */
  readonly impliedGatewayClass: boolean;
  /** Listeners bind the Gateway's first `spec.addresses` value (file mode), else 0.0.0.0 (translate.ts says why). */
  readonly listenOnGatewayAddress?: boolean;
  /** Attaches effective policies to listeners and routes; without it the IR carries no policy. */
  readonly policies?: PolicyEngine;
  /** The agent runtime endpoint override (TranslateOptions.agentCoreEndpoint). */
  readonly agentCoreEndpoint?: string;
  /** Route outcomes of earlier translations (src/translate/memo.ts); the result is the same with or without it. */
  readonly memo?: {
    routesOf(gateway: string, fingerprint: string): GatewayRouteMemo;
    readonly resolutionsSame: boolean;
    /** namespace/name used by more than one route. */
    readonly sharedRouteNames: ReadonlySet<string>;
  };
}

export interface GatewaysResult {
  readonly gateways: readonly GatewayIR[];
  readonly statuses: readonly ResourceStatus[];
}

export interface AttachedListener {
  readonly listener: Listener;
  /** The Gateway listener's name, or `<listenerset>/<name>` for ListenerSet listeners. */
  readonly sectionName: string;
  readonly namespace: string;
  readonly fromListenerSet: boolean;
  /** The ListenerSet the listener comes from. */
  readonly listenerSet?: ListenerSet;
}

interface ListenerState {
  readonly att: AttachedListener;
  readonly conditions: Condition[];
  attachedRoutes: number;
  valid: boolean;
  /** The route configuration this listener's routes go to: per port for HTTP, per listener for HTTPS. */
  routeConfigName: string;
  /** SDS secret names of an HTTPS listener's certificates. */
  secrets: string[];
}

const DEFAULT_ADDRESS = "0.0.0.0";

function controlledClasses(
  input: TranslationInput,
  opts: Pick<GatewayTranslateOptions, "impliedGatewayClass">,
): Set<string> {
  const names = new Set(
    input.gatewayClasses.filter((c) => c.spec.controllerName === SLUICE_CONTROLLER_NAME).map((c) => c.metadata.name),
  );
  if (opts.impliedGatewayClass && input.gatewayClasses.length === 0) names.add("sluice");
  return names;
}

export function refersToGateway(ref: ParentReference, routeNs: string, gw: Gateway): boolean {
  return (
    (ref.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP &&
    (ref.kind ?? "Gateway") === "Gateway" &&
    (ref.namespace ?? routeNs) === namespaceOf(gw) &&
    ref.name === gw.metadata.name
  );
}

export function namespaceAllowed(input: TranslationInput, l: AttachedListener, routeNs: string): boolean {
  const from = l.listener.allowedRoutes?.namespaces?.from ?? "Same";
  if (from === "All") return true;
  if (from === "Same") return routeNs === l.namespace;
  const selector = l.listener.allowedRoutes?.namespaces?.selector;
  const ns = input.namespaces.find((n) => n.metadata.name === routeNs);
  const labels: Record<string, string> = { "kubernetes.io/metadata.name": routeNs, ...(ns?.metadata.labels ?? {}) };
  const matchLabels = selector?.matchLabels ?? {};
  if (!Object.entries(matchLabels).every(([k, v]) => labels[k] === v)) return false;
  return (selector?.matchExpressions ?? []).every((e) => {
    const v = labels[e.key];
    switch (e.operator) {
      case "In":
        return v !== undefined && (e.values ?? []).includes(v);
      case "NotIn":
        return v === undefined || !(e.values ?? []).includes(v);
      case "Exists":
        return v !== undefined;
      case "DoesNotExist":
        return v === undefined;
    }
    return false;
  });
}

function kindAllowed(l: Listener, kind: "HTTPRoute" | "GRPCRoute"): boolean {
  const kinds = l.allowedRoutes?.kinds;
  if (kinds === undefined || kinds.length === 0) return true;
  return kinds.some((k) => (k.group ?? GATEWAY_API_GROUP) === GATEWAY_API_GROUP && k.kind === kind);
}

function gatewayListeners(input: TranslationInput, gw: Gateway): AttachedListener[] {
  const ns = namespaceOf(gw);
  const out: AttachedListener[] = gw.spec.listeners.map((listener) => ({
    listener,
    sectionName: listener.name,
    namespace: ns,
    fromListenerSet: false,
  }));
  for (const ls of input.listenerSets) {
    const p = ls.spec.parentRef;
    const group = p.group ?? GATEWAY_API_GROUP;
    if (group !== GATEWAY_API_GROUP && group !== GATEWAY_API_X_GROUP) continue;
    if ((p.kind ?? "Gateway") !== "Gateway" || (p.namespace ?? namespaceOf(ls)) !== ns || p.name !== gw.metadata.name) {
      continue;
    }
    for (const listener of ls.spec.listeners) {
      out.push({
        listener,
        sectionName: listener.name,
        namespace: namespaceOf(ls),
        fromListenerSet: true,
        listenerSet: ls,
      });
    }
  }
  return out;
}

/** The Gateways Sluice serves (its GatewayClasses), in the order they are translated. */
export function servedGateways(input: TranslationInput, impliedGatewayClass: boolean): Gateway[] {
  const classes = controlledClasses(input, { impliedGatewayClass });
  return input.gateways
    .filter((g) => classes.has(g.spec.gatewayClassName))
    .sort((a, b) => describeResource(a).localeCompare(describeResource(b)));
}

/**
 * The listeners of a Gateway (its own and its ListenerSets') with whether each is valid, checked as translateGateways
 * checks them: what other resources attaching to listeners (GwModel parentRefs) resolve against.
 */
export function gatewayListenerStates(
  input: TranslationInput,
  gw: Gateway,
): readonly { readonly att: AttachedListener; readonly valid: boolean }[] {
  const listeners: ListenerState[] = gatewayListeners(input, gw).map((att) => ({
    att,
    conditions: [],
    attachedRoutes: 0,
    valid: true,
    routeConfigName: "",
    secrets: [],
  }));
  validateListeners(listeners, (l) => resolveCertificates(input, gw, l.att.listener, l.att.namespace));
  return listeners.map((l) => ({ att: l.att, valid: l.valid }));
}

/** Translates every Gateway served by Sluice, with the HTTPRoutes attached to it. */
export function translateGateways(input: TranslationInput, opts: GatewayTranslateOptions): GatewaysResult {
  const gateways: GatewayIR[] = [];
  const statuses: ResourceStatus[] = [];
  // Route status accumulates a parent entry per (route, parentRef) over all Gateways.
  const routeParents = new Map<HTTPRoute | GRPCRoute, readonly unknown[]>();
  // The same with a single Gateway, without a map of every route (a large object on every translation).
  const routeSources: (HTTPRoute | GRPCRoute)[] = [];
  const routeParentLists: (readonly unknown[])[] = [];

  // Routes sharing a namespace/name with another route (of either kind) share policy sites, so each depends on the
  // other: they are never memoized.
  const sharedNames = opts.memo?.sharedRouteNames;
  const shared = (r: HTTPRoute | GRPCRoute) =>
    sharedNames !== undefined && sharedNames.size > 0 && sharedNames.has(`${namespaceOf(r)}/${r.metadata.name}`);

  const ours = servedGateways(input, opts.impliedGatewayClass);

  for (const gw of ours) {
    const key = gatewayKey(namespaceOf(gw), gw.metadata.name);
    const resolver = new BackendResolver(input, key, opts.agentCoreEndpoint);
    const listeners: ListenerState[] = gatewayListeners(input, gw).map((att) => ({
      att,
      conditions: [],
      attachedRoutes: 0,
      valid: true,
      routeConfigName:
        att.listener.protocol === "HTTPS"
          ? listenerChainName(key, att.listener.port, att.sectionName)
          : routeConfigName(key, att.listener.port),
      secrets: [],
    }));
    const secrets = new Map<string, SecretIR>();
    validateListeners(listeners, (l) => {
      const certs = resolveCertificates(input, gw, l.att.listener, l.att.namespace);
      if (!certs.ok) return certs;
      for (const c of certs.secrets) secrets.set(c.name, c);
      l.secrets = certs.secrets.map((c) => c.name);
      return certs;
    });

    // route configuration -> host name -> ranked routes
    const hostsByConfig = new Map<string, Map<string, { ranked: RankedMatch; route: RouteIR }[]>>();
    for (const l of listeners)
      if (l.valid && !hostsByConfig.has(l.routeConfigName)) hostsByConfig.set(l.routeConfigName, new Map());

    const routeMemo = opts.memo?.routesOf(key, listenerFingerprint(input, gw, listeners));
    const hasConfig = (name: string) => hostsByConfig.has(name);
    const apply = (source: HTTPRoute | GRPCRoute, outcome: RouteOutcome) => {
      if (outcome.parents.length > 0) {
        // A route naming one Gateway has that outcome's parents as its status (so a reused outcome reuses its status).
        if (ours.length === 1) {
          // Each route is applied once per Gateway: with one Gateway, no route needs its parents merged.
          routeSources.push(source);
          routeParentLists.push(outcome.parents);
        } else {
          const parents = routeParents.get(source);
          if (parents === undefined) routeParents.set(source, outcome.parents);
          else routeParents.set(source, [...parents, ...outcome.parents]);
        }
      }
      for (const i of outcome.attached) {
        const l = listeners[i];
        if (l !== undefined) l.attachedRoutes++;
      }
      for (const s of outcome.served) {
        const byHost = hostsByConfig.get(s.config);
        if (byHost === undefined) continue;
        const list = byHost.get(s.host) ?? [];
        byHost.set(s.host, list);
        for (const r of s.rules) list.push(r);
      }
    };
    const attachContext: AttachContext = { input, gw, key, listeners, hasConfig, resolver, policies: opts.policies };
    const attach = (kind: "HTTPRoute" | "GRPCRoute", source: HTTPRoute | GRPCRoute) =>
      attachRoute(attachContext, kind, kind === "GRPCRoute" ? asHTTPRoute(source as GRPCRoute) : (source as HTTPRoute));
    const attachOne = (kind: "HTTPRoute" | "GRPCRoute", source: HTTPRoute | GRPCRoute) => {
      const known = routeMemo?.get(source);
      // A memoized route names this Gateway (only those are kept); any other must be checked.
      if (known === undefined) {
        const routeNs = namespaceOf(source);
        if (!(source.spec.parentRefs ?? []).some((ref) => refersToGateway(ref, routeNs, gw))) return;
      }
      if (routeMemo === undefined || shared(source)) {
        apply(source, attach(kind, source));
        return;
      }
      if (
        known !== undefined &&
        (known.engine === undefined) === (opts.policies === undefined) &&
        (known.engine === undefined || opts.policies?.unchanged(known.engine) === true) &&
        (opts.memo?.resolutionsSame === true
          ? resolver.register(known.resolutions)
          : resolver.resolvesSame(known.resolutions))
      ) {
        if (known.engine !== undefined) opts.policies?.replay(known.engine);
        routeMemo.keep(source, known);
        routeMemo.hits++;
        apply(source, known.outcome);
        return;
      }
      resolver.startTrace();
      opts.policies?.startTrace();
      const outcome = attach(kind, source);
      const engine = opts.policies?.stopTrace();
      routeMemo.keep(source, { outcome, engine, resolutions: resolver.stopTrace() });
      routeMemo.misses++;
      apply(source, outcome);
    };
    for (const source of input.httpRoutes) attachOne("HTTPRoute", source);
    for (const source of input.grpcRoutes) attachOne("GRPCRoute", source);

    const routeConfigs: RouteConfigIR[] = [];
    for (const [name, byHost] of [...hostsByConfig.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const virtualHosts: VirtualHostIR[] = [];
      for (const host of [...byHost.keys()].sort(hostOrder)) {
        const entries = byHost.get(host) ?? [];
        const vhName = virtualHostName(name, host);
        const routes = routeMemo?.ordered(vhName, entries, orderRoutes) ?? orderRoutes(entries);
        virtualHosts.push({ name: vhName, domains: [host], routes });
      }
      routeConfigs.push({ name, virtualHosts });
    }
    const address =
      ((opts.listenOnGatewayAddress ?? true) ? gw.spec.addresses?.[0]?.value : undefined) ?? DEFAULT_ADDRESS;
    const irListeners: ListenerIR[] = [];
    const ports = [...new Set(listeners.filter((l) => l.valid).map((l) => l.att.listener.port))].sort((a, b) => a - b);
    for (const port of ports) {
      const onPort = listeners.filter((l) => l.valid && l.att.listener.port === port);
      const https = onPort[0]?.att.listener.protocol === "HTTPS";
      const filterChains: FilterChainIR[] = https
        ? onPort
            .map((l) => ({
              name: l.routeConfigName,
              serverNames: l.att.listener.hostname !== undefined ? [l.att.listener.hostname.toLowerCase()] : [],
              tls: { secrets: l.secrets },
              routeConfigName: l.routeConfigName,
            }))
            .sort((a, b) => (a.name < b.name ? -1 : 1))
        : [{ name: routeConfigName(key, port), serverNames: [], routeConfigName: routeConfigName(key, port) }];
      irListeners.push({
        name: listenerName(key, port),
        address,
        port,
        protocol: https ? "HTTPS" : "HTTP",
        filterChains,
        ...opts.policies?.listenerFields(gw, port),
      });
    }

    gateways.push({
      key,
      listeners: irListeners,
      routeConfigs,
      clusters: resolver.clusters(),
      secrets: [...secrets.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
    });
    statuses.push(gatewayStatus(input, gw, listeners));
    statuses.push(...listenerSetStatuses(listeners));
  }

  const routeStatus = (parents: readonly unknown[], route: HTTPRoute | GRPCRoute) => {
    let status = routeStatuses.get(parents);
    if (status?.kind !== route.kind || status.name !== route.metadata.name || status.namespace !== namespaceOf(route)) {
      status = { kind: route.kind, namespace: namespaceOf(route), name: route.metadata.name, status: { parents } };
      routeStatuses.set(parents, status);
    }
    statuses.push(status);
  };
  routeParents.forEach(routeStatus);
  routeSources.forEach((route, i) => {
    routeStatus(routeParentLists[i] ?? [], route);
  });
  statuses.push(...gatewayClassStatuses(input.gatewayClasses), ...inferencePoolStatuses(gateways));
  return { gateways, statuses };
}

/** The status of a route by its parents list: a route whose outcome is reused keeps its status object. */
const routeStatuses = new WeakMap<readonly unknown[], ResourceStatus>();

interface AttachContext {
  readonly input: TranslationInput;
  readonly gw: Gateway;
  readonly key: string;
  readonly listeners: readonly ListenerState[];
  /** Whether a route configuration of that name is served (a valid listener uses it). */
  readonly hasConfig: (name: string) => boolean;
  readonly resolver: BackendResolver;
  readonly policies: PolicyEngine | undefined;
}

/** Attaches one route to the listeners of one Gateway its parentRefs name: status, attachments, rules served. */
function attachRoute(c: AttachContext, routeKind: "HTTPRoute" | "GRPCRoute", route: HTTPRoute): RouteOutcome {
  const { input, gw, key, listeners, resolver } = c;
  const routeNs = namespaceOf(route);
  const parents: unknown[] = [];
  const attached: number[] = [];
  const served: { config: string; host: string; rules: readonly TranslatedRule[] }[] = [];
  for (const ref of route.spec.parentRefs ?? []) {
    if (!refersToGateway(ref, routeNs, gw)) continue;
    const parentConditions: Condition[] = [];
    const candidates = listeners.filter(
      (l) =>
        (ref.sectionName === undefined || ref.sectionName === l.att.sectionName) &&
        (ref.port === undefined || ref.port === l.att.listener.port),
    );
    const attachments: { l: ListenerState; hosts: string[] }[] = [];
    let reason: string = RouteConditionReason.NoMatchingParent;
    let message = `no listener of Gateway ${key} matches sectionName/port of this parentRef`;
    for (const l of candidates) {
      if (!l.valid) continue;
      if (!kindAllowed(l.att.listener, routeKind)) {
        reason = RouteConditionReason.NotAllowedByListeners;
        message = `listener ${l.att.sectionName} of Gateway ${key} does not allow the ${routeKind} kind (allowedRoutes.kinds)`;
        continue;
      }
      if (!namespaceAllowed(input, l.att, routeNs)) {
        reason = RouteConditionReason.NotAllowedByListeners;
        message = `listener ${l.att.sectionName} of Gateway ${key} does not allow ${routeKind}s from namespace ${routeNs}`;
        continue;
      }
      const hosts = intersectHostnames(l.att.listener.hostname, route.spec.hostnames);
      if (hosts.length === 0) {
        reason = RouteConditionReason.NoMatchingListenerHostname;
        message = `no hostname of the route matches listener ${l.att.sectionName} (${l.att.listener.hostname})`;
        continue;
      }
      attachments.push({ l, hosts });
    }
    if (attachments.length === 0) {
      parentConditions.push(condition("Accepted", false, reason, message));
    } else {
      parentConditions.push(condition("Accepted", true, RouteConditionReason.Accepted, "attached"));
      const rules =
        routeKind === "GRPCRoute"
          ? translateHTTPRouteRules(route, resolver, { http2: true, kind: "grpcroute" })
          : translateHTTPRouteRules(route, resolver);
      parentConditions.push(
        rules.unresolved.length === 0
          ? condition("ResolvedRefs", true, RouteConditionReason.ResolvedRefs, "all references resolved")
          : condition(
              "ResolvedRefs",
              false,
              rules.unresolved[0]?.reason ?? RouteConditionReason.BackendNotFound,
              rules.unresolved.map((u) => u.message).join("; "),
            ),
      );
      for (const { l, hosts } of attachments) {
        attached.push(listeners.indexOf(l));
        if (!c.hasConfig(l.routeConfigName)) continue;
        const rulesServed = resolvePolicyRefs(
          c.policies?.attachToRules(gw, l.att, route, rules.routes, routeKind) ?? rules.routes,
          resolver,
        );
        for (const host of hosts) served.push({ config: l.routeConfigName, host, rules: rulesServed });
      }
    }
    parents.push({ parentRef: ref, controllerName: SLUICE_CONTROLLER_NAME, conditions: parentConditions });
  }
  return { parents, attached, served };
}

/**
 * Everything about a Gateway's listeners that attaching a route reads, as a string: when it changes, no memoized
 * route outcome of this Gateway is valid.
 */
function listenerFingerprint(input: TranslationInput, gw: Gateway, listeners: readonly ListenerState[]): string {
  const selector = listeners.some((l) => l.att.listener.allowedRoutes?.namespaces?.from === "Selector");
  return JSON.stringify([
    namespaceOf(gw),
    gw.metadata.name,
    listeners.map((l) => [
      l.att.sectionName,
      l.att.namespace,
      l.att.fromListenerSet
        ? (input.listenerSets.find((s) => (s.spec?.listeners ?? []).includes(l.att.listener))?.metadata.name ?? "")
        : null,
      l.att.listener,
      l.valid,
      l.routeConfigName,
    ]),
    selector ? input.namespaces.map((n) => [n.metadata.name, n.metadata.labels ?? {}]) : null,
  ]);
}

/** The routes of one virtual host in precedence order; the same rule reached through two listeners appears once. */
function orderRoutes(entries: readonly { ranked: RankedMatch; route: RouteIR }[]): RouteIR[] {
  const unique = new Map(entries.map((e) => [e.route.name, e]));
  return [...unique.values()].sort((a, b) => compareMatches(a.ranked, b.ranked)).map((e) => e.route);
}

/** Exact host names first, then wildcards from most to least specific, `*` last. */
function hostOrder(a: string, b: string): number {
  const wa = a === "*" ? 2 : a.startsWith("*.") ? 1 : 0;
  const wb = b === "*" ? 2 : b.startsWith("*.") ? 1 : 0;
  return wa - wb || b.length - a.length || (a < b ? -1 : a > b ? 1 : 0);
}

type CertificateCheck = { ok: true } | { ok: false; reason: string; message: string };

function validateListeners(
  listeners: ListenerState[],
  checkCertificates: (l: ListenerState) => CertificateCheck,
): void {
  const seenNames = new Set<string>();
  const hostsPerPort = new Map<number, Set<string>>();
  const protocolOfPort = new Map<number, string>();
  const reject = (l: ListenerState, c: Condition) => {
    l.valid = false;
    l.conditions.push(c);
    l.conditions.push(condition("Programmed", false, ListenerConditionReason.Invalid, c.message));
  };
  for (const l of listeners) {
    const { listener } = l.att;
    const id = `${l.att.fromListenerSet ? `ls:${l.att.namespace}:` : ""}${l.att.sectionName}`;
    if (seenNames.has(id)) {
      reject(
        l,
        condition("Accepted", false, ListenerConditionReason.Invalid, `listener name ${listener.name} is used twice`),
      );
      continue;
    }
    seenNames.add(id);
    if (listener.protocol !== "HTTP" && listener.protocol !== "HTTPS") {
      reject(
        l,
        condition(
          "Accepted",
          false,
          ListenerConditionReason.UnsupportedProtocol,
          `protocol ${listener.protocol} is not served; use HTTP or HTTPS`,
        ),
      );
      continue;
    }
    const portProtocol = protocolOfPort.get(listener.port);
    if (portProtocol !== undefined && portProtocol !== listener.protocol) {
      reject(
        l,
        condition(
          "Conflicted",
          true,
          ListenerConditionReason.ProtocolConflict,
          `port ${listener.port} already serves ${portProtocol}; one port cannot serve HTTP and HTTPS`,
        ),
      );
      continue;
    }
    const host = listener.hostname ?? "*";
    const hosts = hostsPerPort.get(listener.port) ?? new Set<string>();
    if (hosts.has(host)) {
      reject(
        l,
        condition(
          "Conflicted",
          true,
          ListenerConditionReason.HostnameConflict,
          `another listener on port ${listener.port} has hostname ${host}`,
        ),
      );
      continue;
    }
    if (listener.protocol === "HTTPS") {
      if ((listener.tls?.mode ?? "Terminate") !== "Terminate") {
        reject(
          l,
          condition(
            "Accepted",
            false,
            ListenerConditionReason.UnsupportedProtocol,
            "HTTPS listeners terminate TLS; tls.mode Passthrough needs a TLS listener and TLSRoute",
          ),
        );
        continue;
      }
      const certs = checkCertificates(l);
      if (!certs.ok) {
        l.valid = false;
        l.conditions.push(condition("Accepted", true, ListenerConditionReason.Accepted, "listener accepted"));
        l.conditions.push(condition("ResolvedRefs", false, certs.reason, certs.message));
        l.conditions.push(condition("Programmed", false, ListenerConditionReason.Invalid, certs.message));
        continue;
      }
    }
    protocolOfPort.set(listener.port, listener.protocol);
    hosts.add(host);
    hostsPerPort.set(listener.port, hosts);
    l.conditions.push(condition("Accepted", true, ListenerConditionReason.Accepted, "listener accepted"));
    l.conditions.push(condition("ResolvedRefs", true, ListenerConditionReason.ResolvedRefs, "all references resolved"));
    l.conditions.push(condition("Programmed", true, ListenerConditionReason.Programmed, "listener programmed"));
  }
}

const SUPPORTED_KINDS = [
  { group: GATEWAY_API_GROUP, kind: "HTTPRoute" },
  { group: GATEWAY_API_GROUP, kind: "GRPCRoute" },
] as const;

function listenerStatus(l: ListenerState) {
  return {
    name: l.att.sectionName,
    attachedRoutes: l.attachedRoutes,
    supportedKinds: SUPPORTED_KINDS,
    conditions: l.conditions,
  };
}

/**
 * Accepted and Programmed of a Gateway or a ListenerSet from its listeners: accepted when any is valid (a Gateway
 * with none at all too), programmed when any is served.
 */
function listenersConditions(listeners: readonly ListenerState[], acceptedMessage: string): Condition[] {
  const anyValid = listeners.some((l) => l.valid);
  const allValid = listeners.every((l) => l.valid);
  return [
    condition(
      "Accepted",
      anyValid || listeners.length === 0,
      allValid ? GatewayConditionReason.Accepted : GatewayConditionReason.ListenersNotValid,
      allValid ? acceptedMessage : "some listeners are not valid; see status.listeners",
    ),
    condition(
      "Programmed",
      anyValid,
      anyValid ? GatewayConditionReason.Programmed : GatewayConditionReason.Invalid,
      anyValid ? "served over xDS" : "no valid listener",
    ),
  ];
}

/** The status of each ListenerSet attached to a Gateway: its listeners, as the Gateway's own are reported. */
function listenerSetStatuses(listeners: readonly ListenerState[]): ResourceStatus[] {
  const bySet = new Map<ListenerSet, ListenerState[]>();
  for (const l of listeners) {
    const ls = l.att.listenerSet;
    if (ls === undefined) continue;
    const list = bySet.get(ls) ?? [];
    list.push(l);
    bySet.set(ls, list);
  }
  return [...bySet].map(([ls, own]) => {
    return {
      kind: ls.kind,
      namespace: namespaceOf(ls),
      name: ls.metadata.name,
      status: {
        conditions: listenersConditions(own, "attached to its Gateway"),
        // XListenerSet (v1alpha1) also requires each listener's port; ListenerSet (v1) has no such field.
        listeners: own.map((l) =>
          ls.kind === "XListenerSet" ? { ...listenerStatus(l), port: l.att.listener.port } : listenerStatus(l),
        ),
      },
    };
  });
}

function gatewayStatus(input: TranslationInput, gw: Gateway, listeners: readonly ListenerState[]): ResourceStatus {
  const conditions = listenersConditions(listeners, "Gateway accepted");
  const addresses = gatewayAddresses(input, gw);
  return {
    kind: "Gateway",
    namespace: namespaceOf(gw),
    name: gw.metadata.name,
    status: {
      ...(addresses.length > 0 ? { addresses } : {}),
      conditions,
      listeners: listeners.filter((l) => !l.att.fromListenerSet).map(listenerStatus),
    },
  };
}
