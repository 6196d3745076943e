// MCP targets over the other transports Sluice reaches: the SDK's SSE server transport (HTTP+SSE, 2024-11-05) over
// HTTP or HTTPS, and the SDK's Streamable HTTP server transport over HTTP/2 (node:http2: TLS with ALPN h2 only, or
// plain h2c with prior knowledge). Each records what it saw of the connections, so tests can tell what was negotiated.

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { createServer as createHttpsServer, type ServerOptions as HttpsServerOptions } from "node:https";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

export interface ProtocolTarget {
  readonly port: number;
  /** Requests seen: HTTP version, and for TLS the ALPN protocol and whether a client certificate was presented. */
  readonly seen: { httpVersion: string; alpn: string | false | undefined; clientCert: boolean; path: string }[];
  /** TCP (or TLS) connections accepted. */
  readonly connections: { count: number };
  /** HTTP/2 targets: ends every connection with a GOAWAY, the server listening on. */
  goaway?(): void;
  close(): Promise<void>;
}

function echoServer(name: string): McpServer {
  const server = new McpServer({ name: `target-${name}`, version: "1.0.0" }, { capabilities: { logging: {} } });
  server.registerTool(
    "echo",
    { description: "Echoes its text", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text: `${name}: ${text}` }] }),
  );
  return server;
}

function record(seen: ProtocolTarget["seen"], req: IncomingMessage | Http2ServerRequest): void {
  const socket = req.socket as Partial<TLSSocket>;
  seen.push({
    httpVersion: req.httpVersion,
    alpn: socket.alpnProtocol ?? undefined,
    clientCert: typeof socket.getPeerCertificate === "function" && socket.getPeerCertificate().raw !== undefined,
    path: req.url ?? "",
  });
}

export interface SseTargetOptions {
  readonly tls?: HttpsServerOptions;
  /** Serve HTTP/2 only (h2c with prior knowledge; with `tls`, ALPN h2 alone). */
  readonly h2?: boolean;
  /** Answer 401 to requests without this header and value. */
  readonly requireHeader?: { readonly name: string; readonly value: string };
}

/** An SSE target (GET /sse, POST /messages) on 127.0.0.1, HTTPS with `opts.tls`, HTTP/2 with `opts.h2`. */
export async function startSseTarget(name: string, opts: SseTargetOptions = {}): Promise<ProtocolTarget> {
  const seen: ProtocolTarget["seen"] = [];
  const connections = { count: 0 };
  const transports = new Map<string, SSEServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    record(seen, req);
    const required = opts.requireHeader;
    if (required !== undefined && req.headers[required.name.toLowerCase()] !== required.value) {
      res.writeHead(401).end("unauthorized");
      return;
    }
    const url = new URL(req.url ?? "/", "http://target");
    if (req.method === "GET" && url.pathname === "/sse") {
      const t = new SSEServerTransport("/messages", res);
      transports.set(t.sessionId, t);
      res.once("close", () => transports.delete(t.sessionId));
      await echoServer(name).connect(t);
      return;
    }
    const t = transports.get(url.searchParams.get("sessionId") ?? "");
    if (req.method === "POST" && url.pathname === "/messages" && t !== undefined) {
      await t.handlePostMessage(req, res);
      return;
    }
    res.writeHead(404).end();
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    });
  };
  const server =
    opts.h2 === true
      ? opts.tls !== undefined
        ? http2.createSecureServer({ ...(opts.tls as http2.SecureServerOptions), allowHTTP1: false }, listener as never)
        : http2.createServer({}, listener as never)
      : opts.tls !== undefined
        ? createHttpsServer(opts.tls, listener)
        : createServer(listener);
  server.on(opts.tls !== undefined ? "secureConnection" : "connection", () => connections.count++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    connections,
    async close() {
      if ("closeAllConnections" in server) server.closeAllConnections();
      for (const t of transports.values()) await t.close().catch(() => {});
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * A Streamable HTTP target at /mcp over HTTP/2 only: with `tls`, a secure server that offers h2 alone by ALPN
 * (`allowHTTP1: false`: an HTTP/1.1 client is refused); without, an h2c server (prior knowledge; HTTP/1.1 is not
 * understood).
 */
export async function startH2Target(name: string, tls?: http2.SecureServerOptions): Promise<ProtocolTarget> {
  const seen: ProtocolTarget["seen"] = [];
  const connections = { count: 0 };
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: Http2ServerRequest, res: Http2ServerResponse) => {
    record(seen, req);
    const sid = req.headers["mcp-session-id"];
    let t = typeof sid === "string" ? transports.get(sid) : undefined;
    if (t === undefined) {
      if (req.method !== "POST" || sid !== undefined) {
        res.writeHead(404).end();
        return;
      }
      const fresh: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, fresh);
        },
        onsessionclosed: (id) => {
          transports.delete(id);
        },
      });
      await echoServer(name).connect(fresh);
      t = fresh;
    }
    await t.handleRequest(req as unknown as IncomingMessage, res as unknown as ServerResponse);
  };
  const listener = (req: Http2ServerRequest, res: Http2ServerResponse) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    });
  };
  const server =
    tls !== undefined
      ? http2.createSecureServer({ ...tls, allowHTTP1: false }, listener)
      : http2.createServer({}, listener);
  server.on(tls !== undefined ? "secureConnection" : "connection", () => connections.count++);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    connections,
    goaway() {
      for (const s of sessions) s.close();
    },
    async close() {
      for (const s of sessions) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
