// `promptGuard` (Document 2, AIPromptGuard) compiled for the LLM ext_proc: per direction, the guards in order with
// their CustomResponse (spec defaults filled in), regexes checked now (linear-regex.ts), webhook backendRefs resolved
// to addresses, remote guards' credentials read from their Secrets (by the LLM table's own credential compiler, passed
// in). Everything the entry cannot serve is a note for the policy's status, never dropped silently.

import type { GuardConnection, GuardKeyLocation, RemoteGuardConfig } from "../../extproc/llm/guards/remote/config.js";
import { referenceAllowed, serviceEndpoints, tunnelRefs } from "../backend/resolve.js";
import { resolveTunnel } from "../backend/tunnel.js";
import { parseDurationMs } from "../duration.js";
import type { TranslationInput } from "../input.js";
import type { PolicySourceIR } from "../ir.js";
import { DEFAULT_KEEPALIVE_PROBES, KEEPALIVE_PROBES_SETTABLE, keepaliveProbesUnserved } from "../keepalive.js";
import { findNamed } from "../lookup.js";
import { resolveBackendTls } from "../xds/backend-tls.js";
import { linearRegex } from "./linear-regex.js";
import type { compileGuardAuth } from "./table.js";

export const GUARD_BUILTINS = ["Ssn", "CreditCard", "PhoneNumber", "Email", "CaSin"] as const;
export type GuardBuiltin = (typeof GUARD_BUILTINS)[number];
export type GuardDirection = "request" | "response";

export interface GuardCustomResponse {
  readonly message: string;
  readonly statusCode: number;
}

export interface RegexGuardSpec {
  readonly kind: "regex";
  /** User patterns, each valid for the linear-time engine (invalid ones are left out and reported). */
  readonly patterns: readonly string[];
  readonly builtins: readonly GuardBuiltin[];
  /** Responses always mask. */
  readonly action: "Mask" | "Reject";
}

export interface HeaderMatchSpec {
  readonly type: "Exact" | "RegularExpression";
  /** Lower case. */
  readonly name: string;
  readonly value: string;
}

export interface WebhookGuardSpec {
  readonly kind: "webhook";
  /** `namespace/name` of the backendRef, for logs and errors. */
  readonly service: string;
  /** Where the webhook listens (ready endpoints first); empty when the backendRef did not resolve. */
  readonly targets: readonly { readonly host: string; readonly port: number }[];
  /** Header name (lower case) → CEL expression. */
  readonly headers: readonly (readonly [string, string])[];
  readonly forwardHeaderMatches: readonly HeaderMatchSpec[];
  readonly failureMode: "FailClosed" | "FailOpen";
}

/** A guard asking a provider's moderation or guardrail service; served by src/extproc/llm/guards/remote. */
export interface RemoteGuardSpec {
  readonly kind: RemoteGuardConfig["kind"];
  /**
   * What the client needs, credentials read from the policy's Secrets (like a provider's `auth`); `problem` says why
   * they could not be, and every check then fails closed.
   */
  readonly config: RemoteGuardConfig;
}

/** The LLM table's compiler of a guard's `policies.auth` (table.ts), passed in by the table. */
export type GuardAuthCompiler = typeof compileGuardAuth;

/** One guard's answer must come within this (a remote guard's `policies.http.requestTimeout` replaces it) ... */
export const GUARD_TIMEOUT_MS = 2000;
/**
 * ... and all of a direction's guards within this: below Envoy's 5 s ext_proc message timeout, so the client gets the
 * guard's answer rather than Envoy's.
 */
export const GUARDS_BUDGET_MS = 4000;

export type GuardSpec = (RegexGuardSpec | WebhookGuardSpec | RemoteGuardSpec) & {
  /** Field path of the guard in its policy (`backend.ai.promptGuard.request[0]`), for logs. */
  readonly path: string;
  readonly response: GuardCustomResponse;
};

export interface PromptGuardEntry {
  readonly request: readonly GuardSpec[];
  readonly response: readonly GuardSpec[];
  /** Guard streamed responses too (`streaming: Enabled`). */
  readonly streaming: boolean;
}

export interface GuardNote {
  readonly from: PolicySourceIR;
  readonly field: string;
  readonly message: string;
  readonly reason?: "NotYetSupported" | "Ignored" | "NeverMatches";
}

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export const DEFAULT_GUARD_MESSAGE: Readonly<Record<GuardDirection, string>> = {
  request: "The request was rejected due to inappropriate content",
  response: "The response was rejected due to inappropriate content",
};

/**
 * The remote guard kinds the LLM ext_proc serves (src/extproc/llm/guards/remote). A kind not listed here is carried in
 * the table all the same and reported NotYetSupported: add it here when its client lands.
 */
const SERVED_REMOTE_GUARDS: ReadonlySet<RemoteGuardSpec["kind"]> = new Set<RemoteGuardSpec["kind"]>([
  "moderationA",
  "guardrailsA",
  "guardrailsB",
]);

/** Model Armor's location when the policy names none (the schema's default), for the service's host. */
const MODEL_ARMOR_DEFAULT_LOCATION = "us-central1";

function keyLocation(v: unknown): GuardKeyLocation | undefined {
  if (!isRec(v)) return undefined;
  if (isRec(v.queryParameter)) return { queryParameter: { name: String(v.queryParameter.name) } };
  if (isRec(v.cookie)) return { cookie: { name: String(v.cookie.name) } };
  if (isRec(v.header)) {
    const h = v.header;
    return { header: { name: String(h.name), ...(typeof h.prefix === "string" ? { prefix: h.prefix } : {}) } };
  }
  return undefined;
}

/**
 * A remote guard's settings as written → its client's config. `policies.auth` goes through the LLM table's credential
 * compiler; `policies.http.requestTimeout` bounds each check; `tls`, `tcp`, `http.version` and `tunnel` say how its
 * calls connect (guardConnection).
 */
function remoteConfig(
  kind: RemoteGuardSpec["kind"],
  c: Rec,
  at: string,
  ns: string,
  input: TranslationInput,
  from: PolicySourceIR,
  compileAuth: GuardAuthCompiler,
  note: (field: string, message: string, reason?: GuardNote["reason"]) => void,
): RemoteGuardConfig {
  const policies = isRec(c.policies) ? c.policies : {};
  const problems: string[] = [];
  let timeoutMs: number | undefined;
  const http = isRec(policies.http) ? policies.http : {};
  if (typeof http.requestTimeout === "string") {
    const ms = parseDurationMs(http.requestTimeout);
    if (ms !== undefined && ms > 0) {
      timeoutMs = Math.min(ms, GUARDS_BUDGET_MS);
      if (ms > GUARDS_BUDGET_MS) {
        note(
          `${at}.policies.http.requestTimeout`,
          `cut to ${GUARDS_BUDGET_MS} ms: a direction's guards must answer within that, before Envoy's ext_proc timeout`,
          "Ignored",
        );
      }
    }
  }
  const connection = guardConnection(policies, http, at, ns, input, note, problems);
  const host =
    kind === "guardrailsB"
      ? `modelarmor.${typeof c.location === "string" ? c.location : MODEL_ARMOR_DEFAULT_LOCATION}.rep.googleapis.com`
      : kind === "guardrailsA"
        ? `bedrock-runtime.${String(c.region)}.amazonaws.com`
        : "api.openai.com";
  const auth = compileAuth(policies.auth, host, ns, input.secrets, from.name);
  for (const p of auth.problems) {
    note(`${at}.policies.auth`, `${p.message}: every check by this guard fails (fail closed) until it is resolved`);
    problems.push(p.message);
  }
  const key = auth.key !== undefined ? { key: auth.key, ...opt("location", keyLocation(auth.location)) } : undefined;
  const common = {
    ...opt("timeoutMs", timeoutMs),
    ...(problems.length > 0 ? { problem: problems.join("; ") } : {}),
    ...opt("connection", connection),
  };
  switch (kind) {
    case "moderationA":
      return {
        kind,
        ...opt("model", typeof c.model === "string" ? c.model : undefined),
        ...opt("auth", key),
        ...common,
      };
    case "guardrailsA":
      return {
        kind,
        identifier: String(c.identifier),
        version: String(c.version),
        region: String(c.region),
        ...opt("auth", key ?? (auth.aws !== undefined ? { aws: auth.aws } : undefined)),
        ...common,
      };
    case "guardrailsB":
      return {
        kind,
        templateId: String(c.templateId),
        projectId: String(c.projectId),
        ...opt("location", typeof c.location === "string" ? c.location : undefined),
        ...opt("auth", auth.google !== undefined ? { google: auth.google } : undefined),
        ...common,
      };
  }
}

/**
 * A remote guard's `policies.tls`, `tcp`, `http.version` and `tunnel` → how its calls connect, resolved as a Service
 * backend's are (the CA ConfigMap and client certificate Secret by backend-tls.ts, the proxy by backend/tunnel.ts, in
 * the policy's namespace). What cannot be resolved is a note and a problem: every check fails closed rather than
 * reach the service another way than the one set. Undefined when none is set.
 */
function guardConnection(
  policies: Rec,
  http: Rec,
  at: string,
  ns: string,
  input: TranslationInput,
  note: (field: string, message: string, reason?: GuardNote["reason"]) => void,
  problems: string[],
): GuardConnection | undefined {
  const failClosed = "every check by this guard fails (fail closed) until it is resolved";
  const c: { -readonly [K in keyof GuardConnection]: GuardConnection[K] } = {};
  if (http.version === "HTTP2") c.http2 = true;
  if (policies.tls !== undefined) {
    const t = isRec(policies.tls) ? policies.tls : {};
    const r = resolveBackendTls(t, ns, undefined, input);
    if (!r.ok) {
      note(`${at}.policies.tls.${r.field}`, `${r.message}: ${failClosed}`);
      problems.push(`policies.tls.${r.field}: ${r.message}`);
    } else {
      // Without verifySubjectAltNames the certificate is checked against the SNI, else the service URL's host.
      const sans = Array.isArray(t.verifySubjectAltNames) ? t.verifySubjectAltNames.map(String) : undefined;
      c.tls = {
        ...opt("sni", r.tls.sni),
        ...opt("ca", r.tls.ca),
        ...opt("insecure", r.tls.insecure),
        ...opt("sans", sans),
        ...opt(
          "clientCert",
          r.tls.clientCert !== undefined ? { chain: r.tls.clientCert.chain, key: r.tls.clientCert.key } : undefined,
        ),
        ...opt("curves", r.tls.curves),
      };
      // ALPN follows http.version (h2 and http/1.1 with HTTP2, else http/1.1), as Envoy's does the cluster's protocol:
      // the client's connector (undici) sets the offer itself, so a list that says otherwise is not what is offered.
      if (Array.isArray(t.alpnProtocols)) {
        const offered = c.http2 === true ? ["h2", "http/1.1"] : ["http/1.1"];
        const asked = t.alpnProtocols.map(String);
        if (asked.length !== offered.length || asked.some((p) => !offered.includes(p))) {
          note(
            `${at}.policies.tls.alpnProtocols`,
            `not applied: the guard's calls offer ${offered.join(", ")} (from http.version), not ${asked.join(", ")}`,
            "Ignored",
          );
        }
      }
    }
  }
  const tcp = isRec(policies.tcp) ? policies.tcp : undefined;
  if (tcp !== undefined) {
    const timeout = typeof tcp.connectTimeout === "string" ? parseDurationMs(tcp.connectTimeout) : undefined;
    if (timeout !== undefined && timeout > 0) c.connectTimeoutMs = timeout;
    const ka = isRec(tcp.keepalive) ? tcp.keepalive : undefined;
    if (ka !== undefined) {
      const time = typeof ka.time === "string" ? parseDurationMs(ka.time) : undefined;
      c.keepAliveMs = time !== undefined && time > 0 ? time : 180_000;
      if (KEEPALIVE_PROBES_SETTABLE && policies.tunnel === undefined) {
        const interval = typeof ka.interval === "string" ? parseDurationMs(ka.interval) : undefined;
        c.keepAliveProbes = {
          intervalMs: interval !== undefined && interval > 0 ? interval : DEFAULT_KEEPALIVE_PROBES.intervalMs,
          count: typeof ka.retries === "number" ? ka.retries : DEFAULT_KEEPALIVE_PROBES.count,
        };
      } else if (ka.retries !== undefined || ka.interval !== undefined) {
        note(
          `${at}.policies.tcp.keepalive`,
          KEEPALIVE_PROBES_SETTABLE
            ? "retries and interval not applied: through a tunnel the guard's HTTP client (undici's ProxyAgent) opens the connection to the proxy itself and sets only the keepalive idle time on it (libuv then probes every 1 s, 10 times)"
            : `retries and interval not applied: ${keepaliveProbesUnserved("interval", "guard services")}, and the count at 10`,
          "Ignored",
        );
      }
    }
  }
  if (policies.tunnel !== undefined) {
    const r = resolveTunnel(policies.tunnel, ns, tunnelRefs(input, ns));
    if (!r.ok) {
      note(`${at}.policies.tunnel`, `${r.message}: ${failClosed}`);
      problems.push(`policies.tunnel: ${r.message}`);
    } else c.tunnel = r.tunnel;
  }
  return Object.keys(c).length === 0 ? undefined : c;
}

/** `{[k]: v}`, or nothing when v is undefined (exactOptionalPropertyTypes). */
function opt<K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } {
  return (v !== undefined ? { [k]: v } : {}) as { [P in K]?: V };
}

function customResponse(v: unknown, direction: GuardDirection): GuardCustomResponse {
  const r = isRec(v) ? v : {};
  return {
    message: typeof r.message === "string" ? r.message : DEFAULT_GUARD_MESSAGE[direction],
    statusCode: typeof r.statusCode === "number" ? r.statusCode : 403,
  };
}

function resolveWebhook(
  ref: Rec,
  ns: string,
  input: TranslationInput,
  note: (message: string) => void,
): { service: string; targets: WebhookGuardSpec["targets"] } {
  const kind = typeof ref.kind === "string" ? ref.kind : "Service";
  const group = typeof ref.group === "string" ? ref.group : "";
  const namespace = typeof ref.namespace === "string" ? ref.namespace : ns;
  const name = String(ref.name);
  const service = `${namespace}/${name}`;
  const port = typeof ref.port === "number" ? ref.port : undefined;
  const fail = (why: string) => {
    note(`${why}; calls to this webhook fail until it resolves (the failure mode applies)`);
    return { service, targets: [] };
  };
  if (
    !referenceAllowed(input, { group: "sluice.dev", kind: "GwPolicy", namespace: ns }, { group, kind, namespace, name })
  ) {
    return fail(`backendRef to ${kind} ${service} is not allowed by a ReferenceGrant`);
  }
  if (kind === "GwBackend" && group === "sluice.dev") {
    const be = findNamed(input.backends, namespace, name);
    const s = be?.spec.static;
    if (s === undefined || typeof s.host !== "string" || typeof s.port !== "number") {
      return fail(`GwBackend ${service} ${be === undefined ? "not found" : "is not a static host and port"}`);
    }
    return { service, targets: [{ host: s.host, port: s.port }] };
  }
  if (kind !== "Service" || group !== "")
    return fail(`backendRef kind ${kind} is not supported (Service or GwBackend)`);
  const eps = serviceEndpoints(input, namespace, name, port);
  if (!eps.ok) return fail(eps.message);
  const targets = [...eps.endpoints]
    .sort((a, b) => Number(b.ready) - Number(a.ready))
    .map((e) => ({ host: e.address, port: e.port }));
  if (eps.fqdn !== undefined) targets.push(eps.fqdn);
  if (targets.length === 0) return fail(`Service ${service} has no endpoints`);
  return { service, targets };
}

function headerMatches(v: unknown): HeaderMatchSpec[] {
  if (!Array.isArray(v)) return [];
  return v.filter(isRec).map((m) => ({
    type: m.type === "RegularExpression" ? "RegularExpression" : "Exact",
    name: String(m.name).toLowerCase(),
    value: String(m.value),
  }));
}

/**
 * The guards of one `promptGuard` as written in a policy of namespace `ns`, and the notes about what is not served.
 * `at` is the field path of the promptGuard (`backend.ai.promptGuard`).
 */
export function compilePromptGuard(
  v: unknown,
  ns: string,
  input: TranslationInput,
  from: PolicySourceIR,
  at: string,
  compileAuth: GuardAuthCompiler,
): { entry?: PromptGuardEntry; notes: GuardNote[] } {
  const notes: GuardNote[] = [];
  if (!isRec(v)) return { notes };
  const note = (field: string, message: string, reason?: GuardNote["reason"]) =>
    notes.push({ from, field, message, ...(reason !== undefined ? { reason } : {}) });
  const direction = (d: GuardDirection): GuardSpec[] => {
    const list = Array.isArray(v[d]) ? v[d] : [];
    const out: GuardSpec[] = [];
    list.forEach((g: unknown, i) => {
      if (!isRec(g)) return;
      const path = `${at}.${d}[${i}]`;
      const response = customResponse(g.response, d);
      if (isRec(g.regex)) {
        const r = g.regex;
        const patterns: string[] = [];
        (Array.isArray(r.matches) ? r.matches : []).forEach((p: unknown, j) => {
          const c = linearRegex(String(p));
          if ("error" in c) {
            note(
              `${path}.regex.matches[${j}]`,
              `pattern ${JSON.stringify(String(p))} is left out: ${c.error} (patterns use the RE2-like subset: no lookaround, no backreferences, small counted repetitions)`,
              "Ignored",
            );
          } else patterns.push(String(p));
        });
        const builtins = (Array.isArray(r.builtins) ? r.builtins : []).filter((b): b is GuardBuiltin =>
          (GUARD_BUILTINS as readonly unknown[]).includes(b),
        );
        const action = d === "request" && r.action === "Reject" ? "Reject" : "Mask";
        if (d === "response" && r.action === "Reject") {
          note(`${path}.regex.action`, "response matches are always masked (Reject applies to requests)", "Ignored");
        }
        out.push({ kind: "regex", patterns, builtins, action, path, response });
      } else if (isRec(g.webhook)) {
        const w = g.webhook;
        const ref = isRec(w.backendRef) ? w.backendRef : {};
        const { service, targets } = resolveWebhook(ref, ns, input, (m) => note(`${path}.webhook.backendRef`, m));
        const headers = isRec(w.headers)
          ? Object.entries(w.headers)
              .map(([k, e]) => [k.toLowerCase(), String(e)] as const)
              .sort((a, b) => (a[0] < b[0] ? -1 : 1))
          : [];
        out.push({
          kind: "webhook",
          service,
          targets,
          headers,
          forwardHeaderMatches: headerMatches(w.forwardHeaderMatches),
          failureMode: w.failureMode === "FailOpen" ? "FailOpen" : "FailClosed",
          path,
          response,
        });
      } else {
        for (const kind of ["moderationA", "guardrailsA", "guardrailsB"] as const) {
          const c = g[kind];
          if (!isRec(c)) continue;
          if (kind === "moderationA" && d === "response") {
            // The schema refuses it; a policy reaching here another way is told rather than obeyed halfway.
            note(`${path}.${kind}`, "moderationA guards requests only: left out of the response guards", "Ignored");
            continue;
          }
          if (!SERVED_REMOTE_GUARDS.has(kind)) {
            note(`${path}.${kind}`, `the ${kind} guard is accepted but not served yet: requests pass it unchecked`);
          }
          const config = remoteConfig(kind, c, `${path}.${kind}`, ns, input, from, compileAuth, note);
          out.push({ kind, config, path, response });
        }
      }
    });
    return out;
  };
  const entry: PromptGuardEntry = {
    request: direction("request"),
    response: direction("response"),
    streaming: v.streaming === "Enabled",
  };
  // With `streaming: Enabled` every response guard also checks streams (extproc/llm/guards/stream.ts) and the text
  // events of Realtime sessions (extproc/llm/realtime/); Realtime audio is not read (table.ts says so in the status).
  return { entry, notes };
}
