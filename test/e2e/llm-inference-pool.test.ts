// A `custom` provider whose backendRef is an InferencePool (Gateway API Inference Extension), end to end through a real
// Envoy: Envoy calls the pool's endpoint picker (a picker written for the test, speaking the extension's protocol in
// full duplex mode) with the request, after Sluice has translated it, and connects to the model server the picker
// names. The picker decides by the model in the body. Routes in one stage and in two (the upstream stage translating
// for the pool's one provider) both work. Without the picker (FailClose) the client gets an error in its own format;
// a client cannot name the endpoint itself.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import {
  type GrpcTestServer,
  inferencePoolYaml,
  poolGwBackendYaml,
  startEndpointPicker,
} from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, waitFor } from "../helpers/net.js";

function resources(pickerPort: number, failureMode: "FailClose" | "FailOpen" = "FailClose"): string {
  return `${inferencePoolYaml(pickerPort, failureMode)}${poolGwBackendYaml(
    "default",
    `    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages: Messages
`,
  )}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /pool } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llama }]
    # A request header modifier keeps this route in two stages (llm/stages.ts): the upstream stage translates, for
    # the cluster's one provider, on the connection to the pod the picker chose.
    - matches: [{ path: { type: PathPrefix, value: /staged } }]
      filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { set: [{ name: x-team, value: blue }] } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llama }]
`;
}

describe("custom provider with an InferencePool backendRef", { timeout: 90_000 }, () => {
  let a: FakeProvider;
  let b: FakeProvider;
  let picker: GrpcTestServer & { readonly picked: string[] };
  let env: LlmEnv;
  const openai = () => new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/pool/v1`, maxRetries: 0 });
  const chat = async (model: string, text: string): Promise<string> => {
    const r = await openai().chat.completions.create({ model, messages: [{ role: "user", content: text }] });
    return r.choices[0]?.message.content ?? "";
  };

  before(async () => {
    a = await startFakeProvider({ name: "pod-a", apiKey: "pool-key" });
    b = await startFakeProvider({ name: "pod-b", apiKey: "pool-key" });
    picker = await startEndpointPicker((model) => `127.0.0.1:${model.endsWith("-b") ? b.port : a.port}`);
    env = await startLlmEnv(resources(picker.port), "/pool/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await picker?.close();
    await a?.close();
    await b?.close();
  });

  test("each request goes to the model server the picker names, from the model in the body", async () => {
    assert.equal(await chat("llama-b", "one"), "Hello from pod-b: one");
    assert.equal(await chat("llama-a", "two"), "Hello from pod-a: two");
    assert.equal(await chat("llama-b", "three"), "Hello from pod-b: three");
    assert.deepEqual(picker.picked.slice(-3), [
      `llama-b→127.0.0.1:${b.port}`,
      `llama-a→127.0.0.1:${a.port}`,
      `llama-b→127.0.0.1:${b.port}`,
    ]);
    const seen = b.requests.at(-1);
    assert.equal(seen?.path, "/v1/chat/completions");
    assert.equal(seen?.headers.authorization, "Bearer pool-key");
    assert.equal(seen?.headers["x-gateway-destination-endpoint"], `127.0.0.1:${b.port}`);
  });

  test("the picker sees the request Sluice translated: a messages client reaches the chat-completions server", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/pool`, maxRetries: 0 });
    const m = await c.messages.create({
      model: "llama-b",
      max_tokens: 20,
      messages: [{ role: "user", content: "hej" }],
    });
    assert.equal((m.content[0] as { text: string }).text, "Hello from pod-b: hej");
    // The model server got chat completions (translated from messages by Sluice before the picker read the model).
    const sent = b.requests.at(-1)?.json;
    assert.equal(sent?.["model"], "llama-b");
    assert.deepEqual(sent?.["messages"], [{ role: "user", content: "hej" }]);
    assert.equal(sent?.["system"], undefined);
  });

  test("streaming responses come back through the picker chunk by chunk", async () => {
    const stream = await openai().chat.completions.create({
      model: "llama-a",
      stream: true,
      messages: [{ role: "user", content: "stream please" }],
    });
    let text = "";
    let chunks = 0;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? "";
      chunks++;
    }
    assert.equal(text, "Hello from pod-a: stream please");
    assert.ok(chunks > 3, `${chunks} chunks`);
  });

  test("a client cannot choose the endpoint: its x-gateway-destination-endpoint header is not where Envoy goes", async () => {
    const r = await openai().chat.completions.create(
      { model: "llama-a", messages: [{ role: "user", content: "sneaky" }] },
      { headers: { "x-gateway-destination-endpoint": `127.0.0.1:${b.port}` } },
    );
    assert.equal(r.choices[0]?.message.content, "Hello from pod-a: sneaky");
  });

  test("in two stages too: the upstream stage serves the pool's one provider on the pod the picker chose", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/staged`, maxRetries: 0 });
    const m = await c.messages.create({
      model: "llama-b",
      max_tokens: 20,
      messages: [{ role: "user", content: "två" }],
    });
    assert.equal((m.content[0] as { text: string }).text, "Hello from pod-b: två");
    const seen = b.requests.at(-1);
    assert.equal(seen?.path, "/v1/chat/completions");
    assert.equal(seen?.headers["x-team"], "blue");
    assert.equal(seen?.headers.authorization, "Bearer pool-key");
    // The picker read the client's own (messages) body: in two stages the translation comes after it.
    assert.equal(picker.picked.at(-1), `llama-b→127.0.0.1:${b.port}`);
    const dump = JSON.stringify(await env.envoy.configDump());
    assert.match(dump, /sluice\.llm_upstream_ext_proc/, "the pool's cluster keeps the upstream stage");
  });

  test("FailClose: without the picker the request fails, in the client's format", async () => {
    const nobody = await freePort();
    env.write(resources(nobody));
    await waitFor(
      "the picker's new address in Envoy",
      async () => {
        try {
          await chat("llama-a", "anyone?");
          return undefined;
        } catch (e) {
          return e instanceof OpenAI.APIError ? e : undefined;
        }
      },
      20_000,
    ).then((e) => {
      assert.ok(e.status !== undefined && e.status >= 500, `status ${e.status}`);
      assert.equal(typeof e.message, "string");
    });
    env.write(resources(picker.port));
    await waitFor(
      "the picker back",
      async () => ((await chat("llama-a", "back").catch(() => "")) === "Hello from pod-a: back" ? true : undefined),
      20_000,
    );
  });
});
