// The translation memo: what one translation keeps for the next, so that translating after a small change costs in
// proportion to the change. Give the same memo to every translate() of a sequence (as `sluice serve` does); the result
// is the same as without it, byte for byte (test/unit/translate-memo.test.ts).
//
// - policy/memo.ts: the view and attachments of each unchanged GwPolicy;
// - gateway/route-memo.ts: per Gateway and route, the outcome of attaching the route (IR, status, policy bookkeeping),
//   reused while everything it read is unchanged;
// - xds/memo.ts: per route IR, the filter contributions and serialized route; per virtual host and route
//   configuration, their bytes.
//
// Inputs are immutable: an unchanged resource is the same object from one load to the next (the file source keeps
// unchanged documents' objects), so object identity is what tells unchanged from changed.

import { GatewayRouteMemo } from "./gateway/route-memo.js";
import { Generations } from "./generations.js";
import type { TranslationInput } from "./input.js";
import { changedNames, type ListChange, listChange, type Named, nameOf } from "./list-diff.js";
import { PolicyMemo, sameItems } from "./policy/memo.js";
import type { ResourceStatus } from "./status/conditions.js";
import { XdsMemo } from "./xds/memo.js";

const LIST_KINDS = ["Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute", "Service", "GwBackend"] as const;
type Lists = Readonly<Record<(typeof LIST_KINDS)[number], readonly Named[]>>;

/** How many routes have each namespace/name, kept up to date from the changes of the route lists. */
class NameCounts {
  readonly #counts = new Map<string, number>();
  #shared = new Set<string>();
  #pending: { delta: Map<string, number>; shared: Set<string> } | undefined;

  /** Names used more than once once `changes` apply (`fresh`: start from nothing). */
  begin(changes: readonly ListChange<Named>[], fresh: boolean): ReadonlySet<string> {
    if (fresh) this.#counts.clear();
    const delta = new Map<string, number>();
    for (const c of changes) {
      for (const o of c.removed) delta.set(nameOf(o), (delta.get(nameOf(o)) ?? 0) - 1);
      for (const o of c.added) delta.set(nameOf(o), (delta.get(nameOf(o)) ?? 0) + 1);
    }
    const shared = new Set(fresh ? [] : this.#shared);
    for (const [name, d] of delta) {
      if ((this.#counts.get(name) ?? 0) + d > 1) shared.add(name);
      else shared.delete(name);
    }
    this.#pending = { delta, shared };
    return shared;
  }

  commit(): void {
    if (this.#pending === undefined) return;
    for (const [name, d] of this.#pending.delta) {
      const n = (this.#counts.get(name) ?? 0) + d;
      if (n > 0) this.#counts.set(name, n);
      else this.#counts.delete(name);
    }
    this.#shared = this.#pending.shared;
    this.#pending = undefined;
  }
}

export interface MemoStats {
  /** Route × Gateway outcomes reused / computed in the last translation. */
  readonly routeHits: number;
  readonly routeMisses: number;
  /** Route IRs whose filter contributions were reused / built. */
  readonly buildHits: number;
  readonly buildMisses: number;
}

export class TranslationMemo {
  readonly policies = new PolicyMemo();
  readonly xds = new XdsMemo();
  #gateways = new Map<string, GatewayRouteMemo>();
  #seen = new Set<string>();
  /** The lists of the last finished translation, and of the current one. */
  #lists: Lists | undefined;
  #pendingLists: Lists | undefined;
  readonly #routeNames = new NameCounts();
  /**
   * namespace/name shared by several routes (of either kind): such routes share policy sites, so each depends on the
   * other, and they are never memoized.
   */
  sharedRouteNames: ReadonlySet<string> = new Set();
  #context: readonly unknown[] = [];
  /** What backendRefs resolve against (Services ... ConfigMaps) in the last finished translation, and the current one. */
  #backends: readonly (readonly object[])[] = [];
  #pendingBackends: readonly (readonly object[])[] = [];
  /**
   * Every backendRef resolves as in the last finished translation (its Services, EndpointSlices, GwBackends, Secrets,
   * ConfigMaps and ReferenceGrants are the same objects), so memoized routes need not check their resolutions.
   */
  resolutionsSame = false;

  /**
   * Starts a translation. `context`: options that change what translation does; with the ReferenceGrants (which any
   * cross-namespace reference may read), a change drops every route outcome.
   */
  begin(input: TranslationInput, context: readonly unknown[]): void {
    const routeContext = [...context, ...input.referenceGrants];
    if (!sameItems(routeContext, this.#context)) this.#gateways.clear();
    this.#context = routeContext;
    // Secrets and ConfigMaps too: an AI GwBackend's tls policy reads its CA and client certificate when it resolves.
    this.#pendingBackends = [
      input.services,
      input.endpointSlices,
      input.backends,
      input.inferencePools,
      input.pods,
      input.secrets,
      input.configMaps,
    ];
    this.resolutionsSame =
      this.#gateways.size > 0 &&
      this.#backends.length === this.#pendingBackends.length &&
      this.#backends.every((l, i) => sameItems(l, this.#pendingBackends[i] ?? []));
    this.#seen = new Set();
    this.#statuses.begin();
    const lists: Lists = {
      Gateway: input.gateways,
      ListenerSet: input.listenerSets,
      HTTPRoute: input.httpRoutes,
      GRPCRoute: input.grpcRoutes,
      Service: input.services,
      GwBackend: input.backends,
    };
    this.#pendingLists = lists;
    const last = this.#lists;
    const changes = last === undefined ? undefined : LIST_KINDS.map((k) => [k, listChange(last[k], lists[k])] as const);
    this.policies.begin(changes === undefined ? undefined : new Map(changes.map(([k, c]) => [k, changedNames(c)])));
    this.sharedRouteNames = this.#routeNames.begin(
      changes?.filter(([k]) => k === "HTTPRoute" || k === "GRPCRoute").map(([, c]) => c) ?? [
        { removed: [], added: [...input.httpRoutes, ...input.grpcRoutes] },
      ],
      last === undefined,
    );
    // What filter builders read from the input besides the route IR: Secrets and ConfigMaps (API keys, passwords).
    this.xds.begin([...context, ...input.secrets, ...input.configMaps]);
  }

  /** The route outcomes of one Gateway; all of them are dropped when its listeners changed (`fingerprint`). */
  routesOf(gateway: string, fingerprint: string): GatewayRouteMemo {
    let memo = this.#gateways.get(gateway);
    if (memo === undefined || memo.fingerprint !== fingerprint) {
      memo = new GatewayRouteMemo(fingerprint);
      this.#gateways.set(gateway, memo);
    }
    memo.begin();
    this.#seen.add(gateway);
    return memo;
  }

  /** Ends a translation: what it did not use is forgotten. */
  end(): void {
    for (const [key, memo] of this.#gateways) {
      if (this.#seen.has(key)) memo.end();
      else this.#gateways.delete(key);
    }
    this.xds.end();
    this.#statuses.end();
    this.policies.commit();
    this.#lists = this.#pendingLists;
    this.#routeNames.commit();
    this.#backends = this.#pendingBackends;
  }

  readonly #statuses = new Generations<string, { readonly json: string; readonly status: ResourceStatus }>();

  /**
   * The statuses, with each one equal to the last translation's replaced by that object (so what the server keeps
   * between reloads is not garbage of every reload). Route and most policy statuses are already reused as objects;
   * the others are compared as JSON.
   */
  sameStatuses(statuses: readonly ResourceStatus[]): ResourceStatus[] {
    return statuses.map((s) => {
      if (s.kind === "HTTPRoute" || s.kind === "GRPCRoute") return s;
      const key = `${s.kind}/${s.namespace ?? ""}/${s.name}`;
      let known = this.#statuses.get(key);
      if (known?.status !== s) {
        const json = JSON.stringify(s.status);
        if (known?.json !== json) known = { json, status: s };
      }
      this.#statuses.keep(key, known);
      return known.status;
    });
  }

  stats(): MemoStats {
    let routeHits = 0;
    let routeMisses = 0;
    for (const key of this.#seen) {
      const m = this.#gateways.get(key);
      routeHits += m?.hits ?? 0;
      routeMisses += m?.misses ?? 0;
    }
    return { routeHits, routeMisses, buildHits: this.xds.hits, buildMisses: this.xds.misses };
  }
}
