// GwModel `baseURL` with a path through a real Envoy (docs/llm.md, GwModel `baseURL`): a Gemini-format and a
// Bedrock-format fake provider mounted under a path prefix, as behind a corporate proxy or an AI gateway (Cloudflare AI
// Gateway's `.../{account}/{gateway}/google-ai-studio`), answering only there. The official `openai` client's chat
// (plain and streamed) and embeddings, the `@anthropic-ai/sdk` client's token count and `@google/genai`'s
// generateContent reach each provider's own path after the base path; the Bedrock fake checks SigV4 over the path it
// receives.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { gwModelYaml, PROBE_ROUTE } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const AWS = { accessKeyId: "AKIDBASEURL", secretAccessKey: "base-url-secret", region: "eu-west-1" };
const GEMINI_KEY = "gemini-base-url-key";
const GEMINI_MOUNT = "/v1/acct/gw/google-ai-studio";
const BEDROCK_MOUNT = "/corp/aws/bedrock";

function resources(gemini: FakeProvider, bedrock: FakeProvider): string {
  return [
    `${PROBE_ROUTE}---
apiVersion: v1
kind: Secret
metadata: { name: model-creds, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey}, gemini: ${GEMINI_KEY} }
`,
    gwModelYaml(
      "gemini-proxied",
      `provider: Provider04
baseURL: http://127.0.0.1:${gemini.port}${GEMINI_MOUNT}
policies: { auth: { secretRef: { name: model-creds, key: gemini } } }`,
    ),
    gwModelYaml(
      "bedrock-proxied",
      `provider: Provider06
providerG: { region: ${AWS.region} }
baseURL: http://127.0.0.1:${bedrock.port}${BEDROCK_MOUNT}/
policies: { auth: { cloudA: { secretRef: { name: model-creds } } } }`,
    ),
  ].join("");
}

describe("GwModel baseURL with a path", { timeout: 90_000 }, () => {
  let env: LlmEnv;
  let gemini: FakeProvider;
  let bedrock: FakeProvider;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const last = (p: FakeProvider) => p.requests.at(-1)?.path ?? "";

  before(async () => {
    gemini = await startFakeProvider({ name: "gemini", apiKey: GEMINI_KEY, mount: GEMINI_MOUNT });
    bedrock = await startFakeProvider({ name: "bedrock", aws: AWS, mount: BEDROCK_MOUNT });
    env = await startLlmEnv(resources(gemini, bedrock), "/probe");
    openai = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: "k", baseURL: env.baseUrl, maxRetries: 0 });
  });
  after(async () => {
    await env?.stop();
    await gemini?.close();
    await bedrock?.close();
  });

  test("the fakes answer under their mount only", async () => {
    const r = await fetch(`http://127.0.0.1:${gemini.port}/v1beta/models/m:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": GEMINI_KEY, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "x" }] }] }),
    });
    assert.equal(r.status, 404);
    const ok = await fetch(`http://127.0.0.1:${gemini.port}${GEMINI_MOUNT}/v1beta/models/m:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": GEMINI_KEY, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "x" }] }] }),
    });
    assert.equal(ok.status, 200);
  });

  test("Gemini behind a path: chat, streamed chat and embeddings at <base path>/v1beta/models/...", async () => {
    const c = await openai.chat.completions.create({
      model: "gemini-proxied",
      messages: [{ role: "user", content: "through the gateway" }],
    });
    assert.equal(c.choices[0]?.message.content, "Hello from gemini: through the gateway");
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:generateContent`);
    assert.equal(gemini.requests.at(-1)?.headers["x-goog-api-key"], GEMINI_KEY);

    const stream = await openai.chat.completions.create({
      model: "gemini-proxied",
      messages: [{ role: "user", content: "streamed" }],
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from gemini: streamed");
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:streamGenerateContent?alt=sse`);

    const e = await openai.embeddings.create({ model: "gemini-proxied", input: ["a", "b"] });
    assert.equal(e.data.length, 2);
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:batchEmbedContents`);
  });

  test("Bedrock behind a path: Converse and ConverseStream at <base path>/model/..., SigV4 over that path", async () => {
    const c = await openai.chat.completions.create({
      model: "bedrock-proxied",
      messages: [{ role: "user", content: "signed" }],
    });
    assert.equal(c.choices[0]?.message.content, "Hello from bedrock: signed");
    assert.equal(last(bedrock), `${BEDROCK_MOUNT}/model/bedrock-proxied/converse`);
    assert.match(String(bedrock.requests.at(-1)?.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDBASEURL\//);

    const stream = await openai.chat.completions.create({
      model: "bedrock-proxied",
      messages: [{ role: "user", content: "streamed" }],
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from bedrock: streamed");
    assert.equal(last(bedrock), `${BEDROCK_MOUNT}/model/bedrock-proxied/converse-stream`);
  });

  test("Google's own client: generateContent and embeddings behind a path, to Gemini and to Bedrock", async () => {
    const google = new GoogleGenAI({ apiKey: "client", httpOptions: { baseUrl: env.baseUrl } });
    const g = await google.models.generateContent({ model: "gemini-proxied", contents: "as written" });
    assert.equal(g.text, "Hello from gemini: as written");
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:generateContent`);
    assert.equal(gemini.requests.at(-1)?.headers["x-goog-api-key"], GEMINI_KEY, "the model's key, not the client's");
    const e = await google.models.embedContent({ model: "gemini-proxied", contents: "embed me" });
    assert.equal(e.embeddings?.length, 1);
    // The SDK's embedContent calls batchEmbedContents.
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:batchEmbedContents`);
    const b = await google.models.generateContent({ model: "bedrock-proxied", contents: "converse" });
    assert.equal(b.text, "Hello from bedrock: converse");
    assert.equal(last(bedrock), `${BEDROCK_MOUNT}/model/bedrock-proxied/converse`);
  });

  test("token counts behind a path: Gemini's countTokens and Bedrock's CountTokens", async () => {
    const messages = [{ role: "user" as const, content: "count these words" }];
    const g = await anthropic.messages.countTokens({ model: "gemini-proxied", messages });
    assert.ok(g.input_tokens > 0);
    assert.equal(last(gemini), `${GEMINI_MOUNT}/v1beta/models/gemini-proxied:countTokens`);
    const b = await anthropic.messages.countTokens({ model: "bedrock-proxied", messages });
    assert.ok(b.input_tokens > 0);
    assert.equal(last(bedrock), `${BEDROCK_MOUNT}/model/bedrock-proxied/count-tokens`);
  });
});
