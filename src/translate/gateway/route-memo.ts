// The route part of the translation memo (src/translate/memo.ts): for one Gateway, what attaching each route produced
// last time, with everything it read, so an unchanged route is not translated again.
//
// An entry is reused when the route is the same object, the Gateway's listeners are the same (the fingerprint), the
// policy engine finds the same attachments, Services and GwBackends where the route looked (EngineTrace), and every
// backendRef resolves to what the route saw (Resolution). Reusing replays the policy engine's bookkeeping and
// registers the clusters again; the outcome itself is applied like a fresh one.

import type { Resolution } from "../backend/resolve.js";
import { Generations } from "../generations.js";
import type { RouteIR } from "../ir.js";
import type { EngineTrace } from "../policy/engine.js";
import { sameItems } from "../policy/memo.js";
import type { TranslatedRule } from "../route/httproute.js";

/** What attaching one route to one Gateway produces. */
export interface RouteOutcome {
  /** Route status entries, one per parentRef naming this Gateway. */
  readonly parents: readonly unknown[];
  /** Index of the listener of each attachment (each counts in the listener's attachedRoutes). */
  readonly attached: readonly number[];
  /** Rules served, per route configuration and host name, in order. */
  readonly served: readonly {
    readonly config: string;
    readonly host: string;
    readonly rules: readonly TranslatedRule[];
  }[];
}

export interface RouteMemoEntry {
  readonly outcome: RouteOutcome;
  /** Absent when the translation had no policy engine. */
  readonly engine: EngineTrace | undefined;
  readonly resolutions: readonly Resolution[];
}

/** The entries of one Gateway, valid for one listener fingerprint; entries not used in a translation are dropped. */
export class GatewayRouteMemo {
  readonly fingerprint: string;
  readonly #routes = new Generations<object, RouteMemoEntry>();
  readonly #hosts = new Generations<string, { entries: readonly TranslatedRule[]; routes: RouteIR[] }>();
  hits = 0;
  misses = 0;

  constructor(fingerprint: string) {
    this.fingerprint = fingerprint;
  }

  /** Starts a translation: entries kept from now on are the ones the next translation sees. */
  begin(): void {
    this.#routes.begin();
    this.#hosts.begin();
    this.hits = 0;
    this.misses = 0;
  }

  /**
   * The routes of virtual host `name` in precedence order, as `order` gives them; reused while its entries are the
   * same objects in the same order (unchanged routes keep their TranslatedRule objects).
   */
  ordered(
    name: string,
    entries: readonly TranslatedRule[],
    order: (entries: readonly TranslatedRule[]) => RouteIR[],
  ): RouteIR[] {
    let known = this.#hosts.get(name);
    if (known === undefined || !sameItems(known.entries, entries)) known = { entries, routes: order(entries) };
    this.#hosts.keep(name, known);
    return known.routes;
  }

  get(route: object): RouteMemoEntry | undefined {
    return this.#routes.get(route);
  }

  keep(route: object, entry: RouteMemoEntry): void {
    this.#routes.keep(route, entry);
  }

  /** Ends a translation: entries not kept are forgotten. */
  end(): void {
    this.#routes.end();
    this.#hosts.end();
  }
}
