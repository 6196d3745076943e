// MCP targets for the tests, written with the MCP SDK's server classes over its Streamable HTTP transport (stateful:
// one McpServer per session, as the SDK asks), and @modelcontextprotocol/server-everything started as a process.

import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer, type ServerOptions as HttpsServerOptions } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, waitFor } from "./net.js";

export interface SdkTarget {
  readonly name: string;
  readonly port: number;
  /**
   * What the target saw: cancelled calls of `slow`, sessions ended by DELETE, sessions started, GET streams asked,
   * tools/list requests answered, notifications/initialized received; each session by id with when it was
   * initialized (Date.now()), whether it heard notifications/initialized and was DELETEd; the session of the last
   * tools/call.
   */
  readonly seen: {
    cancelled: number;
    deleted: number;
    initialized: number;
    streams: number;
    lists: number;
    notified: number;
    sessions: Map<string, { initializedAt: number; notified: boolean; deleted: boolean }>;
    lastCallSession: string | undefined;
  };
  /** Ends the target as a crash would: every connection dropped, the port closed. */
  kill(): Promise<void>;
}

function buildServer(name: string, seen: SdkTarget["seen"]): McpServer {
  const server = new McpServer(
    { name: `target-${name}`, version: "1.0.0" },
    { capabilities: { logging: {} }, instructions: `target ${name}` },
  );
  server.registerTool(
    "echo",
    { description: "Echoes its text", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text: `${name}: ${text}` }] }),
  );
  server.registerTool(`${name}-only`, { description: `Only ${name} has it` }, async () => ({
    content: [{ type: "text", text: `only ${name}` }],
  }));
  server.registerTool(
    "sample",
    { description: "Asks the client's model (sampling)", inputSchema: { question: z.string() } },
    async ({ question }) => {
      const r = await server.server.createMessage({
        messages: [{ role: "user", content: { type: "text", text: question } }],
        maxTokens: 50,
      });
      const text = r.content.type === "text" ? r.content.text : "?";
      return { content: [{ type: "text", text: `${name} heard: ${text}` }] };
    },
  );
  server.registerTool(
    "slow",
    { description: "Reports progress, step by step", inputSchema: { steps: z.number(), ms: z.number() } },
    async ({ steps, ms }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        await new Promise((r) => setTimeout(r, ms));
        if (extra.signal.aborted) {
          seen.cancelled++;
          return { content: [{ type: "text", text: "cancelled" }], isError: true };
        }
        if (token !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken: token, progress: i, total: steps, message: `step ${i}` },
          });
        }
      }
      return { content: [{ type: "text", text: `${name} done after ${steps}` }] };
    },
  );
  server.registerTool("add-tool", { description: "Adds a tool (tools/list_changed)" }, async () => {
    server.registerTool(`${name}-added`, { description: "added" }, async () => ({
      content: [{ type: "text", text: "added" }],
    }));
    return { content: [{ type: "text", text: "ok" }] };
  });
  server.registerPrompt("greet", { description: "A greeting", argsSchema: { who: z.string() } }, ({ who }) => ({
    messages: [{ role: "user", content: { type: "text", text: `${name} greets ${who}` } }],
  }));
  server.registerResource("info", `mem://${name}/info`, { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, text: `info of ${name}` }],
  }));
  return server;
}

export interface SdkTargetOptions {
  /** Serve HTTPS (https://127.0.0.1:<port>/mcp) with these certificates (and client certificate checks). */
  readonly tls?: HttpsServerOptions;
  /** Answer 401 to requests without this header and value (a credential the gateway must add). */
  readonly requireHeader?: { readonly name: string; readonly value: string };
  /** Answer 401 to requests this refuses (a minted credential the gateway must add, verified by the test). */
  readonly authorize?: (req: IncomingMessage) => boolean | Promise<boolean>;
  /**
   * Shapes the answer to a request: `headers` added to it, and with `status` the target answers that status (with
   * a JSON-RPC error body) instead of serving it.
   */
  readonly shape?: (req: IncomingMessage) => { status?: number; headers?: Record<string, string> } | undefined;
}

/** A target over Streamable HTTP at http://127.0.0.1:<port>/mcp (https with `opts.tls`). */
export async function startSdkTarget(name: string, opts: SdkTargetOptions = {}): Promise<SdkTarget> {
  const seen: SdkTarget["seen"] = {
    cancelled: 0,
    deleted: 0,
    initialized: 0,
    streams: 0,
    lists: 0,
    notified: 0,
    sessions: new Map(),
    lastCallSession: undefined,
  };
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const required = opts.requireHeader;
    if (
      (required !== undefined && req.headers[required.name.toLowerCase()] !== required.value) ||
      (opts.authorize !== undefined && !(await opts.authorize(req)))
    ) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Unauthorized" } }));
      return;
    }
    const shaped = opts.shape?.(req);
    for (const [k, v] of Object.entries(shaped?.headers ?? {})) res.setHeader(k, v);
    if (shaped?.status !== undefined) {
      res.writeHead(shaped.status, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: `status ${shaped.status}` } }),
      );
      return;
    }
    const sid = req.headers["mcp-session-id"];
    let transport = typeof sid === "string" ? transports.get(sid) : undefined;
    if (transport === undefined) {
      if (req.method !== "POST" || sid !== undefined) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32001, message: "Session not found" } }));
        return;
      }
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          seen.initialized++;
          seen.sessions.set(id, { initializedAt: Date.now(), notified: false, deleted: false });
          transports.set(id, t);
        },
        onsessionclosed: (id) => {
          seen.deleted++;
          const known = seen.sessions.get(id);
          if (known !== undefined) known.deleted = true;
          transports.delete(id);
        },
      });
      await buildServer(name, seen).connect(t);
      transport = t;
    }
    if (req.method === "GET") seen.streams++;
    if (req.method !== "POST") {
      await transport.handleRequest(req, res);
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if ((body as { method?: unknown }).method === "tools/list") seen.lists++;
    const method = (body as { method?: unknown }).method;
    if (method === "notifications/initialized") {
      seen.notified++;
      const known = typeof sid === "string" ? seen.sessions.get(sid) : undefined;
      if (known !== undefined) known.notified = true;
    }
    if (method === "tools/call" && typeof sid === "string") seen.lastCallSession = sid;
    await transport.handleRequest(req, res, body);
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    });
  };
  const server: Server = opts.tls !== undefined ? createHttpsServer(opts.tls, listener) : createServer(listener);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    name,
    port,
    seen,
    async kill() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      for (const t of transports.values()) await t.close().catch(() => {});
    },
  };
}

export interface EverythingTarget {
  readonly port: number;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

/** @modelcontextprotocol/server-everything, `streamableHttp` (/mcp) or `sse` (/sse), as a process of its own. */
export async function startEverything(mode: "streamableHttp" | "sse"): Promise<EverythingTarget> {
  const port = await freePort();
  const bin = join(projectRoot(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");
  const output: string[] = [];
  const child = spawn(process.execPath, [bin, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  for (const s of [child.stdout, child.stderr]) s?.on("data", (c: Buffer) => output.push(c.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await waitFor(`server-everything (${mode}) to listen`, async () => {
    if (child.exitCode !== null) throw new Error(`server-everything exited: ${output.join("")}`);
    return /listening|running on port/i.test(output.join("")) ? true : undefined;
  });
  return {
    port,
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 3000);
      await exited;
      clearTimeout(t);
    },
  };
}
