// `health.unhealthyCondition` on MCP targets (src/mcp/target-request.ts, target-health.ts), through a real Envoy to
// Sluice's MCP service with the SDK's client and SDK targets. The condition judges every HTTP answer of the target by
// its status and headers and replaces the fixed rule: a target answering 200 with `x-overloaded: 1` is evicted under
// a condition reading that header and not without it; a target answering 503 is not evicted under a condition that
// only counts 429, and is as soon as it answers 429; a target that refuses connections is still evicted (a failure
// without an answer stays unhealthy). Spare target sessions are off: each session's traffic is the test's own.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { freePort } from "../helpers/net.js";
import { scrape } from "../helpers/prom-text.js";

const DURATION_MS = 60_000;

function text(r: unknown): string {
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

/** A FailOpen GwBackend whose target `alpha` (at alphaPort) has a health policy, and `beta` serves beside it. */
function backend(name: string, alphaPort: number, betaPort: number, condition: string | undefined): string {
  const c = condition === undefined ? "" : `unhealthyCondition: ${JSON.stringify(condition)}, `;
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  mcp:
    failureMode: FailOpen
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
    health: { ${c}eviction: { consecutiveFailures: 2, duration: ${DURATION_MS}ms } }
`;
}

function route(names: readonly string[]): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${names
  .map(
    (n) => `    - matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${n} }]`,
  )
  .join("\n")}
`;
}

describe("unhealthyCondition on MCP targets", { timeout: 180_000 }, () => {
  /** Answers 200 with `x-overloaded: 1` while `overloaded`. */
  let over: SdkTarget;
  /** Answers `busyStatus` to every request while it is set. */
  let busy: SdkTarget;
  let beta: SdkTarget;
  let overloaded = false;
  let busyStatus: number | undefined;
  let env: LlmEnv;
  const clients: Client[] = [];
  const connectTo = async (backend: string) => {
    const c = (await mcpClient(env.baseUrl, backend)).client;
    clients.push(c);
    return c;
  };
  const tools = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).sort();
  /** The target alpha's series `name` under `backend`, or undefined when Sluice has none. */
  const metric = async (name: string, backend: string): Promise<number | undefined> => {
    const f = await scrape(env.sluice.adminPort);
    return f
      .get(name)
      ?.samples.find((s) => s.labels["backend"] === `default/${backend}` && s.labels["target"] === "alpha")?.value;
  };

  before(async () => {
    [over, busy, beta] = await Promise.all([
      startSdkTarget("alpha", { shape: () => (overloaded ? { headers: { "x-overloaded": "1" } } : undefined) }),
      startSdkTarget("alpha", { shape: () => (busyStatus !== undefined ? { status: busyStatus } : undefined) }),
      startSdkTarget("beta"),
    ]);
    const nobody = await freePort();
    const yaml = [
      backend("header", over.port, beta.port, "response.headers['x-overloaded'] == '1'"),
      backend("plain", over.port, beta.port, undefined),
      backend("codes", busy.port, beta.port, "response.code == 429"),
      backend("fixed", busy.port, beta.port, undefined),
      backend("refused", nobody, beta.port, "response.code == 429"),
      route(["header", "plain", "codes", "fixed", "refused"]),
    ].join("");
    env = await startLlmEnv(yaml, "/header/mcp", { SLUICE_MCP_SPARE_SESSIONS: "off" });
  });
  after(async () => {
    if (process.env["DEBUG_MCP"] !== undefined) console.log(env?.sluice.output.slice(-40).join("\n"));
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await over?.kill();
    await busy?.kill();
    await beta?.kill();
  });

  test("200 with x-overloaded: evicted under a condition reading the header, served without it", async () => {
    overloaded = true;
    // Without a condition the answers are healthy: the session serves alpha call after call.
    const plain = await connectTo("plain");
    for (let i = 0; i < 4; i++) {
      assert.equal(text(await plain.callTool({ name: "alpha_echo", arguments: { text: `${i}` } })), `alpha: ${i}`);
    }
    assert.equal(await metric("sluice_mcp_target_evicted", "plain"), 0);
    assert.equal(await metric("sluice_mcp_target_health", "plain"), 100);
    // With it, each answer (initialize, notifications/initialized, the calls) is unhealthy: two evict.
    const judged = await connectTo("header");
    await judged.callTool({ name: "alpha_echo", arguments: { text: "x" } }).catch(() => {});
    assert.equal(await metric("sluice_mcp_target_evicted", "header"), 1);
    assert.equal(await metric("sluice_mcp_target_evictions_total", "header"), 1);
    // A new session starts without the evicted alpha (FailOpen).
    const after = await connectTo("header");
    const names = await tools(after);
    assert.ok(names.length > 0 && names.every((n) => n.startsWith("beta_")), names.join(", "));
    // Still served without the condition.
    assert.equal(text(await plain.callTool({ name: "alpha_echo", arguments: { text: "on" } })), "alpha: on");
    assert.equal(await metric("sluice_mcp_target_evicted", "plain"), 0);
    overloaded = false;
  });

  test("the condition replaces the fixed rule: 503 ignored under `response.code == 429`, 429 evicts", async () => {
    busyStatus = 503;
    for (let i = 0; i < 3; i++) {
      // alpha fails to start (503), the sessions start with beta alone.
      const names = await tools(await connectTo("codes"));
      assert.ok(
        names.every((n) => n.startsWith("beta_")),
        names.join(", "),
      );
      await tools(await connectTo("fixed"));
    }
    // The 503s were judged, healthy by the condition; the fixed rule evicted the same target for them.
    assert.equal(await metric("sluice_mcp_target_health", "codes"), 100);
    assert.equal(await metric("sluice_mcp_target_evicted", "codes"), 0);
    assert.equal(await metric("sluice_mcp_target_evicted", "fixed"), 1);
    busyStatus = 429;
    for (let i = 0; i < 2; i++) await tools(await connectTo("codes"));
    assert.equal(await metric("sluice_mcp_target_evicted", "codes"), 1);
    busyStatus = undefined;
  });

  test("a target refusing connections is evicted under a condition too (no answer is unhealthy)", async () => {
    for (let i = 0; i < 2; i++) {
      const names = await tools(await connectTo("refused"));
      assert.ok(names.includes("beta_echo") && names.every((n) => n.startsWith("beta_")), names.join(", "));
    }
    assert.equal(await metric("sluice_mcp_target_evicted", "refused"), 1);
    assert.equal(await metric("sluice_mcp_target_evictions_total", "refused"), 1);
  });
});
