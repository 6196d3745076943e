// backend.mcp.authorization end to end, with JWT claims verified by Envoy: lists leave out what the rules deny, calls
// and reads of a denied item are refused, and the usual bypasses (a prefix the lists never gave, another case, a
// percent-encoded URI, a batch) are refused too. An admin's claim sees everything.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";

const ISS = "https://issuer.test";

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

describe("MCP authorization through Envoy with JWT claims", { timeout: 60_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let env: LlmEnv;
  let user = "";
  let admin = "";
  const clients: Client[] = [];
  const connect = async (token: string) => {
    const c = await mcpClient(env.baseUrl, "guarded", { headers: { authorization: `Bearer ${token}` } });
    clients.push(c.client);
    return c;
  };

  before(async () => {
    const key = await generateKeyPair("RS256", { extractable: true });
    const jwk = { ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
    const mint = (group: string) =>
      new SignJWT({ sub: `${group}-user`, group })
        .setProtectedHeader({ alg: "RS256", kid: "k1" })
        .setIssuer(ISS)
        .setAudience("mcp")
        .setIssuedAt()
        .setExpirationTime("10m")
        .sign(key.privateKey);
    [user, admin] = await Promise.all([mint("eng"), mint("admin")]);
    [alpha, beta] = await Promise.all([startSdkTarget("alpha"), startSdkTarget("beta")]);
    const inline = JSON.stringify({ keys: [jwk] });
    env = await startLlmEnv(
      `${mcpYaml([
        {
          name: "guarded",
          targets: [
            { name: "alpha", port: alpha.port },
            { name: "beta", port: beta.port },
          ],
        },
      ])}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: jwt, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: mcp, sectionName: guarded }]
  traffic:
    jwtAuthentication: { providers: [{ issuer: "${ISS}", audiences: [mcp], jwks: { inline: '${inline}' } }] }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: items, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: guarded }]
  backend:
    mcp:
      authorization:
        action: Allow
        policy:
          matchExpressions:
            - "mcp.tool.name == 'echo'"
            - "mcp.tool.name == 'sample' && mcp.tool.target == 'alpha'"
            - "mcp.prompt.name == 'greet'"
            - "mcp.resource.uri == 'mem://alpha/info'"
            - "jwt.group == 'admin'"
`,
      "/guarded/mcp",
    );
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
  });

  test("lists leave out denied items; allowed ones are called", async () => {
    const { client } = await connect(user);
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    assert.deepEqual(tools, ["alpha_echo", "alpha_sample", "beta_echo"]);
    assert.deepEqual((await client.listPrompts()).prompts.map((p) => p.name).sort(), ["alpha_greet", "beta_greet"]);
    assert.deepEqual(
      (await client.listResources()).resources.map((r) => r.uri),
      ["sluice://alpha/mem://alpha/info"],
    );
    assert.equal(text(await client.callTool({ name: "beta_echo", arguments: { text: "ok" } })), "beta: ok");
    const r = await client.readResource({ uri: "sluice://alpha/mem://alpha/info" });
    assert.equal((r.contents[0] as { text: string }).text, "info of alpha");
  });

  test("a denied item is refused by name, case, prefix, URL encoding or batch", async () => {
    const { client, transport } = await connect(user);
    await assert.rejects(client.callTool({ name: "alpha_slow", arguments: { steps: 1, ms: 1 } }), /not allowed/);
    await assert.rejects(client.callTool({ name: "beta_sample", arguments: { question: "q" } }), /not allowed/);
    await assert.rejects(client.callTool({ name: "ALPHA_ECHO", arguments: { text: "x" } }), /not available|not found/);
    await assert.rejects(client.callTool({ name: "alpha_slow ", arguments: {} }), /not allowed|not found/);
    await assert.rejects(client.readResource({ uri: "sluice://beta/mem://beta/info" }), /not allowed/);
    await assert.rejects(client.readResource({ uri: "sluice://beta/mem://beta/%69nfo" }), /not allowed/);
    // The same normalization makes an allowed resource readable however it is encoded.
    const ok = await client.readResource({ uri: "sluice://alpha/mem://alpha/%69nfo" });
    assert.equal((ok.contents[0] as { text: string }).text, "info of alpha");
    const r = await fetch(`${env.baseUrl}/guarded/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${user}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": transport.sessionId ?? "",
      },
      body: JSON.stringify([{ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "alpha_slow" } }]),
    });
    assert.equal(r.status, 400);
    // A client-sent claims header is removed by Envoy: it does not make the user an admin.
    const spoof = await fetch(`${env.baseUrl}/guarded/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${user}`,
        "x-sluice-mcp-jwt": JSON.stringify({ group: "admin" }),
        "content-type": "application/json",
        accept: "application/json",
        "mcp-session-id": transport.sessionId ?? "",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    const listed = (await spoof.json()) as { result: { tools: unknown[] } };
    assert.equal(listed.result.tools.length, 3);
  });

  test("the admin's claim allows everything; no token is refused by Envoy", async () => {
    const { client } = await connect(admin);
    assert.equal((await client.listTools()).tools.length, 10);
    assert.match(text(await client.callTool({ name: "alpha_slow", arguments: { steps: 1, ms: 1 } })), /done/);
    const anonymous = await fetch(`${env.baseUrl}/guarded/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }),
    });
    assert.equal(anonymous.status, 401);
  });
});
