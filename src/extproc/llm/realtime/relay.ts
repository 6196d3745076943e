// The Realtime relay: Envoy routes the websocket upgrade of a Realtime route whose provider has prompt guards here
// (xds/realtime-relay.ts, over the bootstrap's `sluice_authz_http` cluster) instead of to the provider, since
// Envoy's ext_proc does not see websocket frames; and one whose provider is behind an InferencePool, whose endpoint
// picker the relay asks once per session (picker.ts). The relay opens the provider's websocket itself (the provider
// entry of the LLM table: address, TLS, path, credentials, minted ones too; the client's key only where a
// `passthrough` says so; the next provider of the GwBackend when one cannot be opened: #session), then answers the
// client's upgrade and relays the events, guarding them (events.ts). Which entry and cluster: headers the route sets from its config,
// overwriting any a client sent.

import { randomUUID } from "node:crypto";
import { STATUS_CODES } from "node:http";
import { isIP, connect as netConnect, type Socket } from "node:net";
import { type ConnectionOptions, connect as tlsConnect } from "node:tls";
import { Minter, type Mutation, writeAt } from "../../../credentials/mint.js";
import { HTTP_AUTHZ_PREFIX } from "../../../extauthz/http-check.js";
import type { Http1Request } from "../../../grpc/http1.js";
import { providerKey } from "../../../health/endpoint-health.js";
import { requestDebug } from "../../../observability/log.js";
import { nodeTlsOptions } from "../../../security/backend-tls.js";
import { providerTcp } from "../../../translate/backend/ai-provider-connection.js";
import type { TunnelIR } from "../../../translate/backend/tunnel.js";
import type { LlmClusterIR, LlmProviderIR } from "../../../translate/ir.js";
import type { LlmProviderEntry, LlmRouteEntry } from "../../../translate/llm/table.js";
import { clusterVariantBase, REALTIME_CLUSTER_HEADER, REALTIME_ENTRY_HEADER } from "../../../translate/names.js";
import type { TranslationResult } from "../../../translate/translate.js";
import { AwsCredentialSource } from "../aws-credentials.js";
import { requestVariable } from "../cel.js";
import { GoogleTokens } from "../google-tokens.js";
import type { GuardContext } from "../guards/runner.js";
import { providerPath } from "../provider.js";
import { ProviderExtAuths } from "../provider-ext-auth.js";
import { clientToken } from "../service.js";
import { TokenLimiter } from "../token-limits.js";
import { guardClientEvent, RealtimeResponseGuard } from "./events.js";
import {
  acceptKey,
  encodeFrame,
  FrameReader,
  type Message,
  newKey,
  OP_BINARY,
  OP_CLOSE,
  OP_PING,
  OP_PONG,
  OP_TEXT,
  ProtocolError,
} from "./frames.js";
import { RealtimeGlobalTokens } from "./global-tokens.js";
import { EndpointPickers } from "./picker.js";
import { type DialTcp, dialling } from "./provider-tcp.js";
import { answerDenial, checkSession, sessionRequest, withAllowed } from "./session-ext-auth.js";
import { SessionTokens } from "./usage.js";

/** The provider's answer to the upgrade must come within this. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
const MAX_HANDSHAKE_BYTES = 64 * 1024;
/** The provider is quiet after this long without an event (stream.ts counts 0.5 ms as back to back). */
const IDLE_MS = 5;
/** How long the relay waits for a peer's close frame after sending its own. */
const CLOSE_WAIT_MS = 2000;
/** Client headers the provider gets besides the websocket's own: none carries a credential. */
const FORWARDED = ["openai-beta", "user-agent", "x-request-id"];

export interface RealtimeRelayOptions {
  readonly log: (line: string) => void;
  readonly remote?: GuardContext["remote"];
  /** Mints the providers' `jwtSign`, `oauthTokenExchange`, `crossAppAccess` and `cloudC` tokens; its own when absent. */
  readonly minter?: Minter;
  /** The providers' cloudB tokens (the LLM ext_proc's cache, so both share a token); its own when absent. */
  readonly google?: GoogleTokens;
  /** The routes' `tokens` buckets (the LLM ext_proc's, which admits the upgrade); its own when absent. */
  readonly limiter?: TokenLimiter;
}

/** The key a browser client puts in a subprotocol (it cannot set headers on a websocket): OpenAI's form. */
const KEY_PROTOCOL = "openai-insecure-api-key.";

interface Target {
  readonly entry: LlmRouteEntry;
  readonly provider: LlmProviderEntry;
  readonly ir: LlmProviderIR;
  /** The session's model: the upgrade's `model` query parameter, else the provider's (for the metrics' label). */
  readonly model?: string;
  /** The upgrade's path as the client's request reached the relay. */
  readonly path: string;
}

function reply(socket: Socket, status: number, message: string): void {
  const body = JSON.stringify({ error: { message, type: status >= 500 ? "server_error" : "invalid_request_error" } });
  const reason = STATUS_CODES[status] ?? "Error";
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export class RealtimeRelay {
  readonly #log: (line: string) => void;
  readonly #remote: GuardContext["remote"];
  #entries = new Map<string, LlmRouteEntry>();
  #previous = new Map<string, LlmRouteEntry>();
  #clusters = new Map<string, LlmClusterIR>();
  readonly #sessions = new Set<Socket>();
  readonly #minter: Minter;
  readonly #google: GoogleTokens;
  /** Sessions opened so far: a Service's endpoints are taken in turn. */
  #turn = 0;
  /** InferencePools' endpoint pickers, asked once per session (picker.ts). */
  readonly #pickers = new EndpointPickers();
  /** The providers' extAuth, checked once per session before the provider is called (provider-ext-auth.ts). */
  readonly #extAuths: ProviderExtAuths;
  /** The routes' `tokens` buckets, debited by each response a session completes (usage.ts). */
  readonly #limiter: TokenLimiter;
  /** The routes' global `Tokens` descriptors, charged by each response a session completes (global-tokens.ts). */
  readonly #global: RealtimeGlobalTokens;
  /** The provider keys Sluice's health scoring has evicted in a cluster (src/health/), once the server gives it. */
  #evicted: ((cluster: string) => readonly string[]) | undefined;

  constructor(opts: RealtimeRelayOptions) {
    this.#limiter = opts.limiter ?? new TokenLimiter();
    this.#global = new RealtimeGlobalTokens(opts.log);
    this.#log = opts.log;
    this.#remote = opts.remote;
    this.#google = opts.google ?? new GoogleTokens();
    this.#minter = opts.minter ?? new Minter({ aws: new AwsCredentialSource(), google: this.#google });
    this.#extAuths = new ProviderExtAuths(this.#log);
  }

  /** Sluice's health scoring, whose evicted providers a session tries last (#targets). */
  useHealth(evicted: (cluster: string) => readonly string[]): void {
    this.#evicted = evicted;
  }

  update(result: TranslationResult): void {
    this.#previous = this.#entries;
    this.#entries = new Map(result.llm.entries);
    // Token exchange caches of plans in neither table are dropped (as the LLM ext_proc's are).
    const ids = new Set<string>();
    const extAuths = [];
    for (const table of [this.#entries, this.#previous]) {
      for (const e of table.values()) {
        for (const b of Object.values(e.backends)) {
          for (const p of Object.values(b.providers)) {
            if (p.auth.minted !== undefined) ids.add(p.auth.minted.id);
            if (p.extAuth !== undefined) extAuths.push(p.extAuth);
          }
        }
      }
    }
    this.#minter.retain(ids);
    this.#extAuths.retain(extAuths);
    const clusters = new Map<string, LlmClusterIR>();
    // With their route-level variants (a relay route names the one its route reaches).
    for (const gw of result.gateways) for (const c of gw.llmClusters ?? []) clusters.set(c.name, c);
    this.#clusters = clusters;
  }

  close(): void {
    for (const s of this.#sessions) s.destroy();
    this.#pickers.close();
    this.#extAuths.close();
    this.#global.close();
  }

  /** Whether `req` is the relay's (an upgrade Envoy routed here); if so the socket is the relay's from now on. */
  upgrade(req: Http1Request, socket: Socket, head: Buffer): boolean {
    const headers: Record<string, string> = {};
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const name = (req.rawHeaders[i] as string).toLowerCase();
      const v = req.rawHeaders[i + 1] as string;
      headers[name] = headers[name] === undefined ? v : `${headers[name]}, ${v}`;
    }
    const entryId = headers[REALTIME_ENTRY_HEADER];
    // Envoy's HTTP ext_authz checks share this port and may carry a client's headers: a check (its path prefix, and no
    // `Connection: upgrade`, a hop-by-hop header Envoy sets only on the upgrade it forwards) is never the relay's.
    if (entryId === undefined || !/websocket/i.test(headers.upgrade ?? "")) return false;
    if (req.url.startsWith(HTTP_AUTHZ_PREFIX) || !/(^|[\s,])upgrade($|[\s,])/i.test(headers.connection ?? "")) {
      return false;
    }
    // No data listener until the session's: what comes meanwhile waits.
    socket.pause();
    this.#sessions.add(socket);
    socket.once("close", () => this.#sessions.delete(socket));
    socket.on("error", () => socket.destroy());
    const key = headers["sec-websocket-key"];
    if (req.method !== "GET" || key === undefined || headers["sec-websocket-version"] !== "13") {
      reply(socket, 400, "a websocket upgrade (GET, Sec-WebSocket-Key, version 13) is required");
      return true;
    }
    const entry = this.#entries.get(entryId) ?? this.#previous.get(entryId);
    const targets = entry !== undefined ? this.#targets(entry, headers[REALTIME_CLUSTER_HEADER], req.url) : [];
    if (targets.length === 0) {
      reply(socket, 503, "unknown Realtime route");
      return true;
    }
    void this.#session(targets, headers, key, req.url, socket, head).catch((e: unknown) => {
      this.#log(`llm realtime relay: ${String(e)}`);
      if (!socket.destroyed) reply(socket, 500, "gateway error");
    });
    return true;
  }

  /**
   * The session's providers in turn (#targets' order) until one's websocket opens: each with its own extAuth check,
   * credentials and connection. A failure to open the provider's websocket (no connection, a reset, a TLS failure, a
   * connect or handshake timeout, an upgrade answered 5xx or 429) goes on to the next provider, the client seeing only
   * the last one's; anything else (an extAuth denial, credentials, a provider that cannot take Realtime, a refusal
   * such as 401) is the client's answer at once. Once open, the session stays with that provider: its conversation
   * state lives there.
   */
  async #session(
    targets: readonly Target[],
    headers: Record<string, string>,
    clientKey: string,
    url: string,
    client: Socket,
    clientHead: Buffer,
  ): Promise<void> {
    const turn = this.#turn++;
    for (const [i, target] of targets.entries()) {
      const last = i === targets.length - 1;
      const refused = unsupported(target);
      if (refused !== undefined) {
        this.#log(`llm realtime relay: ${refused.message}`);
        reply(client, refused.status, refused.message);
        return;
      }
      const allowed = await checkSession(this.#extAuths, target.provider, headers, url);
      if (client.destroyed) return;
      if ("deny" in allowed) {
        answerDenial(client, target.provider.name, allowed.deny);
        return;
      }
      const c = await this.#credentials(target, headers, url);
      if (client.destroyed) return;
      if ("status" in c) {
        this.#log(`llm realtime relay: ${c.message}; answered ${c.status}`);
        reply(client, c.status, c.message);
        return;
      }
      const a = await this.#attempt(headers, target, withAllowed(c, allowed.allow), turn, client);
      if ("upstream" in a) {
        if (client.destroyed) {
          a.upstream.destroy();
          return;
        }
        if (i > 0) this.#log(`llm realtime relay: session opened on provider ${target.provider.name} (failed over)`);
        this.#start(a.upstream, a.protocol, headers, clientKey, target, client, clientHead, a.rest);
        return;
      }
      if (client.destroyed) return;
      this.#log(`llm realtime relay: provider ${target.provider.name}: ${a.failure}`);
      if (!a.next || last) {
        if (Buffer.isBuffer(a.answer)) client.end(a.answer);
        else reply(client, a.answer.status, a.answer.message);
        return;
      }
    }
  }

  /**
   * The provider's credential headers and the path the session opens: its static ones (the LLM table's), and, as the
   * LLM ext_proc writes them on an HTTP request (service.ts #withMinted), a `passthrough` of the client's key or a token
   * minted by src/credentials/ (jwtSign, oauthTokenExchange with the client's key as subject, crossAppAccess, cloudC),
   * at its location; else the status and message the client's upgrade gets (the provider is not called). Messages name
   * the field, never a value.
   */
  async #credentials(
    target: Target,
    headers: Readonly<Record<string, string>>,
    url: string,
  ): Promise<{ headers: Record<string, string>; path: string } | { status: number; message: string }> {
    const { provider } = target;
    const query = Object.entries(provider.auth.query);
    const at = providerPath(provider, url);
    const path =
      query.length === 0 ? at : `${at}${at.includes("?") ? "&" : "?"}${new URLSearchParams(query).toString()}`;
    const out = { headers: { ...provider.auth.headers }, path };
    const { passthrough, minted, google } = provider.auth;
    const unavailable = `credentials of provider ${provider.name} are not available`;
    if (google !== undefined) {
      // As the LLM ext_proc does for an HTTP request: an access or ID token as `Authorization: Bearer`, which Vertex
      // AI's Live API (and a Cloud Run service behind IAM) takes on the websocket's upgrade.
      let token: string;
      try {
        token = await this.#google.token(google);
      } catch (e) {
        this.#log(`llm realtime relay: provider ${provider.name}: Google credentials: ${(e as Error).message}`);
        return { status: 500, message: unavailable };
      }
      // Written into the handshake as it is: a value that could end the header line is refused.
      if (/[\s]/.test(token)) {
        return { status: 502, message: `credentials of provider ${provider.name}: the token is not a header value` };
      }
      out.headers.authorization = `Bearer ${token}`;
    }
    if (passthrough === undefined && minted === undefined) return out;
    // The client's key: its headers, else the subprotocol a browser puts it in. A token source reading the default
    // `Authorization: Bearer` finds it there too.
    const offered = (headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim());
    const inProtocol = offered.find((p) => p.startsWith(KEY_PROTOCOL))?.slice(KEY_PROTOCOL.length);
    const token = clientToken(headers) ?? (inProtocol !== "" ? inProtocol : undefined);
    const outgoing: Record<string, string> = {
      ...headers,
      ...(headers.authorization === undefined && token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      ":method": "GET",
      ":path": path,
      ":authority": provider.authority,
    };
    let m: Mutation = { set: {}, remove: [] };
    if (passthrough !== undefined) {
      if (token !== undefined) writeAt(passthrough, token, outgoing, m);
    } else if (minted !== undefined) {
      try {
        const r = await this.#minter.mint(minted, { headers: outgoing });
        if (!("ok" in r)) return { status: r.status, message: `${unavailable}: ${r.message}` };
        m = r.ok;
      } catch (e) {
        this.#log(`llm realtime relay: provider ${provider.name}: ${minted.field}: ${(e as Error).message}`);
        return { status: 500, message: unavailable };
      }
    }
    for (const name of m.remove) delete out.headers[name];
    for (const [name, value] of Object.entries(m.set)) {
      // Written into the handshake as it is: a value that could end the header line is refused.
      if (/[\r\n]/.test(value)) {
        return { status: 502, message: `credentials of provider ${provider.name}: the token is not a header value` };
      }
      if (name === ":path") out.path = value;
      else if (!name.startsWith(":")) out.headers[name] = value;
    }
    return out;
  }

  /**
   * The providers a session may open, in the order it tries them: the single stage's provider alone; else each priority
   * group in order, its providers as written, with those Sluice's health scoring has evicted last (the scoring the
   * route's cluster reports to: `edsOf`, else its own name). Envoy's outlier detection is Envoy's and not seen here.
   */
  #targets(entry: LlmRouteEntry, cluster: string | undefined, url: string): Target[] {
    if (cluster === undefined) return [];
    // The route's cluster, or its variant (a route-level GwPolicy's tls, tunnel or tcp: the providers as that route
    // reaches them); the table entry names the providers under the AI cluster's name.
    const base = clusterVariantBase(cluster);
    const backend = entry.backends[base];
    const ir = this.#clusters.get(cluster);
    if (backend === undefined || ir === undefined) return [];
    const all = ir.groups.flat();
    const named = entry.single?.cluster === base ? all.filter((p) => p.name === entry.single?.provider) : all;
    const evicted = new Set(this.#evicted?.(ir.edsOf ?? ir.name) ?? []);
    const order = [
      ...named.filter((p) => !evicted.has(providerKey(p.name))),
      ...named.filter((p) => evicted.has(providerKey(p.name))),
    ];
    const query = new URLSearchParams(url.includes("?") ? url.slice(url.indexOf("?") + 1) : "");
    return order.flatMap((pir) => {
      const provider = backend.providers[pir.name];
      if (provider === undefined) return [];
      const configured = provider.settings["model"];
      const model = query.get("model") ?? (typeof configured === "string" ? configured : undefined);
      // The provider's tcp, or its cluster's, on the relay's own connections (provider-tcp.ts).
      return [
        {
          entry,
          path: url,
          provider,
          ir: { ...pir, connection: { ...pir.connection, tcp: providerTcp(ir, pir) } },
          ...(model !== undefined ? { model } : {}),
        },
      ];
    });
  }

  /**
   * One provider's websocket: its connection (#reach, dial) and the upgrade with its credentials, within
   * HANDSHAKE_TIMEOUT_MS; the client is not written to. Open: the provider's socket, the protocol it chose and what
   * came after its 101. Else why, what the client would get, and whether the next provider is to be tried.
   */
  #attempt(
    headers: Readonly<Record<string, string>>,
    target: Target,
    credentials: {
      readonly headers: Readonly<Record<string, string>>;
      readonly path: string;
      readonly remove?: readonly string[];
    },
    turn: number,
    client: Socket,
  ): Promise<
    | { readonly upstream: Socket; readonly protocol: string | undefined; readonly rest: Buffer }
    | {
        readonly failure: string;
        readonly answer: Buffer | { readonly status: number; readonly message: string };
        readonly next: boolean;
      }
  > {
    const { provider } = target;
    const removed = credentials.remove ?? [];
    const path = credentials.path;
    const protocols = (headers["sec-websocket-protocol"] ?? "")
      .split(",")
      .map((p) => p.trim())
      .filter((p) => p !== "" && !p.startsWith(KEY_PROTOCOL));
    const key = newKey();
    const lines = [
      `GET ${path} HTTP/1.1`,
      `Host: ${provider.authority}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${key}`,
      "Sec-WebSocket-Version: 13",
      ...(protocols.length > 0 ? [`Sec-WebSocket-Protocol: ${protocols.join(", ")}`] : []),
      ...FORWARDED.flatMap((h) =>
        headers[h] !== undefined && !removed.includes(h) && !(h in credentials.headers) ? [`${h}: ${headers[h]}`] : [],
      ),
      ...Object.entries(credentials.headers).map(([k, v]) => `${k}: ${v}`),
    ];
    const unreachable = { status: 502, message: `provider ${provider.name} unreachable` };
    return new Promise((resolve) => {
      // Until the provider's websocket is open, what was dialled is closed on timeout, failure or the client's leaving.
      const dialled = new Set<Socket>();
      let settled = false;
      const settle = (r: Parameters<typeof resolve>[0]) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.off("close", onClientClose);
        if (!("upstream" in r)) for (const s of dialled) s.destroy();
        resolve(r);
      };
      const timer = setTimeout(() => {
        const message = `provider ${provider.name} did not answer the websocket upgrade in time`;
        settle({ failure: message, answer: { status: 502, message }, next: true });
      }, HANDSHAKE_TIMEOUT_MS);
      timer.unref();
      const onClientClose = () => settle({ failure: "the client left", answer: unreachable, next: false });
      client.once("close", onClientClose);
      const failed = (e: Error) =>
        settle({
          failure: e.message,
          answer: e instanceof NoEndpoint ? { status: 503, message: unreachable.message } : unreachable,
          next: true,
        });
      this.#reach(target, path, headers)
        .then((r) => {
          if ("status" in r) {
            settle({ failure: r.message, answer: r, next: false });
            return undefined;
          }
          return dial(r, turn, dialled);
        })
        .then((upstream) => {
          if (upstream === undefined) return;
          if (settled) {
            upstream.destroy();
            return;
          }
          dialled.add(upstream);
          const closed = () => failed(new Error("the connection closed before the websocket opened"));
          upstream.on("error", failed);
          upstream.once("close", closed);
          upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
          let buf = Buffer.alloc(0);
          const onHead = (chunk: Buffer) => {
            buf = Buffer.concat([buf, chunk]);
            const end = buf.indexOf("\r\n\r\n");
            if (end < 0) {
              if (buf.length > MAX_HANDSHAKE_BYTES) failed(new Error("the upgrade's answer is too large"));
              return;
            }
            upstream.off("data", onHead);
            const head = buf.toString("latin1", 0, end).split("\r\n");
            const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head[0] ?? "")?.[1]);
            const theirs: Record<string, string> = {};
            for (const l of head.slice(1)) {
              const c = l.indexOf(":");
              if (c > 0) theirs[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
            }
            if (status === 101 && theirs["sec-websocket-accept"] === acceptKey(key)) {
              upstream.off("error", failed);
              upstream.off("close", closed);
              settle({ upstream, protocol: theirs["sec-websocket-protocol"], rest: buf.subarray(end + 4) });
              return;
            }
            // The provider's refusal (a 401, a 404 ...) reaches the client as it came; a 5xx or 429 as the HTTP path
            // retries it: the next provider is tried, the client getting this answer when it was the last.
            settle({
              failure: `the websocket upgrade was answered ${Number.isNaN(status) ? "without a status" : status}`,
              answer: buf,
              next: status >= 500 || status === 429,
            });
          };
          upstream.on("data", onHead);
        }, failed);
    });
  }

  /**
   * Where the session goes: the provider as its cluster has it, or for one behind an InferencePool the model server its
   * endpoint picker names for the session's model (the query's `model`, else the provider's), asked once (picker.ts);
   * the picker's refusal or failure is the status the client's upgrade gets.
   */
  async #reach(
    target: Target,
    path: string,
    headers: Readonly<Record<string, string>>,
  ): Promise<LlmProviderIR | { readonly status: number; readonly message: string }> {
    const { provider, ir } = target;
    if (ir.pool === undefined) return ir;
    const query = new URLSearchParams(path.includes("?") ? path.slice(path.indexOf("?") + 1) : "");
    const configured = provider.settings["model"];
    const model = query.get("model") ?? (typeof configured === "string" ? configured : "");
    const forwarded = Object.fromEntries(FORWARDED.flatMap((h) => (headers[h] !== undefined ? [[h, headers[h]]] : [])));
    const r = await this.#pickers.pick(ir.pool, { authority: provider.authority, model, headers: forwarded });
    return "endpoint" in r ? { ...ir, endpoints: [r.endpoint] } : r;
  }

  /** The provider's websocket is open: the client's upgrade is answered 101 and the session relayed (#relay). */
  #start(
    upstream: Socket,
    protocol: string | undefined,
    headers: Record<string, string>,
    clientKey: string,
    target: Target,
    client: Socket,
    clientHead: Buffer,
    upstreamHead: Buffer,
  ): void {
    this.#sessions.add(upstream);
    upstream.once("close", () => {
      this.#sessions.delete(upstream);
      // What was written to the client (a close frame, an error event) goes out before the connection ends.
      client.end();
      setTimeout(() => client.destroy(), 1000).unref();
    });
    client.once("close", () => upstream.destroy());
    upstream.on("error", () => upstream.destroy());
    client.write(
      [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        `Sec-WebSocket-Accept: ${acceptKey(clientKey)}`,
        ...(protocol !== undefined ? [`Sec-WebSocket-Protocol: ${protocol}`] : []),
        "",
        "",
      ].join("\r\n"),
    );
    this.#relay(headers, target, client, upstream, clientHead, upstreamHead);
  }

  /**
   * The session: client → provider through the request guards, provider → client through the response guards; each
   * response's tokens counted (usage.ts), a session whose response spends a `tokens` budget ended.
   */
  #relay(
    headers: Record<string, string>,
    target: Target,
    client: Socket,
    upstream: Socket,
    clientHead: Buffer,
    upstreamHead: Buffer,
  ): void {
    const { provider } = target;
    const guards = provider.ai.promptGuard;
    const request = guards?.request ?? [];
    const vars = { request: requestVariable({ ...headers, ":method": "GET" }), llm: { provider: provider.name } };
    const ctx: GuardContext = {
      headers: new Map(Object.entries(headers)),
      vars: () => vars,
      log: this.#log,
      ...(this.#remote !== undefined ? { remote: this.#remote } : {}),
    };
    const responses = RealtimeResponseGuard.applies(guards)
      ? new RealtimeResponseGuard(guards?.response ?? [], ctx)
      : undefined;
    const session = randomUUID().slice(0, 8);
    const toProvider = (op: number, payload: Buffer) => {
      if (!upstream.destroyed) upstream.write(encodeFrame(op, payload, true));
    };
    const toClient = (op: number, payload: Buffer) => {
      if (!client.destroyed) client.write(encodeFrame(op, payload, false));
    };
    // The relay ends the session (a guard's rejection, a protocol error): a close frame each way, and each connection
    // ends when its peer's close frame comes back (RFC 6455 §7.1.1), or after CLOSE_WAIT_MS.
    let closing = false;
    const closeBoth = (code: number, why: string) => {
      if (closing) return;
      closing = true;
      const reason = closeReason(why);
      const p = Buffer.alloc(2 + reason.length);
      p.writeUInt16BE(code, 0);
      reason.copy(p, 2);
      toClient(OP_CLOSE, p);
      toProvider(OP_CLOSE, p);
      setTimeout(() => {
        client.end();
        upstream.end();
      }, CLOSE_WAIT_MS).unref();
    };
    /** While closing: the peer's close frame ends its connection; anything else is dropped. */
    const whileClosing = (m: Message, socket: Socket): boolean => {
      if (!closing) return false;
      if (m.opcode === OP_CLOSE) socket.end();
      return true;
    };
    // Guards may answer later (webhooks): each direction keeps its messages in order.
    let clientChain: Promise<void> = Promise.resolve();
    let upstreamChain: Promise<void> = Promise.resolve();
    const fromClient = (m: Message): void | Promise<void> => {
      const json = jsonText(m);
      if (json === undefined) return toProvider(m.opcode, m.payload);
      const o = guardClientEvent(json, request, ctx);
      const send = (r: Awaited<typeof o>) => {
        if ("reply" in r) toClient(OP_TEXT, Buffer.from(r.reply));
        else if ("close" in r) {
          this.#log(`llm realtime relay ${session}: a request guard rejected; session closed`);
          closeBoth(1008, r.close);
        } else toProvider(m.opcode, r.forward === json ? m.payload : Buffer.from(r.forward));
      };
      return o instanceof Promise ? o.then(send) : send(o);
    };
    // Events go to the client in the frame type the provider sends them in (the Live API's are binary).
    let eventOp = OP_TEXT;
    /** Events the response guards let out; after a rejection (its error event last), the session ends. */
    const release = (events: readonly string[]): boolean => {
      for (const e of events) toClient(eventOp, Buffer.from(e));
      if (responses?.closed !== true) return false;
      this.#log(`llm realtime relay ${session}: a response guard rejected; session closed`);
      closeBoth(1008, responses.closeReason ?? "rejected by a prompt guard");
      return true;
    };
    // When the provider goes quiet, what the webhook and remote guards have not checked yet is checked (events.ts idle).
    let idleTimer: NodeJS.Timeout | undefined;
    const quiet = () => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => {
        upstreamChain = upstreamChain
          .then(async () => {
            if (responses !== undefined && !closing) release(await responses.idle());
          })
          .catch((e: unknown) => {
            this.#log(`llm realtime relay ${session}: ${String(e)}`);
            closeBoth(1011, "relay error");
          });
      }, IDLE_MS);
      idleTimer.unref();
    };
    upstream.once("close", () => clearTimeout(idleTimer));
    const tokens = new SessionTokens(this.#limiter, target.entry, {
      provider: provider.name,
      model: target.model,
    });
    upstream.once("close", () =>
      requestDebug(
        "llm",
        { entry: target.entry.id, provider: provider.name, responses: tokens.responses, ...tokens.total },
        "llm realtime relay: session ended",
      ),
    );
    /**
     * A response spent a `tokens` budget: the client gets it, then Realtime's error event (the Live API has none: the
     * close alone), and the session ends.
     */
    let live = false;
    const spent = () => {
      if (closing) return;
      this.#log(`llm realtime relay ${session}: token rate limit exceeded; session closed`);
      if (!live) toClient(OP_TEXT, Buffer.from(JSON.stringify(tokenLimitError())));
      closeBoth(1008, "token rate limit exceeded");
    };
    // The route's global Tokens descriptors, charged per response by the relay (global-tokens.ts).
    const limits = target.entry.realtimeTokens ?? [];
    const charge =
      limits.length === 0
        ? undefined
        : {
            activation: sessionRequest(headers, target.path).activation,
            provider: provider.name,
            model: target.model,
          };
    const fromProvider = (m: Message): void | Promise<void> => {
      if (whileClosing(m, upstream)) return;
      // Events in text frames; the Live API's JSON in binary ones (its usageMetadata).
      const counted =
        m.opcode === OP_TEXT || (m.opcode === OP_BINARY && m.payload[0] === 0x7b) ? tokens.count(m.payload) : undefined;
      if (counted?.live === true) live = true;
      if (counted?.usage !== undefined && charge !== undefined) {
        // Not waited for: the session goes on while the service answers; OVER_LIMIT ends it then.
        void this.#global.charge(limits, counted.usage, charge).then((over) => {
          if (over) upstreamChain = upstreamChain.then(spent);
        });
      }
      const done = forward(m);
      if (counted?.spent !== true) return done;
      return done instanceof Promise ? done.then(spent) : spent();
    };
    const forward = (m: Message): void | Promise<void> => {
      const json = responses !== undefined ? jsonText(m) : undefined;
      if (json === undefined || responses === undefined) {
        if (m.opcode === OP_CLOSE && responses !== undefined) {
          // What the response guards still hold goes out (masked) before the close.
          const rest = responses.end();
          const send = (events: string[]) => {
            if (!release(events)) toClient(m.opcode, m.payload);
          };
          return rest instanceof Promise ? rest.then(send) : send(rest);
        }
        return toClient(m.opcode, m.payload);
      }
      eventOp = m.opcode;
      const out = responses.push(json);
      quiet();
      const send = (events: string[]) => {
        release(events);
      };
      return out instanceof Promise ? out.then(send) : send(out);
    };
    const pump = (
      socket: Socket,
      reader: FrameReader,
      handle: (m: Message) => void | Promise<void>,
      chain: () => Promise<void>,
      setChain: (p: Promise<void>) => void,
    ) => {
      const onData = (chunk: Buffer) => {
        let messages: Message[];
        try {
          messages = reader.push(chunk);
        } catch (e) {
          const pe = e instanceof ProtocolError ? e : new ProtocolError(1002, String(e));
          closeBoth(pe.code, pe.message);
          return;
        }
        for (const m of messages) {
          setChain(
            chain().then(() =>
              Promise.resolve(handle(m)).catch((e: unknown) => {
                this.#log(`llm realtime relay ${session}: ${String(e)}`);
                closeBoth(1011, "relay error");
              }),
            ),
          );
        }
      };
      socket.on("data", onData);
    };
    const clientReader = new FrameReader(true);
    const upstreamReader = new FrameReader(false);
    pump(
      client,
      clientReader,
      (m) =>
        whileClosing(m, client)
          ? undefined
          : m.opcode === OP_PING || m.opcode === OP_PONG
            ? toProvider(m.opcode, m.payload)
            : fromClient(m),
      () => clientChain,
      (p) => {
        clientChain = p;
      },
    );
    pump(
      upstream,
      upstreamReader,
      fromProvider,
      () => upstreamChain,
      (p) => {
        upstreamChain = p;
      },
    );
    client.on("end", () => upstream.end());
    upstream.on("end", () => client.end());
    if (clientHead.length > 0) client.emit("data", clientHead);
    if (upstreamHead.length > 0) upstream.emit("data", upstreamHead);
    client.resume();
  }
}

/** A provider reached through a Service with no ready endpoint (as Envoy answers: 503). */
class NoEndpoint extends Error {}

/** `socket` once `event` (connect, secureConnect) comes; its error instead. */
function once(socket: Socket, event: "connect" | "secureConnect"): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const fail = (e: Error) => reject(e);
    socket.once("error", fail);
    socket.once(event, () => {
      socket.off("error", fail);
      resolve(socket);
    });
  });
}

/**
 * A tunnel to `authority` through the HTTP CONNECT proxy (as Envoy's http_11_proxy transport socket opens one: the
 * provider's host name when it has one, else the endpoint's address); the socket once the proxy answers 200.
 */
async function tunnelTo(
  proxy: TunnelIR,
  authority: string,
  dialled: Set<Socket>,
  tcp: DialTcp | undefined,
): Promise<Socket> {
  const s = dialling(netConnect({ host: proxy.address, port: proxy.port }), tcp);
  dialled.add(s);
  await once(s, "connect");
  s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) {
        if (buf.length > MAX_HANDSHAKE_BYTES) done(new Error(`proxy ${proxy.proxy}: answer too large`));
        return;
      }
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(buf.toString("latin1", 0, end))?.[1]);
      if (status < 200 || status > 299) return done(new Error(`proxy ${proxy.proxy} answered ${status} to CONNECT`));
      const rest = buf.subarray(end + 4);
      if (rest.length > 0) s.unshift(rest);
      done(undefined);
    };
    const onError = (e: Error) => done(e);
    const onEnd = () => done(new Error(`proxy ${proxy.proxy} closed the tunnel`));
    const done = (e: Error | undefined) => {
      s.off("data", onData);
      s.off("error", onError);
      s.off("end", onEnd);
      if (e === undefined) {
        s.pause();
        resolve(s);
      } else {
        s.destroy();
        reject(e);
      }
    };
    s.on("data", onData);
    s.on("error", onError);
    s.on("end", onEnd);
  });
}

/**
 * The provider's connection, as Envoy's cluster reaches it: its host, or a Service's ready endpoints (in turn, the
 * next tried when one refuses); through its tunnel when it has one; TLS with its CA, name checks and client
 * certificate. Every socket made is in `dialled` (closed by the caller on timeout).
 */
async function dial(ir: LlmProviderIR, turn: number, dialled: Set<Socket>) {
  const tls = providerTlsOptions(ir);
  const all = ir.endpoints ?? [{ address: ir.address, port: ir.port }];
  if (all.length === 0) throw new NoEndpoint(`${ir.name}: no ready endpoint`);
  const first = turn % all.length;
  const targets = [...all.slice(first), ...all.slice(0, first)];
  let last: unknown;
  for (const t of targets) {
    try {
      // Envoy's tunnel asks for the endpoint's host name when it has one: the provider's, without a Service.
      const authority = ir.endpoints === undefined ? `${ir.address}:${ir.port}` : `${t.address}:${t.port}`;
      const raw =
        ir.tunnel !== undefined ? await tunnelTo(ir.tunnel, authority, dialled, ir.connection?.tcp) : undefined;
      if (tls === undefined) {
        if (raw !== undefined) return raw;
        const s = dialling(netConnect({ host: t.address, port: t.port }), ir.connection?.tcp);
        dialled.add(s);
        return await once(s, "connect");
      }
      const s = dialling(
        tlsConnect({
          ...(raw !== undefined ? { socket: raw } : { host: t.address, port: t.port }),
          ...tls,
        }),
        ir.connection?.tcp,
      );
      dialled.add(s);
      return await once(s, "secureConnect");
    } catch (e) {
      last = e;
    }
  }
  throw last instanceof Error ? last : new Error(String(last));
}

/** Realtime's error event for a session whose response spent the route's `tokens` budget (as for a 429). */
function tokenLimitError(): Record<string, unknown> {
  return {
    type: "error",
    event_id: `event_sluice_${Date.now().toString(36)}`,
    error: {
      type: "rate_limit_error",
      code: "token_rate_limit_exceeded",
      message: "token rate limit exceeded",
      param: null,
      event_id: null,
    },
  };
}

/**
 * A message's JSON text: a text frame's, or a binary frame's that holds a JSON object (Google's Live API sends its
 * messages in binary frames); undefined for other messages (audio bytes), which pass unread.
 */
function jsonText(m: Message): string | undefined {
  if (m.opcode === OP_TEXT) return m.payload.toString("utf8");
  if (m.opcode !== OP_BINARY || m.payload[0] !== 0x7b) return undefined;
  const text = m.payload.toString("utf8");
  try {
    JSON.parse(text);
    return text;
  } catch {
    return undefined;
  }
}

/** A close frame's reason: at most 123 bytes of UTF-8 (RFC 6455 §5.5), cut between characters. */
function closeReason(why: string): Buffer {
  let b = Buffer.from(why);
  if (b.length <= 123) return b;
  let n = 123;
  // Back to the start of a character: continuation bytes are 10xxxxxx.
  while (n > 0 && ((b[n] ?? 0) & 0xc0) === 0x80) n--;
  b = b.subarray(0, n);
  return b;
}

/** Why the relay cannot open this provider's websocket itself (and the status it answers); undefined when it can. */
function unsupported(t: Target): { status: 501 | 502 | 503; message: string } | undefined {
  const name = t.provider.name;
  const auth = t.provider.auth;
  if ((auth.problems?.length ?? 0) > 0) return { status: 502, message: `provider ${name}: credentials unresolved` };
  // As the LLM ext_proc answers a Realtime request to such a provider.
  if (auth.aws !== undefined) {
    return {
      status: 501,
      message: `provider ${name} (providerG) signs every request with SigV4; Realtime requests cannot be signed`,
    };
  }
  if (t.ir.tunnel !== undefined && t.ir.tls === undefined) {
    // As Envoy does (tunnel.ts): never reached around the proxy.
    return { status: 503, message: `provider ${name}: a tunnel is opened only around TLS` };
  }
  return undefined;
}

/**
 * The provider's TLS as Envoy's socket to it has it (xds/llm-provider-hop.ts providerTransportSocket): its `tls` resolved
 * by the translator (the GwBackend's, a provider's own, or the route's variant's), SNI the policy's or the provider's
 * host, the names checked the policy's or the SNI; undefined for a provider reached in cleartext. The relay speaks
 * HTTP/1.1 to it (a websocket upgrade).
 */
function providerTlsOptions(ir: LlmProviderIR): ConnectionOptions | undefined {
  const t = ir.tls;
  if (t === undefined) return undefined;
  const sni = t.sni ?? (isIP(ir.address) === 0 ? ir.address : undefined);
  return nodeTlsOptions({ ...t, ...(sni !== undefined ? { sni } : {}), sans: t.sans ?? [t.sni ?? ir.address] });
}
