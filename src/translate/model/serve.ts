// The GwModels of each Gateway served: their clusters and routes added to the Gateway's IR, and the LLM table entry of
// each listener with models (docs/llm.md, "GwModel").
//
// - A cluster per concrete model (its provider as a GwBackend `ai` provider's: address, TLS, tunnel), and one per
//   failover or weighted virtual model whose targets are all concrete: a priority group per `priority` (failover), or
//   one group with a locality of its weight per target (weighted), so Envoy retries another target within the
//   request, as for a GwBackend's groups (outlier detection ejects the failing ones).
// - Path first: in every virtual host of a listener with models, after the HTTPRoute routes, `GET /v1/models`,
//   `/v1beta/models` and one model of each (answered by the LLM ext_proc), then the LLM API paths once per model cluster, matching MODEL_CLUSTER_HEADER, which
//   the LLM ext_proc sets to the cluster of the model it selected from the request's body (and then has Envoy route
//   again); the last route, reached before that, answers 500 if the ext_proc ever let a request through unselected.
// - Every model route names the listener's one LLM table entry: the models to select from, where each is sent, and the
//   provider entries of every model cluster (model/entry.ts, compiled as a GwBackend provider's).

import type { Gateway } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import { type AttachedListener, gatewayListenerStates } from "../gateway/gateway.js";
import type { TranslationInput } from "../input.js";
import type {
  GatewayIR,
  HealthScoreIR,
  LlmClusterIR,
  LlmProviderIR,
  RouteConfigIR,
  RouteIR,
  RoutePolicyIR,
  VirtualHostIR,
} from "../ir.js";
import type { PromptGuardEntry } from "../llm/guards.js";
import {
  compileModelPromptGuard,
  compileProviderAuth,
  entryId,
  type LlmBackendEntry,
  type LlmProviderEntry,
  type LlmRouteEntry,
  type RouteType,
  tokenPolicy,
} from "../llm/table.js";
import {
  gatewayKey,
  listenerChainName,
  MODEL_CLUSTER_HEADER,
  modelClusterName,
  modelRouteName,
  routeConfigName,
  virtualHostName,
} from "../names.js";
import { READS_BODY } from "../xds/filters/transformation.js";
import { modelProviderEntry } from "./entry.js";
import type {
  ConcreteModelIR,
  ListenerModelsIR,
  ModelIR,
  ModelRouteEntry,
  ModelTableIR,
  VirtualModelIR,
} from "./ir.js";

/** The LLM API paths GwModels serve, and their route types. */
export const MODEL_API_ROUTES: readonly (readonly [string, RouteType])[] = [
  ["/v1/chat/completions", "Completions"],
  ["/v1/embeddings", "Embeddings"],
  ["/v1/messages", "Messages"],
  ["/v1/messages/count_tokens", "MessagesTokenCount"],
  ["/v1/models", "Models"],
  ["/v1/responses", "Responses"],
];
const MODELS_PATHS = "/v1(beta)?/models(/[^/:]+)?";
const POST_PATHS = "/v1/(chat/completions|responses|embeddings|messages|messages/count_tokens)";
/**
 * Google's methods (`/v1beta/models/{model}:generateContent`, `:countTokens`, `:embedContent` ...: the model in the
 * URL; `@google/genai` 3 calls `/v1/`), a route of their own: one regex with both would pass Envoy's RE2 program size limit (100).
 */
const GOOGLE_POST_PATHS = "/v1(beta)?/models/[^/:]+:[a-zA-Z]+";

export interface ServedModels {
  /** The Gateways with their model clusters and routes. */
  readonly gateways: readonly GatewayIR[];
  /** LLM table entries of the model routes, and the entry of each route by `gatewayKey|routeName`. */
  readonly entries: ReadonlyMap<string, LlmRouteEntry>;
  readonly routes: ReadonlyMap<string, string>;
  /** By Gateway key: the model clusters (all keep the upstream LLM ext_proc: the cluster varies per request). */
  readonly clusters: ReadonlyMap<string, ReadonlySet<string>>;
  /** Fields served partly, by GwModel `namespace/name`, for its status Warning. */
  readonly notes: ReadonlyMap<string, readonly { field: string; message: string }[]>;
}

/** How specifically a listener hostname covers a virtual host's domain: 2 exact, 1 wildcard, 0 any host, -1 not. */
function covers(hostname: string | undefined, domain: string): number {
  if (hostname === undefined) return 0;
  if (hostname === domain) return 2;
  if (hostname.startsWith("*.") && domain.endsWith(hostname.slice(1)) && domain !== hostname) return 1;
  return -1;
}

function concreteProvider(m: ModelIR | undefined): (ConcreteModelIR & { provider: LlmProviderIR }) | undefined {
  return m?.type === "concrete" && m.provider !== undefined
    ? (m as ConcreteModelIR & { provider: LlmProviderIR })
    : undefined;
}

interface GatewayModels {
  readonly clusters: LlmClusterIR[];
  /** Model id → cluster name. */
  readonly byModel: Record<string, string>;
  /** Cluster → provider name → target. */
  readonly targets: Record<string, Record<string, { id: string; model?: string }>>;
  /** Cluster → its providers' entries. */
  readonly backends: Record<string, LlmBackendEntry>;
  /** Cluster → retries (providers − 1). */
  readonly retries: Record<string, number>;
}

function gatewayModels(
  table: ModelTableIR,
  entryOf: (m: ConcreteModelIR) => LlmProviderEntry | undefined,
  notes: Map<string, { field: string; message: string }[]>,
): GatewayModels {
  const out: GatewayModels = { clusters: [], byModel: {}, targets: {}, backends: {}, retries: {} };
  const add = (name: string, backend: string, groups: LlmProviderIR[][], models: Record<string, ConcreteModelIR>) => {
    const first = Object.values(models)[0];
    if (first === undefined) return;
    const health = modelScoring(models);
    out.clusters.push({
      kind: "llm",
      name,
      http2: false,
      backend,
      groups,
      eviction: { consecutiveFailures: first.health.consecutiveFailures, durationMs: first.health.ejectionMs },
      ...(health !== undefined ? { health } : {}),
    });
    out.retries[name] = groups.flat().length - 1;
  };
  for (const [id, m] of Object.entries(table.models)) {
    const c = concreteProvider(m);
    if (c === undefined) continue;
    const entry = entryOf(c);
    if (entry === undefined) continue;
    const name = modelClusterName(id);
    add(name, `GwModel ${id}`, [[c.provider]], { [c.provider.name]: c });
    out.byModel[id] = name;
    out.targets[name] = { [c.provider.name]: { id } };
    out.backends[name] = { backend: `GwModel ${id}`, providers: { [c.provider.name]: entry } };
  }
  for (const [id, m] of Object.entries(table.models)) {
    if (m.type !== "virtual" || m.strategy === "conditional") continue;
    const targets = m.targets.map((t, i) => ({ t, i, c: concreteProvider(table.models[t.ref]) }));
    if (targets.some((x) => x.c === undefined)) {
      if (targets.some((x) => table.models[x.t.ref]?.type === "virtual")) {
        const list = notes.get(id) ?? [];
        list.push({
          field: `spec.virtualModel.${m.strategy}.targets`,
          message:
            m.strategy === "failover"
              ? "a target is a virtual model: the target is chosen per request by health, and a request that fails is not retried on the next one"
              : "a target is a virtual model: the target is picked per request by weight, and a request that fails is not retried on another one",
        });
        notes.set(id, list);
      }
      continue;
    }
    const name = modelClusterName(id, m.strategy);
    // Failover: a priority group per `priority`. Weighted: one group, each target a locality of its weight (never
    // picked at 0).
    const keyed = m.targets.map((t) => ({
      t,
      priority: "priority" in t ? (t.priority as number) : 0,
      weight: "weight" in t ? (t.weight as number) : undefined,
    }));
    const priorities = [...new Set(keyed.map((k) => k.priority))].sort((a, b) => a - b);
    const providers: Record<string, LlmProviderEntry> = {};
    const targetsOf: Record<string, { id: string; model?: string }> = {};
    const groups = priorities.map((p) =>
      targets
        .filter((x) => keyed[x.i]?.priority === p && keyed[x.i]?.weight !== 0)
        .flatMap((x) => {
          const c = x.c as ConcreteModelIR & { provider: LlmProviderIR };
          const entry = entryOf(c);
          if (entry === undefined) return [];
          // One endpoint per target: the same model may be a target twice (asked for two names).
          const pname = `${x.i}.${c.id}`;
          providers[pname] = { ...entry, name: pname };
          targetsOf[pname] = { id: c.id, model: x.t.model };
          const weight = keyed[x.i]?.weight;
          return [{ ...c.provider, name: pname, ...(weight !== undefined ? { weight } : {}) }];
        }),
    );
    const served = groups.filter((g) => g.length > 0);
    if (served.length === 0) continue;
    add(
      name,
      `GwModel ${id}`,
      served,
      Object.fromEntries(targets.map((x) => [`${x.i}.${x.c?.id}`, x.c as ConcreteModelIR])),
    );
    out.byModel[id] = name;
    out.targets[name] = targetsOf;
    out.backends[name] = { backend: `GwModel ${id}`, providers };
  }
  return out;
}

/** A concrete model's `policies.health` as the scoring of its endpoint in a model cluster. */
function scoreOf(h: ConcreteModelIR["health"]): HealthScoreIR {
  return {
    ...(h.unhealthyCondition !== undefined ? { condition: h.unhealthyCondition } : {}),
    responseBody: h.unhealthyCondition !== undefined && READS_BODY.response.test(h.unhealthyCondition),
    ...(h.consecutiveFailures > 0 ? { consecutiveFailures: h.consecutiveFailures } : {}),
    ...(h.healthThreshold > 0 ? { healthThreshold: h.healthThreshold } : {}),
    restoreHealth: h.restoreHealth,
    durationMs: h.ejectionMs,
  };
}

/**
 * Sluice's scoring of a model cluster's endpoints (xds/llm-health.ts, src/health/: EDS, evicted targets marked
 * UNHEALTHY) when a target's `policies.health` asks for what Envoy's outlier detection cannot judge: an
 * `unhealthyCondition` or a `healthThreshold`. Each target is scored by its own model's; undefined otherwise.
 */
function modelScoring(models: Readonly<Record<string, ConcreteModelIR>>): HealthScoreIR | undefined {
  const entries = Object.entries(models);
  if (!entries.some(([, m]) => m.health.unhealthyCondition !== undefined || m.health.healthThreshold > 0)) {
    return undefined;
  }
  const providers = Object.fromEntries(entries.map(([name, m]) => [name, scoreOf(m.health)] as const));
  const first = entries[0]?.[1] as ConcreteModelIR;
  return {
    ...scoreOf(first.health),
    responseBody: Object.values(providers).some((p) => p.responseBody),
    providers,
  };
}

/** A concrete model's provider entry, with its prompt guards compiled as a GwBackend's (their notes are the model's). */
function providerEntry(
  m: ConcreteModelIR,
  input: TranslationInput,
  notes: Map<string, { field: string; message: string }[]>,
): LlmProviderEntry | undefined {
  const entry = modelProviderEntry(m, (kind, host, auth, ns) => compileProviderAuth(kind, host, auth, ns, input, m.id));
  // A credential that cannot be resolved fails the model's requests (500): the status says why first.
  for (const problem of entry?.auth.problems ?? []) {
    const list = notes.get(m.id) ?? [];
    list.push({
      field: "spec.policies.auth",
      message: `${problem.message}; requests to this model fail (500) until it is fixed`,
    });
    notes.set(m.id, list);
  }
  if (entry === undefined || m.policies.promptGuard === undefined) return entry;
  const ns = m.id.split("/")[0] ?? "";
  const from = { kind: "GwBackend", name: m.id, level: "gwBackend", target: `GwModel ${m.id}` } as const;
  const g = compileModelPromptGuard(m.policies.promptGuard, ns, input, from, "spec.policies.promptGuard");
  if (g.notes.length > 0) {
    const list = notes.get(m.id) ?? [];
    for (const n of g.notes) list.push({ field: n.field, message: n.message });
    notes.set(m.id, list);
  }
  return g.entry === undefined ? entry : { ...entry, ai: { ...entry.ai, promptGuard: g.entry } };
}

/** A virtual model's prompt guards compiled as a GwBackend's (their notes are the model's); undefined without any. */
function virtualGuards(
  m: VirtualModelIR,
  input: TranslationInput,
  notes: Map<string, { field: string; message: string }[]>,
): PromptGuardEntry | undefined {
  const written = m.policies?.promptGuard;
  if (written === undefined) return undefined;
  const ns = m.id.split("/")[0] ?? "";
  const from = { kind: "GwBackend", name: m.id, level: "gwBackend", target: `GwModel ${m.id}` } as const;
  const g = compileModelPromptGuard(written, ns, input, from, "spec.policies.promptGuard");
  if (g.notes.length > 0) {
    const list = notes.get(m.id) ?? [];
    for (const n of g.notes) list.push({ field: n.field, message: n.message });
    notes.set(m.id, list);
  }
  return g.entry;
}

/** The routes of one listener's models in one virtual host. */
function modelRoutes(
  vh: string,
  gm: GatewayModels,
  clusters: readonly string[],
  policy: RoutePolicyIR | undefined,
): RouteIR[] {
  const withPolicy = policy !== undefined ? { policy } : {};
  const path = (type: "Exact" | "RegularExpression", value: string) => ({ type, value });
  const routes: RouteIR[] = [
    {
      name: modelRouteName(vh, "models"),
      // Lists (OpenAI's and Anthropic's `/v1/models`, Google's `/v1beta/models`) and one model of each.
      match: { path: path("RegularExpression", MODELS_PATHS), headers: [], queryParams: [], method: "GET" },
      action: { kind: "direct", status: 500, body: "model discovery is answered by the LLM ext_proc" },
      ...withPolicy,
    },
  ];
  // The OpenAI and Anthropic paths, then Google's (named `<cluster>/google`).
  const forms = [
    ["", POST_PATHS],
    ["/google", GOOGLE_POST_PATHS],
  ] as const;
  for (const c of clusters) {
    for (const [suffix, paths] of forms) {
      routes.push({
        name: modelRouteName(vh, `${c}${suffix}`),
        match: {
          path: path("RegularExpression", paths),
          headers: [{ name: MODEL_CLUSTER_HEADER, type: "Exact", value: c }],
          queryParams: [],
          method: "POST",
        },
        action: {
          kind: "forward",
          backends: [{ cluster: c, weight: 1 }],
          mirrors: [],
          failover: { retries: gm.retries[c] ?? 0 },
        },
        ...withPolicy,
      });
    }
  }
  for (const [suffix, paths] of forms) {
    routes.push({
      name: modelRouteName(vh, `default${suffix}`),
      match: { path: path("RegularExpression", paths), headers: [], queryParams: [], method: "POST" },
      action: { kind: "direct", status: 500, body: "no model selected" },
      ...withPolicy,
    });
  }
  return routes;
}

/**
 * The listener's LLM table entry; `policy`: the listener's traffic policy, whose `tokens` limits (one set of buckets for
 * all the listener's model routes) and token costs the LLM ext_proc applies.
 */
function listenerEntry(
  table: ModelTableIR,
  l: ListenerModelsIR,
  gm: GatewayModels,
  policy: RoutePolicyIR | undefined,
  guardsOf: (m: VirtualModelIR) => PromptGuardEntry | undefined,
): LlmRouteEntry {
  // Only what this listener's models can reach.
  const reach = new Set<string>();
  const todo = [...l.models];
  while (todo.length > 0) {
    const id = todo.pop() as string;
    const m = table.models[id];
    if (m === undefined || reach.has(id)) continue;
    reach.add(id);
    if (m.type === "virtual") for (const t of m.targets) todo.push(t.ref);
  }
  const ids = [...reach].sort();
  const clusters = Object.fromEntries(ids.flatMap((id) => (gm.byModel[id] ? [[id, gm.byModel[id]] as const] : [])));
  const names = [...new Set(Object.values(clusters))].sort();
  const guards = Object.fromEntries(
    ids.flatMap((id) => {
      const m = table.models[id];
      const g = m?.type === "virtual" ? guardsOf(m) : undefined;
      return g === undefined ? [] : [[id, g] as const];
    }),
  );
  const models: ModelRouteEntry = {
    table: {
      models: l.models,
      byId: Object.fromEntries(ids.flatMap((id) => (table.models[id] ? [[id, table.models[id]] as const] : []))),
    },
    clusters,
    targets: Object.fromEntries(names.map((c) => [c, gm.targets[c] ?? {}])),
    ...(Object.keys(guards).length > 0 ? { guards } : {}),
  };
  const standIn: RouteIR = {
    name: modelRouteName(`${l.routeConfig}/listener/${l.sectionName}`, "tokens"),
    match: { path: { type: "PathPrefix", value: "/" }, headers: [], queryParams: [] },
    action: { kind: "direct", status: 500 },
    ...(policy !== undefined ? { policy } : {}),
  };
  const content = {
    routes: MODEL_API_ROUTES,
    ...tokenPolicy(standIn, table.gateway),
    backends: Object.fromEntries(names.flatMap((c) => (gm.backends[c] ? [[c, gm.backends[c]] as const] : []))),
    models,
  };
  return { id: entryId(content), ...content };
}

/**
 * Adds the GwModels of `tables` to the Gateways: clusters, routes after each listener's HTTPRoute routes, and the LLM
 * table entries those routes name.
 */
export function serveModels(
  gateways: readonly GatewayIR[],
  tables: readonly ModelTableIR[],
  input: TranslationInput,
  policyOf: (gw: Gateway, listener: AttachedListener) => RoutePolicyIR | undefined = () => undefined,
): ServedModels {
  const entries = new Map<string, LlmRouteEntry>();
  const routes = new Map<string, string>();
  const clusterSets = new Map<string, ReadonlySet<string>>();
  const notes = new Map<string, { field: string; message: string }[]>();
  const entryCache = new Map<string, LlmProviderEntry | undefined>();
  const entryOf = (m: ConcreteModelIR) => {
    if (!entryCache.has(m.id)) entryCache.set(m.id, providerEntry(m, input, notes));
    return entryCache.get(m.id);
  };
  const guardCache = new Map<string, PromptGuardEntry | undefined>();
  const guardsOf = (m: VirtualModelIR) => {
    if (!guardCache.has(m.id)) guardCache.set(m.id, virtualGuards(m, input, notes));
    return guardCache.get(m.id);
  };
  const byKey = new Map(tables.map((t) => [t.gateway, t]));
  const listenersOf = new Map<
    string,
    { sectionName: string; hostname?: string; routeConfig: string; policy?: RoutePolicyIR | undefined }[]
  >();
  for (const g of input.gateways) {
    const key = gatewayKey(namespaceOf(g), g.metadata.name);
    if (!byKey.has(key)) continue;
    listenersOf.set(
      key,
      gatewayListenerStates(input, g)
        .filter((l) => l.valid)
        .map(({ att }) => ({
          sectionName: att.sectionName,
          // Gateway- and listener-level traffic policies apply to model routes as to every rule of the listener.
          ...(byKey.get(key)?.listeners.some((l) => l.sectionName === att.sectionName) === true
            ? { policy: policyOf(g, att) }
            : {}),
          ...(att.listener.hostname !== undefined ? { hostname: att.listener.hostname.toLowerCase() } : {}),
          routeConfig:
            att.listener.protocol === "HTTPS"
              ? listenerChainName(key, att.listener.port, att.sectionName)
              : routeConfigName(key, att.listener.port),
        })),
    );
  }
  const out = gateways.map((gw): GatewayIR => {
    const table = byKey.get(gw.key);
    if (table === undefined) return gw;
    const gm = gatewayModels(table, entryOf, notes);
    clusterSets.set(gw.key, new Set(gm.clusters.map((c) => c.name)));
    const routeConfigs = gw.routeConfigs.map((rc): RouteConfigIR => {
      const listeners = table.listeners.filter((l) => l.routeConfig === rc.name);
      if (listeners.length === 0) return rc;
      // Each virtual host belongs to the listener whose hostname covers it most specifically (as Gateway API picks),
      // among every valid listener of the route configuration, with models or not.
      const all = (listenersOf.get(gw.key) ?? []).filter((l) => l.routeConfig === rc.name);
      const owner = (domain: string) => {
        let best: { sectionName: string } | undefined;
        let score = -1;
        for (const l of all) {
          const s = covers(l.hostname, domain);
          if (s > score) {
            best = l;
            score = s;
          }
        }
        return best === undefined ? undefined : listeners.find((l) => l.sectionName === best?.sectionName);
      };
      // One entry per listener, whatever the number of its virtual hosts.
      const byListener = new Map<ListenerModelsIR, LlmRouteEntry>();
      const withModels = (vh: VirtualHostIR, l: ListenerModelsIR): VirtualHostIR => {
        const policy = listenersOf.get(gw.key)?.find((x) => x.sectionName === l.sectionName)?.policy;
        let entry = byListener.get(l);
        if (entry === undefined) {
          entry = listenerEntry(table, l, gm, policy, guardsOf);
          byListener.set(l, entry);
          entries.set(entry.id, entry);
        }
        const added = modelRoutes(vh.name, gm, Object.keys(entry.backends), policy);
        for (const r of added) routes.set(`${gw.key}|${r.name}`, entry.id);
        return { ...vh, routes: [...vh.routes, ...added] };
      };
      const virtualHosts = rc.virtualHosts.map((vh) => {
        const l = vh.domains[0] === undefined ? undefined : owner(vh.domains[0]);
        return l === undefined ? vh : withModels(vh, l);
      });
      // A listener with models and no virtual host of its own hostname gets one.
      for (const l of listeners) {
        const domain = l.hostname ?? "*";
        if (virtualHosts.some((vh) => vh.domains.includes(domain))) continue;
        virtualHosts.push(withModels({ name: virtualHostName(rc.name, domain), domains: [domain], routes: [] }, l));
      }
      return { ...rc, virtualHosts };
    });
    return { ...gw, routeConfigs, clusters: [...gw.clusters, ...gm.clusters] };
  });
  return { gateways: out, entries, routes, clusters: clusterSets, notes };
}
