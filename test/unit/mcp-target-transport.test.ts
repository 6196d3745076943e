// Sluice's Streamable HTTP transport to MCP targets, against a node:http server speaking the wire format by hand
// (the e2e tests drive it against the SDK's own server; these cover what those targets never do): the session id and
// protocol version sent back, a POST's SSE answer cut after an event id and resumed with a GET and Last-Event-ID,
// sockets kept alive between requests, an SSE event past the parser's bound, a GET answered 405, an error status,
// DELETE.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { HttpError, TargetTransport } from "../../src/mcp/target-transport.js";

interface Seen {
  method: string;
  headers: IncomingMessage["headers"];
  body: string;
  remotePort: number | undefined;
}

describe("MCP target transport", () => {
  let server: Server;
  let url: URL;
  const seen: Seen[] = [];
  let handler: (req: IncomingMessage, body: string, res: ServerResponse) => void = () => {};

  before(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        seen.push({ method: req.method ?? "", headers: req.headers, body, remotePort: req.socket.remotePort });
        handler(req, body, res);
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const reconnect = { initialDelayMs: 10, maxDelayMs: 50, growFactor: 2, maxRetries: 2 };

  function received(t: TargetTransport): JSONRPCMessage[] {
    const out: JSONRPCMessage[] = [];
    t.onmessage = (m) => out.push(m);
    return out;
  }

  test("session id and protocol version go back to the target; sockets are kept alive", async () => {
    seen.length = 0;
    handler = (_req, body, res) => {
      const m = JSON.parse(body) as { id?: number };
      if (m.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "s-1" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: m.id, result: { n: m.id } }));
    };
    const t = new TargetTransport(url, { reconnect });
    const got = received(t);
    await t.send({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} });
    assert.equal(t.sessionId, "s-1");
    t.setProtocolVersion("2025-11-25");
    await t.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    await t.send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    assert.deepEqual(got, [
      { jsonrpc: "2.0", id: 1, result: { n: 1 } },
      { jsonrpc: "2.0", id: 2, result: { n: 2 } },
    ]);
    assert.equal(seen[0]?.headers["mcp-session-id"], undefined);
    assert.equal(seen[2]?.headers["mcp-session-id"], "s-1");
    assert.equal(seen[2]?.headers["mcp-protocol-version"], "2025-11-25");
    assert.equal(seen[2]?.headers["accept"], "application/json, text/event-stream");
    // One connection for the three requests.
    assert.equal(new Set(seen.map((s) => s.remotePort)).size, 1);
    await t.close();
  });

  test("a POST's SSE answer cut after an event id is resumed with a GET and Last-Event-ID, in order", async () => {
    seen.length = 0;
    let asked = 0;
    handler = (req, body, res) => {
      if (req.method === "POST") {
        const m = JSON.parse(body) as { id: number };
        asked = m.id;
        res.writeHead(200, { "content-type": "text/event-stream" });
        const progress = {
          jsonrpc: "2.0",
          method: "notifications/progress",
          params: { progressToken: 7, progress: 1 },
        };
        res.end(`id: ev-1\ndata: ${JSON.stringify(progress)}\n\n`);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`id: ev-2\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: asked, result: { done: true } })}\n\n`);
    };
    const t = new TargetTransport(url, { sessionId: "s-2", reconnect });
    const got = received(t);
    await t.send({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "x" } });
    const deadline = Date.now() + 5000;
    while (got.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.equal(got.length, 2);
    assert.equal((got[0] as { method?: string }).method, "notifications/progress");
    // The target replays the answer, with the id of the request it answers, after the progress notice.
    assert.deepEqual(got[1], { jsonrpc: "2.0", id: 5, result: { done: true } });
    const get = seen.find((s) => s.method === "GET");
    assert.equal(get?.headers["last-event-id"], "ev-1");
    assert.equal(get?.headers["mcp-session-id"], "s-2");
    await t.close();
  });

  test("an SSE answer with an event past the parser's bound is dropped as a cut stream, not held", async () => {
    let closed!: () => void;
    const serverSawClose = new Promise<void>((r) => {
      closed = r;
    });
    handler = (req, _body, res) => {
      if (req.method !== "POST") {
        res.writeHead(405).end();
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      // One data line that never ends: 17 Mi characters, past the 16 Mi bound, and the stream kept open.
      res.write(`data: ${"x".repeat(17 * 1024 * 1024)}`);
      res.on("close", () => closed());
    };
    const t = new TargetTransport(url, { sessionId: "s-big", reconnect });
    const errors: string[] = [];
    t.onerror = (e) => errors.push(e.message);
    await t.send({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "x" } });
    await Promise.race([
      serverSawClose,
      new Promise((_, reject) => setTimeout(() => reject(new Error("the transport kept reading")), 10_000)),
    ]);
    assert.ok(
      errors.some((m) => /longer than \d+ characters/.test(m)),
      `errors: ${errors.join(" | ")}`,
    );
    await t.close();
  });

  test("an error status is an HttpError naming the body; a GET answered 405 is quiet; DELETE", async () => {
    seen.length = 0;
    handler = (req, _body, res) => {
      if (req.method === "POST") res.writeHead(404, { "content-type": "text/plain" }).end("Session not found");
      else if (req.method === "GET") res.writeHead(405).end();
      else res.writeHead(200).end();
    };
    const t = new TargetTransport(url, { sessionId: "s-3", reconnect });
    const errors: Error[] = [];
    t.onerror = (e) => errors.push(e);
    await assert.rejects(
      t.send({ jsonrpc: "2.0", id: 1, method: "ping" }),
      (e: unknown) =>
        e instanceof HttpError && e.status === 404 && /Error POSTing to endpoint: Session not found/.test(e.message),
    );
    errors.length = 0;
    await t.openStream();
    assert.deepEqual(errors, []);
    await t.terminateSession();
    assert.equal(t.sessionId, undefined);
    assert.equal(seen.at(-1)?.method, "DELETE");
    assert.equal(seen.at(-1)?.headers["mcp-session-id"], "s-3");
    let closed = false;
    t.onclose = () => {
      closed = true;
    };
    await t.close();
    assert.equal(closed, true);
    await assert.rejects(t.send({ jsonrpc: "2.0", id: 2, method: "ping" }));
  });
});
