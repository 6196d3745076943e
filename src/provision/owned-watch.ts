// The objects Sluice provisioned, watched (label app.kubernetes.io/managed-by=sluice) so that a hand edit or a
// deletion is put right within a second or so rather than at the next resync. What counts as a change is what an
// apply could put back: the object minus its status and the bookkeeping the API server writes (resourceVersion,
// generation, managedFields), so a Deployment's rollout status or a Service's load balancer address wakes nothing.
// Objects appearing are not drift (Sluice made them, or is about to); changes the provisioner itself wrote are told
// apart by their resourceVersion (provisioner.ts).

import type { KubeClient, KubeObject } from "../sources/kube/client.js";
import type { WatchedKind } from "../sources/kube/kinds.js";
import { Reflector } from "../sources/kube/reflector.js";
import { MANAGED_BY } from "./names.js";

export const MANAGED_BY_SELECTOR = `app.kubernetes.io/managed-by=${MANAGED_BY}`;

/** A provisioned object changed or went away by another hand. */
export interface Drift {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** The resourceVersion of the changed object; undefined when it was deleted. */
  readonly resourceVersion: string | undefined;
}

interface Served {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** What of an object an apply sets or could set: all but status and the API server's bookkeeping. */
export function fingerprint(o: KubeObject): string {
  const { status: _s, metadata, ...rest } = o as KubeObject & { status?: unknown };
  const {
    resourceVersion: _rv,
    generation: _g,
    managedFields: _mf,
    ...meta
  } = metadata as KubeObject["metadata"] & {
    managedFields?: unknown;
  };
  return JSON.stringify({ ...rest, metadata: meta });
}

export class OwnedWatch {
  readonly #reflectors: Reflector[];
  /** Per kind, each object's fingerprint as last seen (`namespace/name`). */
  readonly #seen = new Map<string, Map<string, string>>();
  readonly #onDrift: (d: Drift) => void;
  #started = false;

  constructor(
    client: KubeClient,
    kinds: Readonly<Record<string, Served>>,
    opts: { readonly onDrift: (d: Drift) => void; readonly log: (line: string) => void },
  ) {
    this.#onDrift = opts.onDrift;
    this.#reflectors = Object.entries(kinds).map(([kind, r]) => {
      const watched: WatchedKind = {
        kind,
        group: r.group,
        versions: [r.version],
        plural: r.plural,
        namespaced: true,
        optional: false,
        labelSelector: MANAGED_BY_SELECTOR,
      };
      const reflector: Reflector = new Reflector(client, watched, {
        log: opts.log,
        onChange: () => this.#changed(reflector),
      });
      return reflector;
    });
  }

  /** Whether every kind has been listed once (before that, nothing is drift). */
  get synced(): boolean {
    return this.#reflectors.every((r) => r.synced);
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    for (const r of this.#reflectors) r.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.#reflectors.map((r) => r.stop()));
  }

  #changed(r: Reflector): void {
    const kind = r.kind.kind;
    const { whole, keys } = r.drain();
    let seen = this.#seen.get(kind);
    const first = seen === undefined;
    seen ??= new Map();
    this.#seen.set(kind, seen);
    const look = whole ? new Set([...seen.keys(), ...r.objects.keys()]) : keys;
    for (const key of look) {
      const now = r.objects.get(key);
      const before = seen.get(key);
      const print = now !== undefined ? fingerprint(now) : undefined;
      if (print === undefined) seen.delete(key);
      else seen.set(key, print);
      // The first list, an object appearing, or nothing an apply sets: not drift.
      if (first || before === undefined || before === print) continue;
      const [namespace = "", name = ""] = key.split("/");
      this.#onDrift({ kind, namespace, name, resourceVersion: now?.metadata.resourceVersion });
    }
  }
}
