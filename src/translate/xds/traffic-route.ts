// The traffic fields Envoy carries on the route itself: timeouts, retry, headerModifiers, hostRewrite and
// directResponse. PreRouting values apply first and PostRouting values over them (the two phases never merge, and
// on one route the later phase decides). Fields that need CEL per request are reported, never dropped silently.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Traffic } from "../../api/policy.js";
import type { Static } from "../../api/schema-kit.js";
import { compileExpression } from "../../cel/env.js";
import {
  HeaderValueOption_HeaderAppendAction,
  type HeaderValueOptionSchema,
} from "../../gen/envoy/config/core/v3/base_pb.js";
import type {
  RetryPolicy,
  RetryPolicySchema,
  RouteSchema,
} from "../../gen/envoy/config/route/v3/route_components_pb.js";
import { durationFromMs, parseDurationMs } from "../duration.js";
import type { PolicySourceIR, RouteIR } from "../ir.js";
import { mcpUnservedParts } from "../mcp/connection.js";
import { isMcpClusterName } from "../names.js";
import { APPLIED_CONNECTION_FIELDS } from "./backend-connection.js";
import { RETRY_CONDITION_HEADER, sluiceRetryCondition } from "./backend-transformation.js";
import { internalRequestHeaders } from "./filters/context.js";
import { AUTHZ_POLICY_METADATA_KEY, httpAuthzPolicyId } from "./filters/ext-authz-sluice.js";
import { celStringLiteral, phaseFields } from "./filters/policy-fields.js";
import { BUFFER_RESPONSE_METADATA_KEY } from "./filters/route-scoped.js";
import { directNeedsSluice } from "./filters/transformation.js";
import { type BuildContext, SLUICE_ROUTE_METADATA } from "./filters/types.js";
import { failoverRetryPolicy } from "./llm.js";
import { retryConditionCodes } from "./retry-condition.js";

type T = Static<typeof Traffic>;
type Init = MessageInitShape<typeof RouteSchema>;
type HeaderFilter = NonNullable<NonNullable<T["headerModifiers"]>["request"]>;

function options(h: HeaderFilter): MessageInitShape<typeof HeaderValueOptionSchema>[] {
  return [
    ...(h.set ?? []).map((x) => ({
      header: { key: x.name, value: x.value },
      appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    })),
    ...(h.add ?? []).map((x) => ({
      header: { key: x.name, value: x.value },
      appendAction: HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD,
    })),
  ];
}

type RetryInit = Exclude<MessageInitShape<typeof RetryPolicySchema>, RetryPolicy>;

/**
 * Gateway API retries (codes, attempts, backoff): retry on connection failures and resets, and on these codes; with
 * `condition`, also on the status codes it is true for (retry-condition.ts).
 */
function retryPolicy(
  r: NonNullable<T["retry"]>,
  conditionCodes: readonly number[] = [],
  markedBySluice = false,
): RetryInit {
  const codes = [...new Set([...(r.codes ?? []), ...conditionCodes])].sort((a, b) => a - b);
  const backoff = r.backoff !== undefined ? parseDurationMs(r.backoff) : undefined;
  return {
    retryOn: [
      "connect-failure",
      "refused-stream",
      "reset",
      ...(codes.length > 0 ? ["retriable-status-codes"] : []),
      ...(markedBySluice ? ["retriable-headers"] : []),
    ].join(","),
    retriableStatusCodes: codes,
    ...(markedBySluice
      ? {
          retriableHeaders: [
            {
              name: RETRY_CONDITION_HEADER,
              headerMatchSpecifier: {
                case: "stringMatch" as const,
                value: { matchPattern: { case: "exact", value: "true" } },
              },
            },
          ],
        }
      : {}),
    ...(r.attempts !== undefined ? { numRetries: r.attempts } : {}),
    ...(backoff !== undefined && backoff > 0 ? { retryBackOff: { baseInterval: durationFromMs(backoff) } } : {}),
  };
}

/** Applies the route-level traffic fields of `r` to the Envoy route `out` (in place). */
/**
 * `earlyHeaders`: the route configuration's PreRouting request header modifiers already run in the HCM before
 * routing (early-headers.ts), so they are not repeated on the route.
 */
export function applyTrafficToRoute(r: RouteIR, out: Init, ctx: BuildContext | undefined, earlyHeaders = false): void {
  const note = (
    from: Parameters<BuildContext["note"]>[0],
    field: string,
    message: string,
    reason?: Parameters<BuildContext["note"]>[3],
  ) => ctx?.note(from, field, message, reason);
  noteUnappliedBackendFields(r, ctx);
  applyBackendCredentials(r, out, ctx);
  const route = out.action?.case === "route" ? out.action.value : undefined;

  for (const f of phaseFields<NonNullable<T["headerModifiers"]>>(r, "headerModifiers")) {
    const { response } = f.value;
    const hoisted = f.phase === "preRouting" && earlyHeaders;
    const request = hoisted ? undefined : f.value.request;
    if (request !== undefined && f.phase === "preRouting") {
      note(
        f.from,
        "headerModifiers.request",
        "PreRouting request headers are set after route selection here: the routes served on this port do not all " +
          "share this policy's PreRouting headers, so they cannot run before routing",
      );
    }
    if (request !== undefined) {
      out.requestHeadersToAdd = [...(out.requestHeadersToAdd ?? []), ...options(request)];
      out.requestHeadersToRemove = [...(out.requestHeadersToRemove ?? []), ...(request.remove ?? [])];
    }
    if (response !== undefined) {
      out.responseHeadersToAdd = [...(out.responseHeadersToAdd ?? []), ...options(response)];
      out.responseHeadersToRemove = [...(out.responseHeadersToRemove ?? []), ...(response.remove ?? [])];
    }
  }

  // Headers Sluice sets for later filters only (filters/context.ts) never reach the backend.
  const internal = internalRequestHeaders(r);
  if (internal.length > 0) out.requestHeadersToRemove = [...(out.requestHeadersToRemove ?? []), ...internal];

  // The policy of the route's HTTP authorization check, which Envoy reads from here (filters/ext-authz-sluice.ts).
  const httpAuthz = ctx !== undefined ? httpAuthzPolicyId(r, ctx) : undefined;
  if (httpAuthz !== undefined) setSluiceMetadata(out, AUTHZ_POLICY_METADATA_KEY, httpAuthz);

  // Marks the route for the listener's 502 mapping of an oversized buffered response (filters/route-scoped.ts).
  if (phaseFields<NonNullable<T["buffer"]>>(r, "buffer").at(-1)?.value.response !== undefined) {
    setSluiceMetadata(out, BUFFER_RESPONSE_METADATA_KEY, true);
  }

  for (const f of phaseFields<NonNullable<T["timeouts"]>>(r, "timeouts")) {
    const ms = f.value.request !== undefined ? parseDurationMs(f.value.request) : undefined;
    // An HTTPRoute rule's own timeouts.request is more specific than a policy and keeps precedence.
    if (route !== undefined && ms !== undefined && r.action.kind === "forward" && r.action.timeout === undefined) {
      route.timeout = durationFromMs(ms);
    }
  }

  // backend.http.requestTimeout: the route's deadline when nothing more specific set one (the HTTPRoute rule's own, a
  // traffic policy's timeouts.request) and every backend of the route has the same one. Envoy has one per route.
  const trafficTimeout = phaseFields<NonNullable<T["timeouts"]>>(r, "timeouts").some(
    (f) => f.value.request !== undefined,
  );
  const backendTimeouts = backendRequestTimeouts(r, ctx);
  if (backendTimeouts.length > 0 && route !== undefined && r.action.kind === "forward") {
    const distinct = new Set(backendTimeouts.map((t) => t.ms));
    const only = backendTimeouts[0];
    if (distinct.size === 1 && only !== undefined && backendTimeouts.length === r.action.backends.length) {
      if (r.action.timeout === undefined && !trafficTimeout) route.timeout = durationFromMs(only.ms);
    } else if (only !== undefined) {
      note(
        only.from,
        "backend.http.requestTimeout",
        "the route's backends do not share one request timeout; Envoy has one per route, so none is applied",
      );
    }
  }

  // A retry.condition reading more than the status code: Sluice evaluates it per attempt (backend-transformation.ts).
  const bySluice = sluiceRetryCondition(r);
  for (const f of phaseFields<NonNullable<T["retry"]>>(r, "retry")) {
    let conditionCodes: readonly number[] = [];
    const sluiceCondition = bySluice !== undefined && bySluice.from === f.from && f.value.condition === bySluice.text;
    if (f.value.condition !== undefined && !sluiceCondition) {
      const c = retryConditionCodes(f.value.condition);
      if (!c.ok) note(f.from, "retry.condition", c.why);
      else if (c.codes.length === 0) {
        note(
          f.from,
          "retry.condition",
          "is true for no status code (100 to 599): only connection failures and resets are retried",
          "NeverMatches",
        );
      } else conditionCodes = c.codes;
    }
    if (route !== undefined) {
      // An AI route's failover (llm.ts): its retries still go to another provider, then to the next group.
      const a = r.action;
      const failover: RetryInit =
        a.kind === "forward" && a.failover !== undefined ? (failoverRetryPolicy(a.failover.retries) as RetryInit) : {};
      route.retryPolicy = {
        ...retryPolicy(f.value, conditionCodes, sluiceCondition),
        ...(failover.retryPriority !== undefined
          ? {
              retryPriority: failover.retryPriority,
              retryHostPredicate: failover.retryHostPredicate ?? [],
              ...(failover.hostSelectionRetryMaxAttempts !== undefined
                ? { hostSelectionRetryMaxAttempts: failover.hostSelectionRetryMaxAttempts }
                : {}),
            }
          : {}),
      };
    }
    // The mark is for the router alone: a response that is not retried (attempts spent) goes out without it.
    if (sluiceCondition && !(out.responseHeadersToRemove ?? []).includes(RETRY_CONDITION_HEADER)) {
      out.responseHeadersToRemove = [...(out.responseHeadersToRemove ?? []), RETRY_CONDITION_HEADER];
    }
    // retry.precondition: Sluice's transformation ext_proc evaluates it (filters/transformation.ts). One that does not
    // compile can never be true, which the spec reads as "no retries".
    const pre = f.value.precondition;
    const compiled = pre === undefined ? undefined : compileExpression(pre);
    if (compiled !== undefined && "errors" in compiled) {
      note(
        f.from,
        "retry.precondition",
        `${compiled.errors.map((e) => e.message).join("; ")}; it can never be true, so the route makes no retries`,
        "NeverMatches",
      );
      if (route?.retryPolicy !== undefined) route.retryPolicy = { ...route.retryPolicy, numRetries: 0 };
    }
  }

  for (const f of phaseFields<NonNullable<T["hostRewrite"]>>(r, "hostRewrite")) {
    if (route === undefined) continue;
    // Auto: the Host header becomes the upstream host name (DNS / static backends).
    if (f.value.mode === "Auto") route.hostRewriteSpecifier = { case: "autoHostRewrite", value: { value: true } };
    else if (route.hostRewriteSpecifier?.case === "autoHostRewrite") delete route.hostRewriteSpecifier;
  }

  for (const f of phaseFields<NonNullable<T["directResponse"]>>(r, "directResponse")) {
    const d = f.value;
    // With CEL, Sluice's ext_proc answers with the evaluated body and headers (filters/transformation.ts); the route's
    // own direct response stays for its status and static body.
    const bySluice = directNeedsSluice(d);
    const headers: MessageInitShape<typeof HeaderValueOptionSchema>[] = [];
    for (const h of bySluice ? [] : (d.headers ?? [])) {
      // Every value is a string literal here (otherwise Sluice answers).
      const v = celStringLiteral(h.value);
      if (v === undefined) continue;
      headers.push({
        header: { key: h.name, value: v },
        appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
      });
    }
    out.action = {
      case: "directResponse",
      value: {
        status: d.status,
        ...(d.body !== undefined ? { body: { specifier: { case: "inlineString", value: d.body } } } : {}),
      },
    };
    out.responseHeadersToAdd = [...(out.responseHeadersToAdd ?? []), ...headers];
  }
}

/** The `backend.http.requestTimeout` of each backend of the route that has one (non-AI backends). */
function backendRequestTimeouts(r: RouteIR, ctx: BuildContext | undefined): { ms: number; from: PolicySourceIR }[] {
  const out: { ms: number; from: PolicySourceIR }[] = [];
  for (const b of r.policy?.backends ?? []) {
    const f = b.policy.http;
    if (f === undefined || "combined" in f) continue;
    // AI backends: the GwBackend's own, or a GwPolicy's for the whole GwBackend (one for a single provider is that
    // provider's, per attempt, in its hop: llm-provider-hop.ts; the route's timeout cannot tell an attempt's provider).
    if (ctx?.cluster?.(b.cluster)?.kind === "llm" && f.from.level === "backendSection") continue;
    const t = (f.value as { requestTimeout?: unknown } | undefined)?.requestTimeout;
    const ms = typeof t === "string" ? parseDurationMs(t) : undefined;
    if (ms !== undefined) out.push({ ms, from: f.from });
  }
  return out;
}

/**
 * Backend policy fields served on AI backends: by the LLM table (`ai`, `auth`: llm/table.ts), the route's ext_authz
 * (`extAuth`: backend-ext-auth.ts), the AI cluster's upstream transformation (`transformation`:
 * llm-transformation.ts, which reports its own problems) and its health (`health`: the GwBackend's own natively, else
 * Sluice's scoring, llm-health.ts, which reports its own); every other one is reported.
 */
const AI_BACKEND_FIELDS = new Set(["ai", "auth", "extAuth", "transformation", "health"]);

type Rec = Record<string, unknown>;

/**
 * What the AI cluster (backend/ai.ts) serves of a GwBackend's own `spec.policies` (level `gwBackend`) and of a
 * provider's own `policies` (level `subBackend`): the parts of each field it does not serve, by field; a field not
 * listed is reported whole.
 */
const AI_CLUSTER_FIELDS: Readonly<
  Record<"gwBackend" | "subBackend", Readonly<Record<string, ((v: Rec) => string[]) | undefined>>>
> = {
  gwBackend: {
    tls: () => [],
    tunnel: () => [],
    tcp: () => [],
    // version: the cluster's protocol; requestTimeout: the route's timeout (backendRequestTimeouts).
    http: () => [],
    // Envoy's outlier detection, or Sluice's scoring (llm-health.ts, which reports what it cannot apply).
    health: () => [],
    // The route's ext_authz (backend-ext-auth.ts).
    extAuth: () => [],
    // The AI cluster's upstream transformation (llm-transformation.ts).
    transformation: () => [],
  },
  // The provider's TLS socket and tunnel; its tcp and http through a hop of its own where they differ from the
  // cluster's (llm-provider-hop.ts), its requestTimeout there per attempt.
  subBackend: { tls: () => [], tunnel: () => [], health: () => [], tcp: () => [], http: () => [] },
};

/** Why a provider's own `extAuth` is not applied (docs/policies.md says the same). */
const PROVIDER_EXT_AUTH_WHY =
  "not applied from a provider's own policies (BackendWithAI has no extAuth): set it in a GwPolicy targeting the provider (sectionName), which Sluice checks per attempt, or on the GwBackend's spec.policies to check every request to the GwBackend";

/** Whether the route sends `backend` (`GwBackend ns/name`) to Sluice's MCP service (names.ts mcpClusterName). */
function servesMcp(r: RouteIR, backend: string): boolean {
  const suffix = `/${backend.replace(/^GwBackend /, "")}`;
  return (
    r.action.kind === "forward" &&
    r.action.backends.some((x) => isMcpClusterName(x.cluster) && x.cluster.endsWith(suffix))
  );
}

/**
 * Backend policy fields that reach no Envoy or Sluice config yet are reported on the policy that set them (a GwPolicy,
 * or a GwBackend's own policies), rather than shown as applied: on Service and static backends all but the connection
 * settings of backend-connection.ts (`tcp`, `http`, `health`: eviction natively, the score by Sluice) and
 * `auth` / `tls`; on AI backends all but `ai` and `auth` from a GwPolicy, and from the GwBackend's own policies what
 * its cluster serves (AI_CLUSTER_FIELDS).
 */
export function noteUnappliedBackendFields(r: RouteIR, ctx: BuildContext | undefined): void {
  if (ctx === undefined) return;
  for (const b of r.policy?.backends ?? []) {
    // An MCP backend's cluster is named per Gateway (names.ts mcpClusterName): found by the backend it serves.
    const mcp =
      r.action.kind === "forward" &&
      r.action.backends.some((x) => {
        const c = ctx.cluster?.(x.cluster);
        return c?.kind === "mcp" && `GwBackend ${c.backend}` === b.backend;
      });
    const kind = mcp ? "mcp" : ctx.cluster?.(b.cluster)?.kind;
    const ai = kind === "llm";
    const sections = [b.policy, ...(b.subBackends ?? []).map((s) => s.policy)];
    for (const section of sections) {
      for (const [field, f] of Object.entries(section)) {
        // backend.mcp of an MCP backend is the MCP table's, which reports what of it is not served.
        if (field === "mcp" && servesMcp(r, b.backend)) continue;
        if ("combined" in f) continue;
        // A sub-backend's own policies: an AI provider's here, an MCP target's in the MCP table (translate/mcp/table.ts).
        if (f.from.kind !== "GwPolicy" && f.from.level !== "gwBackend" && !ai) continue;
        const value = (f.value ?? {}) as Rec;
        const parts = (served: ((v: Rec) => string[]) | undefined, why: string) => {
          if (served === undefined) {
            ctx.note(f.from, `backend.${field}`, why);
            return;
          }
          for (const part of served(value)) {
            ctx.note(f.from, `backend.${field}.${part}`, why);
          }
        };
        if (ai) {
          // A GwPolicy's extAuth for one provider is checked by the LLM ext_proc per attempt (llm/provider-ext-auth.ts);
          // a provider's own (which its schema has not) could not be: the route's ext_authz runs before a provider is
          // chosen.
          if (field === "extAuth" && f.from.level === "subBackend") {
            ctx.note(f.from, "backend.extAuth", PROVIDER_EXT_AUTH_WHY);
            continue;
          }
          if (AI_BACKEND_FIELDS.has(field)) continue;
          if (f.from.kind === "GwPolicy" && (field === "tcp" || field === "http")) {
            // For the whole GwBackend: the AI cluster's (llm-connection.ts, which reports routes that disagree); for one
            // provider (sectionName): that provider's, through a hop of its own (llm-provider-hop.ts).
            continue;
          } else if (f.from.kind === "GwPolicy" && (field === "tls" || field === "tunnel")) {
            // Each provider's (backend/ai-policy-tls.ts, which reports what it cannot apply).
            continue;
          } else if (f.from.kind === "GwPolicy") {
            ctx.note(f.from, `backend.${field}`, "not applied to AI backends when set by a GwPolicy");
          } else if (f.from.level === "subBackend") {
            parts(AI_CLUSTER_FIELDS.subBackend[field], "not applied to AI providers yet");
          } else {
            parts(AI_CLUSTER_FIELDS.gwBackend[field], "not applied to AI backends yet");
          }
          continue;
        }
        if (kind === "mcp") {
          // Sluice's MCP service, not an Envoy cluster, reaches MCP targets: what its transport does not serve.
          for (const [part, why] of mcpUnservedParts(field, f.value)) {
            ctx.note(f.from, `backend.${field}${part === "" ? "" : `.${part}`}`, why);
          }
          continue;
        }
        // Credentials and TLS: applyBackendCredentials (Envoy's credential injector for one key or secretRef in a
        // header, else Sluice's credential ext_proc, which writes `credentials[]` beside it: docs/credentials.md).
        if (field === "auth" || field === "tls") continue;
        // Connection settings become cluster settings (backend-connection.ts), but for the parts listed.
        parts(APPLIED_CONNECTION_FIELDS[field], `not applied to ${b.backend} yet`);
      }
    }
  }
}

/**
 * `backend.auth` and `backend.tls` of the route's Service and static backends that could not be applied
 * (backend-connection.ts found them): each is reported; a credential or TLS setting that cannot be had makes the route
 * answer 503, so the request never goes out without it.
 */
function applyBackendCredentials(r: RouteIR, out: Init, ctx: BuildContext | undefined): void {
  if (ctx === undefined || r.backendProblems === undefined) return;
  for (const p of r.backendProblems) ctx.note(p.from, p.field, p.message);
  if (r.backendProblems.some((p) => p.fatal)) {
    out.action = {
      case: "directResponse",
      value: {
        status: 503,
        body: {
          specifier: { case: "inlineString", value: "backend credentials, TLS or tunnel settings are not available" },
        },
      },
    };
  }
}

/** Sets `key` in the route's metadata namespace `sluice`, keeping what the route already has there and elsewhere. */
function setSluiceMetadata(out: Init, key: string, value: string | boolean): void {
  const md = out.metadata?.filterMetadata ?? {};
  const ns = md[SLUICE_ROUTE_METADATA] ?? {};
  out.metadata = { filterMetadata: { ...md, [SLUICE_ROUTE_METADATA]: { ...ns, [key]: value } } };
}
