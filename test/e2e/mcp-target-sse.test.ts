// Connection policies on SSE targets (HTTP+SSE, the SDK's SSEServerTransport), through a real Envoy to Sluice's MCP
// service with the SDK's client: an SSE target over HTTPS with the policy's CA, SNI, client certificate, API key and
// TCP keepalive time (seen on Sluice's socket with ss); a plain SSE target reached through an HTTP CONNECT proxy
// (`tunnel`); the HTTPS one with another CA refusing the session (FailClosed). Before, SSE targets were reached over
// plain HTTP and these policies were only reported.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { prefixRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type ProtocolTarget, startSseTarget } from "../helpers/mcp-target-protocols.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

const KEY = "sse-k-71c2";

function text(r: unknown): string {
  return ((r as { content?: { text?: string }[] }).content ?? []).map((x) => x.text ?? "").join("");
}

function yaml(securePort: number, plainPort: number, proxyPort: number): string {
  const backend = (name: string, target: string, port: number, policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  mcp:
    failureMode: FailClosed
    targets:
      - { name: ${target}, static: { host: 127.0.0.1, port: ${port}, protocol: SSE, policies: ${policies} } }
`;
  const tls = (ca: string) =>
    `tls: { caCertificateRefs: [{ name: ${ca} }], sni: example.com, mtlsCertificateRef: [{ name: client-cert }] }`;
  const key = `auth: { key: ${KEY}, location: { header: { name: x-api-key } } }`;
  const names = ["secure", "tunnelled", "wrongca"];
  return `${caConfigMapYaml()}${caConfigMapYaml("other-ca", "wildcard.example.org.crt")}${tlsSecretYaml()}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: proxy, namespace: default }
spec:
  static: { host: 127.0.0.1, port: ${proxyPort} }
${backend("secure", "legacy", securePort, `{ ${tls("example-ca")}, ${key}, tcp: { keepalive: { time: 45s } } }`)}${backend("tunnelled", "legacy", plainPort, `{ ${key}, tunnel: { backendRef: { group: sluice.dev, kind: GwBackend, name: proxy } } }`)}${backend("wrongca", "legacy", securePort, `{ ${tls("other-ca")}, ${key} }`)}${prefixRoute(names, { name: "mcp", to: "GwBackend" })}`;
}

describe("connection policies on SSE targets", { timeout: 90_000 }, () => {
  let secure: ProtocolTarget;
  let plain: ProtocolTarget;
  let proxy: Server;
  /** The authorities the proxy was asked to CONNECT to. */
  const tunnels: string[] = [];
  const open = new Set<Socket>();
  let env: LlmEnv;
  const clients: Client[] = [];
  const connectTo = async (backend: string) => {
    const c = (await mcpClient(env.baseUrl, backend)).client;
    clients.push(c);
    return c;
  };

  before(async () => {
    [secure, plain] = await Promise.all([
      startSseTarget("secure", {
        tls: {
          cert: tlsFixture("example.com.crt"),
          key: tlsFixture("example.com.key"),
          requestCert: true,
          rejectUnauthorized: true,
          ca: [tlsFixture("foo.example.com.crt")],
          ALPNProtocols: ["http/1.1"],
        },
        requireHeader: { name: "x-api-key", value: KEY },
      }),
      startSseTarget("plain", { requireHeader: { name: "x-api-key", value: KEY } }),
    ]);
    // A CONNECT proxy on loopback: records each tunnel and pipes it to the address asked for.
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
      for (const s of [client, upstream]) {
        open.add(s);
        s.on("error", () => {});
        s.once("close", () => open.delete(s));
      }
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    const proxyPort = (proxy.address() as AddressInfo).port;
    env = await startLlmEnv(yaml(secure.port, plain.port, proxyPort), "/secure/mcp");
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    for (const s of open) s.destroy();
    await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
    await secure?.close();
    await plain?.close();
  });

  test("over HTTPS with the policy's CA, SNI, client certificate, API key and keepalive time", async () => {
    const c = await connectTo("secure");
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "over tls" } })), "secure: over tls");
    // The stream and the POSTs reached the target over TLS, with the client certificate, offering HTTP/1.1.
    assert.ok(secure.seen.some((s) => s.path === "/sse"));
    assert.ok(secure.seen.some((s) => s.path.startsWith("/messages")));
    assert.ok(
      secure.seen.every((s) => s.clientCert && s.alpn === "http/1.1"),
      JSON.stringify(secure.seen),
    );
    // Sluice's socket of the SSE stream has TCP keepalive on, with at most the 45 s of the policy left.
    const sockets = execFileSync("ss", ["-tnoH", "state", "established", `( dport = :${secure.port} )`], {
      encoding: "utf8",
    });
    const timers = [...sockets.matchAll(/timer:\(keepalive,(?:(\d+)min)?(\d+(?:\.\d+)?)(m?s)ec/g)].map(
      (m) => Number(m[1] ?? 0) * 60 + Number(m[2]) / (m[3] === "ms" ? 1000 : 1),
    );
    assert.ok(timers.length > 0, sockets);
    assert.ok(
      timers.every((t) => t > 0 && t <= 45),
      sockets,
    );
  });

  test("through the tunnel's CONNECT proxy, with the API key", async () => {
    const before = tunnels.length;
    const c = await connectTo("tunnelled");
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "tunnelled" } })), "plain: tunnelled");
    assert.ok(
      tunnels.slice(before).every((t) => t === `127.0.0.1:${plain.port}`) && tunnels.length > before,
      tunnels.join(", "),
    );
  });

  test("another CA: the handshake fails and the session is refused (FailClosed), naming the certificate", async () => {
    const seen = secure.seen.length;
    await assert.rejects(connectTo("wrongca"), (e: Error) => {
      assert.match(e.message, /cannot start the session: target legacy: .*(certificate|self.signed|issuer)/i);
      return true;
    });
    assert.equal(secure.seen.length, seen);
  });
});
