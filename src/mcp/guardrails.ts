// `backend.mcp.guardrails`: remote processors that see a client's requests and their answers, by JSON-RPC method, and
// may let them pass, change them or refuse them. Processors run in order; the first refusal ends the chain. The wire
// protocol (one JSON POST per phase) is defined in docs/mcp.md, "Guardrail processors".

import { type CelActivation, compileExpression, evaluate, fromCel, specEnvironmentWith } from "../cel/index.js";
import type { McpGuardrail, McpGuardrailPhase } from "../translate/mcp/table.js";
import type { McpRequestContext } from "./authorization.js";
import { ErrorCodes, RpcError } from "./jsonrpc.js";

const MCP_ENVIRONMENT = specEnvironmentWith(["mcp"]);
/** A processor's answer is waited for this long; longer is a failure (failureMode decides). */
const PROCESSOR_TIMEOUT_MS = 5_000;
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

export type GuardPhase = "Request" | "Response";

/**
 * The phase a processor's `methods` give `method`: exact first, then the wildcard with the longest literal part
 * (`tools/*`, `*\/list`; a prefix wildcard wins a tie), then `*`; undefined when none matches (the processor is
 * bypassed).
 */
export function phaseFor(
  methods: Readonly<Record<string, McpGuardrailPhase>>,
  method: string,
): McpGuardrailPhase | undefined {
  const exact = methods[method];
  if (exact !== undefined) return exact;
  let best: { score: number; phase: McpGuardrailPhase } | undefined;
  for (const [pattern, phase] of Object.entries(methods)) {
    let score: number | undefined;
    if (pattern === "*") score = 0;
    else if (pattern.endsWith("*") && method.startsWith(pattern.slice(0, -1))) score = 2 * (pattern.length - 1) + 1;
    else if (pattern.startsWith("*") && method.endsWith(pattern.slice(1))) score = 2 * (pattern.length - 1);
    if (score !== undefined && (best === undefined || score > best.score)) best = { score, phase };
  }
  return best?.phase;
}

function applies(phase: McpGuardrailPhase | undefined, at: GuardPhase): boolean {
  return phase === "Full" || phase === at;
}

/** Whether any processor wants to see `method` at `at` (so callers can skip the work). */
export function guarded(processors: readonly McpGuardrail[] | undefined, method: string, at: GuardPhase): boolean {
  return (processors ?? []).some((p) => applies(phaseFor(p.methods, method), at));
}

const compiled = new Map<string, ReturnType<typeof compileExpression>>();

function metadataOf(p: McpGuardrail, ctx: McpRequestContext, method: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const activation: CelActivation = {
    request: ctx.request,
    ...(ctx.jwt !== undefined ? { jwt: ctx.jwt as never } : {}),
    ...(ctx.apiKey !== undefined ? { apiKey: ctx.apiKey as never } : {}),
    mcp: { method },
  };
  for (const [name, text] of Object.entries(p.metadata)) {
    let c = compiled.get(text);
    if (c === undefined) {
      c = compileExpression(text, MCP_ENVIRONMENT);
      compiled.set(text, c);
    }
    if (!("ok" in c)) {
      out[name] = null;
      continue;
    }
    const r = evaluate(c.ok, activation);
    out[name] = "value" in r ? fromCel(r.value) : null;
  }
  return out;
}

/** The request headers a processor gets: its allow list (empty: all, pseudo-headers included), minus its deny list. */
function headersFor(p: McpGuardrail, ctx: McpRequestContext): Record<string, string> {
  const all: [string, string][] = [
    [":method", ctx.request.method],
    [":path", ctx.request.path],
    [":authority", ctx.request.host],
    [":scheme", ctx.request.scheme],
    ...ctx.request.headers,
  ];
  const allowed = p.allowedRequestHeaders.length === 0 ? undefined : new Set(p.allowedRequestHeaders);
  const denied = new Set(p.disallowedRequestHeaders);
  const out: Record<string, string> = {};
  for (const [k, v] of all) {
    const name = k.toLowerCase();
    if (denied.has(name) || (allowed !== undefined && !allowed.has(name))) continue;
    out[name] = v;
  }
  return out;
}

interface Verdict {
  readonly action?: unknown;
  readonly params?: unknown;
  readonly result?: unknown;
  readonly error?: unknown;
}

async function call(p: McpGuardrail, body: unknown): Promise<Verdict> {
  if (p.url === undefined) throw new Error(p.unresolved ?? "no address");
  const r = await fetch(p.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(PROCESSOR_TIMEOUT_MS),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`HTTP ${r.status}`);
  if (text.length > MAX_ANSWER_BYTES) throw new Error("answer too large");
  const v: unknown = JSON.parse(text);
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("the answer is not a JSON object");
  return v as Verdict;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export interface GuardInput {
  readonly backend: string;
  /** A target's own processors: the target the request is forwarded to (its name is in the body). */
  readonly target?: string;
  readonly method: string;
  readonly id: string | number;
  readonly params: Record<string, unknown> | undefined;
  /** Response phase: what the client would get (one of them). */
  readonly result?: unknown;
  readonly error?: { code: number; message: string; data?: unknown };
}

/**
 * Runs the processors that want `input.method` at `at`, in order. Returns the (possibly changed) params (Request) or
 * result (Response); throws the RpcError the client gets when one refuses, or fails under FailClosed.
 */
export async function runGuardrails(
  processors: readonly McpGuardrail[] | undefined,
  at: GuardPhase,
  input: GuardInput,
  ctx: McpRequestContext,
  log: (line: string) => void,
): Promise<{ params: Record<string, unknown> | undefined; result: unknown }> {
  let params = input.params;
  let result = input.result;
  for (const p of processors ?? []) {
    if (!applies(phaseFor(p.methods, input.method), at)) continue;
    let verdict: Verdict;
    try {
      verdict = await call(p, {
        phase: at,
        backend: input.backend,
        ...(input.target !== undefined ? { target: input.target } : {}),
        method: input.method,
        id: input.id,
        ...(params !== undefined ? { params } : {}),
        ...(at === "Response"
          ? input.error !== undefined && result === undefined
            ? { error: input.error }
            : { result }
          : {}),
        metadata: metadataOf(p, ctx, input.method),
        headers: headersFor(p, ctx),
      });
    } catch (e) {
      const why =
        (e as Error).name === "TimeoutError" ? `no answer in ${PROCESSOR_TIMEOUT_MS} ms` : (e as Error).message;
      if (p.failureMode === "FailOpen") {
        log(`sluice mcp: ${p.path}: ${why}; skipped (FailOpen)`);
        continue;
      }
      throw new RpcError(
        ErrorCodes.ServerError,
        `guardrail processor failed (${p.path.split(": ")[1] ?? p.path}): ${why}`,
      );
    }
    switch (verdict.action) {
      case "Continue":
      case undefined:
        break;
      case "Reject": {
        const err = isRecord(verdict.error) ? verdict.error : {};
        const code =
          typeof err["code"] === "number" && Number.isInteger(err["code"]) ? err["code"] : ErrorCodes.InvalidRequest;
        const message = typeof err["message"] === "string" ? err["message"] : "refused by a guardrail";
        throw new RpcError(code, message, err["data"]);
      }
      case "Modify":
        if (at === "Request" && isRecord(verdict.params)) params = verdict.params;
        else if (at === "Response" && isRecord(verdict.result)) result = verdict.result;
        else {
          const why = `Modify without ${at === "Request" ? "an object params" : "an object result"}`;
          if (p.failureMode === "FailOpen") log(`sluice mcp: ${p.path}: ${why}; skipped (FailOpen)`);
          else throw new RpcError(ErrorCodes.ServerError, `guardrail processor answered ${why}`);
        }
        break;
      default: {
        const why = `unknown action ${JSON.stringify(verdict.action)}`;
        if (p.failureMode === "FailOpen") log(`sluice mcp: ${p.path}: ${why}; skipped (FailOpen)`);
        else throw new RpcError(ErrorCodes.ServerError, `guardrail processor answered ${why}`);
      }
    }
  }
  return { params, result };
}

/**
 * A target's own processors (a policy with its sectionName) around one request forwarded to it: the Request phase on
 * the params as the target will get them (its own names and URIs), then `forward`, then the Response phase on its
 * answer, or on the error the client would get (which is then thrown unchanged), as the backend's run around the whole
 * request (http.ts).
 */
export async function guardTarget(
  processors: readonly McpGuardrail[],
  input: GuardInput,
  ctx: McpRequestContext,
  log: (line: string) => void,
  forward: (params: Record<string, unknown> | undefined) => Promise<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  const params = guarded(processors, input.method, "Request")
    ? (await runGuardrails(processors, "Request", input, ctx, log)).params
    : input.params;
  if (!guarded(processors, input.method, "Response")) return forward(params);
  let result: Record<string, unknown> | undefined;
  let error: RpcError | undefined;
  try {
    result = await forward(params);
  } catch (e) {
    if (!(e instanceof RpcError)) throw e;
    error = e;
  }
  const g = await runGuardrails(
    processors,
    "Response",
    { ...input, params, ...(error !== undefined ? { error: error.toObject() } : { result }) },
    ctx,
    log,
  );
  if (error !== undefined) throw error;
  return g.result as Record<string, unknown>;
}
