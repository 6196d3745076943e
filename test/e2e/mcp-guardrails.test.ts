// backend.mcp.guardrails through Envoy with the SDK client: a processor that refuses tools/call of one tool (and the
// chain ends there), one that rewrites a tool's answer, an unreachable FailOpen processor skipped, an unreachable
// FailClosed one refusing what it applies to; metadata CEL and the header deny list as the processors saw them.
// The processors speak the protocol docs/mcp.md defines (one JSON POST per phase).

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { phaseFor } from "../../src/mcp/guardrails.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { freePort } from "../helpers/net.js";

interface Seen {
  phase: string;
  method: string;
  params?: { name?: string };
  result?: unknown;
  metadata: Record<string, unknown>;
  headers: Record<string, string>;
}

/** A processor: `decide` answers each POST; what it was sent is kept. */
async function processor(decide: (s: Seen) => unknown): Promise<{ port: number; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const s = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Seen;
      seen.push(s);
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(decide(s)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, seen, server };
}

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

const staticBackend = (name: string, port: number) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${port} } }
`;

const ref = (name: string) => `{ group: sluice.dev, kind: GwBackend, name: ${name} }`;

describe("MCP guardrail processors through Envoy", { timeout: 90_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let env: LlmEnv;
  let blocker: Awaited<ReturnType<typeof processor>>;
  let rewriter: Awaited<ReturnType<typeof processor>>;
  const clients: Client[] = [];

  before(async () => {
    [alpha, beta] = await Promise.all([startSdkTarget("alpha"), startSdkTarget("beta")]);
    blocker = await processor((s) =>
      s.params?.name === "alpha_sample"
        ? { action: "Reject", error: { code: -32001, message: "alpha_sample is blocked by policy" } }
        : { action: "Continue" },
    );
    rewriter = await processor((s) => {
      if (s.phase !== "Response") return { action: "Continue" };
      const r = s.result as { content: { type: string; text: string }[] };
      return {
        action: "Modify",
        result: { ...r, content: r.content.map((c) => ({ ...c, text: `${c.text.toUpperCase()} [checked]` })) },
      };
    });
    const dead = await freePort();
    const targets = [
      { name: "alpha", port: alpha.port },
      { name: "beta", port: beta.port },
    ];
    env = await startLlmEnv(
      `${mcpYaml([
        { name: "guarded", targets },
        { name: "closed", targets },
        { name: "split", targets },
      ])}${staticBackend("blocker", blocker.port)}${staticBackend("rewriter", rewriter.port)}${staticBackend("dead", dead)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: guards, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: guarded }]
  backend:
    mcp:
      guardrails:
        processors:
          - remote:
              backendRef: ${ref("blocker")}
              metadata: { team: "request.headers['x-team']", method: "mcp.method" }
              disallowedRequestHeaders: [Authorization]
            methods: { "tools/call": Request, "*": "Off" }
          - remote: { backendRef: ${ref("rewriter")} }
            methods: { "tools/*": Response, "tools/list": "Off" }
          - remote: { backendRef: ${ref("dead")}, failureMode: FailOpen }
            methods: { "*": Full }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: closed, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: closed }]
  backend:
    mcp:
      guardrails:
        processors:
          - remote: { backendRef: ${ref("dead")} }
            methods: { "tools/call": Request }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: split-all, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: split }]
  backend:
    mcp:
      authorization: { action: Allow, policy: { matchExpressions: ["mcp.tool.name == 'echo'"] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: split-beta, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: split, sectionName: beta }]
  backend:
    mcp:
      authorization: { action: Allow, policy: { matchExpressions: ["mcp.tool.name == 'beta-only'"] } }
`,
      "/guarded/mcp",
    );
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
    blocker?.server.closeAllConnections();
    blocker?.server.close();
    rewriter?.server.closeAllConnections();
    rewriter?.server.close();
  });

  test("method patterns: exact, then the longest wildcard, then *; unmatched bypass", () => {
    const methods = { "tools/call": "Request", "tools/*": "Response", "*/list": "Full", "*": "Off" } as const;
    assert.equal(phaseFor(methods, "tools/call"), "Request");
    assert.equal(phaseFor(methods, "tools/list"), "Response");
    assert.equal(phaseFor(methods, "prompts/list"), "Full");
    assert.equal(phaseFor(methods, "ping"), "Off");
    assert.equal(phaseFor({ "tools/*": "Full" }, "ping"), undefined);
  });

  test("one tool's call is refused, the chain ends there; another's answer is rewritten", async () => {
    const { client } = await mcpClient(env.baseUrl, "guarded", {
      headers: { authorization: "Bearer secret-token", "x-team": "blue" },
    });
    clients.push(client);
    await assert.rejects(
      client.callTool({ name: "alpha_sample", arguments: { question: "q" } }),
      (e: Error & { code?: number }) => e.code === -32001 && /alpha_sample is blocked by policy/.test(e.message),
    );
    // The rewriter never saw the refused call (neither phase).
    assert.ok(!rewriter.seen.some((s) => s.params?.name === "alpha_sample"));
    const r = await client.callTool({ name: "beta_echo", arguments: { text: "hi" } });
    assert.equal(text(r), "BETA: HI [checked]");
    // tools/list is Off for the rewriter and unmatched (Off via *) for the blocker: names as the targets gave them.
    const tools = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(tools.includes("alpha_echo"));
    assert.ok(!rewriter.seen.some((s) => s.method === "tools/list"));
    // What the blocker saw: the call, its metadata, headers without Authorization (deny list), pseudo-headers.
    const call = blocker.seen.find((s) => s.params?.name === "beta_echo");
    assert.ok(call !== undefined);
    assert.equal(call.phase, "Request");
    assert.deepEqual(call.metadata, { team: "blue", method: "tools/call" });
    assert.equal(call.headers["x-team"], "blue");
    assert.equal(call.headers["authorization"], undefined);
    assert.equal(call.headers[":method"], "POST");
    assert.ok(!Object.keys(call.headers).some((h) => h.startsWith("x-sluice-mcp")));
    assert.ok(blocker.seen.every((s) => s.method === "tools/call"));
  });

  test("a policy with a target's sectionName replaces the backend's rules for that target only", async () => {
    const { client } = await mcpClient(env.baseUrl, "split");
    clients.push(client);
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, ["alpha_echo", "beta_beta-only"]);
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "a" } })), "alpha: a");
    assert.equal(text(await client.callTool({ name: "beta_beta-only", arguments: {} })), "only beta");
    await assert.rejects(client.callTool({ name: "beta_echo", arguments: { text: "b" } }), /not allowed/);
    await assert.rejects(client.callTool({ name: "alpha_alpha-only", arguments: {} }), /not allowed/);
  });

  test("an unreachable FailClosed processor refuses what it applies to, and nothing else", async () => {
    const { client } = await mcpClient(env.baseUrl, "closed");
    clients.push(client);
    assert.ok((await client.listTools()).tools.length > 0);
    await assert.rejects(
      client.callTool({ name: "alpha_echo", arguments: { text: "x" } }),
      (e: Error & { code?: number }) => e.code === -32000 && /guardrail processor failed/.test(e.message),
    );
    // The session is unaffected.
    assert.ok((await client.listTools()).tools.length > 0);
  });
});
