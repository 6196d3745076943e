// providerF (Google Vertex AI) end to end through a real Envoy: the official `openai` and `@anthropic-ai/sdk` clients
// against a fake Vertex AI that checks the URL form (project, location, publisher model, method) and the OAuth Bearer
// token, which Sluice gets from a fake Google token endpoint with the service account key of the policy (JWT bearer
// grant, signature verified there) or, without a secretRef, from the metadata server (ambient credentials). Claude
// models go to Anthropic's publisher models on Vertex AI (rawPredict / streamRawPredict, messages body).

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

function resources(port: number, google: FakeGoogleAuth): string {
  const otherKey = generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
  const json = (o: unknown) => JSON.stringify(JSON.stringify(o));
  const backend = (name: string, settings: string, auth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      providerF: ${settings}
      host: 127.0.0.1
      port: ${port}
  policies:
    auth: ${auth}
    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages/count_tokens: MessagesTokenCount
        /v1/messages: Messages
        /v1/embeddings: Embeddings
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData:
  credentials.json: ${json(google.serviceAccount)}
---
apiVersion: v1
kind: Secret
metadata: { name: gcp-wrong-key, namespace: default }
stringData:
  credentials.json: ${json({ ...google.serviceAccount, private_key: otherKey })}
${backend("vertex", "{ projectId: my-project, region: us-central1, model: gemini-2.0-flash-001 }", "{ cloudB: { secretRef: { name: gcp } } }")}
${backend("ambient", "{ projectId: other-project, model: gemini-2.5-pro }", "{ cloudB: {} }")}
${backend("wrongkey", "{ projectId: my-project, region: us-central1 }", "{ cloudB: { secretRef: { name: gcp-wrong-key } } }")}
${backend("claude", "{ projectId: my-project, region: us-east5 }", "{ cloudB: { secretRef: { name: gcp } } }")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("vertex")}${rule("ambient")}${rule("wrongkey")}${rule("claude")}
`;
}

describe("providerF (Vertex AI) end to end", { timeout: 60_000 }, () => {
  let google: FakeGoogleAuth;
  let vertex: FakeProvider;
  let env: LlmEnv;
  const openai = (prefix: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });

  before(async () => {
    google = await startFakeGoogleAuth();
    vertex = await startFakeProvider({ name: "vertex", bearer: (t) => google.issued(t) });
    env = await startLlmEnv(resources(vertex.port, google), "/vertex/v1/chat/completions", {
      GCE_METADATA_HOST: `127.0.0.1:${google.port}`,
    });
  });
  after(async () => {
    await env?.stop();
    await vertex?.close();
    await google?.close();
  });

  test("chat completions → generateContent on the project/location/model URL with a service account token", async () => {
    const r = await openai("vertex").chat.completions.create({
      model: "ignored-by-override",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hi" },
      ],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from vertex: hi");
    assert.equal(r.usage?.total_tokens, 18);
    const seen = vertex.requests.at(-1);
    assert.equal(
      seen?.path,
      "/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:generateContent",
    );
    const token = /^Bearer (ya29\.sa-\d+)$/.exec(String(seen?.headers.authorization))?.[1];
    assert.ok(token !== undefined && google.issued(token), String(seen?.headers.authorization));
    assert.deepEqual(seen?.json?.systemInstruction, { parts: [{ text: "Be brief." }] });
    const grant = google.grants.find((g) => g.kind === "jwt-bearer");
    assert.equal(grant?.claims?.scope, "https://www.googleapis.com/auth/cloud-platform");
  });

  test("streamed with ?alt=sse, chunk by chunk; the token is reused, not fetched again", async () => {
    const before = google.grants.filter((g) => g.kind === "jwt-bearer").length;
    const stream = await openai("vertex").chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "stream please" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let chunks = 0;
    let usage: number | undefined;
    for await (const c of stream) {
      chunks++;
      text += c.choices[0]?.delta.content ?? "";
      if (c.usage) usage = c.usage.total_tokens;
    }
    assert.equal(text, "Hello from vertex: stream please");
    assert.ok(chunks > 4, `${chunks} chunks`);
    assert.equal(usage, 18);
    assert.equal(
      vertex.requests.at(-1)?.path,
      "/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.0-flash-001:streamGenerateContent?alt=sse",
    );
    assert.equal(google.grants.filter((g) => g.kind === "jwt-bearer").length, before);
  });

  test("messages token counting → Vertex countTokens (contents at the top level)", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/vertex`, maxRetries: 0 });
    const n = await c.messages.countTokens({ model: "claude", messages: [{ role: "user", content: "count me" }] });
    assert.ok(n.input_tokens > 0);
    const seen = vertex.requests.at(-1);
    assert.match(seen?.path ?? "", /\/publishers\/google\/models\/gemini-2\.0-flash-001:countTokens$/);
    assert.ok(Array.isArray(seen?.json?.contents));
  });

  test("without a secretRef: the metadata server's token, and the global location's URL", async () => {
    const r = await openai("ambient").chat.completions.create({
      model: "x",
      messages: [{ role: "user", content: "ambient" }],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from vertex: ambient");
    const seen = vertex.requests.at(-1);
    assert.equal(
      seen?.path,
      "/v1/projects/other-project/locations/global/publishers/google/models/gemini-2.5-pro:generateContent",
    );
    assert.match(String(seen?.headers.authorization), /^Bearer ya29\.metadata-\d+$/);
    assert.ok(google.grants.some((g) => g.kind === "metadata"));
  });

  test("Claude models: Anthropic's publisher models with rawPredict and streamRawPredict", async () => {
    const r = await openai("claude").chat.completions.create({
      model: "claude-sonnet-4@20250514",
      max_tokens: 50,
      messages: [{ role: "user", content: "bonjour" }],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from vertex: bonjour");
    const seen = vertex.requests.at(-1);
    assert.equal(
      seen?.path,
      "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:rawPredict",
    );
    assert.match(String(seen?.headers.authorization), /^Bearer ya29\.sa-\d+$/);

    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/claude`, maxRetries: 0 });
    const stream = c.messages.stream({
      model: "claude-3-5-haiku@20241022",
      max_tokens: 50,
      messages: [{ role: "user", content: "stream" }],
    });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    const final = await stream.finalMessage();
    assert.deepEqual(final.content[0], { type: "text", text: "Hello from vertex: stream" });
    assert.equal(types[0], "message_start");
    assert.equal(types.at(-1), "message_stop");
    assert.match(vertex.requests.at(-1)?.path ?? "", /\/claude-3-5-haiku@20241022:streamRawPredict$/);
  });

  test("a key the token endpoint refuses: the client gets a 500 in its format, the provider is not called", async () => {
    const calls = vertex.requests.length;
    await assert.rejects(
      openai("wrongkey").chat.completions.create({
        model: "gemini-2.0-flash",
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.APIError);
        assert.equal(e.status, 500);
        assert.match(e.message, /credentials of provider default are not available/);
        return true;
      },
    );
    assert.equal(vertex.requests.length, calls);
    assert.ok(env.sluice.output.some((l) => /Google credentials: token endpoint .* answered 400/.test(l)));
  });
  test("embeddings → Vertex AI predict (instances, outputDimensionality), token counts summed into usage", async () => {
    const r = await openai("claude").embeddings.create({
      model: "text-embedding-005",
      input: ["hello world", "bonjour"],
      dimensions: 3,
    });
    assert.deepEqual(
      r.data.map((d) => d.embedding),
      [
        [11 / 8, 12 / 8, 13 / 8],
        [7 / 8, 8 / 8, 9 / 8],
      ],
    );
    assert.equal(r.usage.prompt_tokens, 3);
    const seen = vertex.requests.at(-1);
    assert.equal(
      seen?.path,
      "/v1/projects/my-project/locations/us-east5/publishers/google/models/text-embedding-005:predict",
    );
    assert.deepEqual(seen?.json, {
      instances: [{ content: "hello world" }, { content: "bonjour" }],
      parameters: { outputDimensionality: 3 },
    });
  });

  test("Claude token counting → Anthropic's count-tokens:rawPredict on Vertex AI, the model kept in the body", async () => {
    const c = new Anthropic({ apiKey: "client", baseURL: `${env.baseUrl}/claude`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: "count me" }];
    const n = await c.messages.countTokens({ model: "claude-sonnet-4-5@20250929", system: "Be brief.", messages });
    assert.equal(n.input_tokens, JSON.stringify(messages).length + 3);
    const seen = vertex.requests.at(-1);
    assert.equal(
      seen?.path,
      "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict",
    );
    assert.equal(seen?.json?.model, "claude-sonnet-4-5@20250929");
    assert.equal(seen?.json?.anthropic_version, "vertex-2023-10-16");
  });
});
