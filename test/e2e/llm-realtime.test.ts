// The Realtime route type end to end through a real Envoy: Node's own WebSocket client (as OpenAI's SDK opens it,
// with the `realtime` and `openai-insecure-api-key.<key>` subprotocols) is upgraded through Envoy to a fake Realtime
// provider, with the provider's key in place of the client's; events flow both ways. A route whose AI policy has no
// Realtime route type refuses the upgrade.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

function resources(rt: FakeRealtime, chat: FakeProvider): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: openai, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: realtime, providerA: {}, host: 127.0.0.1, port: ${rt.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes:
        /v1/realtime: Realtime
        /v1/chat/completions: Completions
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: no-realtime, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${chat.port} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
    - matches: [{ path: { type: PathPrefix, value: /plain } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: no-realtime }]
`;
}

/** The next message of a websocket, parsed. */
function nextEvent(ws: WebSocket): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const onMessage = (e: MessageEvent) => {
      cleanup();
      resolve(JSON.parse(String(e.data)) as Record<string, unknown>);
    };
    const onClose = () => {
      cleanup();
      reject(new Error("closed"));
    };
    const cleanup = () => {
      ws.removeEventListener("message", onMessage);
      ws.removeEventListener("close", onClose);
    };
    ws.addEventListener("message", onMessage);
    ws.addEventListener("close", onClose);
  });
}

describe("Realtime (websocket) through Envoy", { timeout: 60_000 }, () => {
  let rt: FakeRealtime;
  let chat: FakeProvider;
  let env: LlmEnv;

  before(async () => {
    rt = await startFakeRealtime({ name: "realtime", apiKey: "sk-provider" });
    chat = await startFakeProvider({ name: "chat" });
    env = await startLlmEnv(resources(rt, chat), "/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await rt?.close();
    await chat?.close();
  });

  test("the websocket is upgraded to the provider with its key, and events flow both ways", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${env.port}/v1/realtime?model=gpt-realtime`, [
      "realtime",
      "openai-insecure-api-key.client-key",
    ]);
    const created = nextEvent(ws);
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve());
      ws.addEventListener("error", () => reject(new Error("websocket failed to open")));
    });
    assert.equal(ws.protocol, "realtime");
    const session = await created;
    assert.equal(session.type, "session.created");
    assert.equal((session.session as { model?: string }).model, "gpt-realtime");
    for (const text of ["first", "second"]) {
      const done = nextEvent(ws);
      ws.send(
        JSON.stringify({
          type: "conversation.item.create",
          item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
        }),
      );
      ws.send(JSON.stringify({ type: "response.create" }));
      const ev = await done;
      assert.equal(ev.type, "response.done");
    }
    assert.deepEqual(
      rt.events.map((e) => e.type),
      ["conversation.item.create", "response.create", "conversation.item.create", "response.create"],
    );
    const closed = new Promise<number>((r) => ws.addEventListener("close", (e) => r(e.code)));
    ws.close(1000, "bye");
    assert.equal(await closed, 1000);
    const h = rt.handshakes.at(-1);
    assert.equal(h?.path, "/v1/realtime?model=gpt-realtime");
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    assert.equal(h?.headers["sec-websocket-protocol"], "realtime", "the client's key is not passed on");
  });

  test("a chat request on the same route is still translated as usual", async () => {
    // The Realtime provider answers plain HTTP with 426: the chat request reached it through the LLM stages.
    const c = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
    await assert.rejects(
      c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 426 && /websocket upgrade required/.test(e.message),
    );
  });

  test("a route without the Realtime route type refuses the upgrade", async () => {
    const calls = chat.requests.length;
    const ws = new WebSocket(`ws://127.0.0.1:${env.port}/plain/v1/realtime?model=gpt-realtime`, ["realtime"]);
    const outcome = await new Promise<string>((resolve) => {
      ws.addEventListener("open", () => resolve("open"));
      ws.addEventListener("error", () => resolve("error"));
    });
    assert.equal(outcome, "error");
    assert.equal(chat.requests.length, calls);
  });
});
