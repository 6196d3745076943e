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
  #notes: NoteArgs[] | undefined;
  #added: [string, ExtAuthzPolicy][] | undefined;
  #clusters: [string, string][] | undefined;

  readonly #llmEntries: ReadonlyMap<string, string> | undefined;

  constructor(memo: XdsMemo, inner: BuildContext, llmEntries: ReadonlyMap<string, string> | undefined) {
    this.#memo = memo;
    this.#inner = inner;
    this.#llmEntries = llmEntries !== undefined && llmEntries.size > 0 ? llmEntries : undefined;
    const note: BuildContext["note"] = (...args) => {
      this.#notes?.push(args);
      inner.note(...args);
    };
    const authz = inner.authz;
    let table: PolicyTableSink | undefined;
    if (authz !== undefined) {
      table = {
        add: (content, compile) => {
          const id = authz.table.add(content, compile);
          const policy = authz.table.get(id);
          if (policy !== undefined) this.#added?.push([id, policy]);
          return id;
        },
        addCompiled: (id, policy) => {
          this.#added?.push([id, policy]);
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
              this.#clusters?.push([name, clusterSignature(c)]);
              return c;
            },
          }
        : {}),
    };
  }

  /** Whether the clusters an entry looked up are still what they were. */
  #sameClusters(entry: BuildEntry): boolean {
    return entry.clusters.every(([name, sig]) => clusterSignature(this.#inner.cluster?.(name)) === sig);
  }

  #record<T>(
    compute: (route: RouteIR) => T,
    route: RouteIR,
  ): { value: T; clusters: readonly (readonly [string, string])[] } & Effects {
    const notes: NoteArgs[] = [];
    const added: [string, ExtAuthzPolicy][] = [];
    const clusters: [string, string][] = [];
    this.#notes = notes;
    this.#added = added;
    this.#clusters = clusters;
    try {
      const value = compute(route);
      return {
        value,
        notes: notes.length > 0 ? notes : NONE,
        added: added.length > 0 ? added : NONE,
        clusters: clusters.length > 0 ? clusters : NONE,
      };
    } finally {
      this.#notes = undefined;
      this.#added = undefined;
      this.#clusters = undefined;
    }
  }

  #replay(effects: Effects): void {
    for (const args of effects.notes) this.#inner.note(...args);
    for (const [id, policy] of effects.added) this.#inner.authz?.table.addCompiled(id, policy);
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
      this.#replay(known);
      return known.contributions;
    }
    this.#memo.misses++;
    const r = this.#record(compute, route);
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
    const r = this.#record(compute, route);
    this.#memo.keepBytes(route, { filterConfigs, bytes: r.value, notes: r.notes, added: r.added });
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
