// Sluice killed (SIGKILL) and restarted under the mixed load of test/helpers/mixed-load.ts, and Envoy restarted.
// docs/faults.md states what each request gets; these tests assert exactly that: requests in flight when Sluice dies,
// new requests while it is down (Envoy keeps serving its last configuration), and how soon every kind succeeds again
// once Sluice is back on the same ports (the MCP session, sealed with the shared SESSION_KEY, carries on).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import {
  KINDS,
  type Kind,
  type MixedClient,
  type MixedPeers,
  mixedClient,
  mixedYaml,
  type Outcome,
  startMixedPeers,
} from "../helpers/mixed-load.js";
import { freePort, sleep, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

const SESSION_KEY = "faults-test-session-key";
/** The message of the LLM client's error when the LLM ext_proc cannot be reached (src/translate/xds/listener.ts). */
const UNAVAILABLE = "the LLM gateway could not process this request (its processor is unavailable); retry";

describe("Sluice killed and restarted under load; Envoy restarted", { timeout: 120_000 }, () => {
  const cfg = tempConfigDir();
  let peers: MixedPeers;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;
  let client: MixedClient;
  let port = 0;
  const ports = { xds: 0, authz: 0, admin: 0, mcp: 0 };
  const start = () =>
    startSluice("serve", cfg.dir, {
      xdsPort: ports.xds,
      authzPort: ports.authz,
      adminPort: ports.admin,
      extraArgs: ["--mcp-port", String(ports.mcp)],
      env: { SESSION_KEY },
    });
  const baseUrl = () => `http://127.0.0.1:${port}`;
  const all = (delayMs = 0) => Promise.all(KINDS.map((k) => client.run(k, delayMs)));
  const byKind = (os: readonly Outcome[]) => new Map(os.map((o) => [o.kind, o]));
  const show = (os: readonly Outcome[]) => os.map((o) => `${o.kind}: ${o.ok ? "ok" : "FAILED"} ${o.got}`).join("\n");

  before(async () => {
    peers = await startMixedPeers();
    port = await freePort();
    ports.xds = await freePort();
    ports.authz = await freePort();
    ports.admin = await freePort();
    ports.mcp = await freePort();
    cfg.write("mixed.yaml", mixedYaml(port, peers));
    sluice = await start();
    envoy = await startTestEnvoy(sluice);
    await waitFor(
      "every kind to be served",
      async () => {
        client ??= await mixedClient(baseUrl(), port, peers);
        return (await all()).every((o) => o.ok) ? true : undefined;
      },
      30_000,
      200,
    );
  });
  after(async () => {
    await client?.close();
    await envoy?.stop();
    await sluice?.stop();
    await peers?.close();
    cfg.cleanup();
  });

  test("SIGKILL under load: in flight, while down, and after the restart", async () => {
    const inflight = all(1500);
    // Every request has passed Envoy's filters and reached its upstream (echo, provider, MCP target) before Sluice dies.
    await waitFor(
      "the slow requests to reach their upstreams",
      async () => ((peers.provider.seen.get("slow") ?? 0) >= 2 ? true : undefined),
      10_000,
      10,
    );
    await sleep(300);
    sluice.child.kill("SIGKILL");
    await new Promise((r) => sluice.child.once("exit", r));
    const killedAt = performance.now();
    const flown = byKind(await inflight);
    const during = byKind(await all());
    const report = `in flight:\n${show([...flown.values()])}\nwhile down:\n${show([...during.values()])}`;
    // In flight: what Envoy decided stands; what still needs Sluice fails.
    for (const k of ["plain", "jwt", "jwt-denied", "cel", "cel-denied"] as const) assert.ok(flown.get(k)?.ok, report);
    // Envoy's own 500 (the ext_proc call failed), in the client's format (the listener's local reply mapper).
    assert.equal(flown.get("llm")?.got, `InternalServerError 500: 500 ${UNAVAILABLE}`, report);
    assert.match(String(flown.get("llm-stream")?.got), /^TypeError: terminated/, report);
    assert.equal(flown.get("mcp")?.status, 503, report);
    // While down: Envoy's own filters serve; Sluice's ext_authz fails closed; the LLM ext_proc and MCP fail.
    for (const k of ["plain", "jwt", "jwt-denied", "cel-denied"] as const) assert.ok(during.get(k)?.ok, report);
    assert.equal(during.get("cel")?.got, "403", report);
    assert.equal(during.get("llm")?.got, `InternalServerError 500: 500 ${UNAVAILABLE}`, report);
    assert.equal(during.get("llm-stream")?.got, `InternalServerError 500: 500 ${UNAVAILABLE}`, report);
    // An Anthropic client gets Anthropic's error object, with the same message.
    const claude = new Anthropic({ apiKey: "k", baseURL: `${baseUrl()}/llm`, maxRetries: 0 });
    await assert.rejects(
      claude.messages.create({ model: "claude-x", max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
      (e: unknown) =>
        e instanceof Anthropic.InternalServerError &&
        JSON.stringify(e.error) ===
          JSON.stringify({ type: "error", error: { type: "api_error", message: UNAVAILABLE } }),
    );
    assert.equal(during.get("mcp")?.status, 503, report);
    // Back on the same ports: Envoy kept its configuration and reconnects by itself; the MCP session carries on.
    const restartAt = performance.now();
    sluice = await start();
    const listeningAt = performance.now();
    const firstOk = new Map<Kind, number>();
    await waitFor(
      "every kind to succeed again",
      async () => {
        const os = await all();
        for (const o of os) if (o.ok && !firstOk.has(o.kind)) firstOk.set(o.kind, performance.now() - listeningAt);
        return firstOk.size === KINDS.length ? true : undefined;
      },
      10_000,
      50,
    );
    const figures = `down ${Math.round(restartAt - killedAt)} ms; Sluice listening ${Math.round(listeningAt - restartAt)} ms after its start; then first success: ${[...firstOk].map(([k, ms]) => `${k} ${Math.round(ms)} ms`).join(", ")}`;
    console.log(figures);
    // The first round after Sluice listens already succeeds (one round of every kind, under load).
    for (const [k, ms] of firstOk) assert.ok(ms < 3000, `${k}: ${figures}`);
  });

  test("Envoy restarted: it gets its configuration again and serves", async () => {
    await envoy.stop();
    const t0 = performance.now();
    envoy = await startTestEnvoy(sluice);
    // The MCP session is Sluice's (sealed id), not Envoy's: the client's session carries on through the new Envoy.
    await waitFor(
      "every kind to be served by the new Envoy",
      async () => ((await all()).every((o) => o.ok) ? true : undefined),
      20_000,
      50,
    );
    const ms = performance.now() - t0;
    console.log(`the new Envoy serves every kind ${Math.round(ms)} ms after its start`);
    const dump = JSON.stringify(await envoy.configDump());
    assert.match(dump, /sluice\.ext_authz/);
  });
});
