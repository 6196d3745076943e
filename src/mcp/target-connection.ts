// How Sluice's transport reaches one target under its connection policies (translate/mcp/connection.ts): the
// keep-alive agents (TLS with the policy's CA, SNI, names, client certificate, skip-verify and curves; TCP keepalive;
// connections opened through an HTTP CONNECT proxy), and the credential written on each request (a static header, or
// minted by src/credentials/ as Envoy's credential ext_proc does for other backends). Agents are shared by every
// session whose target has the same settings, so their sockets are pooled across sessions.

import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import tls from "node:tls";
import { Minter } from "../credentials/mint.js";
import { AwsCredentialSource } from "../extproc/llm/aws-credentials.js";
import { nodeTlsOptions } from "../security/backend-tls.js";
import { setTcpKeepalive } from "../translate/keepalive.js";
import type { McpTargetConnection } from "../translate/mcp/connection.js";

/**
 * Sockets kept per target (host:port), settings and Sluice replica. Requests past it wait for a socket. POSTs answered
 * with a long SSE stream hold theirs until answered, so the bound is high; GET streams, which live as long as a
 * session, do not count against it (they have an agent of their own, without keep-alive).
 */
export const MAX_SOCKETS_PER_TARGET = 256;

export interface TargetAgents {
  /** Requests (POST, DELETE): keep-alive. */
  readonly pooled: http.Agent;
  /** GET streams: a connection each, closed with the stream. */
  readonly stream: http.Agent;
}

/** The credential the requests of one target carry, in the client request being served (passthrough, exchange). */
const clientHeaders = new AsyncLocalStorage<ReadonlyMap<string, string>>();

/** Runs `fn` with the headers of the client's request (as Envoy forwarded it), for credentials minted from them. */
export function withClientHeaders<T>(headers: ReadonlyMap<string, string> | undefined, fn: () => T): T {
  return headers === undefined ? fn() : clientHeaders.run(headers, fn);
}

/** TLS options of a target: `alpn` is the one protocol Sluice speaks to it (`h2` for `http.version: HTTP2`). */
export function tlsOptions(c: NonNullable<McpTargetConnection["tls"]>, alpn = "http/1.1"): https.AgentOptions {
  return nodeTlsOptions(c, alpn);
}

/** Opens `CONNECT host:port` on the proxy; the tunnel's socket, with TLS inside it for an HTTPS target. */
export function tunnelled(
  proxy: NonNullable<McpTargetConnection["proxy"]>,
  secure: boolean,
  connectTimeoutMs: number | undefined,
): http.Agent["createConnection"] {
  return ((opts: https.RequestOptions & tls.ConnectionOptions, cb: (err: Error | null, s?: Duplex) => void) => {
    const authority = `${opts.host}:${opts.port}`;
    const req = http.request({
      host: proxy.address,
      port: proxy.port,
      method: "CONNECT",
      path: authority,
      headers: { host: authority },
      agent: false,
      ...(connectTimeoutMs !== undefined ? { timeout: connectTimeoutMs } : {}),
    });
    let done = false;
    const finish = (err: Error | null, s?: Duplex) => {
      if (done) return;
      done = true;
      cb(err, s);
    };
    req.once("timeout", () => req.destroy(new Error(`the proxy ${proxy.name} did not open a tunnel in time`)));
    req.once("error", (e) => finish(new Error(`proxy ${proxy.name}: ${e.message}`)));
    req.once("connect", (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        finish(new Error(`proxy ${proxy.name} refused CONNECT ${authority} (status ${res.statusCode})`));
        return;
      }
      socket.setTimeout(0);
      if (!secure) {
        finish(null, socket);
        return;
      }
      const t = tls.connect({ ...opts, socket, servername: opts.servername ?? "" });
      t.once("secureConnect", () => finish(null, t));
      t.once("error", (e) => finish(e));
    });
    req.end();
    return undefined;
  }) as unknown as http.Agent["createConnection"];
}

const agents = new Map<string, TargetAgents>();

/** The digest of each settings object's connection part: settings come from the translation and live as long as it. */
const settingsDigests = new WeakMap<McpTargetConnection, string>();
const NO_SETTINGS = createHash("sha256").update("{}").digest("base64url");

/**
 * What tells connections to targets apart: the scheme and the settings of the connection itself. Asked on every
 * request to a target, so each settings object's digest is computed once.
 */
export function connectionKey(protocol: string, c: McpTargetConnection | undefined): string {
  if (c === undefined) return `${protocol}${NO_SETTINGS}`;
  let digest = settingsDigests.get(c);
  if (digest === undefined) {
    const { header: _, minted: __, requestTimeoutMs: ___, health: ____, ...transport } = c;
    digest = createHash("sha256").update(JSON.stringify(transport)).digest("base64url");
    settingsDigests.set(c, digest);
  }
  return `${protocol}${digest}`;
}

/** TCP keepalive on a socket to a target, as its settings ask (none when they set no keepalive). */
export function setTargetKeepalive(socket: Socket, c: McpTargetConnection): void {
  if (c.keepaliveMs !== undefined) setTcpKeepalive(socket, c.keepaliveMs, c.keepaliveProbes);
}

/** The agents of a target with these settings (`https:` or `http:`), made once per distinct settings. */
export function agentsFor(protocol: "http:" | "https:", c: McpTargetConnection | undefined): TargetAgents {
  const key = connectionKey(protocol, c);
  let a = agents.get(key);
  if (a !== undefined) return a;
  const secure = protocol === "https:";
  const make = (keepAlive: boolean): http.Agent => {
    const options: https.AgentOptions = {
      keepAlive,
      ...(keepAlive ? { maxSockets: MAX_SOCKETS_PER_TARGET, maxFreeSockets: 32, scheduling: "lifo" } : {}),
      // Node's agents turn TCP keepalive on with this idle time for the sockets they keep.
      ...(c?.keepaliveMs !== undefined ? { keepAliveMsecs: c.keepaliveMs } : {}),
      ...(secure && c?.tls !== undefined ? tlsOptions(c.tls) : {}),
    };
    const agent = secure ? new https.Agent(options) : new http.Agent(options);
    if (keepAlive && c?.keepaliveProbes !== undefined) {
      // The agent sets the idle time on each socket it keeps (keepSocketAlive), which on Node.js 26 also puts the
      // probe interval and count back to libuv's: set all three after it.
      // (@types/node declares it void; Node returns whether the socket may be kept.)
      const pooling = agent as unknown as { keepSocketAlive: (socket: Duplex) => boolean };
      const keep = pooling.keepSocketAlive.bind(agent);
      pooling.keepSocketAlive = (socket) => {
        const kept = keep(socket);
        setTargetKeepalive(socket as Socket, c);
        return kept;
      };
    }
    if (c?.proxy !== undefined) agent.createConnection = tunnelled(c.proxy, secure, c.connectTimeoutMs);
    return agent;
  };
  a = { pooled: make(true), stream: make(false) };
  agents.set(key, a);
  return a;
}

/**
 * Whether a kept-alive HTTP/1.1 connection to the URL's host and port is open in the pool of these settings: the
 * target's kernel still holds it, so the target's process has not exited (an exit closes its sockets, and the agent
 * drops a socket its peer closed). Not asked over HTTP/2 or through a proxy (false: the caller probes instead).
 */
export function pooledConnectionOpen(url: URL, c: McpTargetConnection | undefined): boolean {
  if (c?.http2 === true || c?.proxy !== undefined) return false;
  const pooled = agents.get(connectionKey(url.protocol as "http:" | "https:", c))?.pooled;
  if (pooled === undefined) return false;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const open = (sockets: NodeJS.ReadOnlyDict<readonly Socket[]>) =>
    Object.values(sockets).some((list) =>
      (list ?? []).some(
        (s) =>
          !s.destroyed &&
          s.readyState === "open" &&
          s.remotePort === port &&
          (s.remoteAddress === host || s.remoteAddress === `::ffff:${host}`),
      ),
    );
  return open(pooled.freeSockets) || open(pooled.sockets);
}

let minter: Minter | undefined;

/**
 * The headers a request of a target gets from its `auth` policy: the static header, or what the plan mints for it
 * (the request as it will leave, body included, for SigV4). Throws with the status and field of a credential that
 * cannot be had: the request is not sent without it.
 */
export async function credentialHeaders(
  c: McpTargetConnection | undefined,
  method: string,
  url: URL,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ headers: Record<string, string>; path: string }> {
  const path = `${url.pathname}${url.search}`;
  if (c?.header === undefined && c?.minted === undefined) return { headers, path };
  const out = { ...headers };
  if (c.header !== undefined) out[c.header.name] = c.header.value;
  if (c.minted === undefined) return { headers: out, path };
  minter ??= new Minter({ aws: new AwsCredentialSource() });
  const client = clientHeaders.getStore();
  const seen: Record<string, string> = {
    ...out,
    ":method": method,
    ":path": path,
    ":authority": url.host,
    ":scheme": url.protocol.slice(0, -1),
  };
  const authorization = client?.get("authorization");
  if (authorization !== undefined && seen["authorization"] === undefined) seen["authorization"] = authorization;
  const r = await minter.mint(c.minted, {
    headers: seen,
    ...(body !== undefined ? { body: Buffer.from(body, "utf8") } : {}),
  });
  if ("status" in r) throw new CredentialError(r.status, r.message);
  for (const name of r.ok.remove) delete out[name];
  let newPath = path;
  for (const [name, value] of Object.entries(r.ok.set)) {
    if (name === ":path") newPath = value;
    else if (!name.startsWith(":")) out[name] = value;
  }
  return { headers: out, path: newPath };
}

/** A credential that could not be had for a target request (the status Envoy's credential ext_proc would answer). */
export class CredentialError extends Error {
  readonly code = "SLUICE_MCP_CREDENTIAL";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
