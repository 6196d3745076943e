// A `custom` provider whose backendRef is a Service, end to end through a real Envoy: requests are spread over the
// Service's ready endpoints (from its EndpointSlices, the Service port mapped to each slice's target port), an endpoint
// that stops being ready stops getting requests, and a messages client is translated for the custom provider's
// chat-completions format.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";

function resources(a: FakeProvider, b: FakeProvider, bReady: boolean): string {
  const slice = (name: string, port: number, ready: boolean) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}, namespace: default, labels: { kubernetes.io/service-name: inference } }
addressType: IPv4
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1], conditions: { ready: ${ready} } }]
`;
  return `
apiVersion: v1
kind: Service
metadata: { name: inference, namespace: default }
spec:
  ports: [{ name: http, port: 80 }]
${slice("inference-a", a.port, true)}${slice("inference-b", b.port, bReady)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: selfhosted, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { name: inference, port: 80 }
        formats: [{ type: Completions }]
  policies:
    auth: { key: in-cluster-key }
    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages: Messages
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /selfhosted } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: selfhosted }]
`;
}

describe("custom provider with a Service backendRef", { timeout: 60_000 }, () => {
  let a: FakeProvider;
  let b: FakeProvider;
  let env: LlmEnv;
  const chat = async (text: string): Promise<string> => {
    const c = new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/selfhosted/v1`, maxRetries: 0 });
    const r = await c.chat.completions.create({ model: "llama-3.1-8b", messages: [{ role: "user", content: text }] });
    return r.choices[0]?.message.content ?? "";
  };

  before(async () => {
    a = await startFakeProvider({ name: "pod-a", apiKey: "in-cluster-key" });
    b = await startFakeProvider({ name: "pod-b", apiKey: "in-cluster-key" });
    env = await startLlmEnv(resources(a, b, true), "/selfhosted/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await a?.close();
    await b?.close();
  });

  test("requests are spread over the Service's endpoints, with the provider's path and credentials", async () => {
    const answers = new Set<string>();
    for (let i = 0; i < 8; i++) answers.add(await chat("hi"));
    assert.deepEqual([...answers].sort(), ["Hello from pod-a: hi", "Hello from pod-b: hi"]);
    const seen = a.requests.at(-1);
    assert.equal(seen?.path, "/v1/chat/completions");
    assert.equal(seen?.headers.authorization, "Bearer in-cluster-key");
    assert.equal(seen?.headers.host, "inference.default.svc.cluster.local");
  });

  test("a messages client is translated for the custom provider's chat-completions format", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/selfhosted`, maxRetries: 0 });
    const m = await c.messages.create({
      model: "llama-3.1-8b",
      max_tokens: 20,
      messages: [{ role: "user", content: "bonjour" }],
    });
    assert.match((m.content[0] as { text: string }).text, /^Hello from pod-[ab]: bonjour$/);
  });

  test("an endpoint that is no longer ready gets no more requests", async () => {
    env.write(resources(a, b, false));
    await waitFor(
      "only pod-a to answer",
      async () => {
        for (let i = 0; i < 6; i++) if ((await chat("again")) !== "Hello from pod-a: again") return undefined;
        return true;
      },
      20_000,
    );
  });
});
