// Values a later Envoy filter reads, computed per request with the spec's CEL where Envoy has none of its own: the
// JWT read from `jwtAuthentication.location.expression` (a request header jwt_authn reads), global rate limit
// descriptor entries and costs that read more than Envoy's CEL knows (`source.address` as an IP, `request.query` as a
// map, `apiKey`, ...), and `extProc.metadataContext` (dynamic metadata forwarded to the user's processor). The route's
// filter config carries the values to compute in the stream's gRPC metadata (src/translate/xds/filters/context.ts),
// as a transformation does; the stream answers the request headers (or the buffered body, when an expression reads
// it) and ends.
//
// `llm`: the values the LLM ext_proc leaves in dynamic metadata (namespace sluice.dev/llm: the request's model and
// streaming once it has read the request body, models, provider and token counts once the answer is done), forwarded
// to the stage. A stage ahead of the LLM ext_proc on the request (the user's processor's request attributes) reads the
// request's model and streaming from the request body itself (`llmBody`), as the LLM ext_proc will; the tracing
// stage waits for the end of an LLM answer (`untilEnd`) so its token counts are known.

import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { formatIp, toCel } from "../cel/index.js";
import {
  ProcessingMode_BodySendMode,
  ProcessingMode_HeaderSendMode,
} from "../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { type HoldSpec, serveHold } from "./buffer-hold.js";
import { evaluateText, identityVariables, requestVariable } from "./llm/cel.js";
import { googleMethodOf } from "./llm/provider.js";
import type { ExtProcHeaders, ExtProcRequest, Reply } from "./llm/wire.js";
import { LLM_METADATA_FIELDS, LLM_NAMESPACE } from "./llm-metadata.js";
import { RESPONSE_ENVIRONMENT, sourceVariable, type TransformationCall } from "./transformation.js";

/** The stage metadata value that routes a Sluice ext_proc stream here. */
export const CONTEXT_STAGE = "context";
/** gRPC metadata of a context stream: its spec, base64url of JSON (ContextSpec). */
export const CONTEXT_METADATA = "x-sluice-context";

/**
 * How a value is written. `json`: as the CEL value (strings as strings, maps as structs); `text`: a string (numbers
 * and booleans printed, an IP in its text form, other values as JSON), as a rate limit descriptor value must be;
 * `count`: a non-negative integer, as a rate limit's hits_addend (a failure or a non-number counts as `fallback`);
 * `attribute`: an ext_proc attribute: scalars as they are, a map or list as its JSON text (Envoy's attribute
 * conversion sends a scalar or the text of one only: a map read from metadata would arrive as `CelMap value`).
 */
export type ContextFormat = "json" | "text" | "count" | "attribute";

export interface ContextValue {
  readonly namespace: string;
  readonly key: string;
  readonly expression: string;
  readonly as: ContextFormat;
  /** `count` only: the value when the expression fails or gives no number. */
  readonly fallback?: number;
  /** Computed only when choice `choice` of the spec picked entry `entry` (a conditional ext_proc's entry values). */
  readonly onlyFor?: { readonly choice: number; readonly entry: number };
  /**
   * Reads what the LLM ext_proc knows only once the answer is done (the response model, token counts) and is sent with
   * the response headers: computed for a non-streamed answer only (complete by then), left out for a streamed one.
   */
  readonly unlessStreamed?: boolean;
}

/**
 * A conditional list's entry chosen per request: the index of the first condition that is true (null: the
 * unconditional fallback), set in request header `header`, which the entries' filters match; removed when none is.
 */
export interface ContextChoice {
  readonly header: string;
  readonly conditions: readonly (string | null)[];
}

export interface ContextSpec {
  /** Request headers set from CEL; one whose expression fails is removed, so a client's own value never passes. */
  readonly headers?: readonly { readonly name: string; readonly expression: string }[];
  readonly values?: readonly ContextValue[];
  /** At the response (`atResponse`), the entries are not chosen again: the request header the choice set is read. */
  readonly choose?: readonly ContextChoice[];
  /** An expression reads `request.body`: Envoy sends the body (buffered) and the values are computed on it. */
  readonly requestBody: boolean;
  /**
   * The values are computed on the response headers (with `response`: code and headers), for the user's processor
   * listed before this stage, which gets the response after it: the request is answered unchanged and kept.
   */
  readonly atResponse?: boolean;
  /** `buffer` FailOpen: nothing is computed; the bodies are held up to these sizes (buffer-hold.ts). */
  readonly hold?: HoldSpec;
  /**
   * The request stage, ahead of the LLM ext_proc: `llm.requestModel` and `llm.streaming` are read from the request
   * body (buffered: `requestBody` is set too) as the LLM ext_proc will read them; its other fields are not known yet.
   */
  readonly llmBody?: boolean;
  /**
   * At the response (`atResponse`): when the LLM ext_proc's values are there (an LLM request) and a body follows, the
   * response body is streamed to Sluice (answered unchanged) and the values are computed at its end, when the answer's
   * models, provider and token counts are known.
   */
  readonly untilEnd?: boolean;
}

export function encodeContext(spec: ContextSpec): string {
  return Buffer.from(JSON.stringify(spec)).toString("base64url");
}

const decoded = new Map<string, ContextSpec | undefined>();

/** The spec of a stream's metadata (cached by its text), or undefined when malformed. */
export function decodeContext(text: string): ContextSpec | undefined {
  if (decoded.has(text)) return decoded.get(text);
  let spec: ContextSpec | undefined;
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString()) as ContextSpec;
    spec = typeof v === "object" && v !== null && typeof v.requestBody === "boolean" ? v : undefined;
  } catch {
    spec = undefined;
  }
  if (decoded.size >= 1024) decoded.clear();
  decoded.set(text, spec);
  return spec;
}

type Obj = Record<string, unknown>;

/** An IP value of the spec's CEL (`source.address`), as its text. */
function ipText(v: unknown): string | undefined {
  const m = (v as { desc?: { typeName?: string }; message?: { addr?: unknown } } | null)?.message;
  const typeName = (v as { desc?: { typeName?: string } } | null)?.desc?.typeName;
  return typeName === "sluice.cel.IP" && m?.addr instanceof Uint8Array ? formatIp(m.addr) : undefined;
}

/** A CEL result as text: strings as they are, numbers and booleans printed, an IP in its usual form, else JSON. */
export function contextText(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return ipText(v) ?? JSON.stringify(v);
}

function jsonOf(v: unknown): JsonValue | undefined {
  if (v === undefined) return undefined;
  const ip = ipText(v);
  if (ip !== undefined) return ip;
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? Number(x) : x)) ?? "null") as JsonValue;
}

/** The `llm` variable from what the LLM ext_proc left in dynamic metadata; undefined when it left nothing. */
export function llmFromMetadata(md: JsonObject | undefined): Obj | undefined {
  if (md === undefined) return undefined;
  const out: Obj = {};
  for (const [field, key] of Object.entries(LLM_METADATA_FIELDS)) {
    const v = md[key];
    if (v !== undefined && v !== null) out[field] = v;
  }
  if (Object.keys(out).length === 0) return undefined;
  // As the LLM ext_proc's own `llm` (completion.ts): with the usage known, unreported cache counts are 0.
  if ("inputTokens" in out) {
    out["cachedInputTokens"] ??= 0;
    out["cacheCreationInputTokens"] ??= 0;
  }
  return toCel(out) as Obj;
}

/**
 * The `llm` variable of a request the LLM ext_proc has not read yet: its model and streaming, as the LLM ext_proc reads
 * them (the body's `model` and `stream`, or a Google client's path); undefined when the body is no JSON object.
 */
export function llmFromBody(path: string, body: string): Obj | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
  const b = parsed as Obj;
  const g = googleMethodOf(path);
  const model = g?.model ?? b["model"];
  return toCel({
    streaming: g?.stream ?? b["stream"] === true,
    ...(typeof model === "string" ? { requestModel: model } : {}),
  }) as Obj;
}

/** The response body streamed to Sluice (with its trailers), to learn its end. */
const UNTIL_END = {
  requestHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  responseHeaderMode: ProcessingMode_HeaderSendMode.SEND,
  requestBodyMode: ProcessingMode_BodySendMode.NONE,
  responseBodyMode: ProcessingMode_BodySendMode.STREAMED,
  requestTrailerMode: ProcessingMode_HeaderSendMode.SKIP,
  responseTrailerMode: ProcessingMode_HeaderSendMode.SEND,
} as const;

/** The request's answer: the headers to set or remove, and the dynamic metadata by namespace. Pure, for tests. */
export function computeContext(spec: ContextSpec, vars: Obj, log: (m: string) => void): Reply {
  const env = spec.atResponse === true ? RESPONSE_ENVIRONMENT : undefined;
  const set: Record<string, string> = {};
  const remove: string[] = [];
  for (const h of spec.headers ?? []) {
    const v = contextText(evaluateText(h.expression, vars));
    const name = h.name.toLowerCase();
    if (v === undefined || v === "") {
      log(`context: header ${name} failed to evaluate; removed`);
      remove.push(name);
    } else set[name] = v;
  }
  const chosen = (spec.choose ?? []).map((c) => {
    const name = c.header.toLowerCase();
    if (spec.atResponse === true) {
      // The request-side stage chose the entry and named it in this request header.
      const v = ((vars["request"] as Obj | undefined)?.["headers"] as Map<string, string> | undefined)?.get(name);
      return v !== undefined && /^\d+$/.test(v) ? Number(v) : -1;
    }
    const i = c.conditions.findIndex((x) => x === null || evaluateText(x, vars) === true);
    if (i < 0) remove.push(name);
    else set[name] = String(i);
    return i;
  });
  const metadata: Record<string, JsonObject> = {};
  for (const c of spec.values ?? []) {
    if (c.onlyFor !== undefined && chosen[c.onlyFor.choice] !== c.onlyFor.entry) continue;
    if (c.unlessStreamed === true && (vars["llm"] as Map<string, unknown> | undefined)?.get("streaming") !== false) {
      log(`context: ${c.namespace}/${c.key} reads the end of a streamed answer (or of none); left out`);
      continue;
    }
    const raw = evaluateText(c.expression, vars, env);
    let value: JsonValue | undefined;
    if (c.as === "count") {
      const n = typeof raw === "number" ? raw : typeof raw === "bigint" ? Number(raw) : Number.NaN;
      if (Number.isFinite(n)) value = Math.max(0, Math.trunc(n));
      else {
        log(`context: ${c.namespace}/${c.key} did not give a number; counts ${c.fallback ?? 1}`);
        value = c.fallback ?? 1;
      }
    } else {
      value = c.as === "text" ? contextText(raw) : jsonOf(raw);
      if (c.as === "attribute" && typeof value === "object" && value !== null) value = JSON.stringify(value);
      if (value === undefined) {
        log(`context: ${c.namespace}/${c.key} failed to evaluate; left out`);
        continue;
      }
    }
    metadata[c.namespace] ??= {};
    (metadata[c.namespace] as JsonObject)[c.key] = value;
  }
  return {
    phase: spec.atResponse === true ? "responseHeaders" : "requestHeaders",
    headers: { set, ...(remove.length > 0 ? { remove } : {}) },
    ...(Object.keys(metadata).length > 0 ? { metadata } : {}),
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
 * One stream: the request's headers (and body, when read), answered once; Envoy sends nothing else. At the response
 * (`atResponse`), the request's messages are answered unchanged and the values are computed on the response headers.
 */
export function serveContext(call: TransformationCall, spec: ContextSpec | undefined, log: (m: string) => void): void {
  if (spec?.hold !== undefined) {
    serveHold(call, spec.hold);
    return;
  }
  let vars: Obj = {};
  let path = "/";
  let closed = false;
  /** The LLM ext_proc's values as this message carries them; false when it left none (yet). */
  const withLlm = (req: ExtProcRequest): boolean => {
    const llm = llmFromMetadata(req.metadataContext?.filterMetadata?.[LLM_NAMESPACE]);
    if (llm !== undefined) vars["llm"] = llm;
    return llm !== undefined;
  };
  const finish = (r: Reply) => {
    if (closed) return;
    closed = true;
    call.write(r);
    call.end();
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
    if (r.case === "requestHeaders") {
      const source = sourceVariable(req);
      const headers = headerMap(r.value);
      path = headers[":path"] ?? "/";
      vars = {
        ...identityVariables(req.metadataContext?.filterMetadata),
        request: requestVariable(headers),
        ...(source !== undefined ? { source } : {}),
      };
      withLlm(req);
      if (spec === undefined) {
        // A config Sluice cannot read: fail closed rather than let the request through without its values.
        log("context: the route's context spec is malformed; the request is refused");
        finish({
          phase: "immediate",
          status: 500,
          headers: { set: {} },
          body: "",
          details: "sluice_context_malformed",
        });
        return;
      }
      // An upgrade (a Realtime websocket): its body is the stream, which never ends. The request stage computes
      // without it and closes the stream, so Envoy holds nothing for the body.
      const upgrade = headers["upgrade"] !== undefined && spec.atResponse !== true;
      if (spec.requestBody && !r.value.endOfStream && !upgrade) {
        call.write({ phase: "requestHeaders" });
        return;
      }
      if (spec.requestBody) (vars["request"] as Obj)["body"] = "";
      if (spec.atResponse === true) call.write({ phase: "requestHeaders" });
      else finish(computeContext(spec, vars, log));
      return;
    }
    if (r.case === "requestBody" && spec !== undefined) {
      const body = utf8.decode(r.value.body);
      (vars["request"] as Obj)["body"] = body;
      if (spec.llmBody === true && vars["llm"] === undefined) {
        const llm = llmFromBody(path, body);
        if (llm !== undefined) vars["llm"] = llm;
      }
      if (spec.atResponse === true) call.write({ phase: "requestBody" });
      else finish({ ...computeContext(spec, vars, log), phase: "requestBody" } as Reply);
      return;
    }
    if (r.case === "responseHeaders" && spec?.atResponse === true) {
      const h = headerMap(r.value);
      // The identities as they are now: a stage ahead of authentication saw none with the request.
      Object.assign(vars, identityVariables(req.metadataContext?.filterMetadata));
      const llm = withLlm(req);
      vars["response"] = {
        code: BigInt(Number(h[":status"] ?? "0")),
        headers: new Map(Object.entries(h).filter(([k]) => !k.startsWith(":"))),
      };
      if (spec.untilEnd === true && llm && !r.value.endOfStream) {
        // An LLM answer: its token counts are known at its end, which the streamed body tells.
        call.write({ phase: "responseHeaders", modeOverride: UNTIL_END });
        return;
      }
      finish(computeContext(spec, vars, log));
      return;
    }
    if (r.case === "responseBody" && spec?.untilEnd === true) {
      if (!r.value.endOfStream) {
        call.write({ phase: "responseBody" });
        return;
      }
      withLlm(req);
      finish({ ...computeContext(spec, vars, log), phase: "responseBody" } as Reply);
      return;
    }
    if (r.case === "responseTrailers" && spec?.untilEnd === true) {
      // A trailers answer carries no dynamic metadata: a response ending in trailers (no LLM answer does) has none.
      log("context: the response ended with trailers; its values are left out");
      finish({ phase: "responseTrailers" });
    }
  });
}
