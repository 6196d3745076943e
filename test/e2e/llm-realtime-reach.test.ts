// Guarded Realtime sessions to providers Envoy reaches another way than a host, through a real Envoy: Node's WebSocket
// client → Envoy → Sluice's Realtime relay, which opens the provider's websocket itself, as the AI cluster would reach
// it:
// - a `custom` provider whose backendRef is a Service: its ready endpoints in turn (an endpoint not ready is never
//   dialled; a Service with none answers 503);
// - a provider with a `tunnel` policy: an HTTP CONNECT proxy (a Service) is asked for the provider's host and the TLS
//   handshake (the provider's CA and SNI) goes through the tunnel; the proxy refusing answers 502.
// The prompt guard masks what the client sends in each case.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime, refusedUpgrade, userTextEvent } from "../helpers/realtime-client.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

const CARD = "4111 1111 1111 1111";

/** An HTTP CONNECT proxy: the targets it was asked for, in order; `refuse` answers 403 instead. */
function startProxy(): Promise<{ port: number; connects: string[]; refuse: boolean; close(): void }> {
  const connects: string[] = [];
  const sockets = new Set<Socket>();
  const state = { refuse: false };
  const server = createServer((_req, res) => res.writeHead(405).end());
  server.on("connect", (req, client: Socket, head: Buffer) => {
    connects.push(req.url ?? "");
    if (state.refuse) {
      client.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n");
      return;
    }
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
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        port: (server.address() as AddressInfo).port,
        connects,
        get refuse() {
          return state.refuse;
        },
        set refuse(v: boolean) {
          state.refuse = v;
        },
        close() {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    ),
  );
}

const guard = `      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]`;

function resources(a: FakeRealtime, b: FakeRealtime, down: FakeRealtime, secure: FakeRealtime, proxy: number): string {
  const slice = (name: string, service: string, port: number, ready: boolean) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}, namespace: default, labels: { kubernetes.io/service-name: ${service} } }
addressType: IPv4
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1], conditions: { ready: ${ready} } }]
`;
  const custom = (name: string, service: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      custom: { backendRef: { name: ${service}, port: 80 }, formats: [{ type: Completions }] }
  policies:
    auth: { key: sk-provider }
    ai:
${guard}
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `${localService("egress", proxy)}---
apiVersion: v1
kind: Service
metadata: { name: inference, namespace: default }
spec: { ports: [{ name: http, port: 80 }] }
${slice("inference-a", "inference", a.port, true)}${slice("inference-b", "inference", b.port, true)}${slice(
  "inference-down",
  "inference",
  down.port,
  false,
)}---
apiVersion: v1
kind: Service
metadata: { name: idle, namespace: default }
spec: { ports: [{ name: http, port: 80 }] }
${slice("idle-a", "idle", down.port, false)}${custom("selfhosted", "inference")}${custom("nowhere", "idle")}${caConfigMapYaml()}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: tunnelled, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${secure.port} }
  policies:
    auth: { key: sk-provider }
    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }
    tunnel: { backendRef: { name: egress, port: 80 } }
    ai:
${guard}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${["selfhosted", "nowhere", "tunnelled"].map(rule).join("")}
`;
}

describe("guarded Realtime sessions to a Service's endpoints and through a tunnel", { timeout: 60_000 }, () => {
  let a: FakeRealtime;
  let b: FakeRealtime;
  let down: FakeRealtime;
  let secure: FakeRealtime;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let env: LlmEnv;

  before(async () => {
    a = await startFakeRealtime({ name: "a", apiKey: "sk-provider" });
    b = await startFakeRealtime({ name: "b", apiKey: "sk-provider" });
    down = await startFakeRealtime({ name: "down", apiKey: "sk-provider" });
    secure = await startFakeRealtime({
      name: "secure",
      apiKey: "sk-provider",
      tls: { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") },
    });
    proxy = await startProxy();
    env = await startLlmEnv(resources(a, b, down, secure, proxy.port), "/selfhosted/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    proxy?.close();
    for (const s of [a, b, down, secure]) await s?.close();
  });

  test("a custom provider's Service: sessions go to its ready endpoints in turn, guarded", async () => {
    const before = a.handshakes.length + b.handshakes.length;
    for (let i = 0; i < 4; i++) {
      const { ws, next } = await openRealtime(env.port, "/selfhosted/v1/realtime", "client-key");
      assert.equal((await next()).type, "session.created");
      ws.send(userTextEvent(`card ${CARD}`));
      ws.close();
    }
    assert.equal(a.handshakes.length + b.handshakes.length, before + 4);
    assert.ok(a.handshakes.length >= 2 && b.handshakes.length >= 2, `${a.handshakes.length} / ${b.handshakes.length}`);
    assert.equal(down.handshakes.length, 0, "an endpoint that is not ready is never dialled");
    const h = a.handshakes.at(-1);
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    assert.equal(h?.headers.host, "inference.default.svc.cluster.local");
    await waitForEvents(a, 1);
    await waitForEvents(b, 1);
    const seen = JSON.stringify([...a.events, ...b.events]);
    assert.match(seen, /card <CREDIT_CARD>/);
    assert.doesNotMatch(seen, /4111/);
  });

  test("a Service without a ready endpoint answers 503, nothing dialled", async () => {
    const r = await refusedUpgrade(env.port, "/nowhere/v1/realtime?model=gpt-realtime");
    assert.equal(r.status, 503);
    assert.equal(down.handshakes.length, 0);
  });

  test("a tunnel: the proxy is asked for the provider, TLS inside it with the provider's CA and SNI", async () => {
    const { ws, next } = await openRealtime(env.port, "/tunnelled/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    ws.send(userTextEvent(`card ${CARD}`));
    await waitForEvents(secure, 1);
    ws.close();
    assert.deepEqual(proxy.connects, [`127.0.0.1:${secure.port}`]);
    const h = secure.handshakes.at(-1);
    assert.equal(h?.secure, true);
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    assert.match(JSON.stringify(secure.events.at(-1)), /card <CREDIT_CARD>/);
  });

  test("a proxy refusing the tunnel answers 502; the provider is never reached around it", async () => {
    proxy.refuse = true;
    try {
      const handshakes = secure.handshakes.length;
      const r = await refusedUpgrade(env.port, "/tunnelled/v1/realtime?model=gpt-realtime");
      assert.equal(r.status, 502);
      assert.match(r.body, /provider default unreachable/);
      assert.equal(secure.handshakes.length, handshakes);
      assert.equal(proxy.connects.at(-1), `127.0.0.1:${secure.port}`);
    } finally {
      proxy.refuse = false;
    }
  });
});
