// Per-target guardrail processors (a GwPolicy with `targetRefs[].sectionName` setting backend.mcp.guardrails),
// through a real Envoy to Sluice's MCP service with the SDK's client: the processor runs around the calls forwarded to
// its target only (the other target's calls and the lists never reach it), sees the target's own tool name and the
// target, can refuse a call (the client gets its error, nothing is forwarded) and rewrite an answer; the
// backend's own processor still runs on every request before it.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";

interface Seen {
  phase: string;
  backend: string;
  target?: string;
  method: string;
  params?: { name?: string; arguments?: { text?: string } };
  result?: { content: { type: string; text: string }[] };
}

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
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

function yaml(alpha: number, beta: number, betaGuard: number, backendGuard: number): string {
  const proc = (name: string, port: number) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${port} } }
`;
  return `${proc("beta-guard", betaGuard)}${proc("backend-guard", backendGuard)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: hub, namespace: default }
spec:
  mcp:
    targets:
      - { name: alpha, static: { host: 127.0.0.1, port: ${alpha} } }
      - { name: beta, static: { host: 127.0.0.1, port: ${beta} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: hub-guard, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
  backend:
    mcp:
      guardrails:
        processors:
          - remote: { backendRef: { group: sluice.dev, kind: GwBackend, name: backend-guard } }
            methods: { "tools/call": Request }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: beta-guard, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: hub, sectionName: beta }]
  backend:
    mcp:
      guardrails:
        processors:
          - remote: { backendRef: { group: sluice.dev, kind: GwBackend, name: beta-guard } }
            methods: { "tools/call": Full, "*": Off }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /hub } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hub }]
`;
}

describe("per-target MCP guardrail processors", { timeout: 90_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let betaGuard: Awaited<ReturnType<typeof processor>>;
  let backendGuard: Awaited<ReturnType<typeof processor>>;
  let env: LlmEnv;
  let client: Client | undefined;

  before(async () => {
    [alpha, beta] = await Promise.all([startSdkTarget("alpha"), startSdkTarget("beta")]);
    betaGuard = await processor((s) => {
      if (s.phase === "Request" && s.params?.arguments?.text === "forbidden") {
        return { action: "Reject", error: { code: -32007, message: "beta refuses that text" } };
      }
      if (s.phase === "Response" && s.result !== undefined) {
        return {
          action: "Modify",
          result: { ...s.result, content: s.result.content.map((c) => ({ ...c, text: `${c.text} [beta checked]` })) },
        };
      }
      return { action: "Continue" };
    });
    backendGuard = await processor(() => ({ action: "Continue" }));
    env = await startLlmEnv(yaml(alpha.port, beta.port, betaGuard.port, backendGuard.port), "/hub/mcp");
  });
  after(async () => {
    await client?.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
    betaGuard?.server.close();
    backendGuard?.server.close();
  });

  test("the target's processor runs around its calls only; the backend's on every call", async () => {
    client = (await mcpClient(env.baseUrl, "hub")).client;
    const names = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("alpha_echo") && names.includes("beta_echo"), names.join(", "));
    assert.equal(text(await client.callTool({ name: "alpha_echo", arguments: { text: "a" } })), "alpha: a");
    assert.equal(
      text(await client.callTool({ name: "beta_echo", arguments: { text: "b" } })),
      "beta: b [beta checked]",
    );
    // Only beta's call, in both phases, with beta's own tool name and the target named.
    assert.deepEqual(
      betaGuard.seen.map((s) => [s.phase, s.method, s.target, s.params?.name]),
      [
        ["Request", "tools/call", "beta", "echo"],
        ["Response", "tools/call", "beta", "echo"],
      ],
    );
    assert.equal(betaGuard.seen[0]?.backend, "default/hub");
    // The backend's processor saw both calls, as the client wrote them.
    assert.deepEqual(
      backendGuard.seen.map((s) => s.params?.name),
      ["alpha_echo", "beta_echo"],
    );
  });

  test("a refusal by the target's processor reaches the client; nothing is forwarded to the target", async () => {
    client ??= (await mcpClient(env.baseUrl, "hub")).client;
    const before = betaGuard.seen.length;
    await assert.rejects(client.callTool({ name: "beta_echo", arguments: { text: "forbidden" } }), (e: Error) => {
      assert.match(e.message, /beta refuses that text/);
      assert.equal((e as { code?: number }).code, -32007);
      return true;
    });
    // A Request phase only: nothing was forwarded, so no Response phase.
    assert.deepEqual(
      betaGuard.seen.slice(before).map((s) => s.phase),
      ["Request"],
    );
    assert.equal(
      text(await client.callTool({ name: "alpha_echo", arguments: { text: "forbidden" } })),
      "alpha: forbidden",
    );
  });
});
