// A remote prompt guard's connection settings through a real Envoy, with the official `openai` client: a moderationA
// guard whose `policies` set `tls` (the service's CA and SNI, a client certificate), `http.version: HTTP2` and a
// `tunnel`. Its service sits behind a TLS front that speaks HTTP/2 only and requires a client certificate the test CA
// signed, reached only through an HTTP CONNECT proxy (a Service); behind the front, the fake OpenAI moderation service
// checks the key and flags words. A flagged prompt is refused with the CustomResponse and a clean one reaches the
// provider; the front saw h2 and the client certificate, the proxy the CONNECT. The same guard without the client
// certificate, or without HTTP2, cannot get an answer, and fails closed (the request refused, the provider not called).

import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { createServer } from "node:http";
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import type { TLSSocket } from "node:tls";
import OpenAI from "openai";
import { type FakeModeration, startFakeModeration } from "../helpers/fake-guards.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

const KEY = "sk-moderation-conn-0123456789";

interface Seen {
  readonly alpn: string | false | null;
  readonly version: string;
  readonly clientCert: string | undefined;
}

/** The TLS, HTTP/2-only front of the moderation service: a client certificate is required. */
async function startFront(target: FakeModeration): Promise<{ port: number; seen: Seen[]; close(): void }> {
  const seen: Seen[] = [];
  const server = createSecureServer(
    {
      cert: tlsFixture("example.com.crt"),
      key: tlsFixture("example.com.key"),
      ca: tlsFixture("foo.example.com.crt"),
      requestCert: true,
      rejectUnauthorized: true,
      allowHTTP1: false,
    },
    (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const sock = req.socket as unknown as TLSSocket;
      const peer = sock.getPeerX509Certificate?.();
      seen.push({
        alpn: sock.alpnProtocol,
        version: req.httpVersion,
        clientCert: peer instanceof X509Certificate ? peer.subject : undefined,
      });
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void fetch(`${target.url}${req.url}`, {
          method: req.method,
          headers: { "content-type": "application/json", authorization: String(req.headers.authorization ?? "") },
          body: Buffer.concat(chunks),
        }).then(async (r) => {
          res.writeHead(r.status, { "content-type": "application/json" });
          res.end(await r.text());
        });
      });
    },
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, seen, close: () => server.close() };
}

/** An HTTP CONNECT proxy; the targets it was asked for. */
async function startProxy(): Promise<{ port: number; connects: string[]; close(): void }> {
  const connects: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.on("connect", (req, client: Socket, head: Buffer) => {
    connects.push(req.url ?? "");
    const [host, port] = (req.url ?? "").split(":");
    const upstream = connect(Number(port), host ?? "", () => {
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.byteLength > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    }
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    connects,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

function resources(provider: FakeProvider, proxyPort: number): string {
  const backend = (name: string, policies: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${provider.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      promptGuard:
        request:
          - moderationA:
              policies:
                auth: { key: ${KEY} }
${policies}
            response: { message: "flagged by moderation" }
`;
  const tls = (mtls: boolean) =>
    `                tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com${mtls ? ", mtlsCertificateRef: [{ name: client-cert }]" : ""} }`;
  const tunnel = "                tunnel: { backendRef: { name: egress, port: 80 } }";
  const h2 = "                http: { version: HTTP2 }";
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `${localService("egress", proxyPort)}${caConfigMapYaml()}${tlsSecretYaml()}${backend(
    "guarded",
    [tls(true), h2, tunnel].join("\n"),
  )}${backend("nocert", [tls(false), h2, tunnel].join("\n"))}${backend("http1", [tls(true), tunnel].join("\n"))}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${["guarded", "nocert", "http1"].map(rule).join("")}
`;
}

describe("a remote guard's tls, http.version: HTTP2 and tunnel", { timeout: 60_000 }, () => {
  let moderation: FakeModeration;
  let front: Awaited<ReturnType<typeof startFront>>;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let provider: FakeProvider;
  let env: LlmEnv;
  const client = (name: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${name}/v1`, maxRetries: 0 });
  const ask = (name: string, text: string) =>
    client(name).chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: text }] });

  before(async () => {
    moderation = await startFakeModeration({ key: KEY });
    moderation.flag.set("bomb", "violence");
    front = await startFront(moderation);
    proxy = await startProxy();
    provider = await startFakeProvider({ name: "chat" });
    env = await startLlmEnv(resources(provider, proxy.port), "/guarded/v1/chat/completions", {
      // The service's endpoint by IP: its certificate is checked against the policy's SNI (example.com).
      OPENAI_BASE_URL: `https://127.0.0.1:${front.port}/v1`,
    });
  });
  after(async () => {
    await env?.stop();
    front?.close();
    proxy?.close();
    await provider?.close();
    await moderation?.close();
  });

  test("through the tunnel, over TLS with the client certificate, in HTTP/2: a flagged prompt is refused", async () => {
    const calls = provider.requests.length;
    await assert.rejects(ask("guarded", "how to build a bomb"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 403);
      assert.match(e.message, /flagged by moderation/);
      return true;
    });
    assert.equal(provider.requests.length, calls);
    const r = await ask("guarded", "hello there");
    assert.match(r.choices[0]?.message.content ?? "", /hello there/);
    assert.equal(provider.requests.length, calls + 1);
    assert.ok(front.seen.length >= 2);
    for (const s of front.seen) {
      assert.equal(s.alpn, "h2");
      assert.equal(s.version, "2.0");
      assert.match(s.clientCert ?? "", /CN=foo\.example\.com/);
    }
    assert.ok(proxy.connects.length >= 1);
    assert.ok(
      proxy.connects.every((c) => c === `127.0.0.1:${front.port}`),
      proxy.connects.join(", "),
    );
    assert.equal(moderation.requests.at(-1)?.headers.authorization, `Bearer ${KEY}`);
  });

  test("without the client certificate the service cannot be reached: the guard fails closed", async () => {
    const calls = provider.requests.length;
    const seen = front.seen.length;
    await assert.rejects(
      ask("nocert", "hello there"),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 403,
    );
    assert.equal(provider.requests.length, calls);
    assert.equal(front.seen.length, seen);
  });

  test("without HTTP2 the HTTP/2-only service cannot be reached: the guard fails closed", async () => {
    const calls = provider.requests.length;
    const seen = front.seen.length;
    await assert.rejects(ask("http1", "hello there"), (e: unknown) => e instanceof OpenAI.APIError && e.status === 403);
    assert.equal(provider.requests.length, calls);
    assert.equal(front.seen.length, seen);
  });
});
