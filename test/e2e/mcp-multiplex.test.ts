// MCP multiplexing end to end: the MCP SDK's client through a real Envoy to Sluice's MCP service, in front of two
// targets written with the SDK's server classes and @modelcontextprotocol/server-everything. Aggregation, each prefix
// mode, routed calls, resources, a list_changed notification, a sampling round trip, progress, cancellation, and the
// answers to bad input.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { CreateMessageRequestSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type EverythingTarget, type SdkTarget, startEverything, startSdkTarget } from "../helpers/mcp-targets.js";
import { waitFor } from "../helpers/net.js";

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

describe("MCP multiplexing through Envoy", { timeout: 60_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let everything: EverythingTarget;
  let env: LlmEnv;
  const clients: Client[] = [];
  const connect = async (backend: string, capabilities?: Record<string, unknown>) => {
    const c = await mcpClient(env.baseUrl, backend, capabilities !== undefined ? { capabilities } : {});
    clients.push(c.client);
    return c;
  };

  before(async () => {
    [alpha, beta, everything] = await Promise.all([
      startSdkTarget("alpha"),
      startSdkTarget("beta"),
      startEverything("streamableHttp"),
    ]);
    const two = [
      { name: "alpha", port: alpha.port },
      { name: "beta", port: beta.port },
    ];
    env = await startLlmEnv(
      mcpYaml([
        { name: "cond", targets: two },
        { name: "always", targets: [{ name: "alpha", port: alpha.port }], prefixMode: "Always" },
        { name: "never", targets: two, prefixMode: "Never" },
        {
          name: "every",
          targets: [
            { name: "everything", port: everything.port },
            { name: "alpha", port: alpha.port },
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
    await everything?.stop();
  });

  test("initialize merges the targets; lists are aggregated with Conditional prefixes; calls are routed", async () => {
    const { client, transport } = await connect("cond");
    assert.ok(transport.sessionId !== undefined && transport.sessionId.length > 20, "a session id is issued");
    assert.equal(client.getServerVersion()?.name, "sluice");
    assert.ok(client.getServerCapabilities()?.tools !== undefined);
    assert.match(client.getInstructions() ?? "", /target alpha[\s\S]*target beta/);
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, [
      "alpha_add-tool",
      "alpha_alpha-only",
      "alpha_echo",
      "alpha_sample",
      "alpha_slow",
      "beta_add-tool",
      "beta_beta-only",
      "beta_echo",
      "beta_sample",
      "beta_slow",
    ]);
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "hi" } })), "alpha: hi");
    assert.equal(text(await client.callTool({ name: "beta_echo", arguments: { text: "hi" } })), "beta: hi");
    const prompts = (await client.listPrompts()).prompts.map((p) => p.name).sort();
    assert.deepEqual(prompts, ["alpha_greet", "beta_greet"]);
    const p = await client.getPrompt({ name: "beta_greet", arguments: { who: "you" } });
    assert.deepEqual(p.messages[0]?.content, { type: "text", text: "beta greets you" });
  });

  test("resource URIs carry their target; reading one reaches it", async () => {
    const { client } = await connect("cond");
    const uris = (await client.listResources()).resources.map((r) => r.uri).sort();
    assert.deepEqual(uris, ["sluice://alpha/mem://alpha/info", "sluice://beta/mem://beta/info"]);
    const r = await client.readResource({ uri: "sluice://beta/mem://beta/info" });
    assert.deepEqual(r.contents, [{ uri: "sluice://beta/mem://beta/info", text: "info of beta" }]);
    await assert.rejects(client.readResource({ uri: "mem://beta/info" }), /names no target/);
  });

  test("prefixMode Always prefixes a single target; Never keeps names and routes by lookup", async () => {
    const always = (await connect("always")).client;
    assert.ok((await always.listTools()).tools.every((t) => t.name.startsWith("alpha_")));
    assert.equal(text(await always.callTool({ name: "alpha_echo", arguments: { text: "x" } })), "alpha: x");
    const never = (await connect("never")).client;
    const names = (await never.listTools()).tools.map((t) => t.name).sort();
    // A name both targets have is listed once, for the first target.
    assert.deepEqual(names, ["add-tool", "alpha-only", "beta-only", "echo", "sample", "slow"]);
    assert.equal(text(await never.callTool({ name: "echo", arguments: { text: "y" } })), "alpha: y");
    assert.equal(text(await never.callTool({ name: "beta-only", arguments: {} })), "only beta");
    // Before any list on a new session: the lookup lists by itself.
    const fresh = (await connect("never")).client;
    assert.equal(text(await fresh.callTool({ name: "beta-only", arguments: {} })), "only beta");
    await assert.rejects(fresh.callTool({ name: "nope", arguments: {} }), /tool nope not found/);
  });

  test("a target's tools/list_changed reaches the client, and the new tool is listed and called", async () => {
    const { client } = await connect("cond");
    let changed = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changed++;
    });
    // The client's GET stream is open once the SDK has started it after initialize.
    await new Promise((r) => setTimeout(r, 300));
    await client.callTool({ name: "beta_add-tool", arguments: {} });
    await waitFor("tools/list_changed", async () => (changed > 0 ? true : undefined), 5000);
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("beta_beta-added"));
    assert.equal(text(await client.callTool({ name: "beta_beta-added", arguments: {} })), "added");
  });

  test("sampling: the target's request reaches the client and its answer goes back", async () => {
    const { client } = await connect("cond", { sampling: {} });
    const asked: string[] = [];
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      const c = req.params.messages[0]?.content;
      asked.push(c !== undefined && "text" in c ? String(c.text) : "");
      return { role: "assistant", content: { type: "text", text: "forty-two" }, model: "m" };
    });
    const r = await client.callTool({ name: "alpha_sample", arguments: { question: "meaning?" } });
    assert.equal(text(r), "alpha heard: forty-two");
    assert.deepEqual(asked, ["meaning?"]);
  });

  test("progress passes through with the client's own token", async () => {
    const { client } = await connect("cond");
    const progress: number[] = [];
    const r = await client.callTool({ name: "beta_slow", arguments: { steps: 4, ms: 20 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    assert.equal(text(r), "beta done after 4");
    assert.deepEqual(progress, [1, 2, 3, 4]);
  });

  test("cancellation: the client's notifications/cancelled reaches the target", async () => {
    const { client } = await connect("cond");
    const before = alpha.seen.cancelled;
    const ctl = new AbortController();
    const call = client.callTool({ name: "alpha_slow", arguments: { steps: 100, ms: 50 } }, undefined, {
      signal: ctl.signal,
    });
    setTimeout(() => ctl.abort("enough"), 300);
    await assert.rejects(call, /enough|abort/i);
    await waitFor(
      "the target to see the cancellation",
      async () => (alpha.seen.cancelled > before ? true : undefined),
      5000,
    );
    // The session goes on.
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "still" } })), "alpha: still");
  });

  test("server-everything beside an SDK target: aggregated and called", async () => {
    const { client } = await connect("every");
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("everything_echo"), names.join(", "));
    assert.ok(names.includes("alpha_echo"));
    const r = await client.callTool({ name: "everything_get-sum", arguments: { a: 2, b: 3 } });
    assert.match(text(r), /5/);
    const e = await client.callTool({ name: "everything_echo", arguments: { message: "hello" } });
    assert.match(text(e), /hello/);
  });

  test("bad input: clear JSON-RPC errors, and the session goes on", async () => {
    const { client, transport } = await connect("cond");
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${env.baseUrl}/cond/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": transport.sessionId ?? "",
          ...headers,
        },
        body,
      });
    let r = await post("{not json");
    assert.equal(r.status, 400);
    assert.equal(((await r.json()) as { error: { code: number } }).error.code, -32700);
    r = await post(JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "ping" }]));
    assert.equal(r.status, 400);
    assert.match(((await r.json()) as { error: { message: string } }).error.message, /batches/);
    r = await post(JSON.stringify({ jsonrpc: "1.0", id: 1, method: "ping" }));
    assert.equal(((await r.json()) as { error: { code: number } }).error.code, -32600);
    r = await post(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "no/such" }));
    const unknown = (await r.json()) as { id: number; error: { code: number } };
    assert.deepEqual([unknown.id, unknown.error.code], [7, -32601]);
    r = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 8, method: "ping", params: { pad: "x".repeat(5 * 1024 * 1024) } }),
    );
    assert.equal(r.status, 413);
    // A browser page of another origin (DNS rebinding): refused.
    r = await post(JSON.stringify({ jsonrpc: "2.0", id: 11, method: "ping" }), { origin: "http://evil.example.com" });
    assert.equal(r.status, 403);
    r = await post(JSON.stringify({ jsonrpc: "2.0", id: 12, method: "ping" }), { origin: env.baseUrl });
    assert.equal(r.status, 200);
    r = await post(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" }), { "mcp-session-id": "forged" });
    assert.equal(r.status, 404);
    // The client's own header naming another backend is overwritten by Envoy: still the Conditional backend.
    r = await post(JSON.stringify({ jsonrpc: "2.0", id: 10, method: "tools/list" }), {
      "x-sluice-mcp-route": "mcp/default/gw/default/never",
    });
    const listed = (await r.json()) as { result: { tools: { name: string }[] } };
    assert.ok(listed.result.tools.every((t) => t.name.includes("_")));
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "ok" } })), "alpha: ok");
  });

  test("metrics per backend, target and method on Sluice's /metrics", async () => {
    const text = await (await fetch(`http://127.0.0.1:${env.sluice.adminPort}/metrics`)).text();
    const value = (name: string, labels: string) => {
      const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}} `));
      return line === undefined ? undefined : Number(line.split(" ").at(-1));
    };
    const call = 'backend="default/cond",target="alpha",method="tools/call"';
    assert.ok((value("sluice_mcp_target_requests_total", call) ?? 0) >= 5, text);
    // The cancelled call ended without an answer.
    assert.ok((value("sluice_mcp_target_errors_total", call) ?? 0) >= 1);
    assert.ok((value("sluice_mcp_target_request_seconds_total", call) ?? 0) > 0);
    assert.ok(
      (value("sluice_mcp_target_requests_total", 'backend="default/every",target="everything",method="tools/list"') ??
        0) >= 1,
    );
    assert.ok((value("sluice_mcp_sessions_total", 'outcome="started"') ?? 0) >= 8);
    assert.ok((value("sluice_mcp_sessions_total", 'outcome="refused"') ?? 0) >= 1);
  });
});
