// GwModel → the model table of each Gateway (ir.ts) and the status of each GwModel. Pure: never does I/O, never throws
// on input. A GwModel attaches to Gateways and listeners by parentRefs as a route does (gateway/gateway.ts), and its
// virtual model targets are resolved to same-namespace GwModels, refusing cycles and chains deeper than
// MAX_VIRTUAL_DEPTH.

import type { Gateway, ParentReference } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import type { GwModel } from "../../api/sluice.js";
import type { AiBackendRefs } from "../backend/ai.js";
import { serviceEndpoints, tunnelRefs } from "../backend/resolve.js";
import { resolveTunnel, TUNNEL_NEEDS_TLS } from "../backend/tunnel.js";
import {
  type AttachedListener,
  gatewayListenerStates,
  namespaceAllowed,
  refersToGateway,
  servedGateways,
} from "../gateway/gateway.js";
import type { TranslationInput } from "../input.js";
import { gatewayKey, listenerChainName, routeConfigName } from "../names.js";
import type {
  ConcreteModelIR,
  ListenerModelsIR,
  ModelIR,
  ModelTableIR,
  ModelTargetIR,
  VirtualModelIR,
  VirtualPoliciesIR,
} from "./ir.js";
import { compareModelPrecedence, formatModelMatch, isWildcard, modelMatches, parseModelMatch } from "./match.js";
import { checkLlmExpression, type ModelNote, translateModelPolicies } from "./policies.js";
import { translateModelProvider } from "./providers.js";

/**
 * How many virtual models a request may pass through before it reaches a concrete one (a weighted split of failover
 * groups is 2). Deeper chains are refused: each level multiplies what one request may try.
 */
export const MAX_VIRTUAL_DEPTH = 3;

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

/** Why a parentRef did not attach: a Gateway API route reason and a message. */
interface ParentProblem {
  readonly reason: "NoMatchingParent" | "NotAllowedByListeners";
  readonly message: string;
}

/** What one GwModel became, before attachment. */
export interface PreparedModel {
  readonly id: string;
  readonly resource: GwModel;
  /** The model's IR, absent when it is refused (`refused` says why). */
  readonly ir?: ModelIR;
  /** Accepted: False (UnsupportedValue) with these messages: the model is in no table. */
  readonly refused: readonly string[];
  /** ResolvedRefs: False (BackendNotFound): a target or a provider's backendRef that is not there. */
  readonly unresolved: readonly string[];
  /** Valid but not applied (yet), or never matching: part of the Warning. */
  readonly notes: readonly ModelNote[];
}

export interface ModelParentOutcome {
  readonly parentRef: ParentReference;
  /** `namespace/name` of the Gateway when it is served by Sluice. */
  readonly gateway?: string;
  /** The listeners it attached to (empty: `problem` says why). */
  readonly listeners: readonly AttachedListener[];
  readonly problem?: ParentProblem;
}

export interface ModelTranslation {
  /** One table per Gateway served by Sluice, sorted by Gateway. */
  readonly tables: readonly ModelTableIR[];
  /** By `namespace/name` of each GwModel. */
  readonly models: ReadonlyMap<string, PreparedModel>;
  /** The outcome of each parentRef, in the order written, by `namespace/name`. */
  readonly parents: ReadonlyMap<string, readonly ModelParentOutcome[]>;
}

export interface ModelTranslateOptions {
  /** File mode: a GatewayClass `sluice` is implied when the input defines none (as translateGateways). */
  readonly impliedGatewayClass: boolean;
}

const idOf = (m: GwModel) => `${namespaceOf(m)}/${m.metadata.name}`;
const createdAt = (m: GwModel): string | undefined => {
  const t = (m.metadata as { creationTimestamp?: unknown }).creationTimestamp;
  return typeof t === "string" ? t : undefined;
};

function refsOf(input: TranslationInput, ns: string): AiBackendRefs {
  return {
    service: (name, port) => serviceEndpoints(input, ns, name, port),
    inferencePool: (name) => input.inferencePools.find((p) => namespaceOf(p) === ns && p.metadata.name === name),
    pods: () => input.pods.filter((p) => namespaceOf(p) === ns),
    tunnel: tunnelRefs(input, ns),
  };
}

function prepareConcrete(
  input: TranslationInput,
  m: GwModel,
  base: Pick<ConcreteModelIR, "id" | "match" | "visibility" | "createdAt">,
  refused: string[],
  unresolved: string[],
  notes: ModelNote[],
): ConcreteModelIR | undefined {
  const spec = m.spec as Rec;
  const ns = namespaceOf(m);
  const { policies, health } = translateModelPolicies(spec.policies, notes);
  const p = translateModelProvider(base.id, spec, policies.tls !== undefined, ns, refsOf(input, ns));
  let provider = p.ok ? p.provider : undefined;
  let unavailable: string | undefined;
  if (!p.ok) {
    const message = `${p.field}: ${p.message}`;
    if (p.notYetSupported) {
      notes.push({ field: p.field, message: p.message });
      unavailable = message;
    } else if (p.field === "spec.custom.backendRef") {
      unresolved.push(message);
      unavailable = message;
    } else {
      refused.push(message);
      return undefined;
    }
  }
  if (provider?.pool?.failOpen === true) {
    // The fallback Pod is left by a GwBackend route's LLM stage; model routes leave none (docs/llm.md).
    notes.push({
      field: "spec.custom.backendRef",
      message: `InferencePool ${provider.pool.name}: spec.endpointPickerRef.failureMode FailOpen is not applied to a GwModel's provider: a request its endpoint picker does not answer fails as with FailClose`,
    });
  }
  const tunnel = isRec(spec.policies) ? spec.policies.tunnel : undefined;
  if (provider !== undefined && tunnel !== undefined) {
    const t = resolveTunnel(tunnel, ns, tunnelRefs(input, ns));
    const problem = !t.ok ? t.message : provider.tls === undefined ? TUNNEL_NEEDS_TLS : undefined;
    if (problem !== undefined || !t.ok) {
      // Never reached around the proxy: the model is unavailable until the tunnel resolves.
      unresolved.push(`spec.policies.tunnel: ${problem}`);
      unavailable = `spec.policies.tunnel: ${problem}`;
      provider = undefined;
    } else {
      provider = { ...provider, tunnel: t.tunnel };
    }
  }
  return {
    type: "concrete",
    ...base,
    providerName: String(spec.provider),
    ...(provider !== undefined ? { provider } : {}),
    ...(unavailable !== undefined ? { unavailable } : {}),
    policies,
    health,
  };
}

const STRATEGIES = ["weighted", "failover", "conditional"] as const;

/** Policies about the connection to a provider, which a virtual model, reaching none itself, has no use for. */
const PROVIDER_ONLY = ["auth", "tls", "tunnel", "health"];

/**
 * A virtual model's `policies`: those about the request (authorization, headers, transformations, prompt guards) are
 * applied on every request through it; those about a provider connection are named in a note, since each target
 * reaches its provider with its own.
 */
function virtualPolicies(policies: unknown, notes: ModelNote[]): VirtualPoliciesIR | undefined {
  if (!isRec(policies)) return undefined;
  for (const field of PROVIDER_ONLY) {
    if (policies[field] === undefined) continue;
    notes.push({
      field: `spec.policies.${field}`,
      message:
        field === "health"
          ? "is not applied on a virtual model: degradation is judged on the concrete models, by their own policies.health"
          : "is not applied on a virtual model, which reaches no provider itself: each target reaches its provider with its own (set it on the target GwModels)",
      reason: "Ignored",
    });
  }
  const { policies: p } = translateModelPolicies(
    Object.fromEntries(Object.entries(policies).filter(([k]) => !PROVIDER_ONLY.includes(k))),
    notes,
  );
  const out: VirtualPoliciesIR = {
    ai: p.ai.transformations !== undefined ? { transformations: p.ai.transformations } : {},
    ...(p.authorization !== undefined ? { authorization: p.authorization } : {}),
    ...(p.headers !== undefined ? { headers: p.headers } : {}),
    ...(p.promptGuard !== undefined ? { promptGuard: p.promptGuard } : {}),
  };
  return Object.keys(out).length > 1 || out.ai.transformations !== undefined ? out : undefined;
}

/** A virtual model's targets, checked against the GwModels they name (which must exist to be checked). */
function prepareVirtual(
  m: GwModel,
  byId: ReadonlyMap<string, GwModel>,
  base: Pick<VirtualModelIR, "id" | "match" | "visibility" | "createdAt">,
  refused: string[],
  unresolved: string[],
  notes: ModelNote[],
): VirtualModelIR | undefined {
  const vm = (m.spec as Rec).virtualModel as Rec;
  const strategy = STRATEGIES.find((s) => isRec(vm[s]));
  if (strategy === undefined) {
    refused.push("spec.virtualModel: one of weighted, failover, conditional is required");
    return undefined;
  }
  const policies = virtualPolicies((m.spec as Rec).policies, notes);
  const ns = namespaceOf(m);
  const written = ((vm[strategy] as Rec).targets ?? []) as readonly Rec[];
  const targets: (ModelTargetIR & Rec)[] = [];
  written.forEach((t, i) => {
    const at = `spec.virtualModel.${strategy}.targets[${i}]`;
    const name = isRec(t.modelRef) && typeof t.modelRef.name === "string" ? t.modelRef.name : "";
    const ref = `${ns}/${name}`;
    const target = byId.get(ref);
    if (target === undefined) {
      unresolved.push(`${at}.modelRef: GwModel ${ref} not found`);
      return;
    }
    const match = parseModelMatch(target.spec.match?.model ?? target.metadata.name);
    const model = typeof t.model === "string" ? t.model : undefined;
    if (model === undefined && isWildcard(match)) {
      refused.push(
        `${at}.model is required: GwModel ${ref} matches ${formatModelMatch(match)}, so the target must name the model to ask it for`,
      );
      return;
    }
    if (model !== undefined && !modelMatches(match, model)) {
      refused.push(`${at}.model: GwModel ${ref} matches ${formatModelMatch(match)}, not ${model}`);
      return;
    }
    if (strategy === "weighted" && (typeof t.weight === "number" ? t.weight : 1) === 0) {
      notes.push({ field: `${at}.weight`, message: "is 0: this target is never picked" });
    }
    if (strategy === "conditional" && typeof t.when === "string") {
      const why = checkLlmExpression(t.when);
      if (why !== undefined) notes.push({ field: `${at}.when`, message: why });
    }
    const extra =
      strategy === "weighted"
        ? { weight: typeof t.weight === "number" ? t.weight : 1 }
        : strategy === "failover"
          ? { priority: typeof t.priority === "number" ? t.priority : 0 }
          : typeof t.when === "string"
            ? { when: t.when }
            : {};
    targets.push({ ref, model: model ?? match.literal, ...extra });
  });
  return {
    type: "virtual",
    ...base,
    ...(policies !== undefined ? { policies } : {}),
    strategy,
    targets,
  } as VirtualModelIR;
}

/** Refuses every virtual model on a cycle (naming it) or deeper than MAX_VIRTUAL_DEPTH. */
function refuseCyclesAndDepth(models: Map<string, { ir?: ModelIR; refused: string[] }>): void {
  const depth = new Map<string, number>();
  const onStack: string[] = [];
  const visit = (id: string): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    const m = models.get(id);
    if (m?.ir?.type !== "virtual") return 0;
    const at = onStack.indexOf(id);
    if (at >= 0) {
      const cycle = [...onStack.slice(at), id];
      for (const c of new Set(cycle)) {
        const cm = models.get(c);
        const message = `spec.virtualModel: targets form a cycle (${cycle.join(" → ")})`;
        if (cm !== undefined && !cm.refused.includes(message)) cm.refused.push(message);
      }
      return Number.POSITIVE_INFINITY;
    }
    onStack.push(id);
    let d = 0;
    for (const t of m.ir.targets) d = Math.max(d, visit(t.ref));
    onStack.pop();
    const mine = d + 1;
    depth.set(id, mine);
    if (Number.isFinite(mine) && mine > MAX_VIRTUAL_DEPTH) {
      m.refused.push(
        `spec.virtualModel: virtual models nest ${mine} deep here; at most ${MAX_VIRTUAL_DEPTH} (a virtual model whose targets are virtual counts 2)`,
      );
    }
    return mine;
  };
  for (const id of [...models.keys()].sort()) visit(id);
}

/** Every GwModel prepared: its IR, or why it is refused; targets naming refused models are unresolved. */
export function prepareModels(input: TranslationInput): Map<string, PreparedModel> {
  const byId = new Map(input.models.map((m) => [idOf(m), m] as const));
  const work = new Map<
    string,
    { resource: GwModel; ir?: ModelIR; refused: string[]; unresolved: string[]; notes: ModelNote[] }
  >();
  for (const [id, m] of [...byId].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const refused: string[] = [];
    const unresolved: string[] = [];
    const notes: ModelNote[] = [];
    const base = {
      id,
      match: parseModelMatch(m.spec.match?.model ?? m.metadata.name),
      visibility: m.spec.visibility === "Internal" ? ("Internal" as const) : ("Public" as const),
      ...(createdAt(m) !== undefined ? { createdAt: createdAt(m) as string } : {}),
    };
    const ir =
      m.spec.virtualModel !== undefined
        ? prepareVirtual(m, byId, base, refused, unresolved, notes)
        : prepareConcrete(input, m, base, refused, unresolved, notes);
    work.set(id, {
      resource: m,
      ...(ir !== undefined && refused.length === 0 ? { ir } : {}),
      refused,
      unresolved,
      notes,
    });
  }
  refuseCyclesAndDepth(work);
  // A target whose model is refused is unresolved (and left out): the virtual model serves with the others.
  const out = new Map<string, PreparedModel>();
  for (const [id, w] of work) {
    let ir = w.refused.length === 0 ? w.ir : undefined;
    if (ir?.type === "virtual") {
      const kept = ir.targets.filter((t) => {
        const target = work.get(t.ref);
        if (target !== undefined && target.refused.length === 0 && target.ir !== undefined) return true;
        w.unresolved.push(`target GwModel ${t.ref} is not accepted (${target?.refused.join("; ") ?? "not found"})`);
        return false;
      });
      ir = { ...ir, targets: kept } as VirtualModelIR;
    }
    out.set(id, {
      id,
      resource: w.resource,
      ...(ir !== undefined ? { ir } : {}),
      refused: w.refused,
      unresolved: w.unresolved,
      notes: w.notes,
    });
  }
  return out;
}

/** The listeners one parentRef attaches a model to, or why none. */
function attachParent(
  input: TranslationInput,
  gw: Gateway,
  listeners: readonly { att: AttachedListener; valid: boolean }[],
  ref: ParentReference,
  modelNs: string,
): { listeners: AttachedListener[]; problem?: ParentProblem } {
  const key = gatewayKey(namespaceOf(gw), gw.metadata.name);
  const candidates = listeners.filter(
    (l) =>
      l.valid &&
      (ref.sectionName === undefined || ref.sectionName === l.att.sectionName) &&
      (ref.port === undefined || ref.port === l.att.listener.port),
  );
  if (candidates.length === 0) {
    const what = [
      ...(ref.sectionName !== undefined ? [`sectionName ${ref.sectionName}`] : []),
      ...(ref.port !== undefined ? [`port ${ref.port}`] : []),
    ];
    return {
      listeners: [],
      problem: {
        reason: "NoMatchingParent",
        message:
          what.length > 0
            ? `no valid listener of Gateway ${key} has ${what.join(" and ")}`
            : `Gateway ${key} has no valid listener`,
      },
    };
  }
  // Listeners' allowedRoutes.namespaces apply as to routes; allowedRoutes.kinds do not (a GwModel is not a route).
  const allowed = candidates.filter((l) => namespaceAllowed(input, l.att, modelNs));
  if (allowed.length === 0) {
    return {
      listeners: [],
      problem: {
        reason: "NotAllowedByListeners",
        message: `listener ${candidates.map((l) => l.att.sectionName).join(", ")} of Gateway ${key} does not allow namespace ${modelNs} (allowedRoutes.namespaces)`,
      },
    };
  }
  return { listeners: allowed.map((l) => l.att) };
}

/** Every model reachable from `roots` through virtual targets. */
function reachable(roots: Iterable<string>, models: ReadonlyMap<string, PreparedModel>): Record<string, ModelIR> {
  const out: Record<string, ModelIR> = {};
  const todo = [...roots];
  while (todo.length > 0) {
    const id = todo.pop() as string;
    const ir = models.get(id)?.ir;
    if (ir === undefined || out[id] !== undefined) continue;
    out[id] = ir;
    if (ir.type === "virtual") for (const t of ir.targets) todo.push(t.ref);
  }
  return Object.fromEntries(Object.entries(out).sort((a, b) => (a[0] < b[0] ? -1 : 1)));
}

/** GwModels → per-Gateway model tables, and what status needs. */
export function translateModels(input: TranslationInput, opts: ModelTranslateOptions): ModelTranslation {
  const models = prepareModels(input);
  const parents = new Map<string, ModelParentOutcome[]>();
  for (const [id, p] of models) {
    parents.set(
      id,
      (p.resource.spec.parentRefs ?? []).map((parentRef) => ({
        parentRef,
        listeners: [],
        problem: {
          reason: "NoMatchingParent",
          message: `Gateway ${parentRef.namespace ?? namespaceOf(p.resource)}/${parentRef.name} is not a Gateway served by Sluice (not found, or of another GatewayClass)`,
        },
      })),
    );
  }
  const tables: ModelTableIR[] = [];
  for (const gw of servedGateways(input, opts.impliedGatewayClass)) {
    const key = gatewayKey(namespaceOf(gw), gw.metadata.name);
    const listeners = gatewayListenerStates(input, gw);
    const byListener = new Map<AttachedListener, string[]>();
    for (const [id, p] of models) {
      const ns = namespaceOf(p.resource);
      const outcomes = parents.get(id) ?? [];
      (p.resource.spec.parentRefs ?? []).forEach((ref, i) => {
        if (!refersToGateway(ref, ns, gw)) return;
        const r = attachParent(input, gw, listeners, ref, ns);
        outcomes[i] = {
          parentRef: ref,
          gateway: key,
          listeners: r.listeners,
          ...(r.problem ? { problem: r.problem } : {}),
        };
        if (p.ir === undefined) return;
        for (const l of r.listeners) {
          const list = byListener.get(l) ?? [];
          if (!list.includes(id)) list.push(id);
          byListener.set(l, list);
        }
      });
    }
    const listenerTables: ListenerModelsIR[] = [];
    for (const { att } of listeners) {
      const ids = byListener.get(att);
      if (ids === undefined) continue;
      const ranked = ids
        .map((id) => models.get(id)?.ir)
        .filter((ir): ir is ModelIR => ir !== undefined)
        .sort(compareModelPrecedence)
        .map((ir) => ir.id);
      listenerTables.push({
        sectionName: att.sectionName,
        port: att.listener.port,
        ...(att.listener.hostname !== undefined ? { hostname: att.listener.hostname.toLowerCase() } : {}),
        // As translateGateways names them: HTTPS listeners have a route configuration each.
        routeConfig:
          att.listener.protocol === "HTTPS"
            ? listenerChainName(key, att.listener.port, att.sectionName)
            : routeConfigName(key, att.listener.port),
        ...(att.listenerSet !== undefined
          ? { listenerSet: `${namespaceOf(att.listenerSet)}/${att.listenerSet.metadata.name}` }
          : {}),
        models: ranked,
      });
    }
    if (listenerTables.length === 0) continue;
    tables.push({
      gateway: key,
      listeners: listenerTables,
      models: reachable(
        listenerTables.flatMap((l) => l.models),
        models,
      ),
    });
  }
  return { tables, models, parents };
}
