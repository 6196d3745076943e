// The MCP table: per Gateway and MCP GwBackend that a route of the Gateway reaches, the targets Sluice's MCP service
// (src/mcp/) multiplexes, resolved to addresses, and the backend's modes. Keyed by the IR cluster name the route puts
// in its header (names.ts mcpClusterName), so the service needs nothing but the header and this table.

import { isIP } from "node:net";
import type { LabelSelector } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import { compileExpression, specEnvironmentWith } from "../../cel/index.js";
import { serviceEndpoints } from "../backend/resolve.js";
import { parseDurationMs } from "../duration.js";
import type { TranslationInput } from "../input.js";
import type { GatewayIR, PolicyFieldIR, PolicySourceIR, RoutePolicyIR } from "../ir.js";
import { findNamed } from "../lookup.js";
import { backendClusterName } from "../names.js";
import type { PolicyNote } from "../xds/filters/types.js";
import { type McpTargetConnection, mcpTargetConnection, mcpUnservedParts } from "./connection.js";
import { servesMcpOAuth } from "./oauth-routes.js";

export type McpProtocol = "StreamableHTTP" | "SSE";

/** The CEL environment of MCP authorization: the spec's variables and `mcp` (src/mcp/authorization.ts). */
const MCP_CEL = specEnvironmentWith(["mcp"]);

export interface McpTargetEntry {
  /** The target's name; a selector's Services are `<target>-<service>` (`<target>-<namespace>-<service>` elsewhere). */
  readonly name: string;
  readonly protocol: McpProtocol;
  /** `http(s)://host:port/path` per endpoint (ready ones first); a session keeps the one it started on. */
  readonly urls: readonly string[];
  /** The spec's target name, which policies select by `sectionName` (a selector's Services share it). */
  readonly section: string;
  /** The name the target is reached by (SNI, certificate check): a host target's host, a Service's cluster name. */
  readonly host?: string;
  /** Its connection policies (connection.ts); absent: plain HTTP, Node's defaults. */
  readonly connection?: McpTargetConnection;
}

/** One `backend.mcp.authorization` rule, as written; `path` names the policy and field in decisions. */
export interface McpAuthorizationRule {
  readonly path: string;
  readonly action: "Allow" | "Deny" | "Require";
  readonly matchExpressions: readonly string[];
}

export interface McpBackendEntry {
  /** The IR cluster name (names.ts mcpClusterName), what the route's header carries. */
  readonly key: string;
  /** `namespace/name` of the Gateway and of the GwBackend. */
  readonly gateway: string;
  readonly backend: string;
  readonly targets: readonly McpTargetEntry[];
  /** Targets that resolve to nothing (a Service without endpoints, a selector matching none), with why. */
  readonly unresolved: readonly { readonly name: string; readonly message: string }[];
  readonly sessionRouting: "Stateful" | "Stateless";
  readonly failureMode: "FailClosed" | "FailOpen";
  readonly prefixMode: "Conditional" | "Always" | "Never";
  /** `backend.mcp.authorization` of the routes reaching the backend (the first route's where they differ). */
  readonly authorization: readonly McpAuthorizationRule[];
  /** MCP OAuth (`traffic.jwtAuthentication.mcp`, or the deprecated `backend.mcp.authentication`). */
  readonly oauth?: McpOAuthEntry;
  /** Targets whose own effective `backend.mcp.authorization` differs (a GwPolicy with their sectionName). */
  readonly targetAuthorization?: Readonly<Record<string, readonly McpAuthorizationRule[]>>;
  /** `backend.mcp.guardrails.processors`, in order. */
  readonly guardrails?: readonly McpGuardrail[];
  /**
   * By target section name (the spec's target name): processors of a policy selecting that target (`sectionName`),
   * run around the requests forwarded to it, after the backend's.
   */
  readonly targetGuardrails?: Readonly<Record<string, readonly McpGuardrail[]>>;
}

export type McpGuardrailPhase = "Off" | "Request" | "Response" | "Full";

/** One `backend.mcp.guardrails.processors[i]` (src/mcp/guardrails.ts; the protocol is in docs/mcp.md). */
export interface McpGuardrail {
  /** `kind namespace/name: backend.mcp.guardrails.processors[i]`, for messages. */
  readonly path: string;
  /** Where the processor is POSTed to; undefined when its backendRef resolves to nothing (a failure of each call). */
  readonly url?: string;
  readonly unresolved?: string;
  readonly failureMode: "FailClosed" | "FailOpen";
  /** Method pattern → phase, as written. */
  readonly methods: Readonly<Record<string, McpGuardrailPhase>>;
  /** Name → CEL text, evaluated per request and sent along. */
  readonly metadata: Readonly<Record<string, string>>;
  /** Lowercase header names. */
  readonly allowedRequestHeaders: readonly string[];
  readonly disallowedRequestHeaders: readonly string[];
}

/**
 * What the MCP service needs to serve the OAuth endpoints of MCP authorization (src/mcp/oauth.ts): the authorization
 * server (the issuer of the JWT provider), the protected resource metadata fields the policy sets, and the client id
 * registration is answered with (else registration is proxied to the authorization server).
 */
export interface McpOAuthEntry {
  /** `kind namespace/name: field` of the policy, for messages. */
  readonly path: string;
  readonly issuer: string;
  readonly provider?: string;
  readonly clientId?: string;
  readonly resourceMetadata: Readonly<Record<string, unknown>>;
  /**
   * The deprecated `backend.mcp.authentication`: Envoy verifies no token, the MCP service does (remote key set URLs,
   * audiences, mode). Absent for `traffic.jwtAuthentication.mcp`, where Envoy's jwt_authn verified it already.
   */
  readonly verify?: {
    readonly jwksUrls: readonly string[];
    readonly audiences: readonly string[];
    readonly mode: "Strict" | "Optional" | "Permissive";
    readonly cacheMs: number;
  };
}

export interface McpTable {
  readonly entries: ReadonlyMap<string, McpBackendEntry>;
  /** What is accepted but not served yet (MCP policies), for status. */
  readonly notes: readonly PolicyNote[];
}

interface StaticTarget {
  readonly host?: string;
  readonly backendRef?: { readonly name: string };
  readonly port: number;
  readonly path?: string;
  readonly protocol?: McpProtocol;
  readonly policies?: unknown;
}

interface TargetSpec {
  readonly name: string;
  readonly static?: StaticTarget;
  readonly selector?: { readonly namespaces?: LabelSelector; readonly services?: LabelSelector };
}

interface McpSpec {
  readonly targets: readonly TargetSpec[];
  readonly sessionRouting?: "Stateful" | "Stateless";
  readonly failureMode?: "FailClosed" | "FailOpen";
  readonly prefixMode?: "Conditional" | "Always" | "Never";
}

function labelsMatch(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (!Object.entries(selector?.matchLabels ?? {}).every(([k, v]) => labels[k] === v)) return false;
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

function hostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

function normalPath(path: string): string {
  return path.startsWith("/") ? path : `/${path}`;
}

/** The endpoints of a Service port as URLs, ready ones first; or why there are none. */
function serviceUrls(
  input: TranslationInput,
  namespace: string,
  service: string,
  port: number,
  path: string,
): { urls: string[] } | { error: string } {
  const r = serviceEndpoints(input, namespace, service, port);
  if (!r.ok) return { error: r.message };
  const eps = [...r.endpoints].sort((a, b) => Number(b.ready) - Number(a.ready));
  const urls = eps.map((e) => `http://${hostPort(e.address, e.port)}${path}`);
  if (r.fqdn !== undefined) urls.push(`http://${hostPort(r.fqdn.host, r.fqdn.port)}${path}`);
  if (urls.length === 0) return { error: `Service ${namespace}/${service} has no endpoints` };
  return { urls };
}

function resolveTargets(
  input: TranslationInput,
  namespace: string,
  spec: McpSpec,
): { targets: McpTargetEntry[]; unresolved: { name: string; message: string }[] } {
  const targets: McpTargetEntry[] = [];
  const unresolved: { name: string; message: string }[] = [];
  for (const t of spec.targets) {
    const s = t.static;
    if (s !== undefined) {
      const protocol = s.protocol ?? "StreamableHTTP";
      const path = normalPath(s.path ?? (protocol === "SSE" ? "/sse" : "/mcp"));
      if (s.host !== undefined) {
        targets.push({
          name: t.name,
          section: t.name,
          protocol,
          urls: [`http://${hostPort(s.host, s.port)}${path}`],
          ...(isIP(s.host) === 0 ? { host: s.host } : {}),
        });
      } else if (s.backendRef !== undefined) {
        const r = serviceUrls(input, namespace, s.backendRef.name, s.port, path);
        if ("error" in r) unresolved.push({ name: t.name, message: r.error });
        else {
          const host = `${s.backendRef.name}.${namespace}.svc.cluster.local`;
          targets.push({ name: t.name, section: t.name, protocol, urls: r.urls, host });
        }
      }
      continue;
    }
    const sel = t.selector;
    if (sel === undefined) continue;
    const namespaces =
      sel.namespaces === undefined
        ? new Set([namespace])
        : new Set(
            input.namespaces
              .filter((n) =>
                labelsMatch(sel.namespaces, { "kubernetes.io/metadata.name": n.metadata.name, ...n.metadata.labels }),
              )
              .map((n) => n.metadata.name),
          );
    const services = input.services
      .filter((svc) => namespaces.has(namespaceOf(svc)) && labelsMatch(sel.services, svc.metadata.labels ?? {}))
      .sort((a, b) => {
        const ka = `${namespaceOf(a)}/${a.metadata.name}`;
        const kb = `${namespaceOf(b)}/${b.metadata.name}`;
        return ka < kb ? -1 : ka > kb ? 1 : 0;
      });
    if (services.length === 0) {
      unresolved.push({ name: t.name, message: "the selector matches no Service" });
      continue;
    }
    for (const svc of services) {
      const ns = namespaceOf(svc);
      const name = ns === namespace ? `${t.name}-${svc.metadata.name}` : `${t.name}-${ns}-${svc.metadata.name}`;
      // A selected Service speaks Streamable HTTP at /mcp on its port named or appProtocol'd `mcp`, else its first.
      const ports = svc.spec.ports ?? [];
      const port = ports.find((p) => p.name === "mcp" || (p.appProtocol ?? "").includes("mcp")) ?? ports[0];
      if (port === undefined) {
        unresolved.push({ name, message: `Service ${ns}/${svc.metadata.name} has no port` });
        continue;
      }
      const r = serviceUrls(input, ns, svc.metadata.name, port.port, "/mcp");
      if ("error" in r) unresolved.push({ name, message: r.error });
      else {
        const host = `${svc.metadata.name}.${ns}.svc.cluster.local`;
        targets.push({ name, section: t.name, protocol: "StreamableHTTP", urls: r.urls, host });
      }
    }
  }
  return { targets, unresolved };
}

/** The `backend.mcp.authorization` rules of a route's backend policies for the GwBackend `cluster`. */
function authorizationRules(
  policy: RoutePolicyIR | undefined,
  cluster: string,
  notes: Map<string, PolicyNote>,
): McpAuthorizationRule[] {
  const b = policy?.backends?.find((x) => x.cluster === cluster);
  return b === undefined ? [] : rulesOf(b.policy["mcp"], notes);
}

/**
 * The authorization rules of targets whose effective `backend.mcp` differs from the backend's: a GwPolicy selecting
 * the target by `targetRefs[].sectionName` merges over the backend's policies (spec: GwPolicy < GwBackend < target).
 */
function targetAuthorizationRules(
  policy: RoutePolicyIR | undefined,
  cluster: string,
  notes: Map<string, PolicyNote>,
): Record<string, McpAuthorizationRule[]> {
  const out: Record<string, McpAuthorizationRule[]> = {};
  const b = policy?.backends?.find((x) => x.cluster === cluster);
  const whole = JSON.stringify(b?.policy["mcp"] ?? null);
  const wholeValues = new Set(
    (b?.policy["mcp"] === undefined
      ? []
      : "combined" in b.policy["mcp"]
        ? b.policy["mcp"].combined
        : [b.policy["mcp"]]
    ).map((v) => JSON.stringify(v)),
  );
  for (const sub of b?.subBackends ?? []) {
    const f = sub.policy["mcp"];
    if (JSON.stringify(f ?? null) === whole) continue;
    out[sub.name] = rulesOf(f, notes);
    for (const v of f === undefined ? [] : "combined" in f ? f.combined : [f]) {
      if (wholeValues.has(JSON.stringify(v)) || typeof v.value !== "object" || v.value === null) continue;
      // Per-target guardrails are served (targetGuardrails); authentication is the endpoint's, before any target.
      for (const field of ["authentication"].filter((k) => k in (v.value as object))) {
        const message = `is served per backend, not per target: the backend's own backend.mcp.${field} applies to target ${sub.name}`;
        notes.set(`${v.from.kind}|${v.from.name}|backend.mcp.${field}|${message}`, {
          from: v.from,
          field: `backend.mcp.${field}`,
          message,
        });
      }
    }
  }
  return out;
}

/**
 * The processors of targets selected by a policy of their own that sets `backend.mcp.guardrails` (a GwPolicy with the
 * target's sectionName): they run around the requests forwarded to that target, after the backend's (docs/mcp.md).
 */
function targetGuardrails(
  input: TranslationInput,
  policy: RoutePolicyIR | undefined,
  cluster: string,
  notes: Map<string, PolicyNote>,
): Record<string, McpGuardrail[]> {
  const out: Record<string, McpGuardrail[]> = {};
  const b = policy?.backends?.find((x) => x.cluster === cluster);
  const f = b?.policy["mcp"];
  const whole = new Set((f === undefined ? [] : "combined" in f ? f.combined : [f]).map((v) => JSON.stringify(v)));
  for (const sub of b?.subBackends ?? []) {
    const sf = sub.policy["mcp"];
    const own = (sf === undefined ? [] : "combined" in sf ? sf.combined : [sf]).find(
      (v) =>
        !whole.has(JSON.stringify(v)) &&
        typeof v.value === "object" &&
        v.value !== null &&
        "guardrails" in (v.value as object),
    );
    if (own === undefined) continue;
    const processors = guardrailsFrom(input, own, notes);
    if (processors.length > 0) out[sub.name] = processors;
  }
  return out;
}

function rulesOf(f: PolicyFieldIR | undefined, notes: Map<string, PolicyNote>): McpAuthorizationRule[] {
  const out: McpAuthorizationRule[] = [];
  const values = f === undefined ? [] : "combined" in f ? f.combined : [f];
  for (const v of values) {
    const rule = (v.value as { authorization?: { action?: string; policy?: { matchExpressions?: string[] } } })
      ?.authorization;
    if (rule === undefined) continue;
    const action = rule.action === "Deny" || rule.action === "Require" ? rule.action : "Allow";
    (rule.policy?.matchExpressions ?? []).forEach((text, i) => {
      const c = compileExpression(text, MCP_CEL);
      if ("ok" in c) return;
      const note: PolicyNote = {
        from: v.from,
        field: `backend.mcp.authorization.policy.matchExpressions[${i}]`,
        message: `${c.errors.map((e) => e.message).join("; ")}; this expression never matches`,
        reason: "NeverMatches",
      };
      notes.set(`${v.from.kind}|${v.from.name}|${note.field}|${note.message}`, note);
    });
    out.push({
      path: `${v.from.kind} ${v.from.name}: backend.mcp.authorization`,
      action,
      matchExpressions: rule.policy?.matchExpressions ?? [],
    });
  }
  return out;
}

interface JwtSpec {
  readonly providers?: readonly { readonly issuer?: string }[];
  readonly mcp?: {
    readonly resourceMetadata?: Record<string, unknown>;
    readonly provider?: string;
    readonly clientId?: string;
  };
}

interface DeprecatedAuthSpec {
  readonly resourceMetadata?: Record<string, unknown>;
  readonly provider?: string;
  readonly issuer?: string;
  readonly audiences?: readonly string[];
  readonly jwks?: {
    readonly jwksPath: string;
    readonly cacheDuration?: string;
    readonly backendRef: {
      readonly name: string;
      readonly namespace?: string;
      readonly kind?: string;
      readonly port?: number;
    };
  };
  readonly mode?: "Strict" | "Optional" | "Permissive";
  readonly clientId?: string;
  readonly clientSecretRef?: unknown;
}

/** The key server of the deprecated form as URLs: a Service's endpoints, or a static GwBackend's host. */
function jwksUrls(
  input: TranslationInput,
  namespace: string,
  jwks: NonNullable<DeprecatedAuthSpec["jwks"]>,
): { urls: string[] } | { error: string } {
  const ref = jwks.backendRef;
  const ns = ref.namespace ?? namespace;
  const path = normalPath(jwks.jwksPath);
  if ((ref.kind ?? "Service") === "Service") return serviceUrls(input, ns, ref.name, ref.port ?? 80, path);
  const be = findNamed(input.backends, ns, ref.name);
  const st = be?.spec.static as { host?: string; port?: number } | undefined;
  if (st?.host === undefined || st.port === undefined) {
    return { error: `GwBackend ${ns}/${ref.name} is not a static backend with host and port` };
  }
  return { urls: [`http://${hostPort(st.host, st.port)}${path}`] };
}

/** `provider` (Idp1..Idp6) of MCP OAuth: accepted and reported, since nothing differs by provider yet. */
const IDP_NOTE =
  "has no effect yet: every identity provider is served the same way (the issuer's discovery document, client registration proxied to it)";

/**
 * MCP OAuth of a route reaching the backend: `jwtAuthentication.mcp` (Envoy verifies the token; the service serves
 * the metadata and registration), else the deprecated `backend.mcp.authentication` (the service verifies too).
 */
function oauthOf(
  input: TranslationInput,
  policy: RoutePolicyIR | undefined,
  cluster: string,
  notes: Map<string, PolicyNote>,
): McpOAuthEntry | undefined {
  const note = (from: PolicySourceIR, field: string, message: string) =>
    notes.set(`${from.kind}|${from.name}|${field}|${message}`, { from, field, message });
  for (const phase of ["preRouting", "traffic"] as const) {
    const f = policy?.[phase]?.["jwtAuthentication"];
    if (f === undefined || "combined" in f) continue;
    const jwt = f.value as JwtSpec;
    if (jwt.mcp === undefined) continue;
    const issuer = jwt.providers?.[0]?.issuer ?? "";
    if (jwt.mcp.provider !== undefined) note(f.from, "jwtAuthentication.mcp.provider", IDP_NOTE);
    return {
      path: `${f.from.kind} ${f.from.name}: ${phase}.jwtAuthentication.mcp`,
      issuer,
      resourceMetadata: jwt.mcp.resourceMetadata ?? {},
      ...(jwt.mcp.provider !== undefined ? { provider: jwt.mcp.provider } : {}),
      ...(jwt.mcp.clientId !== undefined ? { clientId: jwt.mcp.clientId } : {}),
    };
  }
  for (const b of policy?.backends ?? []) {
    if (b.cluster !== cluster) continue;
    const f = b.policy["mcp"];
    const values = f === undefined ? [] : "combined" in f ? f.combined : [f];
    for (const v of values) {
      const auth = (v.value as { authentication?: DeprecatedAuthSpec } | null)?.authentication;
      if (auth?.jwks === undefined) continue;
      const [ns] = v.from.name.split("/") as [string];
      notes.set(`${v.from.kind}|${v.from.name}|backend.mcp.authentication|deprecated`, {
        from: v.from,
        field: "backend.mcp.authentication",
        message:
          "is deprecated: use traffic.jwtAuthentication.mcp, which runs before transformation and rate limiting; honoured here: Sluice's MCP service verifies the token and serves the OAuth endpoints",
        reason: "Deprecated",
      });
      const r = jwksUrls(input, ns, auth.jwks);
      if ("error" in r) {
        note(
          v.from,
          "backend.mcp.authentication.jwks.backendRef",
          `${r.error}; no token verifies, so Strict and Optional refuse every request with a token`,
        );
      }
      if (auth.provider !== undefined) note(v.from, "backend.mcp.authentication.provider", IDP_NOTE);
      if (auth.clientSecretRef !== undefined) {
        note(
          v.from,
          "backend.mcp.authentication.clientSecretRef",
          "token requests are not proxied yet (clients reach the authorization server's token endpoint themselves); the secret is not used",
        );
      }
      if (auth.issuer === undefined) {
        note(
          v.from,
          "backend.mcp.authentication.issuer",
          "is not set: the OAuth metadata endpoints have no authorization server to name and answer 404",
        );
      }
      return {
        path: `${v.from.kind} ${v.from.name}: backend.mcp.authentication`,
        issuer: auth.issuer ?? "",
        resourceMetadata: auth.resourceMetadata ?? {},
        ...(auth.provider !== undefined ? { provider: auth.provider } : {}),
        ...(auth.clientId !== undefined ? { clientId: auth.clientId } : {}),
        verify: {
          jwksUrls: "urls" in r ? r.urls : [],
          audiences: auth.audiences ?? [],
          mode: auth.mode ?? "Strict",
          cacheMs: parseDurationMs(auth.jwks.cacheDuration ?? "5m") ?? 300_000,
        },
      };
    }
  }
  return undefined;
}

interface GuardrailSpec {
  readonly remote?: {
    readonly backendRef: {
      readonly name: string;
      readonly namespace?: string;
      readonly kind?: string;
      readonly port?: number;
    };
    readonly failureMode?: "FailClosed" | "FailOpen";
    readonly metadata?: Record<string, string>;
    readonly allowedRequestHeaders?: readonly string[];
    readonly disallowedRequestHeaders?: readonly string[];
  };
  readonly methods: Record<string, McpGuardrailPhase>;
}

/** A processor's address: a Service's first endpoint (ready ones first), or a static GwBackend's host. */
function processorUrl(
  input: TranslationInput,
  namespace: string,
  ref: NonNullable<GuardrailSpec["remote"]>["backendRef"],
): { url: string } | { error: string } {
  const ns = ref.namespace ?? namespace;
  if ((ref.kind ?? "Service") === "Service") {
    const r = serviceUrls(input, ns, ref.name, ref.port ?? 80, "/");
    return "error" in r ? r : { url: r.urls[0] as string };
  }
  const be = findNamed(input.backends, ns, ref.name);
  const st = be?.spec.static as { host?: string; port?: number } | undefined;
  if (st?.host === undefined || st.port === undefined) {
    return { error: `GwBackend ${ns}/${ref.name} is not a static backend with host and port` };
  }
  return { url: `http://${hostPort(st.host, st.port)}/` };
}

/** `backend.mcp.guardrails` of a route's backend policies for the GwBackend `cluster`. */
function guardrailsOf(
  input: TranslationInput,
  policy: RoutePolicyIR | undefined,
  cluster: string,
  notes: Map<string, PolicyNote>,
): McpGuardrail[] {
  const b = policy?.backends?.find((x) => x.cluster === cluster);
  return guardrailsFrom(input, b?.policy["mcp"], notes);
}

/** The processors of an effective `backend.mcp` field (the backend's, or one target's). */
function guardrailsFrom(
  input: TranslationInput,
  f: PolicyFieldIR | undefined,
  notes: Map<string, PolicyNote>,
): McpGuardrail[] {
  const values = f === undefined ? [] : "combined" in f ? f.combined : [f];
  for (const v of values) {
    const spec = (v.value as { guardrails?: { processors?: readonly GuardrailSpec[] } } | null)?.guardrails;
    if (spec?.processors === undefined) continue;
    const [ns] = v.from.name.split("/") as [string];
    return spec.processors.flatMap((p, i) => {
      const remote = p.remote;
      if (remote === undefined) return [];
      const field = `backend.mcp.guardrails.processors[${i}]`;
      const r = processorUrl(input, ns, remote.backendRef);
      const failureMode = remote.failureMode ?? "FailClosed";
      if ("error" in r) {
        const message = `${r.error}; ${failureMode === "FailClosed" ? "the requests it applies to are refused" : "it is skipped (FailOpen)"}`;
        notes.set(`${v.from.kind}|${v.from.name}|${field}.remote.backendRef|${message}`, {
          from: v.from,
          field: `${field}.remote.backendRef`,
          message,
        });
      }
      Object.entries(remote.metadata ?? {}).forEach(([k, text]) => {
        const c = compileExpression(text, MCP_CEL);
        if ("ok" in c) return;
        const note: PolicyNote = {
          from: v.from,
          field: `${field}.remote.metadata.${k}`,
          message: `${c.errors.map((e) => e.message).join("; ")}; the processor gets null for it`,
          reason: "NeverMatches",
        };
        notes.set(`${v.from.kind}|${v.from.name}|${note.field}|${note.message}`, note);
      });
      return [
        {
          path: `${v.from.kind} ${v.from.name}: ${field}`,
          ...("url" in r ? { url: r.url } : { unresolved: r.error }),
          failureMode,
          methods: p.methods,
          metadata: remote.metadata ?? {},
          allowedRequestHeaders: (remote.allowedRequestHeaders ?? []).map((h) => h.toLowerCase()),
          disallowedRequestHeaders: (remote.disallowedRequestHeaders ?? []).map((h) => h.toLowerCase()),
        },
      ];
    });
  }
  return [];
}

/**
 * A target's own connection policies (`level: subBackend`) that Sluice's transport does not serve are reported here;
 * those of GwPolicies and of the GwBackend's own policies by traffic-route.ts, with the same mcpUnservedParts.
 */
function policyNotes(policy: RoutePolicyIR | undefined, cluster: string, notes: Map<string, PolicyNote>): void {
  for (const b of policy?.backends ?? []) {
    if (b.cluster !== cluster) continue;
    for (const sub of b.subBackends ?? []) {
      for (const [field, v] of Object.entries(sub.policy)) {
        if ("combined" in v || v.from.level !== "subBackend") continue;
        for (const [part, why] of mcpUnservedParts(field, v.value)) {
          const note = { from: v.from, field: `backend.${field}${part === "" ? "" : `.${part}`}`, message: why };
          notes.set(`${v.from.kind}|${v.from.name}|${note.field}|${note.message}`, note);
        }
      }
    }
  }
}

/**
 * The targets of `e` with their connection policies (the effective backend policy of each, connection.ts); a target
 * whose TLS material, credential or proxy cannot be had is unresolved (failureMode decides), and reported.
 */
function withConnections(
  e: McpBackendEntry,
  policy: RoutePolicyIR | undefined,
  cluster: string,
  input: TranslationInput,
  notes: Map<string, PolicyNote>,
): Pick<McpBackendEntry, "targets" | "unresolved"> {
  const b = policy?.backends?.find((x) => x.cluster === cluster);
  if (b === undefined) return e;
  const targets: McpTargetEntry[] = [];
  const unresolved = [...e.unresolved];
  for (const t of e.targets) {
    const p = b.subBackends?.find((s) => s.name === t.section)?.policy ?? b.policy;
    const r = mcpTargetConnection(p, `GwBackend ${e.backend}`, t.name, t.host, input, `${e.key}|${t.name}`);
    for (const n of r.notes) notes.set(`${n.from.kind}|${n.from.name}|${n.field}|${n.message}`, n);
    if (r.failure !== undefined) {
      unresolved.push({ name: t.name, message: r.failure });
      continue;
    }
    if (r.connection === undefined) {
      targets.push(t);
      continue;
    }
    const urls = r.connection.tls !== undefined ? t.urls.map((u) => u.replace(/^http:/, "https:")) : t.urls;
    targets.push({ ...t, urls, connection: r.connection });
  }
  return { targets, unresolved };
}

export function compileMcpTable(gateways: readonly GatewayIR[], input: TranslationInput): McpTable {
  const entries = new Map<string, McpBackendEntry>();
  const notes = new Map<string, PolicyNote>();
  const authorized = new Set<string>();
  for (const gw of gateways) {
    const mcpClusters = gw.clusters.filter((c) => c.kind === "mcp");
    if (mcpClusters.length === 0) continue;
    for (const c of mcpClusters) {
      const [ns, name] = c.backend.split("/") as [string, string];
      const be = findNamed(input.backends, ns, name);
      const spec = be?.spec.mcp as McpSpec | undefined;
      if (spec === undefined) continue;
      const { targets, unresolved } = resolveTargets(input, ns, spec);
      entries.set(c.name, {
        key: c.name,
        gateway: c.gateway,
        backend: c.backend,
        targets,
        unresolved,
        sessionRouting: spec.sessionRouting ?? "Stateful",
        failureMode: spec.failureMode ?? "FailClosed",
        prefixMode: spec.prefixMode ?? "Conditional",
        authorization: [],
      });
    }
    for (const rc of gw.routeConfigs) {
      for (const vh of rc.virtualHosts) {
        for (const r of vh.routes) {
          if (r.action.kind !== "forward") continue;
          for (const b of r.action.backends) {
            const e = entries.get(b.cluster);
            if (e === undefined) continue;
            const [ns, name] = e.backend.split("/") as [string, string];
            policyNotes(r.policy, backendClusterName(ns, name), notes);
            const jwt = r.policy?.traffic?.["jwtAuthentication"] ?? r.policy?.preRouting?.["jwtAuthentication"];
            if (
              r.match.path.type === "RegularExpression" &&
              servesMcpOAuth(r) &&
              jwt !== undefined &&
              !("combined" in jwt)
            ) {
              const note: PolicyNote = {
                from: jwt.from,
                field: "jwtAuthentication.mcp",
                message: `the OAuth discovery paths are built on a route's path; route ${r.name} matches a regular expression and gets none (use PathPrefix or Exact)`,
              };
              notes.set(`${jwt.from.kind}|${jwt.from.name}|${note.field}|${note.message}`, note);
            }
            if (!authorized.has(e.key)) {
              authorized.add(e.key);
              const rules = authorizationRules(r.policy, backendClusterName(ns, name), notes);
              const oauth = oauthOf(input, r.policy, backendClusterName(ns, name), notes);
              const guardrails = guardrailsOf(input, r.policy, backendClusterName(ns, name), notes);
              const perTarget = targetAuthorizationRules(r.policy, backendClusterName(ns, name), notes);
              const guardsPerTarget = targetGuardrails(input, r.policy, backendClusterName(ns, name), notes);
              entries.set(e.key, {
                ...e,
                ...withConnections(e, r.policy, backendClusterName(ns, name), input, notes),
                ...(Object.keys(perTarget).length > 0 ? { targetAuthorization: perTarget } : {}),
                ...(guardrails.length > 0 ? { guardrails } : {}),
                ...(Object.keys(guardsPerTarget).length > 0 ? { targetGuardrails: guardsPerTarget } : {}),
                ...(rules.length > 0 ? { authorization: rules } : {}),
                ...(oauth !== undefined ? { oauth } : {}),
              });
            }
          }
        }
      }
    }
  }
  return { entries, notes: [...notes.values()] };
}
