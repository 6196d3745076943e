// What the web console shows, as one JSON document built from what the server already holds: the last load and its
// translation (Gateways, listeners, routes, effective policies with provenance, backends; statuses and problems), the
// xDS server's view of connected Envoys (ACK / NACK per type with Envoy's text), and usage from /metrics.

import type { Gateway, HTTPRoute } from "../api/gateway-api.js";
import { namespaceOf, type Resource } from "../api/resource.js";
import type { LoadResult } from "../sources/file-source.js";
import type { ListenerSite, RouteSite } from "../translate/policy/engine.js";
import type { TranslationResult } from "../translate/translate.js";
import type { XdsServerStatus } from "../xds-server/index.js";
import type { Usage } from "./usage.js";

export interface ConsoleInput {
  readonly load: LoadResult | undefined;
  readonly result: TranslationResult | undefined;
  readonly xds: XdsServerStatus;
  readonly usage: Usage;
  readonly lastReloadAt: Date | undefined;
}

/** One thing wrong, with where: a resource, a field path, and (for file problems) file and line. */
export interface ConsoleProblem {
  readonly severity: "error" | "warning";
  readonly resource: string;
  readonly path: string;
  readonly message: string;
  /** `file:line` for a problem found reading the files; the condition's type and reason for a status. */
  readonly where: string;
  readonly consequence?: string;
}

export interface ConsoleResource {
  readonly kind: string;
  readonly name: string;
  readonly problems: readonly ConsoleProblem[];
  readonly conditions: readonly Condition[];
}

interface Condition {
  readonly type: string;
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
}

const RESOURCE_KEY = /^(\S+) (\S+)$/;

/** Conditions anywhere in a status (a Gateway's listeners, a route's parents, a policy's ancestors). */
function conditionsOf(v: unknown, out: Condition[] = []): Condition[] {
  if (Array.isArray(v)) for (const x of v) conditionsOf(x, out);
  else if (typeof v === "object" && v !== null) {
    const o = v as Record<string, unknown>;
    if (typeof o["type"] === "string" && typeof o["status"] === "string") {
      out.push({
        type: o["type"],
        status: o["status"],
        ...(typeof o["reason"] === "string" ? { reason: o["reason"] } : {}),
        ...(typeof o["message"] === "string" ? { message: o["message"] } : {}),
      });
    } else for (const x of Object.values(o)) conditionsOf(x, out);
  }
  return out;
}

/** A condition that says something is wrong: False, or a Warning that is True. */
function isBad(c: Condition): boolean {
  return c.status === "False" || (c.type === "Warning" && c.status === "True");
}

/** A field path a status message starts with (`spec.rules[0].x: ...`), else "". */
function pathOfMessage(m: string | undefined): string {
  return /^((?:spec|metadata)(?:\.[A-Za-z0-9_-]+|\[\d+\])+):/.exec(m ?? "")?.[1] ?? "";
}

export function resourcesView(load: LoadResult | undefined, result: TranslationResult | undefined): ConsoleResource[] {
  const byKey = new Map<string, { kind: string; name: string; problems: ConsoleProblem[]; conditions: Condition[] }>();
  const entry = (kind: string, name: string) => {
    const k = `${kind} ${name}`;
    let e = byKey.get(k);
    if (e === undefined) {
      e = { kind, name, problems: [], conditions: [] };
      byKey.set(k, e);
    }
    return e;
  };
  for (const p of load?.problems ?? []) {
    const m = RESOURCE_KEY.exec(p.resource ?? "");
    const e = m !== null ? entry(m[1] ?? "", m[2] ?? "") : entry("File", p.file);
    e.problems.push({
      severity: p.severity,
      resource: p.resource ?? p.file,
      path: p.path,
      message: p.message,
      where: `${p.file}:${p.line}`,
      ...(p.consequence !== undefined ? { consequence: p.consequence } : {}),
    });
  }
  for (const s of result?.statuses ?? []) {
    const name = s.namespace !== "" ? `${s.namespace}/${s.name}` : s.name;
    const e = entry(s.kind, name);
    const conditions = conditionsOf(s.status);
    e.conditions.push(...conditions);
    for (const c of conditions.filter(isBad))
      e.problems.push({
        severity: c.status === "False" ? "error" : "warning",
        resource: `${s.kind} ${name}`,
        path: pathOfMessage(c.message),
        message: c.message ?? "",
        where: `${c.type}=${c.status}${c.reason !== undefined ? ` (${c.reason})` : ""}`,
      });
  }
  const rank = (r: ConsoleResource) =>
    r.problems.some((p) => p.severity === "error") ? 0 : r.problems.length > 0 ? 1 : 2;
  return [...byKey.values()].sort(
    (a, b) => rank(a) - rank(b) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : a.name < b.name ? -1 : 1),
  );
}

export interface ConsoleGateway {
  readonly name: string;
  readonly listeners: readonly {
    readonly name: string;
    readonly port: number;
    readonly protocol: string;
    readonly hostname?: string;
    /** The frontend policy of the listener's port (Envoy has one listener per port), with where each field came from. */
    readonly frontend?: ListenerSite["policy"]["frontend"];
    readonly routes: readonly ConsoleRoute[];
  }[];
}

export interface ConsoleRoute {
  readonly name: string;
  readonly hostnames: readonly string[];
  readonly rules: readonly {
    readonly index: number;
    readonly name?: string;
    readonly matches: unknown;
    /** backendRefs as written: kind, name, port, weight. */
    readonly backendRefs: readonly string[];
    readonly policy: RouteSite["policy"];
    readonly notApplied: RouteSite["notApplied"];
  }[];
}

function backendRefText(ref: {
  readonly group?: string;
  readonly kind?: string;
  readonly name: string;
  readonly namespace?: string;
  readonly port?: number;
  readonly weight?: number;
}): string {
  const kind = ref.kind ?? "Service";
  const ns = ref.namespace !== undefined ? `${ref.namespace}/` : "";
  return `${kind} ${ns}${ref.name}${ref.port !== undefined ? ` port ${ref.port}` : ""}${ref.weight !== undefined ? ` weight ${ref.weight}` : ""}`;
}

export function gatewaysView(load: LoadResult | undefined, result: TranslationResult | undefined): ConsoleGateway[] {
  const resources: readonly Resource[] = load?.resources ?? [];
  const routes = new Map(
    resources
      .filter((r): r is HTTPRoute => r.kind === "HTTPRoute")
      .map((r) => [`${namespaceOf(r)}/${r.metadata.name}`, r]),
  );
  const sites = result?.policies.routes ?? [];
  const served = new Set(result?.gateways.map((g) => g.key) ?? []);
  const gateways = resources
    .filter((r): r is Gateway => r.kind === "Gateway")
    .map((g) => `${namespaceOf(g)}/${g.metadata.name}`)
    .filter((k) => served.size === 0 || served.has(k));
  return gateways.sort().map((key) => {
    const gw = resources.find(
      (r): r is Gateway => r.kind === "Gateway" && `${namespaceOf(r)}/${r.metadata.name}` === key,
    );
    const listeners = (gw?.spec.listeners ?? []).map((l) => {
      const mine = sites.filter((s) => s.gateway === key && s.listener === l.name);
      const routeNames = [...new Set(mine.map((s) => s.route))].sort();
      const frontend = result?.policies.listeners.find((x) => x.gateway === key && x.port === l.port)?.policy.frontend;
      return {
        name: l.name,
        port: l.port,
        protocol: l.protocol,
        ...(l.hostname !== undefined ? { hostname: l.hostname } : {}),
        ...(frontend !== undefined && Object.keys(frontend).length > 0 ? { frontend } : {}),
        routes: routeNames.map((rk): ConsoleRoute => {
          const route = routes.get(rk);
          return {
            name: rk,
            hostnames: [...(route?.spec.hostnames ?? [])],
            rules: mine
              .filter((s) => s.route === rk)
              .sort((a, b) => a.rule - b.rule)
              .map((s) => {
                const rule = route?.spec.rules?.[s.rule];
                return {
                  index: s.rule,
                  ...(s.ruleName !== undefined ? { name: s.ruleName } : {}),
                  matches: rule?.matches ?? [],
                  backendRefs: (rule?.backendRefs ?? []).map(backendRefText),
                  policy: s.policy,
                  notApplied: s.notApplied,
                };
              }),
          };
        }),
      };
    });
    return { name: key, listeners };
  });
}

const TYPE_NAME = /\.([A-Za-z]+)$/;

export function envoysView(xds: XdsServerStatus) {
  return xds.streams.map((s) => ({
    node: s.nodeId,
    gateway: s.group,
    protocol: s.kind,
    connectedAt: s.connectedAt,
    types: s.types.map((t) => {
      const nacked = t.lastNack !== undefined && t.lastNack.version !== t.ackedVersion;
      return {
        type: TYPE_NAME.exec(t.typeUrl)?.[1] ?? t.typeUrl,
        typeUrl: t.typeUrl,
        state: nacked ? "NACK" : t.ackedVersion !== undefined && t.ackedVersion === t.sentVersion ? "ACK" : "pending",
        sentVersion: t.sentVersion ?? null,
        ackedVersion: t.ackedVersion ?? null,
        ...(t.lastNack !== undefined
          ? { lastNack: { version: t.lastNack.version, message: t.lastNack.message, at: t.lastNack.at } }
          : {}),
      };
    }),
  }));
}

/** MCP targets as configured (GwBackend spec.mcp.targets) with their calls over the window. */
export function mcpView(load: LoadResult | undefined, usage: Usage) {
  const out: {
    backend: string;
    target: string;
    kind: string;
    requests: number;
    errors: number;
    health: string;
  }[] = [];
  for (const r of load?.resources ?? []) {
    if (r.kind !== "GwBackend") continue;
    const spec = r.spec as { mcp?: { targets?: { name: string; static?: unknown; selector?: unknown }[] } };
    const backend = `${namespaceOf(r)}/${r.metadata.name}`;
    for (const t of spec.mcp?.targets ?? []) {
      const calls = usage.mcp.filter(
        (c) =>
          c.target === t.name &&
          (c.backend === backend || c.backend.endsWith(`/${r.metadata.name}`) || c.backend === r.metadata.name),
      );
      const requests = calls.reduce((n, c) => n + c.requests, 0);
      const errors = calls.reduce((n, c) => n + c.errors, 0);
      out.push({
        backend,
        target: t.name,
        kind: t.static !== undefined ? "static" : "selector",
        requests,
        errors,
        // From the calls Sluice made: a target nobody called has no verdict yet.
        health:
          requests === 0
            ? "no calls in the last hour"
            : errors === 0
              ? "healthy"
              : errors === requests
                ? "failing"
                : "degraded",
      });
    }
  }
  return out;
}

export function consoleView(input: ConsoleInput) {
  const resources = resourcesView(input.load, input.result);
  return {
    generatedAt: new Date().toISOString(),
    lastReloadAt: input.lastReloadAt?.toISOString() ?? null,
    problems: resources.flatMap((r) => r.problems).length,
    resources,
    gateways: gatewaysView(input.load, input.result),
    envoys: envoysView(input.xds),
    usage: input.usage,
    mcp: mcpView(input.load, input.usage),
  };
}
