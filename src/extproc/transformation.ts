// GwPolicy `traffic.transformation` in Sluice's ext_proc: request and response headers, bodies and dynamic metadata
// computed with CEL per request (Envoy has no CEL for these). The route's filter config carries the transformation
// itself (src/translate/xds/filters/transformation.ts), encoded in the gRPC metadata of each stream, so there is no
// table to keep in step with Envoy; the expressions are compiled once per text.
//
// The CEL variables: `request` (method, path, host, scheme, headers, query, and `body` as a UTF-8 string when the route
// has the request body sent), `source` (address, port: when the route sends them), the identity variables the route
// forwards (`jwt`, `apiKey`, `basicAuth`, `extauthz`), and on the response side `response` (`code`, `headers`, and
// `body` when the route has the response body sent). A value is used as written when it is a string (bytes as UTF-8)
// and as JSON otherwise; an expression that fails leaves its header out, or the body or metadata key as it was.
//
// The conditional form: the first entry whose condition is true applies to the request and its response (conditions are
// evaluated once, on the request: with its body when the route has it sent).
//
// The same stream answers a `directResponse` whose body or headers are CEL: an immediate response, computed from the
// request (and its body when an expression reads it).

import type { JsonObject } from "@bufbuild/protobuf";
import { peerIpValue, specEnvironment, specEnvironmentWith } from "../cel/index.js";
import { parseDurationMs } from "../translate/duration.js";
import { LLM_PROVIDER_ATTRIBUTE } from "../translate/llm/table.js";
import {
  ATTEMPT_JOURNAL_FIELD,
  ATTEMPT_METADATA_NAMESPACE,
  type AttemptState,
  openJournal,
  recordAttempt,
  sealJournal,
  undoAttempt,
  withUndone,
} from "./attempt-journal.js";
import { evaluateText, identityVariables, requestVariable } from "./llm/cel.js";
import type { ExtProcHeaders, ExtProcRequest, Reply, ReplyHeaders } from "./llm/wire.js";

export type { AttemptJournal, AttemptState } from "./attempt-journal.js";

/** gRPC metadata of a transformation stream: its spec, base64url of JSON (TransformationSpec). */
export const TRANSFORMATION_METADATA = "x-sluice-transformation";
/** The stage metadata value that routes a Sluice ext_proc stream here. */
export const TRANSFORMATION_STAGE = "transformation";
/** The CEL environment of response-side expressions: the spec's, and `response`. */
export const RESPONSE_ENVIRONMENT = specEnvironmentWith(["response"]);

/** Dynamic metadata namespace the `metadata` entries are written to. */
export const TRANSFORMATION_METADATA_NAMESPACE = "sluice.transformation";

/** One direction's changes, each value a CEL expression (the API's Transform). */
export interface TransformSpec {
  readonly set?: readonly { readonly name: string; readonly value: string }[];
  readonly add?: readonly { readonly name: string; readonly value: string }[];
  readonly remove?: readonly string[];
  readonly body?: string;
  readonly metadata?: Readonly<Record<string, string>>;
}

export interface TransformationEntry {
  /** Absent: always applies (the top-level form, or the conditional list's fallback). */
  readonly condition?: string;
  readonly request?: TransformSpec;
  readonly response?: TransformSpec;
}

/**
 * `traffic.directResponse` with CEL (`bodyExpression`, or header values other than string literals): Sluice answers
 * the request itself with this status, the evaluated headers and body (`body` and `bodyExpression` exclude each
 * other; a failing `bodyExpression` gives an empty body, a failing header is left out).
 */
export interface DirectResponseSpec {
  readonly status: number;
  readonly body?: string;
  readonly bodyExpression?: string;
  readonly headers: readonly { readonly name: string; readonly value: string }[];
}

/** Envoy's fault filter reads the delay to inject from this request header (on routes configured so only). */
export const FAULT_DELAY_HEADER = "x-envoy-fault-delay-request";
/** Set to `true` on an attempt's response that `retry.condition` retries; removed otherwise (and from the client's). */
export const RETRY_CONDITION_HEADER = "x-sluice-retry-condition";
/** Envoy's router takes the number of retries from this request header over the route's retry policy. */
export const MAX_RETRIES_HEADER = "x-envoy-max-retries";

/** What a route's filter config carries: the entries in order, and which bodies Envoy sends. */
export interface TransformationSpec {
  readonly entries: readonly TransformationEntry[];
  readonly direct?: DirectResponseSpec;
  /** `delay.duration` as CEL: evaluated per request into the fault filter's delay header. */
  readonly delay?: string;
  /** `retry.precondition`: evaluated per request; unless true, the router is told to make no retry. */
  readonly retryPrecondition?: string;
  /**
   * `retry.condition` reading more than the status code, evaluated on each attempt's response by the upstream
   * instance of this processor: true marks the response with RETRY_CONDITION_HEADER, which the route's retry policy
   * matches (`retriable_headers`).
   */
  readonly retryCondition?: string;
  /**
   * An AI cluster's providers whose effective `transformation` differs from the backend's (a provider's own
   * `policies.transformation`, which replaces the backend's as a whole): their entries, chosen per attempt by the
   * provider Envoy picked (its endpoint's metadata, sent as PROVIDER_ATTRIBUTE). Other providers get `entries`.
   */
  readonly providers?: Readonly<Record<string, readonly TransformationEntry[]>>;
  /**
   * An AI cluster's transformation (llm-transformation.ts): each attempt first undoes the request header changes of the
   * attempt before it (AttemptJournal), found through the LLM request that the attempt belongs to.
   */
  readonly llm?: boolean;
  /**
   * A Service backend's transformation that changes request headers: each attempt first undoes the changes of the
   * attempt before it, from the journal that attempt sealed into the request's dynamic metadata (attempt-journal.ts).
   * An AI cluster's (`llm`) finds its journal through the LLM request instead.
   */
  readonly journal?: boolean;
  readonly requestBody: boolean;
  readonly responseBody: boolean;
}

/** The immediate response of a direct response with CEL. */
export function directReply(d: DirectResponseSpec, vars: Obj, log?: (m: string) => void): Reply {
  const set: Record<string, string> = {};
  for (const h of d.headers) {
    const v = asText(evaluateText(h.value, vars));
    if (v === undefined) log?.(`directResponse: header ${h.name} failed to evaluate; left out`);
    else set[h.name.toLowerCase()] = v;
  }
  let body = d.body ?? "";
  if (d.bodyExpression !== undefined) {
    const v = asText(evaluateText(d.bodyExpression, vars));
    if (v === undefined) log?.("directResponse: bodyExpression failed to evaluate; the body is empty");
    else body = v;
  }
  return { phase: "immediate", status: d.status, headers: { set }, body, details: "sluice_direct_response" };
}

export function encodeTransformation(spec: TransformationSpec): string {
  return Buffer.from(JSON.stringify(spec)).toString("base64url");
}

const decoded = new Map<string, TransformationSpec | undefined>();
const DECODED_MAX = 1024;

/** The spec of a stream's metadata (cached by its text), or undefined when malformed. */
export function decodeTransformation(text: string): TransformationSpec | undefined {
  if (decoded.has(text)) return decoded.get(text);
  let spec: TransformationSpec | undefined;
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString()) as TransformationSpec;
    spec = Array.isArray(v.entries) ? v : undefined;
  } catch {
    spec = undefined;
  }
  if (decoded.size >= DECODED_MAX) decoded.clear();
  decoded.set(text, spec);
  return spec;
}

type Obj = Record<string, unknown>;

/** A CEL result as a header value or body: strings as they are, everything else as JSON. */
function asText(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === "string") return v;
  return JSON.stringify(v);
}

/** The changes of one direction: header mutation, new body (undefined: unchanged), metadata. */
export interface Applied {
  readonly headers: ReplyHeaders;
  readonly body?: string;
  readonly metadata?: JsonObject;
}

/** Evaluates `t` with `vars`. Pure: the e2e and unit tests both go through it. */
export function applyTransform(
  t: TransformSpec | undefined,
  vars: Obj,
  log?: (m: string) => void,
  environment = specEnvironment,
): Applied {
  const set: Record<string, string> = {};
  const add: [string, string][] = [];
  const value = (what: string, expr: string): string | undefined => {
    const v = asText(evaluateText(expr, vars, environment));
    if (v === undefined) log?.(`transformation: ${what} failed to evaluate; left out`);
    return v;
  };
  for (const h of t?.set ?? []) {
    const v = value(`set ${h.name}`, h.value);
    if (v !== undefined) set[h.name.toLowerCase()] = v;
  }
  for (const h of t?.add ?? []) {
    const v = value(`add ${h.name}`, h.value);
    if (v !== undefined) add.push([h.name.toLowerCase(), v]);
  }
  let body: string | undefined;
  if (t?.body !== undefined) body = value("body", t.body);
  let metadata: JsonObject | undefined;
  for (const [key, expr] of Object.entries(t?.metadata ?? {})) {
    const v = evaluateText(expr, vars, environment);
    if (v === undefined) {
      log?.(`transformation: metadata ${key} failed to evaluate; left out`);
      continue;
    }
    metadata ??= {};
    metadata[key] = JSON.parse(JSON.stringify(v) ?? "null");
  }
  if (body !== undefined) set["content-length"] = String(Buffer.byteLength(body));
  const remove = (t?.remove ?? []).map((n) => n.toLowerCase()).filter((n) => !(n in set));
  return {
    headers: { set, ...(add.length > 0 ? { add } : {}), ...(remove.length > 0 ? { remove } : {}) },
    ...(body !== undefined ? { body } : {}),
    ...(metadata !== undefined ? { metadata: { [TRANSFORMATION_METADATA_NAMESPACE]: metadata } } : {}),
  };
}

const utf8 = new TextDecoder();

function headerMap(h: ExtProcHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const x of h.headers?.headers ?? []) {
    const v = x.value !== "" ? x.value : utf8.decode(x.rawValue);
    out[x.key] = x.key in out ? `${out[x.key]},${v}` : v;
  }
  return out;
}

/**
 * The provider Envoy picked for this attempt: the endpoint metadata an AI cluster names its providers by. Re-exported
 * (a live binding), not copied into a constant: this module and translate/llm/table.ts are in an import cycle (through
 * the translation's filters), and a copy read at load time fails when table.ts has not run yet.
 */
export { LLM_PROVIDER_ATTRIBUTE as PROVIDER_ATTRIBUTE } from "../translate/llm/table.js";

/** The entries of the attempt's provider when it has its own (`spec.providers`); undefined: the spec's `entries`. */
function providerEntries(
  spec: TransformationSpec | undefined,
  req: Pick<ExtProcRequest, "attributes">,
): readonly TransformationEntry[] | undefined {
  if (spec?.providers === undefined) return undefined;
  const provider = req.attributes["envoy.filters.http.ext_proc"]?.[LLM_PROVIDER_ATTRIBUTE];
  // Own keys only: a provider may be named `constructor`.
  return typeof provider === "string" && Object.hasOwn(spec.providers, provider) ? spec.providers[provider] : undefined;
}

/**
 * The `source` variable from the request attributes Envoy sends when the route reads it. Envoy's source.address is
 * `ip:port`; the spec's is an IP typed value, as in authorization (see peerIpValue).
 */
export function sourceVariable(req: Pick<ExtProcRequest, "attributes">): Obj | undefined {
  const a = req.attributes["envoy.filters.http.ext_proc"];
  const address = a?.["source.address"];
  if (typeof address !== "string") return undefined;
  const ip = peerIpValue(
    address.startsWith("[") ? address.slice(1, address.indexOf("]")) : address.replace(/:\d+$/, ""),
  );
  if (ip === undefined) return undefined;
  const port = a?.["source.port"];
  return { address: ip, port: BigInt(typeof port === "number" ? port : 0) };
}

/** What the processor uses of a stream (see ExtProcCall in llm/service.ts). */
export interface TransformationCall {
  on(event: "data", fn: (req: ExtProcRequest) => void): void;
  on(event: "end", fn: () => void): void;
  on(event: "error", fn: (e: Error) => void): void;
  write(r: Reply): void;
  end(): void;
}

/**
 * The journal a Service backend's previous attempt sealed into the request's metadata (an empty one on the first
 * attempt); undefined when it cannot be opened (not sealed by this process): nothing is undone then.
 */
function metadataAttempt(
  req: Pick<ExtProcRequest, "metadataContext">,
  log: (m: string) => void,
): AttemptState | undefined {
  const sealed = req.metadataContext?.filterMetadata[ATTEMPT_METADATA_NAMESPACE]?.[ATTEMPT_JOURNAL_FIELD];
  const journal = openJournal(typeof sealed === "string" ? sealed : "");
  if (journal === undefined) log("transformation: the previous attempt's journal cannot be opened; nothing undone");
  return journal === undefined ? undefined : { journal, provided: new Set(), pseudo: true };
}

/**
 * One stream: one HTTP request and its response. `attempt`: for an AI cluster's transformation, the state of the client
 * request this attempt belongs to (undefined when it cannot be found: nothing is undone).
 */
export function serveTransformation(
  call: TransformationCall,
  spec: TransformationSpec | undefined,
  log: (m: string) => void,
  attempt?: (headers: Readonly<Record<string, string>>) => AttemptState | undefined,
): void {
  let vars: Obj = {};
  let entry: TransformationEntry | undefined;
  let requestHeaders: Record<string, string> = {};
  let closed = false;
  const answer = (r: Reply, last: boolean) => {
    if (closed) return;
    call.write(r);
    if (last) {
      closed = true;
      call.end();
    }
  };
  let entries = spec?.entries ?? [];
  let undone: { set: Record<string, string>; remove: string[] } | undefined;
  let state: AttemptState | undefined;
  const journaled = spec?.llm !== true && spec?.journal === true;
  const choose = () => {
    entry = entries.find((e) => {
      if (e.condition === undefined) return true;
      return evaluateText(e.condition, vars) === true;
    });
  };
  const request = (phase: "requestHeaders" | "requestBody", replace: boolean) => {
    const t = applyTransform(entry?.request, vars, log);
    const d = spec?.delay === undefined ? t : withDelay(t, spec.delay, vars, log);
    const r = spec?.retryPrecondition === undefined ? d : withRetryPrecondition(d, spec.retryPrecondition, vars, log);
    if (state !== undefined) recordAttempt(state.journal, requestHeaders, r.headers);
    const u = undone === undefined ? r : { ...r, headers: withUndone(r.headers, undone) };
    // A Service backend's journal goes with the request, for the next attempt (sealed even when empty: it replaces the
    // previous attempt's).
    const a =
      journaled && state !== undefined
        ? {
            ...u,
            metadata: {
              ...u.metadata,
              [ATTEMPT_METADATA_NAMESPACE]: { [ATTEMPT_JOURNAL_FIELD]: sealJournal(state.journal) },
            },
          }
        : u;
    answer(
      {
        phase,
        headers: a.headers,
        ...(a.body !== undefined ? { body: a.body, ...(replace ? { replace: true } : {}) } : {}),
        ...(a.metadata !== undefined ? { metadata: a.metadata } : {}),
      },
      // Envoy sends the response only when some entry changes it: otherwise the exchange ends here.
      !hasResponseStage(spec),
    );
  };
  const response = (phase: "responseHeaders" | "responseBody", replace: boolean) => {
    const t = applyTransform(entry?.response, vars, log, RESPONSE_ENVIRONMENT);
    const a = spec?.retryCondition === undefined ? t : withRetryCondition(t, spec.retryCondition, vars, log);
    answer(
      {
        phase,
        headers: a.headers,
        ...(a.body !== undefined ? { body: a.body, ...(replace ? { replace: true } : {}) } : {}),
        ...(a.metadata !== undefined ? { metadata: a.metadata } : {}),
      },
      true,
    );
  };
  call.on("error", () => {
    closed = true;
  });
  call.on("end", () => {
    if (!closed) {
      closed = true;
      call.end();
    }
  });
  call.on("data", (req) => {
    const r = req.request;
    switch (r.case) {
      case "requestHeaders": {
        requestHeaders = headerMap(r.value);
        entries = providerEntries(spec, req) ?? entries;
        state = spec?.llm === true ? attempt?.(requestHeaders) : journaled ? metadataAttempt(req, log) : undefined;
        // The expressions see the request as the previous attempt's transformation found it.
        if (state !== undefined) undone = undoAttempt(requestHeaders, state);
        const source = sourceVariable(req);
        vars = {
          ...identityVariables(req.metadataContext?.filterMetadata),
          // An AI provider's extAuth check on this attempt: what it told, read as `extauthz` after it.
          ...(state?.extauthz !== undefined ? { extauthz: state.extauthz } : {}),
          request: requestVariable(requestHeaders),
          ...(source !== undefined ? { source } : {}),
        };
        if (spec?.requestBody === true && !r.value.endOfStream) {
          answer({ phase: "requestHeaders" }, false);
          return;
        }
        if (spec?.requestBody === true) (vars["request"] as Obj)["body"] = "";
        if (spec?.direct !== undefined) {
          answer(directReply(spec.direct, vars, log), true);
          return;
        }
        choose();
        // No body follows: a new body replaces the whole (bodiless) request.
        request("requestHeaders", r.value.endOfStream);
        return;
      }
      case "requestBody":
        (vars["request"] as Obj)["body"] = utf8.decode(r.value.body);
        if (spec?.direct !== undefined) {
          answer(directReply(spec.direct, vars, log), true);
          return;
        }
        choose();
        request("requestBody", false);
        return;
      case "responseHeaders": {
        const h = headerMap(r.value);
        vars["response"] = {
          code: BigInt(Number(h[":status"] ?? "0")),
          headers: new Map(Object.entries(h).filter(([k]) => !k.startsWith(":"))),
          ...(spec?.responseBody === true ? { body: "" } : {}),
        };
        if (spec?.responseBody === true && !r.value.endOfStream) {
          answer({ phase: "responseHeaders" }, false);
          return;
        }
        response("responseHeaders", r.value.endOfStream);
        return;
      }
      case "responseBody": {
        const res = vars["response"] as Obj | undefined;
        if (res !== undefined) res["body"] = utf8.decode(r.value.body);
        response("responseBody", false);
        return;
      }
      default:
        return;
    }
  });
}

/**
 * `retry.precondition` (spec: "evaluated before any attempt; false disables retries"): unless it evaluates to `true`
 * (false, an error or another value: the spec's rule for expressions), `x-envoy-max-retries: 0`, which Envoy's router
 * takes over the route's retry policy. When true the route's policy applies unchanged.
 */
export function withRetryPrecondition(a: Applied, precondition: string, vars: Obj, log: (m: string) => void): Applied {
  const v = evaluateText(precondition, vars);
  if (v === true) return a;
  if (typeof v !== "boolean") log(`retry.precondition did not give a boolean (${typeof v}); no retries`);
  return { ...a, headers: { ...a.headers, set: { ...a.headers.set, [MAX_RETRIES_HEADER]: "0" } } };
}

/**
 * `retry.condition` on one attempt's response: `true` marks it for the route's retry policy; anything else (false, an
 * error, another value) removes the mark, so neither a backend nor a failing expression can ask for a retry.
 */
export function withRetryCondition(a: Applied, condition: string, vars: Obj, log: (m: string) => void): Applied {
  const v = evaluateText(condition, vars, RESPONSE_ENVIRONMENT);
  if (v === true) {
    return { ...a, headers: { ...a.headers, set: { ...a.headers.set, [RETRY_CONDITION_HEADER]: "true" } } };
  }
  if (typeof v !== "boolean") log(`retry.condition did not give a boolean (${typeof v}); not retried`);
  const remove = [...(a.headers.remove ?? []).filter((n) => n !== RETRY_CONDITION_HEADER), RETRY_CONDITION_HEADER];
  return { ...a, headers: { ...a.headers, remove } };
}

/**
 * The fault delay header from `delay` (a CEL duration, or a duration string): set when it evaluates to a positive
 * duration, removed otherwise, so a client's own value never gets through.
 */
export function withDelay(a: Applied, delay: string, vars: Obj, log: (m: string) => void): Applied {
  const v = evaluateText(delay, vars);
  let ms: number | undefined;
  // A CEL duration comes as a reflected google.protobuf.Duration (its `message`).
  const d = isDuration(v)
    ? v
    : isDuration((v as { message?: unknown } | null)?.message)
      ? (v as { message: unknown }).message
      : undefined;
  if (typeof v === "string") ms = parseDurationMs(v.trim());
  else if (isDuration(d)) ms = Number(d.seconds) * 1000 + d.nanos / 1e6;
  if (ms === undefined) log(`delay.duration did not give a duration (${typeof v}); no delay`);
  const set = { ...a.headers.set };
  const remove = (a.headers.remove ?? []).filter((n) => n !== FAULT_DELAY_HEADER);
  if (ms !== undefined && ms > 0) set[FAULT_DELAY_HEADER] = String(Math.round(ms));
  else remove.push(FAULT_DELAY_HEADER);
  return { ...a, headers: { ...a.headers, set, ...(remove.length > 0 ? { remove } : {}) } };
}

function isDuration(v: unknown): v is { seconds: bigint | number; nanos: number } {
  return typeof v === "object" && v !== null && "seconds" in v && "nanos" in v;
}

/** Whether Envoy sends the response to this processor (some entry changes it, a provider's own included). */
export function hasResponseStage(spec: TransformationSpec | undefined): boolean {
  const changes = (entries: readonly TransformationEntry[]) => entries.some((e) => e.response !== undefined);
  return (
    spec?.retryCondition !== undefined ||
    (spec !== undefined && (changes(spec.entries) || Object.values(spec.providers ?? {}).some(changes)))
  );
}
