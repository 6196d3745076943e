// Realtime sessions fail over across providers through a real Envoy: Node's WebSocket client → Envoy → Sluice's
// Realtime relay → a GwBackend of two priority groups, the first provider refusing the upgrade 503 (or its port closed),
// the second a fake Realtime provider. The session opens on the second and the client never sees the failure; each
// provider gets its own credentials, and the first's prompt guard (a Mask of card numbers) does not follow the session
// to the second. A first provider answering 401 is not failed over: the client gets the 401, the second is not called.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { gwBackendRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, request, waitFor } from "../helpers/net.js";
import { openRealtime, refusedUpgrade, userTextEvent } from "../helpers/realtime-client.js";

const CARD = "4111 1111 1111 1111";

/** GwBackend `name`: `first` (its own key and a masking guard) in the first priority group, `second` in the next. */
function twoGroups(name: string, first: { port: number; key: string }, second: FakeRealtime, health = ""): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: first
            providerA: {}
            host: 127.0.0.1
            port: ${first.port}
            policies:
              auth: { key: ${first.key} }
              ai:
                promptGuard:
                  request: [{ regex: { builtins: [CreditCard] } }]
      - providers:
          - { name: second, providerA: {}, host: 127.0.0.1, port: ${second.port}, policies: { auth: { key: sk-second } } }
  policies:${health}
    ai:
      routes: { /v1/realtime: Realtime, /v1/chat/completions: Completions }
${gwBackendRoute(name, name, { rewrite: "/v1" })}`;
}

describe("Realtime sessions fail over across providers", { timeout: 120_000 }, () => {
  let down: FakeRealtime;
  let second: FakeRealtime;
  let env: LlmEnv;

  before(async () => {
    down = await startFakeRealtime({ name: "down", apiKey: "sk-first", refuse: "503 Service Unavailable" });
    second = await startFakeRealtime({ name: "second", apiKey: "sk-second" });
    const closed = await freePort();
    env = await startLlmEnv(
      twoGroups("refusing", { port: down.port, key: "sk-first" }, second) +
        twoGroups("closed", { port: closed, key: "sk-first" }, second) +
        // The first provider is the second's own server, with a key it refuses (401).
        twoGroups("unauthorized", { port: second.port, key: "sk-wrong" }, second) +
        // Sluice scores the providers (an unhealthyCondition): a 5xx evicts for a minute.
        twoGroups(
          "scored",
          { port: down.port, key: "sk-first" },
          second,
          "\n    health: { unhealthyCondition: 'response.code >= 500', eviction: { duration: 60s } }",
        ),
      "/refusing/v1/realtime",
    );
  });
  after(async () => {
    await env?.stop();
    for (const s of [down, second]) await s?.close();
  });

  for (const [route, what] of [
    ["refusing", "refuses the upgrade 503"],
    ["closed", "has its port closed"],
  ] as const) {
    test(`the first provider ${what}: the session opens on the second, with the second's key and guards`, async () => {
      const refused = down.handshakes.length;
      const opened = second.handshakes.length;
      const { ws, next } = await openRealtime(env.port, `/${route}/v1/realtime`, "client-key");
      const first = await next();
      assert.equal(first.type, "session.created");
      assert.equal((first.session as { model?: string } | undefined)?.model, "gpt-realtime");
      if (route === "refusing") {
        assert.equal(down.handshakes.length, refused + 1);
        assert.equal(down.handshakes.at(-1)?.headers.authorization, "Bearer sk-first");
      }
      assert.equal(second.handshakes.length, opened + 1);
      const h = second.handshakes.at(-1);
      assert.equal(h?.headers.authorization, "Bearer sk-second");
      assert.doesNotMatch(JSON.stringify(h?.headers), /sk-first|client-key/);
      // The first provider's Mask is not the second's: the card number reaches the second as the client wrote it.
      const events = second.events.length;
      ws.send(userTextEvent(`my card is ${CARD}`));
      await waitForEvents(second, events + 1);
      ws.close();
      assert.match(JSON.stringify(second.events.at(-1)), new RegExp(CARD));
    });
  }

  test("a provider Sluice's health scoring evicted is tried last: the session opens on the second at once", async () => {
    // A chat completion the first provider answers 503 evicts it (the health ext_proc; EDS marks it unhealthy).
    await request(env.port, "/scored/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }),
    });
    await waitFor("the first provider evicted", async () => {
      const clusters = (await request(env.envoy.adminPort, "/clusters")).body;
      const line = clusters
        .split("\n")
        .find((l) => l.startsWith(`backend/default/scored::127.0.0.1:${down.port}::health_flags::`));
      return line !== undefined && /failed_eds_health/.test(line) ? true : undefined;
    });
    const refused = down.handshakes.length;
    const { ws, next } = await openRealtime(env.port, "/scored/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    ws.close();
    assert.equal(down.handshakes.length, refused, "the evicted provider is not dialled");
    assert.equal(second.handshakes.at(-1)?.headers.authorization, "Bearer sk-second");
  });

  test("a refusal that is not a provider failure (401) is the client's answer; the next provider is not tried", async () => {
    const handshakes = second.handshakes.length;
    const r = await refusedUpgrade(env.port, "/unauthorized/v1/realtime?model=gpt-realtime");
    assert.equal(r.status, 401);
    assert.match(r.body, /Incorrect API key/);
    assert.equal(second.handshakes.length, handshakes + 1);
    assert.equal(second.handshakes.at(-1)?.headers.authorization, "Bearer sk-wrong");
  });
});
