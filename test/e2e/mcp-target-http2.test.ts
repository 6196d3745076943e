// `http.version: HTTP2` to MCP targets (src/mcp/target-request.ts), through a real Envoy to Sluice's MCP service with
// the SDK's client: a Streamable HTTP target on a node:http2 secure server that offers only h2 by ALPN (an HTTP/1.1
// client is refused), reached with the policy's CA and SNI; one on a plain node:http2 server (h2c, prior knowledge);
// and an SSE target on a plain node:http2 server. The targets record the HTTP version and ALPN protocol of every request, and their connections: a
// session's POSTs and its GET stream share one HTTP/2 connection. Without the policy, the h2-only target cannot be
// reached (the session is refused).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type ProtocolTarget, startH2Target, startSseTarget } from "../helpers/mcp-target-protocols.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

function text(r: unknown): string {
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

function yaml(securePort: number, plainPort: number, ssePort: number): string {
  const tls = "tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }";
  const backend = (name: string, targets: string[]) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  mcp:
    failureMode: FailClosed
    targets:
${targets.map((t) => `      - ${t}`).join("\n")}
`;
  return `${caConfigMapYaml()}${backend("h2", [
    `{ name: secure, static: { host: 127.0.0.1, port: ${securePort}, policies: { ${tls}, http: { version: HTTP2 } } } }`,
    `{ name: plain, static: { host: 127.0.0.1, port: ${plainPort}, policies: { http: { version: HTTP2 } } } }`,
    `{ name: legacy, static: { host: 127.0.0.1, port: ${ssePort}, protocol: SSE, policies: { http: { version: HTTP2 } } } }`,
  ])}${backend("h1", [`{ name: secure, static: { host: 127.0.0.1, port: ${securePort}, policies: { ${tls} } } }`])}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: mcp, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /h2 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: h2 }]
    - matches: [{ path: { type: PathPrefix, value: /h1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: h1 }]
`;
}

describe("HTTP/2 to MCP targets", { timeout: 90_000 }, () => {
  let secure: ProtocolTarget;
  let plain: ProtocolTarget;
  let sse: ProtocolTarget;
  let env: LlmEnv;
  const clients: Client[] = [];
  const connectTo = async (backend: string) => {
    const c = (await mcpClient(env.baseUrl, backend)).client;
    clients.push(c);
    return c;
  };

  before(async () => {
    [secure, plain] = await Promise.all([
      startH2Target("secure", { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") }),
      startH2Target("plain"),
    ]);
    sse = await startSseTarget("legacy", { h2: true });
    env = await startLlmEnv(yaml(secure.port, plain.port, sse.port), "/h2/mcp", { SLUICE_MCP_SPARE_SESSIONS: "off" });
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await secure?.close();
    await plain?.close();
    await sse?.close();
  });

  test("h2 over TLS (ALPN) and h2c (prior knowledge); a session's requests share one connection", async () => {
    const c = await connectTo("h2");
    assert.equal(text(await c.callTool({ name: "secure_echo", arguments: { text: "one" } })), "secure: one");
    assert.equal(text(await c.callTool({ name: "plain_echo", arguments: { text: "two" } })), "plain: two");
    assert.equal(text(await c.callTool({ name: "secure_echo", arguments: { text: "three" } })), "secure: three");
    for (const t of [secure, plain]) {
      // initialize, notifications/initialized, the GET stream the first call opens, the calls.
      assert.ok(t.seen.length >= 4, JSON.stringify(t.seen));
      assert.ok(
        t.seen.every((s) => s.httpVersion === "2.0"),
        JSON.stringify(t.seen),
      );
      // The GET stream stays open beside the POSTs: on HTTP/1.1 that would take two connections.
      assert.equal(t.connections.count, 1);
    }
    assert.ok(
      secure.seen.every((s) => s.alpn === "h2"),
      JSON.stringify(secure.seen),
    );
    assert.ok(secure.seen.some((s) => s.path === "/mcp"));
  });

  test("an SSE target over h2c: its stream and POSTs on one HTTP/2 connection", async () => {
    const c = await connectTo("h2");
    assert.equal(text(await c.callTool({ name: "legacy_echo", arguments: { text: "sse" } })), "legacy: sse");
    assert.ok(sse.seen.some((s) => s.path === "/sse"));
    assert.ok(sse.seen.some((s) => s.path.startsWith("/messages")));
    assert.ok(
      sse.seen.every((s) => s.httpVersion === "2.0"),
      JSON.stringify(sse.seen),
    );
    assert.equal(sse.connections.count, 1);
  });

  test("without http.version HTTP2 the h2-only target refuses Sluice's HTTP/1.1 (the session is refused)", async () => {
    const seen = secure.seen.length;
    await assert.rejects(connectTo("h1"), /cannot start the session: target secure/);
    assert.equal(secure.seen.length, seen);
  });
});
