// backend.tunnel through a real Envoy (backend/tunnel.ts, xds/tunnel.ts): TLS connections to a backend go through an
// HTTP CONNECT proxy written for the test (node:http's `connect` event, piping bytes both ways), reached as a Service
// or as a static GwBackend; the proxy sees `CONNECT <backend>`, the backend the TLS handshake and the request. A
// backend without TLS, or whose proxy cannot be had, answers 503 and is never reached around the proxy; the
// GwBackend's status says why. And a client's own CONNECT to the gateway, with no frontend.connect, is refused (405).

import assert from "node:assert/strict";
import { createServer as createHttpServer } from "node:http";
import { createServer, type Server } from "node:https";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import type { TLSSocket } from "node:tls";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";
import { caConfigMapYaml, indentLines, tlsFixture } from "../helpers/tls.js";

async function listen(server: { listen(port: number, host: string, cb: () => void): unknown; address(): unknown }) {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as AddressInfo).port;
}

/** CONNECT targets the proxy was asked for, in order. */
const connects: string[] = [];
/** Requests that reached the backends, with how (TLS or not). */
const served: string[] = [];

const proxy = createHttpServer((_req, res) => {
  // Anything but CONNECT: a CONNECT proxy does not route it.
  res.writeHead(405).end();
});
const tunnels = new Set<Socket>();
proxy.on("connect", (req, client: Socket, head: Buffer) => {
  connects.push(req.url ?? "");
  const [host, port] = (req.url ?? "").split(":");
  const upstream = connect(Number(port), host === "localhost" ? "127.0.0.1" : (host ?? ""), () => {
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.byteLength > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  for (const s of [client, upstream]) {
    tunnels.add(s);
    s.on("close", () => tunnels.delete(s));
  }
  upstream.on("error", () => client.destroy());
  client.on("error", () => upstream.destroy());
});

const tlsBackend: Server = createServer(
  { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") },
  (req, res) => {
    served.push(`tls ${req.url}`);
    res.end(`through ${(req.socket as TLSSocket).getProtocol()}`);
  },
);
const plainBackend = createHttpServer((req, res) => {
  served.push(`plain ${req.url}`);
  res.end("plain");
});

function resources(proxyPort: number, tlsPort: number, plainPort: number): string {
  const backend = (name: string, port: number, policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  static: { host: 127.0.0.1, port: ${port} }
  policies:
${indentLines(policies.trim(), 4)}
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  const tls = "tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }";
  return `${localService("egress", proxyPort)}---
apiVersion: v1
kind: Service
metadata: { name: idle, namespace: default }
spec: { ports: [{ name: p, port: 80 }] }
${caConfigMapYaml()}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: proxy, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${proxyPort} } }
${backend("viaservice", tlsPort, `${tls}\ntunnel: { backendRef: { name: egress, port: 80 } }`)}${backend(
  "viabackend",
  tlsPort,
  `${tls}\ntunnel: { backendRef: { group: sluice.dev, kind: GwBackend, name: proxy } }`,
)}${backend("plain", plainPort, "tunnel: { backendRef: { name: egress, port: 80 } }")}${backend(
  "noproxy",
  tlsPort,
  `${tls}\ntunnel: { backendRef: { name: idle, port: 80 } }`,
)}${backend("direct", tlsPort, tls)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${["viaservice", "viabackend", "plain", "noproxy", "direct"].map(rule).join("")}
`;
}

describe("backend.tunnel: TLS to the backend through an HTTP CONNECT proxy", { timeout: 60_000 }, () => {
  let gw: TestGateway;
  let tlsPort = 0;

  before(async () => {
    const proxyPort = await listen(proxy);
    tlsPort = await listen(tlsBackend);
    const plainPort = await listen(plainBackend);
    gw = await startTestGateway(
      () => resources(proxyPort, tlsPort, plainPort),
      "/direct",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const s of tunnels) s.destroy();
    proxy.close();
    tlsBackend.close();
    plainBackend.close();
  });

  test("a proxy Service: Envoy asks it for the backend, and the TLS request goes through the tunnel", async () => {
    connects.length = 0;
    served.length = 0;
    const r = await request(gw.port, "/viaservice/a");
    assert.equal(r.status, 200, r.body);
    assert.match(r.body, /^through TLSv1\.[23]$/);
    assert.deepEqual(connects, [`127.0.0.1:${tlsPort}`]);
    assert.deepEqual(served, ["tls /viaservice/a"]);
  });

  test("a static GwBackend proxy: the same, and tunnels are kept for later requests", async () => {
    connects.length = 0;
    for (let i = 0; i < 6; i++) {
      const r = await request(gw.port, `/viabackend/${i}`);
      assert.equal(r.status, 200, r.body);
    }
    // One tunnel per connection of Envoy's pools: at most one per worker (the test Envoy runs two), not one per request.
    assert.ok(connects.length >= 1 && connects.length <= 2, JSON.stringify(connects));
    for (const c of connects) assert.equal(c, `127.0.0.1:${tlsPort}`);
  });

  test("without a tunnel the proxy is not asked", async () => {
    connects.length = 0;
    assert.equal((await request(gw.port, "/direct")).status, 200);
    assert.deepEqual(connects, []);
  });

  test("a plaintext backend, or a proxy Service without endpoints: 503, never reached around the proxy", async () => {
    connects.length = 0;
    served.length = 0;
    for (const path of ["/plain", "/noproxy"]) {
      const r = await request(gw.port, path);
      assert.equal(r.status, 503, path);
      assert.equal(r.body, "backend credentials, TLS or tunnel settings are not available");
    }
    assert.deepEqual(connects, []);
    assert.deepEqual(served, []);
  });

  test("the GwBackend's status says why its tunnel is not used", async () => {
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const warning = (name: string) =>
      JSON.stringify(resources.find((r) => r.kind === "GwBackend" && r.name === name)?.status ?? {});
    assert.match(warning("plain"), /spec\.policies\.tunnel: Envoy opens a CONNECT tunnel only around TLS/);
    assert.match(warning("noproxy"), /spec\.policies\.tunnel: backendRef: Service default\/idle has no ready endpoint/);
    assert.doesNotMatch(warning("viaservice"), /Warning/);
  });

  test("a client's CONNECT to the gateway (no frontend.connect) is 405 with Allow, and opens no tunnel", async () => {
    connects.length = 0;
    const answer = await new Promise<string>((resolve, reject) => {
      const s = connect(gw.port, "127.0.0.1");
      let text = "";
      s.on("data", (d: Buffer) => (text += d.toString("latin1")));
      s.on("end", () => resolve(text));
      s.on("error", reject);
      s.write(`CONNECT 127.0.0.1:${tlsPort} HTTP/1.1\r\nhost: 127.0.0.1:${tlsPort}\r\n\r\n`);
    });
    assert.match(answer, /^HTTP\/1\.1 405 /);
    assert.match(answer, /\r\nallow: GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, PATCH\r\n/);
    assert.deepEqual(connects, []);
    assert.deepEqual(
      served.filter((x) => !x.startsWith("tls /")),
      [],
    );
  });
});
