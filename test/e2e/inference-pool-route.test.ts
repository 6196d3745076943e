// An HTTPRoute whose backendRef is an InferencePool (Gateway API Inference Extension), end to end through a real
// Envoy: no LLM backend in between, Envoy calls the pool's endpoint picker (written for the test, the extension's
// protocol in full duplex mode) and connects to the model server it names, chosen here by the model in the body. The
// model servers are OpenAI-compatible fakes, called with the official `openai` client through the gateway.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, inferencePoolYaml, startEndpointPicker } from "../helpers/grpc-services.js";
import { request } from "../helpers/net.js";

function resources(pickerPort: number): string {
  return `${inferencePoolYaml(pickerPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: inference.networking.k8s.io, kind: InferencePool, name: llama }]
    - matches: [{ path: { type: PathPrefix, value: /missing } }]
      backendRefs: [{ group: inference.networking.k8s.io, kind: InferencePool, name: nowhere }]
`;
}

describe("HTTPRoute to an InferencePool", { timeout: 90_000 }, () => {
  let a: FakeProvider;
  let b: FakeProvider;
  let picker: GrpcTestServer & { readonly picked: string[] };
  let gw: TestGateway;
  const openai = () => new OpenAI({ apiKey: "pool-key", baseURL: `http://127.0.0.1:${gw.port}/v1`, maxRetries: 0 });
  const chat = async (model: string, text: string, headers: Record<string, string> = {}): Promise<string> => {
    const r = await openai().chat.completions.create(
      { model, messages: [{ role: "user", content: text }] },
      { headers },
    );
    return r.choices[0]?.message.content ?? "";
  };

  before(async () => {
    a = await startFakeProvider({ name: "pod-a", apiKey: "pool-key" });
    b = await startFakeProvider({ name: "pod-b", apiKey: "pool-key" });
    picker = await startEndpointPicker((model) => `127.0.0.1:${model.endsWith("-b") ? b.port : a.port}`);
    gw = await startTestGateway(
      () => resources(picker.port),
      "/v1/models",
      (s) => s !== 404 && s !== 503,
    );
  });
  after(async () => {
    await gw?.stop();
    await picker?.close();
    await a?.close();
    await b?.close();
  });

  test("each request reaches the model server the picker names, as the client sent it", async () => {
    assert.equal(await chat("llama-b", "one"), "Hello from pod-b: one");
    assert.equal(await chat("llama-a", "two"), "Hello from pod-a: two");
    assert.deepEqual(picker.picked.slice(-2), [`llama-b→127.0.0.1:${b.port}`, `llama-a→127.0.0.1:${a.port}`]);
    const seen = b.requests.at(-1);
    assert.equal(seen?.path, "/v1/chat/completions");
    assert.equal(seen?.headers.authorization, "Bearer pool-key");
    assert.deepEqual(seen?.json?.["messages"], [{ role: "user", content: "one" }]);
  });

  test("a client's own x-gateway-destination-endpoint does not steer: the picker's choice does", async () => {
    const text = await chat("llama-a", "mine", { "x-gateway-destination-endpoint": `127.0.0.1:${b.port}` });
    assert.equal(text, "Hello from pod-a: mine");
  });

  test("a route to an InferencePool that does not exist answers 500 and says why on the route", async () => {
    assert.equal((await request(gw.port, "/missing")).status, 500);
    const { resources: rs } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const route = JSON.stringify(rs.find((r) => r.kind === "HTTPRoute" && r.name === "llm")?.status);
    assert.match(route, /BackendNotFound/);
    assert.match(route, /InferencePool default\/nowhere not found/);
  });
});
