// The model table: what GwModels translate to, per Gateway and listener. Plain readonly data, no Envoy types; the LLM
// ext_proc selects a concrete model from it per request (src/extproc/llm/models/).

import type { LlmProviderIR } from "../ir.js";
import type { PromptGuardEntry } from "../llm/guards.js";
import type { AiPolicy } from "../llm/table.js";
import type { ModelMatch } from "./match.js";

export type Visibility = "Public" | "Internal";

/** Health tuning of a concrete model (`policies.health`), with the defaults applied. */
export interface ModelHealthIR {
  /** Consecutive failures that eject the model; 0 = never by count. */
  readonly consecutiveFailures: number;
  /** Base ejection time; the n-th ejection in a row lasts n times this (capped, see health.ts). */
  readonly ejectionMs: number;
  /** EWMA health (0..100) below which a failure ejects the model; 0 = never by health. */
  readonly healthThreshold: number;
  /** EWMA health a model returns with after an ejection. */
  readonly restoreHealth: number;
  /** CEL over the response that marks it a failure; absent = any 5xx or connection failure. */
  readonly unhealthyCondition?: string;
}

/**
 * Policies of a concrete model (`spec.policies`), as written where the LLM table has the same thing for a GwBackend
 * provider (`ai.transformations`, `auth`); `authorization` and `headers` are applied per model by the LLM ext_proc
 * (extproc/llm/models/serve.ts), `promptGuard` is compiled into the model's provider entry (model/serve.ts).
 */
export interface ModelPoliciesIR {
  /** The part of an AI request policy the model sets (transformations only). */
  readonly ai: AiPolicy;
  /** `policies.auth` as written (ModelBackendAuth); compiled like a GwBackend's `auth` (see llmProviderEntry). */
  readonly auth?: unknown;
  /** `policies.authorization` as written: rules a client must meet to use the model (checked per attempt). */
  readonly authorization?: unknown;
  /** `policies.headers` as written (HeaderModifiers of the provider request and its response). */
  readonly headers?: unknown;
  /** `policies.promptGuard` as written (AIPromptGuard); compiled as a GwBackend's `ai.promptGuard`. */
  readonly promptGuard?: unknown;
  /** `policies.tls` as written; the provider's `tls` says whether TLS is used and its SNI. */
  readonly tls?: unknown;
}

export interface ConcreteModelIR {
  readonly type: "concrete";
  /** `namespace/name` of the GwModel. */
  readonly id: string;
  readonly match: ModelMatch;
  readonly visibility: Visibility;
  readonly createdAt?: string;
  /** The spec's enumeration value (`Provider01` ...). */
  readonly providerName: string;
  /**
   * Where and how the provider is reached, the same description a GwBackend `ai` provider gets (named after the
   * GwModel); absent when the model cannot be served, and then `unavailable` says why.
   */
  readonly provider?: LlmProviderIR;
  readonly unavailable?: string;
  readonly policies: ModelPoliciesIR;
  readonly health: ModelHealthIR;
}

export interface ModelTargetIR {
  /** `namespace/name` of the target GwModel. */
  readonly ref: string;
  /** The model name the target is asked for: `model`, else the target's exact match. */
  readonly model: string;
}

/**
 * The policies of a virtual model that concern the request rather than a provider connection, applied on every
 * request that passes through it, around the chosen target's own (docs/llm.md, "Virtual models").
 */
export interface VirtualPoliciesIR {
  /** `policies.transformations`, applied before the target's own (so the target's win on the same field). */
  readonly ai: Pick<AiPolicy, "transformations">;
  /** `policies.authorization` as written: checked when the model is selected, before any target. */
  readonly authorization?: unknown;
  /** `policies.headers` as written: applied before the target's on the request, after them on the response. */
  readonly headers?: unknown;
  /** `policies.promptGuard` as written; compiled per Gateway (model/serve.ts), run before the target's guards. */
  readonly promptGuard?: unknown;
}

export type VirtualModelIR = {
  readonly type: "virtual";
  readonly id: string;
  readonly match: ModelMatch;
  readonly visibility: Visibility;
  readonly createdAt?: string;
  readonly policies?: VirtualPoliciesIR;
} & (
  | { readonly strategy: "weighted"; readonly targets: readonly (ModelTargetIR & { readonly weight: number })[] }
  | { readonly strategy: "failover"; readonly targets: readonly (ModelTargetIR & { readonly priority: number })[] }
  | {
      readonly strategy: "conditional";
      /** In order; a target without `when` always matches (the fallback). */
      readonly targets: readonly (ModelTargetIR & { readonly when?: string })[];
    }
);

export type ModelIR = ConcreteModelIR | VirtualModelIR;

/** The models a request on one listener may name directly, in precedence order (match.ts). */
export interface ListenerModelsIR {
  /** The listener's name (a parentRef's sectionName). */
  readonly sectionName: string;
  readonly port: number;
  /** The listener's hostname; absent = any host. */
  readonly hostname?: string;
  /** The route configuration the listener's requests are routed by (per port for HTTP, per listener for HTTPS). */
  readonly routeConfig: string;
  /** `namespace/name` of the ListenerSet the listener comes from, if it does. */
  readonly listenerSet?: string;
  /** `namespace/name` of each model attached to this listener, best match first (Internal ones included). */
  readonly models: readonly string[];
}

/** The model table of one Gateway: its listeners' models and every model they can reach (targets too). */
export interface ModelTableIR {
  /** `namespace/name` of the Gateway. */
  readonly gateway: string;
  readonly listeners: readonly ListenerModelsIR[];
  /** Every accepted model reachable from the listeners, by `namespace/name`. */
  readonly models: Readonly<Record<string, ModelIR>>;
}

/** What selection reads: the models of one listener and the models they reach. */
export interface ListenerModelTable {
  readonly models: readonly string[];
  readonly byId: Readonly<Record<string, ModelIR>>;
}

export function listenerTable(table: ModelTableIR, sectionName: string): ListenerModelTable | undefined {
  const l = table.listeners.find((x) => x.sectionName === sectionName);
  return l === undefined ? undefined : { models: l.models, byId: table.models };
}

/**
 * What the LLM ext_proc needs to serve the GwModels of one listener (the `models` of its LLM table entry): the models
 * to select from, and where each selected model is sent.
 */
export interface ModelRouteEntry {
  readonly table: ListenerModelTable;
  /**
   * The Envoy cluster of each model a selection may end at, by `namespace/name`: every concrete model, and every
   * failover or weighted virtual model whose targets are all concrete (Envoy then picks among them and retries another
   * within the request).
   */
  readonly clusters: Readonly<Record<string, string>>;
  /** By cluster, then provider (endpoint) name: the concrete model it is and, for a failover target, what to ask. */
  readonly targets: Readonly<
    Record<string, Readonly<Record<string, { readonly id: string; readonly model?: string }>>>
  >;
  /** The compiled `policies.promptGuard` of each virtual model the listener reaches that has one, by id. */
  readonly guards?: Readonly<Record<string, PromptGuardEntry>>;
}
