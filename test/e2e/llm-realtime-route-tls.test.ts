// A route-level GwPolicy's backend.tls on a Realtime route Sluice's relay serves (a prompt guard), through a real
// Envoy: Node's WebSocket client → Envoy → the relay, which dials the providers of the route's variant of the AI
// cluster (its relay route names it) → a fake Realtime provider that speaks TLS only (a private CA, the example.com
// fixture). HTTPRoute `secure`'s GwPolicy gives the CA (a ConfigMap) and SNI example.com: its session opens over TLS,
// guarded; HTTPRoute `plain`, to the same GwBackend without a policy, dials in cleartext and the session does not open.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, realtimeBackendYaml, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { gwBackendRoute, routeBackendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime, userTextEvent } from "../helpers/realtime-client.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

const CARD = "4111 1111 1111 1111";

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
        realtimeBackendYaml(provider, {
          ai: "      promptGuard:\n        request: [{ regex: { builtins: [CreditCard] } }]\n",
        }),
        gwBackendRoute("secure", "realtime", { rewrite: "/v1" }),
        gwBackendRoute("plain", "realtime", { rewrite: "/v1" }),
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
    ws.send(userTextEvent(`card ${CARD}`));
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
