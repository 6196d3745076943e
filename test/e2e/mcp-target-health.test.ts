// `health` on MCP targets (src/mcp/target-health.ts), through a real Envoy to Sluice's MCP service with the SDK's
// client: a target that fails (answers 401, as a target whose credential was revoked) is evicted after
// `consecutiveFailures` failures for `duration`, during which no request reaches it: FailOpen sessions start without it,
// FailClosed ones are refused naming the eviction, and a session under way that calls it fails as with a failing
// target. Once the duration is over it is back. /metrics shows its eviction state and count.
// Spare target sessions are turned off (SLUICE_MCP_SPARE_SESSIONS): the counts of requests the target sees are the
// test's own.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { sampleSum, scrape } from "../helpers/prom-text.js";

const DURATION_MS = 4000;

function text(r: unknown): string {
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

function yaml(alphaPort: number, betaPort: number): string {
  const backend = (name: string, failureMode: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  mcp:
    failureMode: ${failureMode}
    targets:
      - { name: alpha, static: { host: 127.0.0.1, port: ${alphaPort} } }
      - { name: beta, static: { host: 127.0.0.1, port: ${betaPort} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}-alpha-health, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name}, sectionName: alpha }]
  backend:
    health: { eviction: { consecutiveFailures: 2, duration: ${DURATION_MS}ms } }
`;
  return `${backend("open", "FailOpen")}${backend("closed", "FailClosed")}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /open } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: open }]
    - matches: [{ path: { type: PathPrefix, value: /closed } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: closed }]
`;
}

describe("health-based eviction of MCP targets", { timeout: 120_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  /** Whether alpha serves (else it answers 401), and the requests that reached it. */
  let alphaUp = true;
  let alphaRequests = 0;
  let env: LlmEnv;
  const clients: Client[] = [];
  const connectTo = async (backend: string) => {
    const c = (await mcpClient(env.baseUrl, backend)).client;
    clients.push(c);
    return c;
  };
  const tools = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).sort();
  const metric = async (name: string, backend: string) =>
    sampleSum(await scrape(env.sluice.adminPort), name, { backend: `default/${backend}`, target: "alpha" });

  before(async () => {
    [alpha, beta] = await Promise.all([
      startSdkTarget("alpha", {
        authorize: () => {
          alphaRequests++;
          return alphaUp;
        },
      }),
      startSdkTarget("beta"),
    ]);
    env = await startLlmEnv(yaml(alpha.port, beta.port), "/open/mcp", { SLUICE_MCP_SPARE_SESSIONS: "off" });
  });
  after(async () => {
    if (process.env["DEBUG_MCP"] !== undefined) console.log(env?.sluice.output.slice(-40).join("\n"));
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
  });

  test("FailOpen: evicted after 2 failures, skipped without a request while evicted, back after the duration", async () => {
    alphaUp = false;
    // Two sessions meet alpha failing: each starts with beta alone.
    for (let i = 0; i < 2; i++) {
      const names = await tools(await connectTo("open"));
      assert.ok(names.includes("beta_echo") && names.every((n) => n.startsWith("beta_")), names.join(", "));
    }
    assert.equal(await metric("sluice_mcp_target_evicted", "open"), 1);
    assert.equal(await metric("sluice_mcp_target_evictions_total", "open"), 1);
    // Evicted: alpha is up again, but a new session does not ask it.
    alphaUp = true;
    const seen = alphaRequests;
    const during = await connectTo("open");
    assert.ok(!(await tools(during)).some((n) => n.startsWith("alpha_")));
    await assert.rejects(during.callTool({ name: "alpha_echo", arguments: { text: "x" } }), /not available|not found/);
    assert.equal(alphaRequests, seen, "no request reaches an evicted target");
    // After the duration it is back in new sessions.
    await new Promise((r) => setTimeout(r, DURATION_MS + 300));
    assert.equal(await metric("sluice_mcp_target_evicted", "open"), 0);
    const back = await connectTo("open");
    assert.equal(text(await back.callTool({ name: "alpha_echo", arguments: { text: "back" } })), "alpha: back");
    assert.ok(alphaRequests > seen);
  });

  test("FailClosed: an evicted target refuses new sessions and fails a session under way that calls it", async () => {
    alphaUp = true;
    const running = await connectTo("closed");
    assert.equal(text(await running.callTool({ name: "alpha_echo", arguments: { text: "1" } })), "alpha: 1");
    alphaUp = false;
    for (let i = 0; i < 2; i++) await assert.rejects(connectTo("closed"), /cannot start the session: target alpha/);
    const seen = alphaRequests;
    await assert.rejects(connectTo("closed"), (e: Error) => {
      assert.match(e.message, /cannot start the session: target alpha: evicted by its health policy/);
      return true;
    });
    // The session under way: its call to alpha fails as a failing target's does (FailClosed: the session with it).
    await assert.rejects(
      running.callTool({ name: "alpha_echo", arguments: { text: "2" } }),
      /target alpha failed: evicted by its health policy/,
    );
    await assert.rejects(running.callTool({ name: "beta_echo", arguments: { text: "3" } }), /the session failed|404/);
    assert.equal(alphaRequests, seen, "no request reaches an evicted target");
    alphaUp = true;
    await new Promise((r) => setTimeout(r, DURATION_MS + 300));
    const back = await connectTo("closed");
    assert.equal(text(await back.callTool({ name: "alpha_echo", arguments: { text: "4" } })), "alpha: 4");
  });
});
