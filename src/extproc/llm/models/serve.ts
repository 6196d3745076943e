// GwModels in the LLM ext_proc (translate/model/serve.ts builds what it reads): which cluster a request goes to,
// which model its provider is asked for, whether the client may use the model (`policies.authorization`), the
// model's `policies.headers`, the models list answer, and the health outcomes that steer the next selections.

import type { LlmError } from "../../../llm/index.js";
import type { JsonObject } from "../../../llm/json.js";
import type { LlmProviderEntry } from "../../../translate/llm/table.js";
import type { ConcreteModelIR, ModelRouteEntry, VirtualModelIR } from "../../../translate/model/ir.js";
import { READS_BODY } from "../../../translate/xds/filters/transformation.js";
import { RESPONSE_ENVIRONMENT } from "../../transformation.js";
import { evaluateText } from "../cel.js";
import type { ModelsRequest } from "../provider.js";
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
  /** The virtual models passed through to the chosen model or failover cluster, from the one matched. */
  readonly via: readonly string[];
}

/**
 * The cluster of a request naming `requestModel`: the first candidate's, or that of the outermost failover or weighted
 * virtual model on its way when Envoy picks and retries within it (its cluster holds every target).
 */
export function chooseModel(
  entry: ModelRouteEntry,
  requestModel: string,
  ctx: SelectContext,
): { readonly ok: true; readonly choice: ModelChoice } | { readonly ok: false; readonly error: LlmError } {
  const s = selectModel(entry.table, requestModel, ctx);
  if (!s.ok) return s;
  // A virtual model's `authorization` is checked once per request, here: a candidate behind a virtual model that
  // refuses the client is not chosen (the next one is, as for a degraded one); the one matched refuses them all.
  const verdicts = new Map<string, LlmError | undefined>();
  const refusedBy = (id: string): LlmError | undefined => {
    if (!verdicts.has(id)) {
      const m = entry.table.byId[id];
      verdicts.set(id, m?.type === "virtual" ? authorizeModel(m, ctx.vars ?? {}) : undefined);
    }
    return verdicts.get(id);
  };
  let refusal: LlmError | undefined;
  const first = s.candidates.find((c) => {
    for (const id of c.via) {
      const r = refusedBy(id);
      if (r !== undefined) {
        refusal ??= r;
        return false;
      }
    }
    return true;
  });
  if (first === undefined) {
    return { ok: false, error: refusal ?? { status: 503, kind: "overloaded", message: `model ${requestModel}` } };
  }
  const via = first.via.find((id) => {
    const m = entry.table.byId[id];
    return m?.type === "virtual" && m.strategy !== "conditional" && entry.clusters[id] !== undefined;
  });
  const cluster = entry.clusters[via ?? first.model.id];
  if (cluster === undefined) {
    return {
      ok: false,
      error: { status: 503, kind: "overloaded", message: `model ${requestModel} has no cluster to serve it` },
    };
  }
  return { ok: true, choice: { cluster, providerModel: first.providerModel, matched: s.matched, via: first.via } };
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

/** What the policy helpers read of a model, concrete or virtual. */
interface PolicyHolder {
  readonly id: string;
  readonly match: { readonly literal: string };
  readonly policies?: { readonly authorization?: unknown; readonly headers?: unknown };
}

/**
 * `policies.authorization` of a model (the spec's Authorization object: Allow grants when an expression is true, Deny
 * refuses when one is, Require needs all of them; an expression that fails to evaluate is not true). Undefined when
 * the client may use the model, else the 403 it gets.
 */
export function authorizeModel(m: PolicyHolder, vars: Readonly<Record<string, unknown>>): LlmError | undefined {
  const a = m.policies?.authorization;
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

export function modelHeaders(m: PolicyHolder, direction: "request" | "response"): HeaderChanges | undefined {
  const h = m.policies?.headers;
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

/** `a` then `b` as one change: what `b` sets, adds or removes wins over what `a` did to the same header. */
export function thenHeaders(a: HeaderChanges | undefined, b: HeaderChanges | undefined): HeaderChanges | undefined {
  if (a === undefined || b === undefined) return a ?? b;
  const touched = new Set([...Object.keys(b.set), ...b.remove]);
  const set = Object.fromEntries(Object.entries(a.set).filter(([k]) => !touched.has(k)));
  const add = a.add.filter(([k]) => !touched.has(k));
  // A header `a` sets and `b` adds to keeps both values, as the two filters in turn would leave it.
  for (const [k, v] of b.add) {
    const before = set[k];
    if (before !== undefined) {
      set[k] = `${before},${v}`;
    } else add.push([k, v]);
  }
  const given = new Set([...Object.keys(set), ...add.map(([k]) => k), ...Object.keys(b.set)]);
  return {
    set: { ...set, ...b.set },
    add,
    remove: [...a.remove.filter((k) => !given.has(k)), ...b.remove],
  };
}

/**
 * The virtual models of a choice with policies, from the one matched to the innermost: their request header changes
 * apply before the concrete model's, their transformations and prompt guards before its own.
 */
export function virtualChain(entry: ModelRouteEntry, choice: ModelChoice | undefined): VirtualModelIR[] {
  return (choice?.via ?? []).flatMap((id) => {
    const m = entry.table.byId[id];
    return m?.type === "virtual" && m.policies !== undefined ? [m] : [];
  });
}

const merged = new WeakMap<LlmProviderEntry, Map<string, LlmProviderEntry>>();

/**
 * `provider` (a concrete model's entry) with the transformations and prompt guards of the virtual models it was chosen
 * through put first; the same object for the same chain, so guard results are shared across attempts as usual.
 */
export function withVirtualPolicies(
  entry: ModelRouteEntry,
  provider: LlmProviderEntry,
  chain: readonly VirtualModelIR[],
): LlmProviderEntry {
  const transforms = chain.flatMap((m) => m.policies?.ai.transformations ?? []);
  const guards = chain.flatMap((m) => {
    const g = entry.guards?.[m.id];
    return g === undefined ? [] : [g];
  });
  if (transforms.length === 0 && guards.length === 0) return provider;
  const key = chain.map((m) => m.id).join(",");
  let byChain = merged.get(provider);
  if (byChain === undefined) {
    byChain = new Map();
    merged.set(provider, byChain);
  }
  const known = byChain.get(key);
  if (known !== undefined) return known;
  const own = provider.ai.promptGuard;
  const all = own === undefined ? guards : [...guards, own];
  const promptGuard =
    all.length === 0
      ? undefined
      : {
          request: all.flatMap((g) => g.request),
          response: all.flatMap((g) => g.response),
          // A guard that asked for streamed responses gets them; the others then see them too.
          streaming: all.some((g) => g.streaming),
        };
  const transformations = [...transforms, ...(provider.ai.transformations ?? [])];
  const out: LlmProviderEntry = {
    ...provider,
    ai: {
      ...provider.ai,
      ...(transformations.length > 0 ? { transformations } : {}),
      ...(promptGuard !== undefined ? { promptGuard } : {}),
    },
  };
  byChain.set(key, out);
  return out;
}

/**
 * The models list (or one model) of a listener, in the shape of the client's family (provider.ts modelsRequestOf:
 * Anthropic's for a client that sends `anthropic-version`, Google's for `x-goog-api-key` or the `/v1beta/models`
 * form, OpenAI's otherwise), with the client's paging.
 */
export function discoveryAnswer(
  entry: ModelRouteEntry,
  req: ModelsRequest,
): { readonly ok: true; readonly body: JsonObject } | { readonly ok: false; readonly error: LlmError } {
  return listModels(entry.table, req.client, req.call);
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

  /**
   * The final response's status and headers: a failure when `policies.health.unhealthyCondition` is true of them (a
   * condition reading the body is judged by the model cluster's scoring, which is sent it: here it fails, so only a
   * 5xx counts), else when it is a 5xx.
   */
  finish(status: number, headers: ReadonlyMap<string, string> = new Map()): void {
    const condition = this.#current?.model.health.unhealthyCondition;
    if (condition === undefined || READS_BODY.response.test(condition)) {
      this.#end(status > 0 && status < 500);
      return;
    }
    const v = evaluateText(condition, { response: { code: BigInt(status), headers } }, RESPONSE_ENVIRONMENT);
    // Only `true` is a failure, as for the cluster's scoring; a status of 0 (no answer) always is.
    this.#end(status > 0 && v !== true);
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
