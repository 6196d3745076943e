// The xDS part of the translation memo (src/translate/memo.ts). Per route IR object: what the HTTP filter builders
// contributed and the route's serialized bytes; per virtual host and route configuration: their bytes. Route IR
// objects are immutable and reused by the route memo while a route is unchanged, so the object is the key; what a
// builder reads besides the route (the authorization path, Secrets, ConfigMaps) is the memo's environment, and the
// LLM table entry of the route is checked with each entry.
//
// Builders report through the context (notes, policy-table entries); those are recorded per route and replayed when
// the route is reused, so the Gateway's notes and policy table come out as a full build makes them.

import type { Any } from "@bufbuild/protobuf/wkt";
import type { ExtAuthzPolicy } from "../../extauthz/server.js";
import type { PolicyTableSink } from "../authz/policy-table.js";
import type { ClusterIR, RouteIR } from "../ir.js";
import { sameItems } from "../policy/memo.js";
import type { HostContributions } from "./filters/chain.js";
import type { BuildContext, RouteContribution } from "./filters/types.js";

type NoteArgs = Parameters<BuildContext["note"]>;

const NONE: readonly never[] = [];
const NOTHING: readonly undefined[] = [];

/** What one route's build reported through the context. */
interface Effects {
  readonly notes: readonly NoteArgs[];
  readonly added: readonly (readonly [string, ExtAuthzPolicy])[];
}

interface BuildEntry extends Effects {
  readonly epoch: number;
  readonly llmEntry: string | undefined;
  /** The clusters the builders looked up (`ctx.cluster`), with what they were: reused only while they are the same. */
  readonly clusters: readonly (readonly [string, string])[];
  readonly contributions: readonly (RouteContribution | undefined)[];
}

interface BytesEntry extends Effects {
  readonly filterConfigs: Readonly<Record<string, Any>> | undefined;
  readonly bytes: Uint8Array;
}

/** A virtual host's routes list (the same array while none of its routes changed): what its routes brought. */
interface HostEntry extends Effects {
  readonly epoch: number;
  /** The LLM table entry of each route, or undefined when none has one. */
  readonly llmEntries: readonly (string | undefined)[] | undefined;
  readonly clusters: readonly (readonly [string, string])[];
  readonly value: HostContributions;
}

/** A virtual host's bytes, from the bytes of its routes with their typed_per_filter_config. */
interface HostBytesEntry extends Effects {
  readonly epoch: number;
  readonly filterConfigs: readonly (Readonly<Record<string, Any>> | undefined)[];
  readonly routes: readonly Uint8Array[];
}

interface JoinedEntry {
  readonly key: string;
  readonly parts: readonly Uint8Array[];
  readonly bytes: Uint8Array;
}

export class XdsMemo {
  #epoch = 0;
  #env: readonly unknown[] = [];
  readonly #builds = new WeakMap<RouteIR, BuildEntry>();
  readonly #bytes = new WeakMap<RouteIR, BytesEntry>();
  readonly #hosts = new WeakMap<readonly RouteIR[], HostEntry>();
  readonly #hostBytes = new WeakMap<readonly RouteIR[], HostBytesEntry>();
  #joined = new Map<string, JoinedEntry>();
  #nextJoined = new Map<string, JoinedEntry>();
  /** Routes whose filter contributions were reused / built in the last translation. */
  hits = 0;
  misses = 0;

  /** Starts a translation. `env`: what builders read besides route IR; when any item changes, nothing is reused. */
  begin(env: readonly unknown[]): void {
    if (!sameItems(env, this.#env)) this.#epoch++;
    this.#env = env;
    this.#nextJoined = new Map();
    this.hits = 0;
    this.misses = 0;
  }

  /** Ends a translation: virtual hosts and route configurations not built in it are forgotten. */
  end(): void {
    this.#joined = this.#nextJoined;
    this.#nextJoined = new Map();
  }

  /**
   * The memo for one Gateway's build, with the context builders must be given (it records what they report).
   * `llmEntries`: what `ctx.llmEntry` answers, by route name.
   */
  forGateway(ctx: BuildContext, llmEntries: ReadonlyMap<string, string> | undefined): GatewayXdsMemo {
    return new GatewayXdsMemo(this, ctx, llmEntries);
  }

  /** @internal */
  build(route: RouteIR, llmEntry: string | undefined): BuildEntry | undefined {
    const e = this.#builds.get(route);
    return e !== undefined && e.epoch === this.#epoch && e.llmEntry === llmEntry ? e : undefined;
  }

  /** @internal */
  keepBuild(route: RouteIR, entry: Omit<BuildEntry, "epoch">): void {
    this.#builds.set(route, { ...entry, epoch: this.#epoch });
  }

  /** @internal */
  bytes(route: RouteIR, filterConfigs: Readonly<Record<string, Any>> | undefined): BytesEntry | undefined {
    const e = this.#bytes.get(route);
    return e !== undefined && sameRecord(e.filterConfigs, filterConfigs) ? e : undefined;
  }

  /** @internal */
  keepBytes(route: RouteIR, entry: BytesEntry): void {
    this.#bytes.set(route, entry);
  }

  /** @internal */
  host(routes: readonly RouteIR[]): HostEntry | undefined {
    const e = this.#hosts.get(routes);
    return e !== undefined && e.epoch === this.#epoch ? e : undefined;
  }

  /** @internal */
  keepHost(routes: readonly RouteIR[], entry: Omit<HostEntry, "epoch">): void {
    this.#hosts.set(routes, { ...entry, epoch: this.#epoch });
  }

  /** @internal */
  hostBytes(routes: readonly RouteIR[]): HostBytesEntry | undefined {
    const e = this.#hostBytes.get(routes);
    return e !== undefined && e.epoch === this.#epoch ? e : undefined;
  }

  /** @internal */
  keepHostBytes(routes: readonly RouteIR[], entry: Omit<HostBytesEntry, "epoch">): void {
    this.#hostBytes.set(routes, { ...entry, epoch: this.#epoch });
  }

  /** @internal */
  joined(name: string, key: string, parts: readonly Uint8Array[], join: () => Uint8Array): Uint8Array {
    let e = this.#joined.get(name) ?? this.#nextJoined.get(name);
    if (e === undefined || e.key !== key || !sameItems(e.parts, parts)) e = { key, parts, bytes: join() };
    this.#nextJoined.set(name, e);
    return e.bytes;
  }
}

/** One Gateway's build: a recording context and the memoized steps. */
export class GatewayXdsMemo {
  readonly #memo: XdsMemo;
  readonly #inner: BuildContext;
  /** The context to build with: reports go to the Gateway's context and, while a route is built, to its record. */
  readonly ctx: BuildContext;
  /** What is being recorded: a route's build, inside a virtual host's (each records what happens within it). */
  readonly #recording: {
    notes: NoteArgs[];
    added: [string, ExtAuthzPolicy][];
    clusters: (readonly [string, string])[];
  }[] = [];

  readonly #llmEntries: ReadonlyMap<string, string> | undefined;

  constructor(memo: XdsMemo, inner: BuildContext, llmEntries: ReadonlyMap<string, string> | undefined) {
    this.#memo = memo;
    this.#inner = inner;
    this.#llmEntries = llmEntries !== undefined && llmEntries.size > 0 ? llmEntries : undefined;
    const note: BuildContext["note"] = (...args) => {
      for (const r of this.#recording) r.notes.push(args);
      inner.note(...args);
    };
    const authz = inner.authz;
    let table: PolicyTableSink | undefined;
    if (authz !== undefined) {
      table = {
        add: (content, compile) => {
          const id = authz.table.add(content, compile);
          const policy = authz.table.get(id);
          if (policy !== undefined) for (const r of this.#recording) r.added.push([id, policy]);
          return id;
        },
        addCompiled: (id, policy) => {
          for (const r of this.#recording) r.added.push([id, policy]);
          authz.table.addCompiled(id, policy);
        },
        get: (id) => authz.table.get(id),
      };
    }
    const cluster = inner.cluster;
    this.ctx = {
      note,
      ...(authz !== undefined && table !== undefined ? { authz: { ...authz, note, table } } : {}),
      ...(inner.llmEntry !== undefined ? { llmEntry: inner.llmEntry } : {}),
      ...(cluster !== undefined
        ? {
            cluster: (name: string) => {
              const c = cluster(name);
              const sig = clusterSignature(c);
              for (const r of this.#recording) r.clusters.push([name, sig]);
              return c;
            },
          }
        : {}),
    };
  }

  /** Whether the clusters an entry looked up are still what they were. */
  #sameClusters(entry: { readonly clusters: readonly (readonly [string, string])[] }): boolean {
    return entry.clusters.every(([name, sig]) => clusterSignature(this.#inner.cluster?.(name)) === sig);
  }

  #record<T>(compute: () => T): { value: T; clusters: readonly (readonly [string, string])[] } & Effects {
    const r = {
      notes: [] as NoteArgs[],
      added: [] as [string, ExtAuthzPolicy][],
      clusters: [] as (readonly [string, string])[],
    };
    this.#recording.push(r);
    try {
      const value = compute();
      return {
        value,
        notes: r.notes.length > 0 ? r.notes : NONE,
        added: r.added.length > 0 ? r.added : NONE,
        clusters: r.clusters.length > 0 ? r.clusters : NONE,
      };
    } finally {
      this.#recording.pop();
    }
  }

  /** Reports again what a reused build reported, to the Gateway's context and to whatever is being recorded. */
  #replay(effects: Effects, clusters: readonly (readonly [string, string])[] = NONE): void {
    for (const args of effects.notes) this.ctx.note(...args);
    for (const [id, policy] of effects.added) this.ctx.authz?.table.addCompiled(id, policy);
    if (clusters.length > 0) for (const r of this.#recording) r.clusters.push(...clusters);
  }

  /** The filter contributions of `route` (one per builder, in builder order), reused while the route is unchanged. */
  contributions(
    route: RouteIR,
    compute: (route: RouteIR) => readonly (RouteContribution | undefined)[],
  ): readonly (RouteContribution | undefined)[] {
    const llmEntry = this.#llmEntries?.get(route.name);
    const known = this.#memo.build(route, llmEntry);
    if (known !== undefined && this.#sameClusters(known)) {
      this.#memo.hits++;
      this.#replay(known, known.clusters);
      return known.contributions;
    }
    this.#memo.misses++;
    const r = this.#record(() => compute(route));
    // Most routes get nothing from most builders: one shared list stands for "nothing at all".
    const contributions = r.value.every((c) => c === undefined) ? NOTHING : r.value;
    this.#memo.keepBuild(route, { llmEntry, contributions, notes: r.notes, added: r.added, clusters: r.clusters });
    return r.value;
  }

  /** The bytes of `route` with its typed_per_filter_config `filterConfigs`. */
  routeBytes(
    route: RouteIR,
    filterConfigs: Readonly<Record<string, Any>> | undefined,
    compute: (route: RouteIR) => Uint8Array,
  ): Uint8Array {
    const known = this.#memo.bytes(route, filterConfigs);
    if (known !== undefined) {
      this.#replay(known);
      return known.bytes;
    }
    const r = this.#record(() => compute(route));
    this.#memo.keepBytes(route, { filterConfigs, bytes: r.value, notes: r.notes, added: r.added });
    return r.value;
  }

  /**
   * What the routes of a virtual host bring to the filter chain, reused while its routes list is the same array (the
   * route memo keeps a host's list while none of its routes changed) and their LLM entries and clusters are the same.
   */
  hostContributions(
    routes: readonly RouteIR[],
    compute: (routes: readonly RouteIR[]) => HostContributions,
  ): HostContributions {
    const llm = this.#llmEntries;
    const known = this.#memo.host(routes);
    if (
      known !== undefined &&
      (known.llmEntries === undefined
        ? llm === undefined || routes.every((r) => !llm.has(r.name))
        : routes.every((r, i) => llm?.get(r.name) === known.llmEntries?.[i])) &&
      this.#sameClusters(known)
    ) {
      this.#memo.hits += routes.length;
      this.#replay(known, known.clusters);
      return known.value;
    }
    const r = this.#record(() => compute(routes));
    const llmEntries =
      llm !== undefined && routes.some((x) => llm.has(x.name)) ? routes.map((x) => llm.get(x.name)) : undefined;
    this.#memo.keepHost(routes, { llmEntries, value: r.value, notes: r.notes, added: r.added, clusters: r.clusters });
    return r.value;
  }

  /**
   * The bytes of each route of a virtual host, reused while its routes list is the same array and each route has the
   * same typed_per_filter_config.
   */
  hostRouteBytes(
    routes: readonly RouteIR[],
    filterConfigs: readonly (Readonly<Record<string, Any>> | undefined)[],
    compute: () => readonly Uint8Array[],
  ): readonly Uint8Array[] {
    const known = this.#memo.hostBytes(routes);
    if (known?.filterConfigs.every((c, i) => sameRecord(c, filterConfigs[i]))) {
      this.#replay(known);
      return known.routes;
    }
    const r = this.#record(compute);
    this.#memo.keepHostBytes(routes, { filterConfigs, routes: r.value, notes: r.notes, added: r.added });
    return r.value;
  }

  /**
   * Bytes made of `parts` (a virtual host of its routes, a route configuration of its virtual hosts) under a unique
   * resource name; `key` holds the other fields. Reused while the parts are the same byte arrays.
   */
  joined(name: string, key: string, parts: readonly Uint8Array[], join: () => Uint8Array): Uint8Array {
    return this.#memo.joined(name, key, parts, join);
  }
}

const signatures = new WeakMap<object, string>();

/** A cluster's content as text (computed once per cluster object). */
function clusterSignature(c: ClusterIR | undefined): string {
  if (c === undefined) return "";
  let sig = signatures.get(c);
  if (sig === undefined) {
    sig = JSON.stringify(c);
    signatures.set(c, sig);
  }
  return sig;
}

/** The same keys in the same order with the same values (typed_per_filter_config is written in key order). */
function sameRecord(a: Readonly<Record<string, Any>> | undefined, b: Readonly<Record<string, Any>> | undefined) {
  if (a === b) return true;
  if (a === undefined || b === undefined) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return sameItems(ka, kb) && ka.every((k) => a[k] === b[k]);
}
