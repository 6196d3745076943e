// Priority groups through a real Envoy: when the first group's provider answers 5xx or refuses connections, the
// request is retried on the next group's provider (of another wire format, translated for it) and the `openai` client
// gets a correct answer, no error. The failed provider is evicted (outlier detection) and comes back after its
// eviction time.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, sleep, waitFor } from "../helpers/net.js";

function resources(primary: number, backup: number, closed: number): string {
  return `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: failover, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: 127.0.0.1, port: ${primary} }
      - providers:
          - { name: backup, providerD: { model: claude-backup }, host: 127.0.0.1, port: ${backup} }
  policies:
    health: { eviction: { duration: 1s } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: refusing, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: gone, providerA: {}, host: 127.0.0.1, port: ${closed} }
      - providers:
          - { name: backup, providerD: { model: claude-backup }, host: 127.0.0.1, port: ${backup} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /refused } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: refusing }]
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: failover }]
`;
}

describe("priority groups fail over", { timeout: 60_000 }, () => {
  let primary: FakeProvider;
  let backup: FakeProvider;
  let env: LlmEnv;
  let client: OpenAI;
  const ask = (c: OpenAI, text: string) =>
    c.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: text }], max_tokens: 20 });

  before(async () => {
    primary = await startFakeProvider({ name: "primary" });
    backup = await startFakeProvider({ name: "backup" });
    env = await startLlmEnv(resources(primary.port, backup.port, await freePort()));
    client = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await env?.stop();
    await primary?.close();
    await backup?.close();
  });

  test("the first group serves while healthy, in its own format", async () => {
    const r = await ask(client, "one");
    assert.equal(r.choices[0]?.message.content, "Hello from primary: one");
    assert.equal(primary.requests.at(-1)?.path, "/v1/chat/completions");
  });

  test("5xx from the first group: the second group answers, translated, and the client sees no error", async () => {
    primary.failWith = 503;
    const before = backup.requests.length;
    const r = await ask(client, "two");
    assert.equal(r.choices[0]?.message.content, "Hello from backup: two");
    assert.equal(r.object, "chat.completion");
    assert.equal(backup.requests.at(-1)?.path, "/v1/messages");
    assert.equal(backup.requests.at(-1)?.json?.model, "claude-backup");
    assert.equal(backup.requests.length, before + 1);

    // Evicted: the next request goes straight to the backup, the primary is not even tried.
    const primaryCount = primary.requests.length;
    const streamed = await client.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "three" }],
      max_tokens: 20,
      stream: true,
    });
    let text = "";
    for await (const chunk of streamed) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from backup: three");
    assert.equal(primary.requests.length, primaryCount, "an evicted provider gets no traffic");
  });

  test("the evicted provider comes back after its eviction time", async () => {
    primary.failWith = undefined;
    await sleep(1000);
    const r = await waitFor(
      "the primary to serve again",
      async () => {
        const a = await ask(client, "back");
        return a.choices[0]?.message.content === "Hello from primary: back" ? a : undefined;
      },
      5000,
      200,
    );
    assert.equal(r.choices[0]?.message.content, "Hello from primary: back");
  });

  test("a provider that refuses connections fails over too", async () => {
    const c = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/refused/v1`, maxRetries: 0 });
    for (const text of ["a", "b"]) {
      const r = await ask(c, text);
      assert.equal(r.choices[0]?.message.content, `Hello from backup: ${text}`);
    }
  });

  test("when every group fails, the client gets the error in its own format", async () => {
    primary.failWith = 500;
    backup.failWith = 500;
    try {
      await assert.rejects(ask(client, "x"), (e: unknown) => e instanceof OpenAI.InternalServerError);
    } finally {
      primary.failWith = undefined;
      backup.failWith = undefined;
    }
  });
});
