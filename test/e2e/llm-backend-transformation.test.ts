// `backend.transformation` on AI backends through a real Envoy, with the official `openai` SDK: Sluice's transformation
// ext_proc runs in the AI cluster's upstream filters after the LLM one (xds/llm-transformation.ts), so it sees and
// changes the provider's request as written for the provider of each attempt (its path, its format), and the provider's
// response before the LLM ext_proc translates it back. A failover to a provider of another format is transformed again;
// a route served in one stage (one provider) gets it too; a GwPolicy targeting the GwBackend is served like the
// GwBackend's own; an expression that does not compile is refused naming its path.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const TRANSFORMATION = `
      request:
        set:
          - { name: x-team, value: "'blue ' + request.path" }
        remove: [x-drop-me]
        body: "request.body.replace('{', '{\\"metadata\\":{\\"user_id\\":\\"from-transformation\\"},', 1)"
      response:
        set:
          - { name: x-provider-format, value: "response.body.contains('\\"stop_reason\\"') ? 'messages' : 'chat'" }
          - { name: x-provider-code, value: "string(response.code)" }
        body: "response.body.replace('Hello', 'Greetings')"`;

function resources(primary: number, backup: number, single: number, live: number): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: live, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${live} }
  policies:
    auth: { key: sk-live }
    ai:
      routes: { /v1/realtime: Realtime }
    transformation:
      request:
        set: [{ name: x-live, value: "'upgrade ' + request.method" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: live-body, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${live} }
  policies:
    auth: { key: sk-live }
    ai:
      routes: { /v1/realtime: Realtime }
    transformation:
      request:
        set: [{ name: x-live, value: "'with a body'" }]
        body: "request.body"
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: groups, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: 127.0.0.1, port: ${primary} }
      - providers:
          - { name: backup, providerD: { model: claude-backup }, host: 127.0.0.1, port: ${backup} }
  policies:
    health: { eviction: { duration: 1s } }
    transformation:${TRANSFORMATION}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: single, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${single} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: single-transform, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: single }]
  backend:
    transformation:
      request:
        set: [{ name: x-by-policy, value: "'policy ' + request.headers['x-client']" }]
      response:
        set: [{ name: x-by-policy, value: "'answered ' + string(response.code)" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: bad-transform, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: single }]
  backend:
    transformation:
      request:
        set: [{ name: x-bad, value: "request.headers[" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: broken, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${single} }
  policies:
    transformation:
      response:
        set: [{ name: x-broken, value: "response.code +" }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /live/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: live }]
    - matches: [{ path: { type: PathPrefix, value: /live-body/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: live-body }]
    - matches: [{ path: { type: PathPrefix, value: /single } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: single }]
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: groups }]
`;
}

describe("backend.transformation on AI backends", { timeout: 90_000 }, () => {
  let primary: FakeProvider;
  let backup: FakeProvider;
  let single: FakeProvider;
  let live: FakeRealtime;
  let env: LlmEnv;
  let client: OpenAI;
  const ask = (c: OpenAI, text: string) =>
    c.chat.completions
      .create(
        { model: "gpt-4o", messages: [{ role: "user", content: text }], max_tokens: 20 },
        { headers: { "x-drop-me": "secret", "x-client": "c1" } },
      )
      .withResponse();

  before(async () => {
    primary = await startFakeProvider({ name: "primary" });
    backup = await startFakeProvider({ name: "backup" });
    single = await startFakeProvider({ name: "single" });
    live = await startFakeRealtime({ name: "live", apiKey: "sk-live" });
    env = await startLlmEnv(resources(primary.port, backup.port, single.port, live.port));
    client = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await env?.stop();
    await primary?.close();
    await backup?.close();
    await single?.close();
    await live?.close();
  });

  test("the provider gets the transformed request in its own format; the client gets the transformed answer", async () => {
    const { data, response } = await ask(client, "one");
    const seen = primary.requests.at(-1);
    assert.equal(seen?.path, "/v1/chat/completions");
    // The request as the LLM stage wrote it for the provider: its path, its body, then changed.
    assert.equal(seen?.headers["x-team"], "blue /v1/chat/completions");
    assert.equal(seen?.headers["x-drop-me"], undefined);
    assert.deepEqual(seen?.json?.metadata, { user_id: "from-transformation" });
    assert.equal(seen?.json?.model, "gpt-4o");
    assert.equal(seen?.headers["content-length"], String(Buffer.byteLength(seen?.body ?? "")));
    // The provider's response, changed before the LLM ext_proc read it.
    assert.equal(data.choices[0]?.message.content, "Greetings from primary: one");
    assert.equal(response.headers.get("x-provider-format"), "chat");
    assert.equal(response.headers.get("x-provider-code"), "200");
  });

  test("a failover to a provider of another format is transformed for that provider", async () => {
    primary.failWith = 503;
    try {
      const before = backup.requests.length;
      const { data, response } = await ask(client, "two");
      assert.equal(backup.requests.length, before + 1);
      const seen = backup.requests.at(-1);
      // Anthropic's Messages request, written by the LLM stage for the backup, then transformed.
      assert.equal(seen?.path, "/v1/messages");
      assert.equal(seen?.headers["x-team"], "blue /v1/messages");
      assert.equal(seen?.json?.model, "claude-backup");
      assert.deepEqual(seen?.json?.metadata, { user_id: "from-transformation" });
      assert.equal(seen?.headers["x-drop-me"], undefined);
      // The failed attempt was transformed too (one request each way per attempt).
      assert.equal(primary.requests.at(-1)?.headers["x-team"], "blue /v1/chat/completions");
      // The client: an OpenAI answer translated from the transformed Messages response.
      assert.equal(data.object, "chat.completion");
      assert.equal(data.choices[0]?.message.content, "Greetings from backup: two");
      assert.equal(response.headers.get("x-provider-format"), "messages");
      assert.equal(response.headers.get("x-provider-code"), "200");
    } finally {
      primary.failWith = undefined;
    }
  });

  test("a streamed answer is transformed (buffered by the transformation) and still streams to the SDK", async () => {
    // The primary may still be evicted from the test before: whichever answers, its text is transformed.
    const { data: stream, response } = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "three" }], max_tokens: 20, stream: true })
      .withResponse();
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      chunks++;
    }
    assert.match(text, /^Greetings from (primary|backup): three$/);
    assert.ok(chunks > 2, `the answer came as chunks (${chunks})`);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    assert.equal(response.headers.get("x-provider-code"), "200");
  });

  test("a GwPolicy targeting the GwBackend, on a route served in one stage", async () => {
    const c = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/single/v1`, maxRetries: 0 });
    const { data, response } = await ask(c, "four");
    assert.equal(data.choices[0]?.message.content, "Hello from single: four");
    const seen = single.requests.at(-1);
    assert.equal(seen?.headers["x-by-policy"], "policy c1");
    assert.equal(seen?.headers["x-bad"], undefined);
    assert.equal(response.headers.get("x-by-policy"), "answered 200");
  });

  const session = async (prefix: string) => {
    const ws = new WebSocket(`ws://127.0.0.1:${env.port}${prefix}/v1/realtime?model=gpt-realtime`, ["realtime"]);
    const first = await new Promise<Record<string, unknown>>((resolve, reject) => {
      ws.addEventListener("message", (m) => resolve(JSON.parse(String(m.data)) as Record<string, unknown>), {
        once: true,
      });
      ws.addEventListener("error", () => reject(new Error("websocket failed")));
    });
    assert.equal(first.type, "session.created");
    ws.send(JSON.stringify({ type: "response.create", event_id: "e1" }));
    const done = await new Promise<Record<string, unknown>>((resolve) =>
      ws.addEventListener("message", (m) => resolve(JSON.parse(String(m.data)) as Record<string, unknown>), {
        once: true,
      }),
    );
    assert.equal(done.type, "response.done");
    ws.close();
  };

  test("a Realtime websocket Envoy passes through: the upgrade is transformed, the session's frames flow", async () => {
    await session("/live");
    assert.equal(live.handshakes.at(-1)?.headers["x-live"], "upgrade GET");
  });

  test("on a Realtime backend, a transformation that buffers a body is not applied (reported): sessions work", async () => {
    await session("/live-body");
    assert.equal(live.handshakes.at(-1)?.headers["x-live"], undefined);
  });

  test("status: the expression that does not compile is refused naming its path; the others are served", async () => {
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (kind: string, name: string) =>
      JSON.stringify(resources.find((r) => r.kind === kind && r.name === name)?.status ?? {});
    assert.match(
      status("GwPolicy", "bad-transform"),
      /spec\.backend\.transformation\.request\.set\[0\]\.value: invalid CEL/,
    );
    assert.doesNotMatch(status("GwPolicy", "single-transform"), /Warning|not applied/);
    assert.match(
      status("GwBackend", "broken"),
      /spec\.policies\.transformation\.response\.set\[0\]\.value: invalid CEL/,
    );
    assert.doesNotMatch(status("GwBackend", "groups"), /transformation/);
    assert.match(
      status("GwBackend", "live-body"),
      /spec\.policies\.transformation: not applied: it reads or writes a body/,
    );
    assert.doesNotMatch(status("GwBackend", "live"), /transformation/);
  });
});
