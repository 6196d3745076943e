// List caching (docs/mcp.md, "List caching"), through a real Envoy: once the targets' GET streams are open (they
// carry list_changed), a session's tools/list is answered from what the targets last listed, until a target says its
// list changed; a session whose targets' streams are not open asks the targets every time.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { waitFor } from "../helpers/net.js";

describe("MCP list caching through Envoy", { timeout: 60_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let env: LlmEnv;
  const clients: Client[] = [];

  before(async () => {
    [alpha, beta] = await Promise.all([startSdkTarget("alpha"), startSdkTarget("beta")]);
    env = await startLlmEnv(
      mcpYaml([
        {
          name: "cond",
          targets: [
            { name: "alpha", port: alpha.port },
            { name: "beta", port: beta.port },
          ],
        },
      ]),
      "/cond/mcp",
    );
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
  });

  test("lists come from the cache while the streams are open, and again from the target after list_changed", async () => {
    const streams = alpha.seen.streams + beta.seen.streams;
    const { client } = await mcpClient(env.baseUrl, "cond");
    clients.push(client);
    // The SDK client opens its GET stream after initialize; Sluice then opens the targets'.
    await waitFor("both targets' GET streams", async () =>
      alpha.seen.streams + beta.seen.streams === streams + 2 ? true : undefined,
    );
    const lists = () => [alpha.seen.lists, beta.seen.lists];
    const before = lists();
    const first = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(lists(), [(before[0] ?? 0) + 1, (before[1] ?? 0) + 1]);
    for (let i = 0; i < 3; i++) {
      assert.deepEqual((await client.listTools()).tools.map((t) => t.name).sort(), first);
    }
    assert.deepEqual(lists(), [(before[0] ?? 0) + 1, (before[1] ?? 0) + 1], "answered from the cache");

    // alpha adds a tool and says so (tools/list_changed on its GET stream): its list is asked again, beta's is not.
    let changed = false;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      changed = true;
    });
    await client.callTool({ name: "alpha_add-tool", arguments: {} });
    await waitFor("tools/list_changed at the client", async () => (changed ? true : undefined));
    const after = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(after.includes("alpha_alpha-added"), after.join(", "));
    assert.deepEqual(lists(), [(before[0] ?? 0) + 2, (before[1] ?? 0) + 1]);
  });

  test("without the targets' streams open (the client opened no GET stream), every list asks the targets", async () => {
    // A client whose GET stream is refused by Envoy would do; simpler: a raw session that never opens one.
    const post = (body: unknown, sid?: string) =>
      fetch(`${env.baseUrl}/cond/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(sid !== undefined ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" } : {}),
        },
        body: JSON.stringify(body),
      });
    const init = await post({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    const sid = init.headers.get("mcp-session-id") ?? "";
    await init.text();
    await (await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sid)).text();
    const before = alpha.seen.lists;
    for (let i = 0; i < 3; i++) {
      const r = await post({ jsonrpc: "2.0", id: 10 + i, method: "tools/list" }, sid);
      assert.match(await r.text(), /alpha_echo/);
    }
    assert.equal(alpha.seen.lists, before + 3);
  });
});
