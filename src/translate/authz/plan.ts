// What Sluice's authentication and authorization need for one route (or one Gateway port for L4): the effective
// `authorization` rules (combined from several GwPolicy resources), `basicAuthentication`, `apiKeyAuthentication`,
// compiled once here, at translation time, into native RBAC filters and/or ext_authz policy-table entries.
//
// Native or Sluice: the authorization rules of a route go to Envoy's RBAC when every expression of every rule compiles
// to RBAC (src/cel/rbac.ts), all or nothing, so one decision is never split between the two. Otherwise they go to
// Sluice's ext_authz. `authorizationPath: "sluice"` (translate option; `sluice serve|run --authorization-path sluice`)
// forces the Sluice path everywhere, which is how the e2e tests run the same cases on both paths; `sluice-grpc` does
// too, and has Envoy call Sluice over gRPC even where the HTTP check would do (xds/filters/ext-authz-sluice.ts), so
// the tests run the same cases on both transports.
//
// Filter positions (ARCHITECTURE.md): basic/API key authentication is one ext_authz call at `sluiceAuthn`; the
// authorization is RBAC or an ext_authz call at `authorization`; with no user `extAuth` in between, a Sluice
// authorization joins the authentication call (one call instead of two).

import { secretValue } from "../../api/core.js";
import { messages } from "../../api/status.js";
import { type CompiledExpr, compileExpression } from "../../cel/index.js";
import { buildRbacFilters } from "../../cel/rbac.js";
import { literalHeaderKeys } from "../../cel/reads.js";
import { type ApiKeySource, compileApiKeyAuth } from "../../extauthz/api-keys.js";
import {
  type AuthorizationAction,
  type CompiledAuthorization,
  type CompiledRule,
  EMPTY_AUTHORIZATION,
  isEmptyAuthorization,
} from "../../extauthz/authorization.js";
import { compileBasicAuth } from "../../extauthz/basic-auth.js";
import type { ExtractionLocation } from "../../extauthz/credentials.js";
import type { ExtAuthzPolicy } from "../../extauthz/server.js";
import type { RBAC } from "../../gen/envoy/config/rbac/v3/rbac_pb.js";
import type { TranslationInput } from "../input.js";
import type { EffectivePolicyIR, PolicySourceIR, PolicyValueIR } from "../ir.js";
import { type PolicyTableSink, secretDigest } from "./policy-table.js";

export type AuthorizationPath = "auto" | "sluice" | "sluice-grpc";

/** Annotations of the GwPolicy carrying an authentication field: the identity sent to the upstream as headers. */
export const API_KEY_METADATA_HEADER_ANNOTATION = "sluice.dev/api-key-metadata-header";
export const BASIC_AUTH_USERNAME_HEADER_ANNOTATION = "sluice.dev/basic-auth-username-header";

export type NoteReason = "NeverMatches" | "Ignored" | "NotYetSupported" | "Deprecated";

export interface AuthzContext {
  readonly input: TranslationInput;
  readonly path: AuthorizationPath;
  readonly table: PolicyTableSink;
  note(from: PolicySourceIR, field: string, message: string, reason: NoteReason): void;
}

export interface HttpAuthzPlan {
  /** ext_authz at `sluiceAuthn`: authentication, plus the authorization when it joins the same call. */
  readonly authnPolicyId?: string;
  /** Native RBAC filters in chain order (deny, require, allow). */
  readonly rbac?: readonly { readonly kind: "deny" | "require" | "allow"; readonly config: RBAC }[];
  /** ext_authz at `authorization`: a Sluice authorization not joined with authentication. */
  readonly authzPolicyId?: string;
  /** The payload of the jwt_authn filter is needed by Sluice (metadata_context_namespaces). */
  readonly readsJwt: boolean;
  /** Sluice's authorization reads `extauthz`: the user's extAuth is fronted by Sluice, which passes it on. */
  readonly readsExtauthz: boolean;
}

export interface NetworkAuthzPlan {
  readonly rbac?: readonly { readonly kind: "deny" | "require" | "allow"; readonly config: RBAC }[];
  readonly policyId?: string;
}

const NEVER = compileExpression("false") as { ok: CompiledExpr };

function fieldValues(policy: EffectivePolicyIR | undefined, name: string): readonly PolicyValueIR[] {
  const f = policy?.[name];
  if (f === undefined) return [];
  return "combined" in f ? f.combined : [f];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function policyNamespace(from: PolicySourceIR): string {
  return from.name.split("/")[0] ?? "default";
}

/**
 * Compiles combined authorization rules. An expression that does not compile (an unknown variable or function; syntax
 * errors are rejected earlier by validation) is replaced by `false`, which is exactly "fails to evaluate": an Allow
 * rule does not grant, a Deny rule does not fire, a Require rule is false. Reported as NeverMatches.
 */
function compileRules(
  values: readonly PolicyValueIR[],
  section: "traffic" | "frontend",
  field: string,
  available: ReadonlySet<string>,
  ctx: AuthzContext,
): CompiledAuthorization {
  const deny: CompiledRule[] = [];
  const require: CompiledRule[] = [];
  const allow: CompiledRule[] = [];
  for (const { value, from } of values) {
    if (!isRecord(value)) continue;
    const action = (value["action"] ?? "Allow") as AuthorizationAction;
    const policy = value["policy"];
    const texts = isRecord(policy) && Array.isArray(policy["matchExpressions"]) ? policy["matchExpressions"] : [];
    const path = `spec.${section}.${field}`;
    const expressions: CompiledExpr[] = texts.map((text, i) => {
      const r = compileExpression(String(text));
      if ("errors" in r) {
        const msg = r.errors.map((e) => e.message).join("; ");
        ctx.note(
          from,
          `${section}.${field}`,
          `${path}.policy.matchExpressions[${i}] never matches: ${msg}`,
          "NeverMatches",
        );
        return NEVER.ok;
      }
      for (const v of r.ok.variables) {
        if (available.has(v)) continue;
        const at = `${path}.policy.matchExpressions[${i}]`;
        const message =
          v === "jwt"
            ? messages.jwtWithoutAuthentication(at, action)
            : v === "llm"
              ? messages.llmInAuthorization(at)
              : messages.contextWithoutProvider(at, v, providerOf(v));
        ctx.note(from, `${section}.${field}`, message, "NeverMatches");
      }
      for (const name of literalHeaderKeys(r.ok)) {
        if (name === name.toLowerCase()) continue;
        ctx.note(
          from,
          `${section}.${field}`,
          messages.uppercaseHeaderKey(`${path}.policy.matchExpressions[${i}]`, name),
          "NeverMatches",
        );
      }
      return r.ok;
    });
    if (expressions.length === 0) continue;
    const rule: CompiledRule = { path: `${from.name}: ${path}`, action, expressions };
    (action === "Deny" ? deny : action === "Require" ? require : allow).push(rule);
  }
  return { deny, require, allow };
}

function providerOf(variable: string): string {
  switch (variable) {
    case "apiKey":
      return "API key authentication";
    case "basicAuth":
      return "basic authentication";
    case "extauthz":
      return "external authorization (extAuth) with responseMetadata";
    case "llm":
      return "AI backend";
    case "request":
      return "HTTP request (networkAuthorization runs on connections)";
    default:
      return `source of ${variable}`;
  }
}

/** `conditions`: Envoy CEL conditions allowed (HTTP); a connection's rules use principals only (see planNetworkAuthz). */
function rbacOf(a: CompiledAuthorization, ctx: AuthzContext, conditions = true): HttpAuthzPlan["rbac"] {
  if (ctx.path !== "auto" || isEmptyAuthorization(a)) return undefined;
  const rules = [...a.deny, ...a.require, ...a.allow];
  const filters = buildRbacFilters(rules, { conditions });
  if (filters === undefined) return undefined;
  // buildRbacFilters emits, in order, a DENY filter when there are Deny rules, one ALLOW filter for the Require rules,
  // one for the Allow rules.
  const kinds: ("deny" | "require" | "allow")[] = [
    ...(a.deny.length > 0 ? (["deny"] as const) : []),
    ...(a.require.length > 0 ? (["require"] as const) : []),
    ...(a.allow.length > 0 ? (["allow"] as const) : []),
  ];
  return filters.map((config, i) => ({ kind: kinds[i]!, config }));
}

function authorizationContent(a: CompiledAuthorization): unknown {
  const rule = (r: CompiledRule) => ({ path: r.path, exprs: r.expressions.map((e) => e.source) });
  return { deny: a.deny.map(rule), require: a.require.map(rule), allow: a.allow.map(rule) };
}

interface CompiledAuthn {
  readonly content: Record<string, unknown>;
  readonly policy: Omit<ExtAuthzPolicy, "authorization" | "jwt">;
}

function annotationOf(input: TranslationInput, from: PolicySourceIR, key: string): string | undefined {
  if (from.kind !== "GwPolicy") return undefined;
  const [ns, name] = from.name.split("/");
  const p = input.policies.find((x) => (x.metadata.namespace ?? "default") === ns && x.metadata.name === name);
  const v = p?.metadata.annotations?.[key];
  return typeof v === "string" && /^[a-z0-9!#$%&'*+.^_`|~-]+$/i.test(v) ? v.toLowerCase() : undefined;
}

function compileBasic(v: PolicyValueIR, ctx: AuthzContext): CompiledAuthn | undefined {
  const spec = isRecord(v.value) ? v.value : {};
  const field = "traffic.basicAuthentication";
  let htpasswd: string | undefined;
  const ref = spec["secretRef"];
  if (isRecord(ref)) {
    const ns = policyNamespace(v.from);
    const key = typeof ref["key"] === "string" ? ref["key"] : ".htaccess";
    const secret = ctx.input.secrets.find(
      (s) => (s.metadata.namespace ?? "default") === ns && s.metadata.name === ref["name"],
    );
    htpasswd = secret === undefined ? undefined : secretValue(secret, key);
    if (htpasswd === undefined) {
      ctx.note(
        v.from,
        field,
        `secretRef: Secret ${ns}/${String(ref["name"])} with key ${key} not found, so no credentials are accepted`,
        "NeverMatches",
      );
      htpasswd = "";
    }
  }
  const users = Array.isArray(spec["users"]) ? (spec["users"] as string[]) : undefined;
  const location = spec["location"] as ExtractionLocation | undefined;
  const mode = spec["mode"] as "Strict" | "Optional" | undefined;
  const realm = typeof spec["realm"] === "string" ? spec["realm"] : undefined;
  const compiled = compileBasicAuth(
    {
      ...(users !== undefined ? { users } : { htpasswd: htpasswd ?? "" }),
      ...(mode !== undefined ? { mode } : {}),
      ...(realm !== undefined ? { realm } : {}),
      ...(location !== undefined ? { location } : {}),
    },
    "spec.traffic.basicAuthentication",
  );
  for (const p of compiled.problems) {
    // Bad lines are left out (the others still log in); never echo a hash.
    ctx.note(v.from, field, `${p.path}: ${p.message}`, "Ignored");
  }
  let auth = compiled.auth;
  if (auth === undefined) {
    // Some lines were bad: keep the good ones rather than failing open or closed on everyone.
    const good = (users ?? (htpasswd ?? "").split(/\r?\n/)).filter(
      (l) => compileBasicAuth({ users: [l] }, "x").problems.length === 0,
    );
    auth = compileBasicAuth(
      {
        users: good.length > 0 ? good : [],
        ...(mode !== undefined ? { mode } : {}),
        ...(realm !== undefined ? { realm } : {}),
        ...(location !== undefined ? { location } : {}),
      },
      "x",
    ).auth;
  }
  if (auth === undefined) return undefined;
  const header = annotationOf(ctx.input, v.from, BASIC_AUTH_USERNAME_HEADER_ANNOTATION);
  return {
    content: {
      basic: {
        mode,
        realm,
        location,
        users: [...auth.users.values()].map((u) => `${u.username}:${u.hash}`),
      },
      basicHeader: header,
    },
    policy: { basicAuth: auth, ...(header !== undefined ? { upstreamHeaders: { basicAuthUsername: header } } : {}) },
  };
}

function secretData(s: { data?: Readonly<Record<string, string>>; stringData?: Readonly<Record<string, string>> }) {
  const out: Record<string, string> = {};
  for (const k of Object.keys(s.data ?? {})) out[k] = Buffer.from(s.data![k]!, "base64").toString("utf8");
  for (const [k, v] of Object.entries(s.stringData ?? {})) out[k] = v;
  return out;
}

function labelsMatch(labels: Readonly<Record<string, string>> | undefined, want: unknown): boolean {
  if (!isRecord(want)) return false;
  return Object.entries(want).every(([k, v]) => labels?.[k] === v);
}

function compileApiKey(v: PolicyValueIR, ctx: AuthzContext): CompiledAuthn | undefined {
  const spec = isRecord(v.value) ? v.value : {};
  const field = "traffic.apiKeyAuthentication";
  const ns = policyNamespace(v.from);
  const sources: ApiKeySource[] = [];
  const ref = spec["secretRef"];
  if (isRecord(ref)) {
    const kind = ref["kind"] === "ConfigMap" ? "ConfigMap" : "Secret";
    const found =
      kind === "ConfigMap"
        ? ctx.input.configMaps.find(
            (c) => (c.metadata.namespace ?? "default") === ns && c.metadata.name === ref["name"],
          )
        : ctx.input.secrets.find((s) => (s.metadata.namespace ?? "default") === ns && s.metadata.name === ref["name"]);
    if (found === undefined) {
      ctx.note(
        v.from,
        field,
        `secretRef: ${kind} ${ns}/${String(ref["name"])} not found, so no key is accepted`,
        "NeverMatches",
      );
    } else {
      sources.push({
        kind,
        name: `${ns}/${found.metadata.name}`,
        data: kind === "ConfigMap" ? { ...(found.data ?? {}) } : secretData(found as Parameters<typeof secretData>[0]),
      });
    }
  }
  const sel = spec["secretSelector"];
  if (isRecord(sel)) {
    const found = ctx.input.secrets
      .filter((s) => (s.metadata.namespace ?? "default") === ns && labelsMatch(s.metadata.labels, sel["matchLabels"]))
      .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    if (found.length === 0) {
      ctx.note(v.from, field, "secretSelector: no Secret has these labels, so no key is accepted", "NeverMatches");
    }
    for (const s of found) sources.push({ kind: "Secret", name: `${ns}/${s.metadata.name}`, data: secretData(s) });
  }
  const cmSel = spec["configMapSelector"];
  if (isRecord(cmSel)) {
    const found = ctx.input.configMaps
      .filter((c) => (c.metadata.namespace ?? "default") === ns && labelsMatch(c.metadata.labels, cmSel["matchLabels"]))
      .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    if (found.length === 0) {
      ctx.note(
        v.from,
        field,
        "configMapSelector: no ConfigMap has these labels, so no key is accepted",
        "NeverMatches",
      );
    }
    for (const c of found)
      sources.push({ kind: "ConfigMap", name: `${ns}/${c.metadata.name}`, data: { ...(c.data ?? {}) } });
  }
  const mode = spec["mode"] as "Strict" | "Optional" | "Permissive" | undefined;
  const location = spec["location"] as ExtractionLocation | undefined;
  const compiled = compileApiKeyAuth(
    { ...(mode !== undefined ? { mode } : {}), ...(location !== undefined ? { location } : {}) },
    sources,
    "spec.traffic.apiKeyAuthentication",
  );
  for (const p of compiled.problems) ctx.note(v.from, field, `${p.path}: ${p.message}`, "Ignored");
  if (compiled.auth === undefined) return undefined;
  const header = annotationOf(ctx.input, v.from, API_KEY_METADATA_HEADER_ANNOTATION);
  return {
    content: {
      apiKey: {
        mode,
        location,
        // Digests only: the id is visible in Envoy's config.
        entries: sources.map((s) => ({
          kind: s.kind,
          name: s.name,
          data: Object.entries(s.data).map(([k, x]) => [k, secretDigest(x)]),
        })),
      },
      apiKeyHeader: header,
    },
    policy: { apiKey: compiled.auth, ...(header !== undefined ? { upstreamHeaders: { apiKeyMetadata: header } } : {}) },
  };
}

/** The authentication and authorization of one route. */
export function planHttpAuthz(traffic: EffectivePolicyIR | undefined, ctx: AuthzContext): HttpAuthzPlan | undefined {
  if (traffic === undefined) return undefined;
  const basicField = fieldValues(traffic, "basicAuthentication")[0];
  const apiKeyField = fieldValues(traffic, "apiKeyAuthentication")[0];
  const rules = fieldValues(traffic, "authorization");
  if (basicField === undefined && apiKeyField === undefined && rules.length === 0) return undefined;
  const jwt = traffic["jwtAuthentication"] !== undefined;
  const userExtAuth = traffic["extAuth"] !== undefined;
  const available = new Set<string>(["request", "source"]);
  if (jwt) available.add("jwt");
  if (basicField !== undefined) available.add("basicAuth");
  if (apiKeyField !== undefined) available.add("apiKey");
  if (userExtAuth) available.add("extauthz");
  const authorization = compileRules(rules, "traffic", "authorization", available, ctx);
  const basic = basicField === undefined ? undefined : compileBasic(basicField, ctx);
  const apiKey = apiKeyField === undefined ? undefined : compileApiKey(apiKeyField, ctx);
  const authn = basic !== undefined || apiKey !== undefined;
  const rbac = rbacOf(authorization, ctx);
  const sluiceAuthz = !isEmptyAuthorization(authorization) && rbac === undefined;
  const extauthz =
    userExtAuth &&
    [...authorization.deny, ...authorization.require, ...authorization.allow].some((r) =>
      r.expressions.some((e) => e.variables.has("extauthz")),
    );
  const upstreamHeaders = { ...basic?.policy.upstreamHeaders, ...apiKey?.policy.upstreamHeaders };
  const policyOf = (withAuthn: boolean, withAuthz: boolean): string =>
    ctx.table.add(
      {
        authorization: withAuthz ? authorizationContent(authorization) : undefined,
        jwt,
        ...(withAuthz && extauthz ? { extauthz } : {}),
        ...(withAuthn ? { ...basic?.content, ...apiKey?.content } : {}),
      },
      () => ({
        authorization: withAuthz ? authorization : EMPTY_AUTHORIZATION,
        jwt,
        ...(withAuthz && extauthz ? { extauthz } : {}),
        ...(withAuthn && basic !== undefined ? { basicAuth: basic.policy.basicAuth! } : {}),
        ...(withAuthn && apiKey !== undefined ? { apiKey: apiKey.policy.apiKey! } : {}),
        ...(withAuthn && Object.keys(upstreamHeaders).length > 0 ? { upstreamHeaders } : {}),
      }),
    );
  // One call when nothing runs between authentication and authorization; with a user extAuth between them, the
  // authorization call re-derives the identity from the same credentials (cheap: cached, and a SHA-256 for keys).
  const joined = authn && sluiceAuthz && !userExtAuth;
  return {
    ...(authn ? { authnPolicyId: policyOf(true, joined) } : {}),
    ...(rbac !== undefined ? { rbac } : {}),
    ...(sluiceAuthz && !joined ? { authzPolicyId: policyOf(authn, true) } : {}),
    readsJwt: jwt && sluiceAuthz,
    readsExtauthz: extauthz && sluiceAuthz,
  };
}

/** `frontend.networkAuthorization` of one Gateway port: only `source` exists on a connection. */
export function planNetworkAuthz(
  frontend: EffectivePolicyIR | undefined,
  ctx: AuthzContext,
): NetworkAuthzPlan | undefined {
  const rules = fieldValues(frontend, "networkAuthorization");
  if (rules.length === 0) return undefined;
  const available = new Set<string>(["source"]);
  const authorization = compileRules(rules, "frontend", "networkAuthorization", available, ctx);
  if (isEmptyAuthorization(authorization)) return undefined;
  // RBAC only when every expression reads nothing but `source`: an expression reading `request` (absent on a
  // connection) can still be true in CEL (`error || true`), so those go to Sluice, which evaluates them exactly.
  const rules4 = [...authorization.deny, ...authorization.require, ...authorization.allow];
  const sourceOnly = rules4.every((r) => r.expressions.every((e) => [...e.variables].every((v) => v === "source")));
  // Principals only: Envoy's CEL on a connection (the network rbac filter) is not exercised here end to end.
  const rbac = sourceOnly ? rbacOf(authorization, ctx, false) : undefined;
  if (rbac !== undefined) return { rbac };
  return {
    policyId: ctx.table.add({ network: authorizationContent(authorization) }, () => ({ authorization, jwt: false })),
  };
}
