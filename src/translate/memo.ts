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
import type { TranslationInput } from "./input.js";
import { PolicyMemo, sameItems } from "./policy/memo.js";
import { XdsMemo } from "./xds/memo.js";

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
  #context: readonly unknown[] = [];
  /** Services, EndpointSlices and GwBackends of the last finished translation, and of the current one. */
  #backends: readonly (readonly object[])[] = [];
  #pendingBackends: readonly (readonly object[])[] = [];
  /**
   * Every backendRef resolves as in the last finished translation (its Services, EndpointSlices, GwBackends and
   * ReferenceGrants are the same objects), so memoized routes need not check their resolutions.
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
    this.#pendingBackends = [input.services, input.endpointSlices, input.backends];
    this.resolutionsSame =
      this.#gateways.size > 0 &&
      this.#backends.length === 3 &&
      this.#backends.every((l, i) => sameItems(l, this.#pendingBackends[i] ?? []));
    this.#seen = new Set();
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
    this.policies.commit();
    this.#backends = this.#pendingBackends;
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
