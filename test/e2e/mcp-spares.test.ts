// Spare target sessions (docs/mcp.md, "Spare target sessions started ahead") end to end, through a real Envoy with the
// SDK client and SDK targets: a second client adopts the set started after the first (no target initializes while it
// waits, its notifications/initialized held until then), the session it gets resumes on a second Sluice, unadopted
// sets are DELETEd after the idle age, a new session's targets are told notifications/initialized once the client's
// own is answered, a set whose target died is not adopted (FailClosed refuses the session as it
// did without spares); and a Stateless backend's initialize answered from the cache.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpYaml } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { waitFor } from "../helpers/net.js";

/** Idle age of spare sets in the first Sluice: short, so the test sees them DELETEd. */
const IDLE_MS = 4000;

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

/** An SDK client whose initialize POST is timed: when it was sent and when its answer arrived (Date.now()). */
async function timedClient(
  base: string,
  backend: string,
  sessionId?: string,
  onAnswer?: () => void,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport; sent: number; answered: number }> {
  const times = { sent: 0, answered: 0 };
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/${backend}/mcp`), {
    ...(sessionId !== undefined ? { sessionId } : {}),
    fetch: async (url, init) => {
      const initialize = typeof init?.body === "string" && init.body.includes('"method":"initialize"');
      if (initialize) times.sent = Date.now();
      const res = await fetch(url, init);
      if (initialize) {
        times.answered = Date.now();
        onAnswer?.();
      }
      return res;
    },
  });
  const client = new Client({ name: "spares-e2e", version: "1.0.0" }, { capabilities: { roots: {} } });
  await client.connect(transport);
  return { client, transport, ...times };
}

describe("MCP spare target sessions through Envoy", { timeout: 120_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let gamma: SdkTarget;
  let victim: SdkTarget;
  let s1: SdkTarget;
  let s2: SdkTarget;
  let delta: SdkTarget;
  let victim2: SdkTarget;
  let h1: SdkTarget;
  let h2: SdkTarget;
  let env: LlmEnv;
  let replica: LlmEnv;
  const clients: Client[] = [];
  const key = randomBytes(32).toString("hex");
  const inits = (...ts: SdkTarget[]) => ts.reduce((n, t) => n + t.seen.initialized, 0);
  const deletes = (...ts: SdkTarget[]) => ts.reduce((n, t) => n + t.seen.deleted, 0);

  before(async () => {
    [alpha, beta, gamma, victim, s1, s2, delta, victim2, h1, h2] = await Promise.all([
      startSdkTarget("alpha"),
      startSdkTarget("beta"),
      startSdkTarget("gamma"),
      startSdkTarget("victim"),
      startSdkTarget("s1"),
      startSdkTarget("s2"),
      startSdkTarget("delta"),
      startSdkTarget("victim2"),
      startSdkTarget("h1"),
      startSdkTarget("h2"),
    ]);
    const yaml = mcpYaml([
      {
        name: "pool",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "beta", port: beta.port },
        ],
      },
      {
        name: "fragile",
        targets: [
          { name: "gamma", port: gamma.port },
          { name: "victim", port: victim.port },
        ],
      },
      {
        name: "checked",
        targets: [
          { name: "delta", port: delta.port },
          { name: "victim2", port: victim2.port },
        ],
      },
      {
        name: "held",
        targets: [
          { name: "h1", port: h1.port },
          { name: "h2", port: h2.port },
        ],
      },
      {
        name: "stateless",
        sessionRouting: "Stateless",
        targets: [
          { name: "s1", port: s1.port },
          { name: "s2", port: s2.port },
        ],
      },
    ]);
    [env, replica] = await Promise.all([
      startLlmEnv(yaml, "/pool/mcp", { SESSION_KEY: key, SLUICE_MCP_SPARE_IDLE_MS: String(IDLE_MS) }),
      // The replica checks a spare set by its targets' answers to notifications/initialized before adopting it. It
      // resumes the pool backend's session but starts none there, so alpha's and beta's counts are the first's doing.
      startLlmEnv(yaml, "/pool/mcp", { SESSION_KEY: key, SLUICE_MCP_SPARE_CHECK: "session" }),
    ]);
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await replica?.stop();
    for (const t of [alpha, beta, gamma, victim, s1, s2, delta, victim2, h1, h2]) await t?.kill();
  });

  let adoptedId: string | undefined;

  test("a new session's targets hear notifications/initialized only once the client's own is answered", async () => {
    // Raw HTTP, so the client's notification comes when the test says (the SDK client sends it at once).
    const url = `${env.baseUrl}/held/mcp`;
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const sent = Date.now();
    const init = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "held-e2e", version: "1" } },
      }),
    });
    assert.equal(init.status, 200);
    await init.text();
    const session = init.headers.get("mcp-session-id");
    assert.ok(session !== null);
    const mine = () => [h1, h2].map((t) => [...t.seen.sessions.values()].find((x) => x.initializedAt >= sent));
    assert.ok(
      mine().every((x) => x !== undefined),
      "each target started the client's session before it was answered",
    );
    // Held while the client has not said it is initialized (Sluice used to send them right after the answer).
    await new Promise((r) => setTimeout(r, 400));
    assert.deepEqual(
      mine().map((x) => x?.notified),
      [false, false],
    );
    const notified = await fetch(url, {
      method: "POST",
      headers: { ...headers, "mcp-session-id": session },
      body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
    });
    assert.equal(notified.status, 202);
    // Then released, without a request of the client's asking for it.
    await waitFor("both targets told notifications/initialized", async () =>
      mine().every((x) => x?.notified === true) ? true : undefined,
    );
  });

  test("a second client adopts the spare set: no target initializes while it waits", async () => {
    const first = await timedClient(env.baseUrl, "pool");
    clients.push(first.client);
    assert.equal(text(await first.client.callTool({ name: "alpha_echo", arguments: { text: "1" } })), "alpha: 1");
    // The first client's own sessions (one per target), then the spare set started after its answer.
    await waitFor("the spare set to start", async () => (inits(alpha, beta) === 4 ? true : undefined), 10_000);
    // The spares' notifications/initialized are held: the targets heard it from the first client's sessions only.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(alpha.seen.notified + beta.seen.notified, 2);

    const second = await timedClient(env.baseUrl, "pool");
    clients.push(second.client);
    // No target started a session while the client waited: the sessions its calls reach were initialized before it
    // sent its initialize, and heard notifications/initialized only once it was adopted.
    assert.equal(text(await second.client.callTool({ name: "alpha_echo", arguments: { text: "2" } })), "alpha: 2");
    assert.equal(text(await second.client.callTool({ name: "beta_echo", arguments: { text: "2" } })), "beta: 2");
    for (const t of [alpha, beta]) {
      const used = t.seen.sessions.get(t.seen.lastCallSession ?? "");
      assert.ok(used !== undefined, `${t.name}: the call came on a session it started`);
      assert.ok(used.initializedAt < second.sent, `${t.name}: its session was started ahead of the client`);
      assert.equal(used.notified, true);
    }
    const waited = [...alpha.seen.sessions.values(), ...beta.seen.sessions.values()].filter(
      (x) => x.initializedAt >= second.sent && x.initializedAt < second.answered,
    );
    // At most the replacement set, started once the answer was written, can land before the client reads it.
    assert.ok(waited.every((x) => !x.notified) && waited.length <= 2, JSON.stringify(waited));
    assert.equal(alpha.seen.notified + beta.seen.notified, 4);
    assert.ok((await second.client.listTools()).tools.some((t) => t.name === "alpha_alpha-only"));
    // A replacement set is started after the answer.
    await waitFor("the replacement spare set", async () => (inits(alpha, beta) === 6 ? true : undefined), 10_000);
    adoptedId = second.transport.sessionId;
    assert.ok(adoptedId !== undefined);
  });

  test("an adopted session resumes on a second Sluice: its targets' sessions are taken up, none started", async () => {
    assert.ok(adoptedId !== undefined, "needs the adopted session of the test before");
    const before = inits(alpha, beta);
    const resumed = await timedClient(replica.baseUrl, "pool", adoptedId);
    clients.push(resumed.client);
    assert.equal(text(await resumed.client.callTool({ name: "alpha_echo", arguments: { text: "r" } })), "alpha: r");
    assert.equal(text(await resumed.client.callTool({ name: "beta_echo", arguments: { text: "r" } })), "beta: r");
    assert.equal(inits(alpha, beta), before, "the resume started no target session");
  });

  test("a spare set nobody adopts is DELETEd at its targets after the idle age", async () => {
    // The replacement set of the first test is idle; no client of this test DELETEs a session, so each DELETE the
    // targets see is a spare's.
    await waitFor(
      "the idle spare set to be DELETEd",
      async () => (deletes(alpha, beta) === 2 ? true : undefined),
      IDLE_MS + 8000,
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(deletes(alpha, beta), 2, "the adopted set was not DELETEd, only the idle one");
    // The DELETEd sessions never heard notifications/initialized (no client had them).
    const notified = alpha.seen.notified + beta.seen.notified;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(alpha.seen.notified + beta.seen.notified, notified);
    // Nothing is held now: the next client starts its own sessions again.
    const next = await timedClient(env.baseUrl, "pool");
    clients.push(next.client);
    for (const t of [alpha, beta]) {
      const started = [...t.seen.sessions.values()].filter(
        (x) => x.initializedAt >= next.sent && x.initializedAt <= next.answered,
      );
      assert.ok(started.length >= 1, `${t.name}: without a spare, the client's initialize reached it`);
    }
  });

  test("a spare set whose target died is not adopted: FailClosed refuses the session as without spares", async () => {
    const first = await timedClient(env.baseUrl, "fragile");
    clients.push(first.client);
    await waitFor("the fragile spare set", async () => (inits(gamma, victim) === 4 ? true : undefined), 10_000);
    const [clientSession, spareSession] = [...gamma.seen.sessions.values()];
    assert.ok(clientSession !== undefined && spareSession !== undefined);
    assert.equal(spareSession.notified, false, "the spare's notifications/initialized is held");
    await victim.kill();
    await assert.rejects(timedClient(env.baseUrl, "fragile"), /cannot start the session: target victim/);
    // The set was not adopted but DELETEd (its gamma session, told initialized only as the check that failed at
    // victim); the client's own attempt (today's path) started and ended a session at gamma as it always did.
    await waitFor("gamma's spare session DELETEd", async () => (spareSession.deleted ? true : undefined));
    // Sluice's /metrics counts the sets by outcome.
    const metrics = await (await fetch(`http://127.0.0.1:${env.sluice.adminPort}/metrics`)).text();
    const outcome = (o: string) =>
      Number(metrics.match(new RegExp(`^sluice_mcp_spare_sets_total\\{outcome="${o}"\\} (\\d+)$`, "m"))?.[1]);
    assert.ok(outcome("adopted") >= 1, metrics);
    assert.ok(outcome("refused") >= 1);
    assert.ok(outcome("discarded") >= 2);
    const all = [...gamma.seen.sessions.values()];
    assert.equal(all.length, 3);
    assert.deepEqual(
      all.map((x) => x.deleted),
      [false, true, true],
    );
  });

  test("SLUICE_MCP_SPARE_CHECK=session: the targets answer notifications/initialized before the client is answered; a dead one's set is not adopted", async () => {
    const first = await timedClient(replica.baseUrl, "checked");
    clients.push(first.client);
    await waitFor("the checked spare set", async () => (inits(delta, victim2) === 4 ? true : undefined), 10_000);
    await new Promise((r) => setTimeout(r, 200));
    const spares = [delta, victim2].map((t) => [...t.seen.sessions.values()][1]);
    assert.ok(spares.every((x) => x !== undefined && !x.notified));
    let atAnswer: boolean[] = [];
    const second = await timedClient(replica.baseUrl, "checked", undefined, () => {
      atAnswer = spares.map((x) => x?.notified === true);
    });
    clients.push(second.client);
    assert.deepEqual(atAnswer, [true, true], "each spare session was told initialized before the client's answer");
    assert.equal(text(await second.client.callTool({ name: "delta_echo", arguments: { text: "c" } })), "delta: c");
    assert.equal(delta.seen.sessions.get(delta.seen.lastCallSession ?? ""), spares[0]);
    // The replacement set; then victim2 dies and its set is refused by the check.
    await waitFor("the replacement set", async () => (inits(delta, victim2) === 6 ? true : undefined), 10_000);
    await new Promise((r) => setTimeout(r, 200));
    const replacement = [...delta.seen.sessions.values()][2];
    await victim2.kill();
    await assert.rejects(timedClient(replica.baseUrl, "checked"), /cannot start the session: target victim2/);
    await waitFor("delta's spare session DELETEd", async () => (replacement?.deleted ? true : undefined));
  });

  test("Stateless: the merged initialize answer is cached, the targets are not asked again", async () => {
    const a = await timedClient(env.baseUrl, "stateless");
    clients.push(a.client);
    assert.equal(a.transport.sessionId, undefined);
    const afterFirst = inits(s1, s2);
    const b = await timedClient(env.baseUrl, "stateless");
    clients.push(b.client);
    assert.equal(inits(s1, s2), afterFirst, "the second initialize was answered from the cache");
    assert.deepEqual(b.client.getServerCapabilities(), a.client.getServerCapabilities());
    assert.equal(b.client.getInstructions(), a.client.getInstructions());
    // Requests still have their own target sessions, ended after them.
    assert.equal(text(await b.client.callTool({ name: "s2_echo", arguments: { text: "x" } })), "s2: x");
    assert.ok(inits(s1, s2) > afterFirst);
  });
});
