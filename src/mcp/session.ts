// One client session over several targets: initialize fans out and merges, lists are aggregated and paged, calls go
// to the target that owns the name or URI, and what targets send on their own (notifications, requests to the
// client) reaches the client on one of its open streams.

import type { McpBackendEntry } from "../translate/mcp/table.js";
import {
  compileMcpAuthorization,
  itemAllowed,
  type McpItem,
  type McpRequestContext,
  normalizeUri,
} from "./authorization.js";
import { guardTarget } from "./guardrails.js";
import { ErrorCodes, type JsonRpcId, type JsonRpcRequest, RpcError } from "./jsonrpc.js";
import type { McpMetrics } from "./metrics.js";
import {
  exposedName,
  exposedUri,
  type PrefixMode,
  prefixes,
  routesUris,
  shorten,
  splitPrefixed,
  splitUri,
} from "./names.js";
import type { SessionState } from "./session-codec.js";
import { mints, type SparePool, type SpareTemplate, spareKey } from "./spare-pool.js";
import { withClientHeaders } from "./target-connection.js";
import { type ConnectOptions, TargetConnection, type TargetHooks } from "./upstream.js";

export const SUPPORTED_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] as const;
export const LATEST_VERSION = SUPPORTED_VERSIONS[0];

/** Where messages to the client go: an SSE answer to one of its POSTs, or its GET stream. */
export interface Channel {
  send(message: object): void;
  readonly open: boolean;
}

/** The lists a client can page through, with the field each one's items are in and how an item is named. */
const LISTS = {
  "tools/list": { field: "tools", key: "name" },
  "prompts/list": { field: "prompts", key: "name" },
  "resources/list": { field: "resources", key: "uri" },
  "resources/templates/list": { field: "resourceTemplates", key: "uriTemplate" },
} as const;
type ListMethod = keyof typeof LISTS;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function encodeCursor(c: Record<string, string>): string {
  return Buffer.from(JSON.stringify(c), "utf8").toString("base64url");
}

function decodeCursor(cursor: unknown): Record<string, string> {
  if (typeof cursor !== "string") throw new RpcError(ErrorCodes.InvalidParams, "params.cursor must be a string");
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (isRecord(v) && Object.values(v).every((x) => typeof x === "string")) return v as Record<string, string>;
  } catch {}
  throw new RpcError(ErrorCodes.InvalidParams, "params.cursor is not a cursor this server issued");
}

/** Merges the targets' capabilities: a feature is offered when one target offers it. */
function mergeCapabilities(all: readonly Record<string, unknown>[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const caps of all) {
    for (const [k, v] of Object.entries(caps)) {
      if (k === "experimental" || k === "tasks") continue;
      const prev = out[k];
      if (isRecord(v)) {
        const merged: Record<string, unknown> = isRecord(prev) ? { ...prev } : {};
        for (const [f, x] of Object.entries(v)) if (x === true || merged[f] === undefined) merged[f] = x;
        out[k] = merged;
      } else if (prev === undefined) out[k] = v;
    }
  }
  return out;
}

export interface SessionOptions {
  readonly log: (line: string) => void;
  readonly metrics?: McpMetrics;
}

export class McpSession {
  readonly entry: McpBackendEntry;
  readonly #targets = new Map<string, TargetConnection>();
  readonly #opts: SessionOptions;
  readonly protocolVersion: string;
  /** Targets skipped (FailOpen) at initialize or since. */
  readonly skipped = new Set<string>();
  /** Exposed tool / prompt name → target and the target's own name; filled by lists, looked up by calls. */
  readonly #names = new Map<string, { target: string; name: string }>();
  /** The client's requests being served, by id: to cancel them, and the channel of their answer. */
  readonly #inflight = new Map<string, { target?: string; abort: AbortController; channel: Channel }>();
  /** Requests of the targets sent to the client, by the id Sluice gave them. */
  readonly #pending = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 0;
  #stream: Channel | undefined;
  /**
   * Whether the targets' GET streams were opened: not at initialize or resume, but once the client opens its own GET
   * stream, the only place their messages not tied to a request can go (docs/mcp.md, "Target streams").
   */
  #streamsOpen = false;
  failed: string | undefined;
  lastUsed = Date.now();
  readonly clientCapabilities: Record<string, unknown>;
  readonly clientInfo: { name: string; version: string } | undefined;

  private constructor(
    entry: McpBackendEntry,
    protocolVersion: string,
    opts: SessionOptions,
    caps: Record<string, unknown>,
    info: { name: string; version: string } | undefined,
  ) {
    this.entry = entry;
    this.protocolVersion = protocolVersion;
    this.#opts = opts;
    this.clientCapabilities = caps;
    this.clientInfo = info;
  }

  get #mode(): PrefixMode {
    return this.entry.prefixMode;
  }

  /** Targets the backend declares (the prefixing rule counts them, not those alive). */
  get #count(): number {
    return this.entry.targets.length + this.entry.unresolved.length;
  }

  #hooks(): TargetHooks {
    return {
      onRequest: (target, method, params) => this.#toClient(target, method, params),
      onNotification: (target, method, params) => this.#notification(target, method, params),
      log: this.#opts.log,
      observe: (target, method, ok, ms) => this.#opts.metrics?.record(this.entry.backend, target, method, ok, ms),
    };
  }

  /**
   * Starts a session: every target's initialize, then the merged answer for the client. With `pool`, a set of spare
   * target sessions started with exactly what this initialize would send the targets is adopted instead
   * (spare-pool.ts) once the pool's check says its targets are still there; a set that fails it is not adopted, and
   * the targets are initialized as without a pool. `template` is what a spare set for this client is started with.
   */
  static async initialize(
    entry: McpBackendEntry,
    params: Record<string, unknown> | undefined,
    opts: SessionOptions,
    more: { readonly pool?: SparePool; readonly headers?: ReadonlyMap<string, string> } = {},
  ): Promise<{ session: McpSession; result: Record<string, unknown>; template: SpareTemplate; adopted: boolean }> {
    const asked = typeof params?.["protocolVersion"] === "string" ? params["protocolVersion"] : LATEST_VERSION;
    const version = (SUPPORTED_VERSIONS as readonly string[]).includes(asked) ? asked : LATEST_VERSION;
    const caps = isRecord(params?.["capabilities"]) ? params["capabilities"] : {};
    const info = isRecord(params?.["clientInfo"])
      ? {
          name: String(params["clientInfo"]["name"] ?? "client"),
          version: String(params["clientInfo"]["version"] ?? "0"),
        }
      : undefined;
    const template: SpareTemplate = {
      protocolVersion: version,
      capabilities: caps,
      clientInfo: info,
      ...(more.headers !== undefined ? { headers: more.headers } : {}),
    };
    const failures: string[] = entry.unresolved.map((u) => `target ${u.name}: ${u.message}`);
    const pool = more.pool;
    const set = await pool?.take(entry, spareKey(entry, template));
    if (pool !== undefined && set !== undefined) {
      const refused = await pool.check(set, entry);
      if (refused.length === 0) {
        const s = new McpSession(entry, version, opts, caps, info);
        set.relay.bind(s.#hooks());
        for (const [name, c] of set.connections) s.#targets.set(name, c);
        for (const u of entry.unresolved) s.skipped.add(u.name);
        return { session: s, result: await s.#started(failures), template, adopted: true };
      }
      pool.refuse(set, refused.join("; "));
    }
    const s = new McpSession(entry, version, opts, caps, info);
    for (const u of entry.unresolved) s.skipped.add(u.name);
    // A credential minted from the client's token (passthrough, exchange) is minted from this request's.
    const results = await withClientHeaders(mints(entry) ? more.headers : undefined, () =>
      Promise.allSettled(
        entry.targets.map((t) =>
          TargetConnection.connect(
            {
              name: t.name,
              url: t.urls[0] as string,
              protocol: t.protocol,
              capabilities: caps,
              ...(info !== undefined ? { clientInfo: info } : {}),
              ...(t.connection !== undefined ? { connection: t.connection } : {}),
            },
            s.#hooks(),
          ),
        ),
      ),
    );
    results.forEach((r, i) => {
      const t = entry.targets[i];
      if (t === undefined) return;
      if (r.status === "fulfilled") s.#targets.set(t.name, r.value);
      else {
        failures.push(`target ${t.name}: ${(r.reason as Error).message}`);
        s.skipped.add(t.name);
      }
    });
    return { session: s, result: await s.#started(failures), template, adopted: false };
  }

  /** The session's targets are up (or failed, `failures`): FailClosed refuses it, else the merged answer. */
  async #started(failures: readonly string[]): Promise<Record<string, unknown>> {
    const entry = this.entry;
    if (failures.length > 0 && (entry.failureMode === "FailClosed" || this.#targets.size === 0)) {
      await this.close(true);
      throw new RpcError(ErrorCodes.ServerError, `cannot start the session: ${failures.join("; ")}`);
    }
    for (const f of failures) this.#opts.log(`sluice mcp: ${entry.backend}: skipping ${f} (FailOpen)`);
    const conns = [...this.#targets.values()];
    const instructions = conns
      .map((c) => c.instructions)
      .filter((x): x is string => x !== undefined && x !== "")
      .join("\n\n");
    return {
      protocolVersion: this.protocolVersion,
      capabilities: mergeCapabilities(conns.map((c) => c.capabilities ?? {})),
      serverInfo: { name: "sluice", version: "0.1.0" },
      ...(instructions !== "" ? { instructions } : {}),
    };
  }

  /**
   * The client has its answer to initialize: the targets' notifications/initialized, held until now so that they do
   * not compete with the targets still initializing, are sent (a request to a target sends its own first anyway).
   */
  release(): void {
    for (const c of this.#targets.values()) c.release();
  }

  /** A session sealed by this or another replica: its targets' sessions taken up again, no initialize. */
  static async resume(entry: McpBackendEntry, state: SessionState, opts: SessionOptions): Promise<McpSession> {
    const caps = isRecord(state.caps) ? state.caps : {};
    const info = isRecord(state.info)
      ? { name: String(state.info["name"] ?? "client"), version: String(state.info["version"] ?? "0") }
      : undefined;
    const s = new McpSession(entry, state.pv, opts, caps, info);
    for (const n of state.skipped ?? []) s.skipped.add(n);
    const byName = new Map(entry.targets.map((t) => [t.name, t]));
    const failures: string[] = [];
    await Promise.all(
      state.targets.map(async (ts) => {
        const t = byName.get(ts.n);
        if (t === undefined) {
          // The backend no longer has this target: its items are gone, as after a list_changed.
          s.skipped.add(ts.n);
          return;
        }
        const o: ConnectOptions = {
          name: t.name,
          // The scheme its policy says now (TLS added or removed since the session was sealed).
          url: ts.u.replace(/^https?:/, t.connection?.tls !== undefined ? "https:" : "http:"),
          ...(t.connection !== undefined ? { connection: t.connection } : {}),
          protocol: t.protocol,
          capabilities: caps,
          ...(info !== undefined ? { clientInfo: info } : {}),
          // A target session can be taken up where it has an id; an SSE target's lives in its stream and is started
          // again, as is one of a target that issues no id (stateless).
          ...(ts.s !== undefined && t.protocol === "StreamableHTTP" ? { sessionId: ts.s } : {}),
          ...(ts.v !== undefined ? { protocolVersion: ts.v } : {}),
        };
        try {
          s.#targets.set(t.name, await TargetConnection.connect(o, s.#hooks()));
        } catch (e) {
          failures.push(`target ${t.name}: ${(e as Error).message}`);
          s.skipped.add(t.name);
        }
      }),
    );
    if (failures.length > 0 && entry.failureMode === "FailClosed") {
      await s.close(false);
      throw new RpcError(ErrorCodes.ServerError, `cannot resume the session: ${failures.join("; ")}`);
    }
    return s;
  }

  /** What to seal into the session id. */
  state(): SessionState {
    return {
      fmt: 1,
      route: this.entry.key,
      pv: this.protocolVersion,
      targets: [...this.#targets.values()].map((c) => ({
        n: c.name,
        u: c.url,
        ...(c.sessionId !== undefined ? { s: c.sessionId } : {}),
        ...(c.protocolVersion !== undefined ? { v: c.protocolVersion } : {}),
      })),
      ...(this.skipped.size > 0 ? { skipped: [...this.skipped].sort() } : {}),
      caps: this.clientCapabilities,
      ...(this.clientInfo !== undefined ? { info: this.clientInfo } : {}),
      iat: Date.now(),
    };
  }

  /**
   * The client's GET stream: notifications and requests of the targets not tied to one of its requests. The first one
   * opens the targets' GET streams; they stay open while the session lives here (a client's stream that drops and
   * comes back finds them still open).
   */
  attachStream(channel: Channel): void {
    this.#stream = channel;
    if (this.#streamsOpen) return;
    this.#streamsOpen = true;
    for (const c of this.#targets.values()) void c.openStream();
  }

  detachStream(channel: Channel): void {
    if (this.#stream === channel) this.#stream = undefined;
  }

  #live(): TargetConnection[] {
    return [...this.#targets.values()].filter((c) => !this.skipped.has(c.name));
  }

  #target(name: string): TargetConnection {
    const c = this.#targets.get(name);
    if (c === undefined || this.skipped.has(name)) {
      throw new RpcError(ErrorCodes.InvalidParams, `target ${name} is not available in this session`);
    }
    return c;
  }

  /** A target failed: FailClosed fails the whole session, FailOpen skips the target from now on. */
  #failed(c: TargetConnection, e: RpcError): void {
    if (e.code !== ErrorCodes.ServerError || c.failure === undefined) return;
    if (this.entry.failureMode === "FailClosed") {
      this.failed = `target ${c.name} failed: ${c.failure}`;
    } else {
      this.skipped.add(c.name);
      this.#opts.log(`sluice mcp: ${this.entry.backend}: skipping target ${c.name} (FailOpen): ${c.failure}`);
    }
  }

  /** Whether `backend.mcp.authorization` lets this request see or use the item (no rules: everything). */
  #allowed(ctx: McpRequestContext | undefined, item: McpItem): boolean {
    // A target's own rules (a policy with its sectionName, merged over the backend's) replace the backend's.
    const rules = this.entry.targetAuthorization?.[item.target] ?? this.entry.authorization;
    if (rules.length === 0) return true;
    // No request context (Sluice's own lookups): nothing is allowed that the rules would have to decide.
    if (ctx === undefined) return false;
    return itemAllowed(compileMcpAuthorization(rules), ctx, item);
  }

  #check(ctx: McpRequestContext | undefined, item: McpItem): void {
    if (this.#allowed(ctx, item)) return;
    const what = item.kind === "resource" ? `resource ${item.uri}` : `${item.kind} ${item.name}`;
    throw new RpcError(ErrorCodes.InvalidParams, `${what} of target ${item.target} is not allowed`);
  }

  /**
   * Serves one request of the client; `channel` is where its answer goes (for progress and target requests); `ctx`
   * what the authorization rules see of the request.
   */
  handle(req: JsonRpcRequest, channel: Channel, ctx?: McpRequestContext): Promise<unknown> {
    // Credentials minted from the client's own token (passthrough, token exchange) read it from there. Only then: an
    // AsyncLocalStorage run costs every promise of the request a hook on Node 22.
    if (!this.#mints) return this.#handle(req, channel, ctx);
    return withClientHeaders(ctx?.request.headers, () => this.#handle(req, channel, ctx));
  }

  get #mints(): boolean {
    return this.entry.targets.some((t) => t.connection?.minted !== undefined);
  }

  async #handle(req: JsonRpcRequest, channel: Channel, ctx?: McpRequestContext): Promise<unknown> {
    this.lastUsed = Date.now();
    if (this.failed !== undefined) throw new RpcError(ErrorCodes.ServerError, `the session failed: ${this.failed}`);
    const params = req.params;
    switch (req.method) {
      case "ping":
        return {};
      case "initialize":
        throw new RpcError(ErrorCodes.InvalidRequest, "the session is already initialized");
      case "tools/list":
      case "prompts/list":
      case "resources/list":
      case "resources/templates/list":
        return this.#list(req.method, params, ctx);
      case "tools/call":
      case "prompts/get": {
        const name = params?.["name"];
        if (typeof name !== "string") throw new RpcError(ErrorCodes.InvalidParams, "params.name must be a string");
        const tools = req.method === "tools/call";
        const to = await this.#resolveName(tools ? "tools/list" : "prompts/list", name, ctx);
        this.#check(ctx, { kind: tools ? "tool" : "prompt", target: to.target, name: to.name });
        return this.#forward(req, to.target, { ...params, name: to.name }, channel, ctx);
      }
      case "resources/read":
      case "resources/subscribe":
      case "resources/unsubscribe": {
        const uri = params?.["uri"];
        if (typeof uri !== "string") throw new RpcError(ErrorCodes.InvalidParams, "params.uri must be a string");
        const to = this.#resolveUri(uri);
        this.#check(ctx, { kind: "resource", target: to.target, uri: to.uri });
        const result = await this.#forward(req, to.target, { ...params, uri: to.uri }, channel, ctx);
        if (req.method === "resources/read" && Array.isArray(result["contents"])) {
          result["contents"] = result["contents"].map((c: unknown) =>
            isRecord(c) && typeof c["uri"] === "string" ? { ...c, uri: this.#uri(to.target, c["uri"]) } : c,
          );
        }
        return result;
      }
      case "completion/complete": {
        const ref = params?.["ref"];
        if (!isRecord(ref)) throw new RpcError(ErrorCodes.InvalidParams, "params.ref must be an object");
        if (ref["type"] === "ref/prompt" && typeof ref["name"] === "string") {
          const to = await this.#resolveName("prompts/list", ref["name"], ctx);
          this.#check(ctx, { kind: "prompt", target: to.target, name: to.name });
          return this.#forward(req, to.target, { ...params, ref: { ...ref, name: to.name } }, channel, ctx);
        }
        if (ref["type"] === "ref/resource" && typeof ref["uri"] === "string") {
          const to = this.#resolveUri(ref["uri"]);
          this.#check(ctx, { kind: "resource", target: to.target, uri: to.uri });
          return this.#forward(req, to.target, { ...params, ref: { ...ref, uri: to.uri } }, channel, ctx);
        }
        throw new RpcError(
          ErrorCodes.InvalidParams,
          "params.ref must be a ref/prompt with a name or a ref/resource with a uri",
        );
      }
      case "logging/setLevel": {
        await Promise.all(this.#live().map((c) => c.request(req.method, params).catch(() => undefined)));
        return {};
      }
      default:
        throw new RpcError(ErrorCodes.MethodNotFound, `Method not found: ${req.method}`);
    }
  }

  #uri(target: string, uri: string): string {
    return exposedUri(this.#mode, this.#count, target, uri);
  }

  #resolveUri(uri: string): { target: string; uri: string } {
    if (routesUris(this.#mode, this.#count)) {
      const s = splitUri(uri);
      if (s === undefined)
        throw new RpcError(ErrorCodes.InvalidParams, `resource ${uri} names no target of this server`);
      return { target: s.target, uri: normalizeUri(s.uri) };
    }
    const only = this.entry.targets[0];
    if (only === undefined) throw new RpcError(ErrorCodes.InvalidParams, `resource ${uri}: no target`);
    return { target: only.name, uri: normalizeUri(uri) };
  }

  /** The target and own name of an exposed tool or prompt name: from the lists seen, else by listing again. */
  async #resolveName(
    list: "tools/list" | "prompts/list",
    exposed: string,
    ctx: McpRequestContext | undefined,
  ): Promise<{ target: string; name: string }> {
    const key = `${list}|${exposed}`;
    const known = this.#names.get(key);
    if (known !== undefined) return known;
    if (prefixes(this.#mode, this.#count)) {
      // Unshortened prefixed names split without a lookup; shortened ones were seen in a list or are listed now.
      const split = splitPrefixed(exposed);
      if (
        split !== undefined &&
        shorten(exposed) === exposed &&
        this.#targets.has(split.target) &&
        exposed.length < 64
      ) {
        return split;
      }
    } else if (this.#count === 1 && this.entry.targets[0] !== undefined) {
      return { target: this.entry.targets[0].name, name: exposed };
    }
    await this.#listAll(list, ctx);
    const found = this.#names.get(key);
    if (found === undefined) {
      throw new RpcError(ErrorCodes.InvalidParams, `${list === "tools/list" ? "tool" : "prompt"} ${exposed} not found`);
    }
    return found;
  }

  async #listAll(method: ListMethod, ctx: McpRequestContext | undefined): Promise<void> {
    let cursor: string | undefined;
    for (let i = 0; i < 100; i++) {
      const page = await this.#list(method, cursor !== undefined ? { cursor } : undefined, ctx);
      cursor = typeof page["nextCursor"] === "string" ? page["nextCursor"] : undefined;
      if (cursor === undefined) return;
    }
  }

  /**
   * One page of an aggregated list. The first page asks every target for its first; the cursor keeps each target's
   * own cursor, and the next page asks those targets for their next.
   */
  async #list(
    method: ListMethod,
    params: Record<string, unknown> | undefined,
    ctx: McpRequestContext | undefined,
  ): Promise<Record<string, unknown>> {
    const { field, key } = LISTS[method];
    const cursors = params?.["cursor"] !== undefined ? decodeCursor(params["cursor"]) : undefined;
    const conns = this.#live().filter((c) => cursors === undefined || cursors[c.name] !== undefined);
    const answers = await Promise.all(
      conns.map(async (c) => {
        if (cursors === undefined && !this.#offers(c, method)) return { c, result: { [field]: [] } };
        const cursor = cursors?.[c.name];
        try {
          return { c, result: cursor !== undefined ? await c.request(method, { cursor }) : await c.list(method) };
        } catch (e) {
          if (e instanceof RpcError && e.code === ErrorCodes.MethodNotFound) return { c, result: { [field]: [] } };
          if (e instanceof RpcError) this.#failed(c, e);
          if (this.entry.failureMode === "FailClosed") throw e;
          return { c, result: { [field]: [] } };
        }
      }),
    );
    const items: unknown[] = [];
    const next: Record<string, string> = {};
    const seen = new Set<string>();
    for (const { c, result } of answers) {
      const list = Array.isArray(result[field]) ? (result[field] as unknown[]) : [];
      for (const item of list) {
        if (!isRecord(item) || typeof item[key] !== "string") continue;
        const own = item[key] as string;
        const kind = method === "tools/list" ? "tool" : method === "prompts/list" ? "prompt" : "resource";
        const item_ =
          kind === "resource" ? { kind, target: c.name, uri: normalizeUri(own) } : { kind, target: c.name, name: own };
        if (!this.#allowed(ctx, item_ as McpItem)) continue;
        let exposed: string;
        if (key === "name") {
          exposed = exposedName(this.#mode, this.#count, c.name, own);
          const k = `${method}|${exposed}`;
          const prior = this.#names.get(k);
          if (seen.has(exposed) || (prior !== undefined && prior.target !== c.name)) {
            // prefixMode Never with a name two targets share: the first target (in declared order) keeps it.
            this.#opts.log(
              `sluice mcp: ${this.entry.backend}: ${method} name ${own} of target ${c.name} is taken; left out`,
            );
            continue;
          }
          this.#names.set(k, { target: c.name, name: own });
        } else {
          exposed = this.#uri(c.name, own);
        }
        seen.add(exposed);
        items.push({ ...item, [key]: exposed });
      }
      if (typeof result["nextCursor"] === "string") next[c.name] = result["nextCursor"];
    }
    return { [field]: items, ...(Object.keys(next).length > 0 ? { nextCursor: encodeCursor(next) } : {}) };
  }

  #offers(c: TargetConnection, method: ListMethod): boolean {
    const caps = c.capabilities;
    // A resumed session did not see the target's initialize: ask, and take "method not found" as an empty list.
    if (caps === undefined) return true;
    if (method === "tools/list") return caps["tools"] !== undefined;
    if (method === "prompts/list") return caps["prompts"] !== undefined;
    return caps["resources"] !== undefined;
  }

  /** Forwards one request to one target, inside the target's own guardrail processors if it has any (guardrails.ts). */
  #forward(
    req: JsonRpcRequest,
    target: string,
    params: Record<string, unknown> | undefined,
    channel: Channel,
    ctx: McpRequestContext | undefined,
  ): Promise<Record<string, unknown>> {
    const section = this.entry.targets.find((t) => t.name === target)?.section ?? target;
    const guards = this.entry.targetGuardrails?.[section];
    if (guards === undefined || ctx === undefined) return this.#forwardTo(req, target, params, channel);
    const input = { backend: this.entry.backend, target, method: req.method, id: req.id, params };
    return guardTarget(guards, input, ctx, this.#opts.log, (p) => this.#forwardTo(req, target, p, channel));
  }

  /** Forwards one request to one target, with its progress and cancellation. */
  async #forwardTo(
    req: JsonRpcRequest,
    target: string,
    params: Record<string, unknown> | undefined,
    channel: Channel,
  ): Promise<Record<string, unknown>> {
    const c = this.#target(target);
    // A target may send its requests of the client (sampling, elicitation) on its GET stream even while serving this
    // one: the stream opens at the first call forwarded to it (which waits for it to be open, else the target could
    // send before it is, and drop what it sent), if the client's own GET stream did not open it before. A Stateless
    // session lives for one request: it opens none, as it never did.
    if (this.entry.sessionRouting === "Stateful") await c.openStream();
    const abort = new AbortController();
    const id = String(req.id);
    this.#inflight.set(id, { target, abort, channel });
    const meta = isRecord(req.params?.["_meta"]) ? req.params["_meta"] : undefined;
    const token = meta?.["progressToken"];
    try {
      return await c.request(req.method, params, {
        signal: abort.signal,
        ...(typeof token === "string" || typeof token === "number"
          ? {
              onProgress: (p) =>
                channel.send({
                  jsonrpc: "2.0",
                  method: "notifications/progress",
                  params: { ...p, progressToken: token },
                }),
            }
          : {}),
      });
    } catch (e) {
      if (e instanceof RpcError) this.#failed(c, e);
      throw e;
    } finally {
      this.#inflight.delete(id);
    }
  }

  /** A notification of the client. */
  async notify(method: string, params: Record<string, unknown> | undefined): Promise<void> {
    this.lastUsed = Date.now();
    if (method === "notifications/cancelled") {
      const id = params?.["requestId"];
      const f = id !== undefined ? this.#inflight.get(String(id)) : undefined;
      f?.abort.abort(typeof params?.["reason"] === "string" ? params["reason"] : "cancelled by the client");
      return;
    }
    if (method === "notifications/initialized") return;
    // notifications/roots/list_changed and anything else: every target hears it.
    await Promise.all(this.#live().map((c) => c.notify(method, params).catch(() => undefined)));
  }

  /** An answer of the client to a request of a target. */
  respond(
    id: JsonRpcId,
    result: unknown,
    error: { code: number; message: string; data?: unknown } | undefined,
  ): boolean {
    const p = this.#pending.get(String(id));
    if (p === undefined) return false;
    this.#pending.delete(String(id));
    if (error !== undefined) p.reject(new RpcError(error.code, error.message, error.data));
    else p.resolve(result);
    return true;
  }

  /** The channel of a target's request or notification: the answer of a request in flight to it, else the GET stream. */
  #channelFor(target: string): Channel | undefined {
    const open = [...this.#inflight.values()].filter((f) => f.target === target && f.channel.open);
    return open.at(-1)?.channel ?? (this.#stream?.open === true ? this.#stream : undefined);
  }

  async #toClient(target: string, method: string, params: Record<string, unknown> | undefined): Promise<unknown> {
    const channel = this.#channelFor(target);
    if (channel === undefined) {
      throw new RpcError(ErrorCodes.InternalError, `no open stream to the client for ${method}`);
    }
    const id = `sluice-${target}-${++this.#nextId}`;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      channel.send({ jsonrpc: "2.0", id, method, ...(params !== undefined ? { params } : {}) });
    });
  }

  #notification(target: string, method: string, params: Record<string, unknown> | undefined): void {
    let p = params;
    if (method === "notifications/resources/updated" && typeof params?.["uri"] === "string") {
      p = { ...params, uri: this.#uri(target, params["uri"]) };
    }
    if (method === "notifications/tools/list_changed" || method === "notifications/prompts/list_changed") {
      // Names are looked up again on the next call.
      for (const k of [...this.#names.keys()]) if (this.#names.get(k)?.target === target) this.#names.delete(k);
    }
    const channel = method.endsWith("list_changed")
      ? this.#stream?.open
        ? this.#stream
        : undefined
      : this.#channelFor(target);
    if (channel === undefined) return;
    channel.send({ jsonrpc: "2.0", method, ...(p !== undefined ? { params: p } : {}) });
  }

  /** `terminate`: end the targets' sessions too (DELETE); else leave them for another replica. */
  async close(terminate: boolean): Promise<void> {
    for (const f of this.#inflight.values()) f.abort.abort("session closed");
    for (const p of this.#pending.values()) p.reject(new RpcError(ErrorCodes.InternalError, "session closed"));
    this.#pending.clear();
    await Promise.all([...this.#targets.values()].map((c) => (terminate ? c.terminate() : c.close())));
  }
}
