// GwModels in the LLM ext_proc (translate/model/serve.ts builds what it reads): which cluster a request goes to,
// which model its provider is asked for, whether the client may use the model (`policies.authorization`), the
// model's `policies.headers`, the models list answer, and the health outcomes that steer the next selections.

import type { ClientFormat } from "../../../llm/formats/names.js";
import type { LlmError } from "../../../llm/index.js";
import type { ConcreteModelIR, ModelRouteEntry } from "../../../translate/model/ir.js";
import { evaluateText } from "../cel.js";
import { listModels } from "./discovery.js";
import type { ModelHealth } from "./health.js";
import { type SelectContext, selectModel } from "./select.js";

export interface ModelChoice {
  /** The cluster Envoy sends the request to (MODEL_CLUSTER_HEADER). */
  readonly cluster: string;
  /** The model name the selected concrete model's provider is asked for, unless its target names one. */
  readonly providerModel: string;
  /** `namespace/name` of the GwModel the client's model matched. */
  readonly matched: string;
}

/**
 * The cluster of a request naming `requestModel`: the first candidate's, or that of the outermost failover virtual
 * model on its way when Envoy fails over within it (its cluster holds every target).
 */
export function chooseModel(
  entry: ModelRouteEntry,
  requestModel: string,
  ctx: SelectContext,
): { readonly ok: true; readonly choice: ModelChoice } | { readonly ok: false; readonly error: LlmError } {
  const s = selectModel(entry.table, requestModel, ctx);
  if (!s.ok) return s;
  const first = s.candidates[0];
  const via = first.via.find((id) => {
    const m = entry.table.byId[id];
    return m?.type === "virtual" && m.strategy === "failover" && entry.clusters[id] !== undefined;
  });
  const cluster = entry.clusters[via ?? first.model.id];
  if (cluster === undefined) {
    return {
      ok: false,
      error: { status: 503, kind: "overloaded", message: `model ${requestModel} has no cluster to serve it` },
    };
  }
  return { ok: true, choice: { cluster, providerModel: first.providerModel, matched: s.matched } };
}

/** The concrete model an endpoint of a model cluster is, and the model name to ask its provider for. */
export function modelTarget(
  entry: ModelRouteEntry,
  cluster: string,
  provider: string,
  choice: ModelChoice | undefined,
): { readonly model: ConcreteModelIR; readonly ask: string | undefined } | undefined {
  const t = entry.targets[cluster]?.[provider];
  const m = t === undefined ? undefined : entry.table.byId[t.id];
  if (t === undefined || m?.type !== "concrete") return undefined;
  return { model: m, ask: t.model ?? choice?.providerModel };
}

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `policies.authorization` of a concrete model (the spec's Authorization object: Allow grants when an expression is
 * true, Deny refuses when one is, Require needs all of them; an expression that fails to evaluate is not true).
 * Undefined when the client may use the model, else the 403 it gets.
 */
export function authorizeModel(m: ConcreteModelIR, vars: Readonly<Record<string, unknown>>): LlmError | undefined {
  const a = m.policies.authorization;
  if (!isRec(a) || !isRec(a.policy) || !Array.isArray(a.policy.matchExpressions)) return undefined;
  const results = a.policy.matchExpressions.map((e) => typeof e === "string" && evaluateText(e, { ...vars }) === true);
  const action = a.action ?? "Allow";
  const allowed =
    action === "Deny" ? !results.some(Boolean) : action === "Require" ? results.every(Boolean) : results.some(Boolean);
  if (allowed) return undefined;
  return { status: 403, kind: "permission", message: `not allowed to use model ${m.match.literal || m.id}` };
}

/** One direction of `policies.headers` (a Gateway API header filter): headers to set, add and remove. */
export interface HeaderChanges {
  readonly set: Readonly<Record<string, string>>;
  readonly add: readonly (readonly [string, string])[];
  readonly remove: readonly string[];
}

export function modelHeaders(m: ConcreteModelIR, direction: "request" | "response"): HeaderChanges | undefined {
  const h = m.policies.headers;
  const f = isRec(h) ? h[direction] : undefined;
  if (!isRec(f)) return undefined;
  const pairs = (v: unknown) =>
    (Array.isArray(v) ? v : []).filter(isRec).map((x) => [String(x.name).toLowerCase(), String(x.value)] as const);
  return {
    set: Object.fromEntries(pairs(f.set)),
    add: pairs(f.add),
    remove: (Array.isArray(f.remove) ? f.remove : []).map((n) => String(n).toLowerCase()),
  };
}

/**
 * The models list answer of a listener: Anthropic's shape for a client that sends `anthropic-version` (the Anthropic
 * SDKs always do), OpenAI's otherwise; Anthropic's paging from the query.
 */
export function discoveryAnswer(entry: ModelRouteEntry, headers: Readonly<Record<string, string>>): object {
  const format: ClientFormat = headers["anthropic-version"] !== undefined ? "messages" : "chat-completions";
  const path = headers[":path"] ?? "";
  const q = new URLSearchParams(path.includes("?") ? path.slice(path.indexOf("?") + 1) : "");
  const limit = q.get("limit");
  const after = q.get("after_id");
  const before = q.get("before_id");
  return listModels(entry.table, format, {
    ...(limit !== null && Number.isFinite(Number(limit)) ? { limit: Number(limit) } : {}),
    ...(after !== null ? { afterId: after } : {}),
    ...(before !== null ? { beforeId: before } : {}),
  });
}

/**
 * Outcomes of the attempts of one request, reported to the health tracker: an attempt followed by another (Envoy
 * retried it) failed; the last one is judged by the response status (5xx, including Envoy's own for a connection
 * failure or a timeout, is a failure).
 */
export class ModelAttempts {
  #current: { model: ConcreteModelIR; start: number } | undefined;
  readonly #health: ModelHealth;
  readonly #now: () => number;

  constructor(health: ModelHealth, now: () => number) {
    this.#health = health;
    this.#now = now;
  }

  start(model: ConcreteModelIR): void {
    this.#end(false);
    this.#current = { model, start: this.#now() };
  }

  /** The final response's status. */
  finish(status: number): void {
    this.#end(status > 0 && status < 500);
  }

  /** The concrete model of the attempt under way. */
  get model(): ConcreteModelIR | undefined {
    return this.#current?.model;
  }

  #end(ok: boolean): void {
    const c = this.#current;
    if (c === undefined) return;
    this.#current = undefined;
    const ms = this.#now() - c.start;
    if (ok) this.#health.recordSuccess(c.model.id, c.model.health, ms);
    else this.#health.recordFailure(c.model.id, c.model.health, ms);
  }
}
