// When a target of a new session hears notifications/initialized (src/mcp/upstream.ts): held after its initialize is
// answered until the session releases it (once the client has its own answer), and in any case before anything else
// the target is sent: a request, a notification, or the DELETE that ends the session. The target is written by hand
// over node:http and records what it receives, in order.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { TargetConnection, type TargetHooks } from "../../src/mcp/upstream.js";

const hooks: TargetHooks = {
  onRequest: async () => ({}),
  onNotification: () => {},
  log: () => {},
};

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
}

describe("MCP target: notifications/initialized held until released", () => {
  let server: Server;
  let port = 0;
  /** What each session (by id) received: JSON-RPC methods, and DELETE. */
  const seen = new Map<string, string[]>();
  let next = 0;

  before(async () => {
    server = createServer(async (req, res) => {
      const sid = req.headers["mcp-session-id"];
      if (req.method === "DELETE") {
        seen.get(String(sid))?.push("DELETE");
        res.writeHead(200).end();
        return;
      }
      if (req.method === "GET") {
        res.writeHead(405).end();
        return;
      }
      const msg = JSON.parse(await body(req)) as { id?: number | string; method: string };
      if (msg.method === "initialize") {
        const id = `s${++next}`;
        seen.set(id, ["initialize"]);
        res.writeHead(200, { "content-type": "application/json", "mcp-session-id": id });
        res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            id: msg.id,
            result: {
              protocolVersion: "2025-06-18",
              capabilities: { tools: {} },
              serverInfo: { name: "raw", version: "1" },
            },
          }),
        );
        return;
      }
      seen.get(String(sid))?.push(msg.method);
      if (msg.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result: { tools: [] } }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  // The client's capabilities as the session passes them on (roots: it may send roots/list_changed).
  const connect = () =>
    TargetConnection.connect(
      {
        name: "raw",
        url: `http://127.0.0.1:${port}/mcp`,
        protocol: "StreamableHTTP",
        capabilities: { roots: { listChanged: true } },
      },
      hooks,
    );
  const settle = () => new Promise((r) => setTimeout(r, 100));

  test("connected: only initialize reached the target; release() sends notifications/initialized", async () => {
    const c = await connect();
    const sid = c.sessionId as string;
    await settle();
    assert.deepEqual(seen.get(sid), ["initialize"]);
    c.release();
    c.release();
    await settle();
    assert.deepEqual(seen.get(sid), ["initialize", "notifications/initialized"]);
    await c.close();
  });

  test("a request before release: the target hears notifications/initialized first", async () => {
    const c = await connect();
    await c.request("tools/list", undefined);
    assert.deepEqual(seen.get(c.sessionId as string), ["initialize", "notifications/initialized", "tools/list"]);
    await c.close();
  });

  test("a notification, or the session ended before release: notifications/initialized first, nothing hangs", async () => {
    const a = await connect();
    await a.notify("notifications/roots/list_changed");
    assert.deepEqual(seen.get(a.sessionId as string), [
      "initialize",
      "notifications/initialized",
      "notifications/roots/list_changed",
    ]);
    await a.close();
    const b = await connect();
    const sid = b.sessionId as string;
    await b.terminate();
    assert.deepEqual(seen.get(sid), ["initialize", "notifications/initialized", "DELETE"]);
  });
});
