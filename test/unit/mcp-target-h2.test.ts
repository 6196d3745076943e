// HTTP/2 in Sluice's transport to MCP targets (src/mcp/target-request.ts), driven by the MCP SDK's Client against an
// SDK target on a plain node:http2 server (h2c): a session's requests share one connection; after the target ends it
// with a GOAWAY, the next request opens a new one instead of failing on the old session.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { TargetTransport } from "../../src/mcp/target-transport.js";
import { type ProtocolTarget, startH2Target } from "../helpers/mcp-target-protocols.js";

const reconnect = { initialDelayMs: 10, maxDelayMs: 50, growFactor: 2, maxRetries: 1 };

function text(r: unknown): string {
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

describe("HTTP/2 to MCP targets in the transport", () => {
  let target: ProtocolTarget;
  before(async () => {
    target = await startH2Target("h2c");
  });
  after(async () => {
    await target?.close();
  });

  test("one connection for a session; a GOAWAY is followed by a new connection", async () => {
    const url = new URL(`http://127.0.0.1:${target.port}/mcp`);
    const c = new Client({ name: "unit", version: "1" });
    await c.connect(new TargetTransport(url, { reconnect, connection: { http2: true } }), { timeout: 5000 });
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "a" } })), "h2c: a");
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "b" } })), "h2c: b");
    assert.equal(target.connections.count, 1);
    assert.ok(target.seen.every((s) => s.httpVersion === "2.0"));
    target.goaway?.();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "c" } })), "h2c: c");
    assert.equal(target.connections.count, 2);
    await c.close();
  });
});
