// MCP sessions end to end, through a real Envoy: a Stateful session resumed by a second Sluice sharing SESSION_KEY,
// DELETE ending the targets' sessions, a session id of another backend refused, Stateless, FailOpen and FailClosed
// with a target killed mid-session, and an SSE target (server-everything's `sse` transport).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type EverythingTarget, type SdkTarget, startEverything, startSdkTarget } from "../helpers/mcp-targets.js";
import { waitFor } from "../helpers/net.js";

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

describe("MCP sessions through Envoy", { timeout: 60_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let victimOpen: SdkTarget;
  let victimClosed: SdkTarget;
  let legacy: EverythingTarget;
  let env: LlmEnv;
  let replica: LlmEnv;
  const clients: Client[] = [];
  const key = randomBytes(32).toString("hex");

  before(async () => {
    [alpha, beta, victimOpen, victimClosed, legacy] = await Promise.all([
      startSdkTarget("alpha"),
      startSdkTarget("beta"),
      startSdkTarget("victim"),
      startSdkTarget("victim"),
      startEverything("sse"),
    ]);
    const yaml = mcpYaml([
      {
        name: "cond",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "beta", port: beta.port },
        ],
      },
      {
        name: "open",
        failureMode: "FailOpen",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "victim", port: victimOpen.port },
        ],
      },
      {
        name: "closed",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "victim", port: victimClosed.port },
        ],
      },
      {
        name: "stateless",
        sessionRouting: "Stateless",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "beta", port: beta.port },
        ],
      },
      {
        name: "legacy",
        targets: [
          { name: "everything", port: legacy.port, protocol: "SSE" },
          { name: "alpha", port: alpha.port },
        ],
      },
    ]);
    [env, replica] = await Promise.all([
      startLlmEnv(yaml, "/cond/mcp", { SESSION_KEY: key }),
      startLlmEnv(yaml, "/cond/mcp", { SESSION_KEY: key }),
    ]);
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await replica?.stop();
    for (const t of [alpha, beta, victimOpen, victimClosed]) await t?.kill();
    await legacy?.stop();
  });

  const connect = async (base: string, backend: string, sessionId?: string) => {
    const c = await mcpClient(base, backend, sessionId !== undefined ? { sessionId } : {});
    clients.push(c.client);
    return c;
  };

  test("the targets' GET streams open lazily: not at initialize or for lists, but at the client's GET stream", async () => {
    const url = `${env.baseUrl}/cond/mcp`;
    const streams = () => alpha.seen.streams + beta.seen.streams;
    const before = streams();
    const post = (body: object, sid?: string) =>
      fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...(sid !== undefined ? { "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" } : {}),
        },
        body: JSON.stringify(body),
      });
    const init = await post({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    assert.equal(init.status, 200);
    const sid = init.headers.get("mcp-session-id") ?? "";
    assert.notEqual(sid, "");
    await init.json();
    assert.equal((await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sid)).status, 202);
    const list = (await (await post({ jsonrpc: "2.0", id: 2, method: "tools/list" }, sid)).json()) as {
      result: { tools: { name: string }[] };
    };
    assert.ok(list.result.tools.some((t) => t.name === "alpha_echo"));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(streams(), before, "no target GET stream before the client opens its own");
    const ctl = new AbortController();
    const get = await fetch(url, {
      headers: { accept: "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25" },
      signal: ctl.signal,
    });
    assert.equal(get.status, 200);
    await waitFor("both targets' GET streams", async () => (streams() === before + 2 ? true : undefined));
    ctl.abort();
    await get.body?.cancel().catch(() => {});
    const del = await fetch(url, { method: "DELETE", headers: { "mcp-session-id": sid } });
    assert.equal(del.status, 200);
  });

  test("DELETE ends the targets' sessions; the id is refused afterwards, on any replica", async () => {
    const { client, transport } = await connect(env.baseUrl, "cond");
    await client.listTools();
    const id = transport.sessionId ?? "";
    const deleted = alpha.seen.deleted + beta.seen.deleted;
    await transport.terminateSession();
    assert.equal(alpha.seen.deleted + beta.seen.deleted, deleted + 2);
    const ping = (base: string) =>
      fetch(`${base}/cond/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json", "mcp-session-id": id },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
    assert.equal((await ping(env.baseUrl)).status, 404);
    // The other replica does not know of the DELETE, but the targets' sessions are gone: no tool list comes back.
    const r = await ping(replica.baseUrl);
    const body = (await r.json()) as { error?: { message: string }; result?: unknown };
    assert.ok(r.status === 404 || body.error !== undefined, JSON.stringify(body));
  });

  test("a Stateful session outlives its Sluice: a second one sharing SESSION_KEY resumes it, GET stream included", async () => {
    const first = await connect(replica.baseUrl, "cond");
    assert.equal(text(await first.client.callTool({ name: "alpha_echo", arguments: { text: "one" } })), "alpha: one");
    const id = first.transport.sessionId;
    assert.ok(id !== undefined);
    // The Sluice (and Envoy) that started the session goes away (with the spare sessions it started: stop waits).
    await replica.stop();
    const initialized = alpha.seen.initialized + beta.seen.initialized;
    const second = await connect(env.baseUrl, "cond", id);
    assert.equal(text(await second.client.callTool({ name: "beta_echo", arguments: { text: "two" } })), "beta: two");
    assert.equal((await second.client.listTools()).tools.length, 10);
    // The targets' own sessions were taken up, not started again.
    assert.equal(alpha.seen.initialized + beta.seen.initialized, initialized);
    // The client's GET stream on the new Sluice gets the targets' notifications of the resumed session.
    let changed = 0;
    second.client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      changed++;
    });
    await second.transport.resumeStream("");
    await new Promise((r) => setTimeout(r, 500));
    await second.client.callTool({ name: "alpha_add-tool", arguments: {} });
    await waitFor("tools/list_changed on the resumed session", async () => (changed > 0 ? true : undefined), 10_000);
    assert.ok((await second.client.listTools()).tools.some((t) => t.name === "alpha_alpha-added"));
    // A session id of another backend (route) is refused.
    const other = await fetch(`${env.baseUrl}/open/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": id,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(other.status, 404);
    assert.match(await other.text(), /another Gateway or MCP backend/);
  });

  test("Stateless: no session id; each request has its own target sessions, ended after it", async () => {
    const { client, transport } = await connect(env.baseUrl, "stateless");
    assert.equal(transport.sessionId, undefined);
    const deleted = alpha.seen.deleted;
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("alpha_echo") && names.includes("beta_echo"));
    assert.equal(text(await client.callTool({ name: "beta_echo", arguments: { text: "s" } })), "beta: s");
    // Each request ended its target sessions (after answering: wait for the DELETEs).
    await waitFor(
      "the targets' sessions to end",
      async () => (alpha.seen.deleted >= deleted + 2 ? true : undefined),
      5000,
    );
  });

  test("FailOpen: a target killed mid-session is skipped, the others keep serving", async () => {
    const { client } = await connect(env.baseUrl, "open");
    assert.ok((await client.listTools()).tools.some((t) => t.name === "victim_echo"));
    await victimOpen.kill();
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.length > 0 && names.every((n) => n.startsWith("alpha_")), names.join(", "));
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "on" } })), "alpha: on");
    await assert.rejects(client.callTool({ name: "victim_echo", arguments: { text: "x" } }), /not available|failed/);
  });

  test("FailClosed: a target killed mid-session fails the session", async () => {
    const { client } = await connect(env.baseUrl, "closed");
    assert.equal(text(await client.callTool({ name: "victim_echo", arguments: { text: "a" } })), "victim: a");
    await victimClosed.kill();
    await assert.rejects(client.listTools(), /victim failed/);
    // The session is over: even a call to the healthy target is refused, so the client starts a new one.
    await assert.rejects(client.callTool({ name: "alpha_echo", arguments: { text: "b" } }), /session failed|404/i);
  });

  test("an SSE target (server-everything) beside a Streamable HTTP one", async () => {
    const { client } = await connect(env.baseUrl, "legacy");
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("everything_echo") && names.includes("alpha_echo"), names.join(", "));
    assert.match(text(await client.callTool({ name: "everything_echo", arguments: { message: "old" } })), /old/);
  });
});
