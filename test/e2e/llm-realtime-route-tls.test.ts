// A route-level GwPolicy's backend.tls on a Realtime route Sluice's relay serves (a prompt guard), through a real
// Envoy: Node's WebSocket client → Envoy → the relay, which dials the providers of the route's variant of the AI
// cluster (its relay route names it) → a fake Realtime provider that speaks TLS only (a private CA, the example.com
// fixture). HTTPRoute `secure`'s GwPolicy gives the CA (a ConfigMap) and SNI example.com: its session opens over TLS,
// guarded; HTTPRoute `plain`, to the same GwBackend without a policy, dials in cleartext and the session does not open.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { routeBackendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime } from "../helpers/realtime-client.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

const CARD = "4111 1111 1111 1111";

function route(name: string): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: realtime }]
`;
}

const userText = (text: string) =>
  JSON.stringify({
    type: "conversation.item.create",
    event_id: "evt_client_1",
    item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  });

describe("a route-level backend.tls on a Realtime route the relay serves", { timeout: 60_000 }, () => {
  let provider: FakeRealtime;
  let env: LlmEnv;

  before(async () => {
    provider = await startFakeRealtime({
      name: "secure",
      apiKey: "sk-provider",
      tls: { cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") },
    });
    env = await startLlmEnv(
      [
        caConfigMapYaml(),
        `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: realtime, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${provider.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`,
        route("secure"),
        route("plain"),
        routeBackendPolicy(
          "secure-tls",
          "secure",
          "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n",
        ),
      ].join(""),
      "/secure/v1/realtime",
    );
  });
  after(async () => {
    await env?.stop();
    await provider?.close();
  });

  test("the route with the policy: the relay's session to the provider is TLS with its CA and SNI, guarded", async () => {
    const { ws, next } = await openRealtime(env.port, "/secure/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    ws.send(userText(`card ${CARD}`));
    await waitForEvents(provider, 1);
    ws.close();
    const h = provider.handshakes.at(-1);
    assert.equal(h?.secure, true);
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    // The relay served it: the guard masked the card number.
    const seen = JSON.stringify(provider.events);
    assert.match(seen, /card <CREDIT_CARD>/);
    assert.doesNotMatch(seen, /4111/);
  });

  test("the route without it dials in cleartext: the TLS-only provider's handshake fails, no session", async () => {
    const before = provider.handshakes.length;
    await assert.rejects(openRealtime(env.port, "/plain/v1/realtime", "client-key"), /failed to open/);
    assert.equal(provider.handshakes.length, before);
  });
});
