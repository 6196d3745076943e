// Sluice's transport to an MCP target under connection policies (src/mcp/target-connection.ts), driven by the MCP
// SDK's Client against an SDK target served over HTTPS: through an HTTP CONNECT proxy (which sees the tunnels), with
// the policy's CA, SNI and API key; the wrong name refused; a proxy that never opens the tunnel bounded by
// tcp.connectTimeout; a minted credential that cannot be had keeps the request from being sent.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { TargetTransport } from "../../src/mcp/target-transport.js";
import type { McpTargetConnection } from "../../src/translate/mcp/connection.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { tlsFixture } from "../helpers/tls.js";

const reconnect = { initialDelayMs: 10, maxDelayMs: 50, growFactor: 2, maxRetries: 1 };

describe("MCP target connection policies in the transport", () => {
  let target: SdkTarget;
  let proxy: Server;
  let proxyPort = 0;
  const tunnels: string[] = [];
  let silent: Server;
  let silentPort = 0;
  const open = new Set<Socket>();

  before(async () => {
    target = await startSdkTarget("t", {
      tls: { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") },
      requireHeader: { name: "x-api-key", value: "k1" },
    });
    // A CONNECT proxy (loopback only): records each tunnel and pipes it to the target.
    proxy = createServer((_req, res) => res.writeHead(405).end());
    proxy.on("connect", (req, client: Socket, head: Buffer) => {
      tunnels.push(req.url ?? "");
      const [host, port] = (req.url ?? "").split(":");
      const upstream = connect(Number(port), host ?? "127.0.0.1", () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
      open.add(client).add(upstream);
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
    });
    // A proxy that takes the CONNECT and never answers it.
    silent = createServer();
    silent.on("connect", (_req, client: Socket) => open.add(client));
    await Promise.all([proxy, silent].map((s) => new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()))));
    proxyPort = (proxy.address() as AddressInfo).port;
    silentPort = (silent.address() as AddressInfo).port;
  });
  after(async () => {
    for (const s of open) s.destroy();
    for (const s of [proxy, silent]) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
    await target.kill();
  });

  const secure = (extra: Partial<McpTargetConnection> = {}): McpTargetConnection => ({
    tls: { sni: "example.com", sans: ["example.com"], ca: tlsFixture("example.com.crt") },
    header: { name: "x-api-key", value: "k1" },
    ...extra,
  });

  async function client(connection: McpTargetConnection): Promise<Client> {
    const c = new Client({ name: "unit", version: "1" });
    const url = new URL(`https://127.0.0.1:${target.port}/mcp`);
    await c.connect(new TargetTransport(url, { reconnect, connection }), { timeout: 5000 });
    return c;
  }

  test("through the proxy, with the CA, SNI and API key: the session works and the proxy saw the tunnel", async () => {
    const before = tunnels.length;
    const c = await client(secure({ proxy: { address: "127.0.0.1", port: proxyPort, name: "proxy" } }));
    const tools = (await c.listTools()).tools.map((t) => t.name);
    assert.ok(tools.includes("echo"), tools.join(", "));
    const r = (await c.callTool({ name: "echo", arguments: { text: "tunnelled" } })) as {
      content: { text: string }[];
    };
    assert.equal(r.content[0]?.text, "t: tunnelled");
    assert.ok(tunnels.length > before);
    assert.ok(
      tunnels.slice(before).every((t) => t === `127.0.0.1:${target.port}`),
      tunnels.join(", "),
    );
    await c.close();
  });

  test("without the API key the target refuses; with a name the certificate lacks the handshake fails", async () => {
    await assert.rejects(client({ ...secure(), header: { name: "x-api-key", value: "wrong" } }), /401|Unauthorized/);
    await assert.rejects(
      client(secure({ tls: { sni: "example.com", sans: ["other.example.com"], ca: tlsFixture("example.com.crt") } })),
      /other\.example\.com|altnames|certificate/i,
    );
    // No CA: Node's store does not know the test CA.
    await assert.rejects(
      client(secure({ tls: { sni: "example.com", sans: ["example.com"] } })),
      /self.signed|certificate/i,
    );
  });

  test("tcp.connectTimeout bounds a proxy that never opens the tunnel", async () => {
    const started = Date.now();
    await assert.rejects(
      client(secure({ proxy: { address: "127.0.0.1", port: silentPort, name: "silent" }, connectTimeoutMs: 300 })),
      /did not open a tunnel in time/,
    );
    assert.ok(Date.now() - started < 3000, `${Date.now() - started} ms`);
  });

  test("a minted credential that cannot be had: the request is not sent, the error names the field", async () => {
    const initialized = target.seen.initialized;
    const plan = {
      id: "unit",
      backend: "default/hub",
      field: "backend.auth.oauthTokenExchange",
      // A token exchange with no subject token in the client's request: refused before any request is sent.
      primary: {
        kind: "oauthTokenExchange",
        endpoint: { url: "http://127.0.0.1:1/token" },
        grantType: "TokenExchange",
        subjectSource: { header: "authorization", prefix: "Bearer" },
        subjectTokenType: "urn:ietf:params:oauth:token-type:access_token",
        audiences: [],
        scopes: [],
        resources: [],
        location: { kind: "header", name: "authorization", prefix: "Bearer" },
        cache: { maxEntries: 16, defaultTtlMs: 60_000 },
      },
      extra: [],
    } as unknown as NonNullable<McpTargetConnection["minted"]>;
    await assert.rejects(client(secure({ minted: plan })), /backend\.auth\.oauthTokenExchange: no subject token/);
    assert.equal(target.seen.initialized, initialized);
  });
});
