// GwModel `baseURL` with a path, per provider family (docs/llm.md, GwModel `baseURL`): the OpenAI-style providers
// (OpenAI, the OpenAI-compatible services, Anthropic) have the path in place of their API prefix; Gemini, Vertex AI,
// Bedrock, Azure and custom providers keep their own path, API version included, after it. Every path a provider is
// sent goes through provider.ts providerPath: translated requests, model lists, requests forwarded as they are and
// Realtime sessions; SigV4 signs the path as sent.

import assert from "node:assert/strict";
import { test } from "node:test";
import { modelsRequest, providerPath, providerRequest } from "../../src/extproc/llm/provider.js";
import type { ProviderFormat } from "../../src/llm/index.js";
import { makeInput } from "../../src/translate/input.js";
import type { LlmProviderEntry, ProviderAuth } from "../../src/translate/llm/table.js";
import { modelProviderEntry } from "../../src/translate/model/entry.js";
import type { ConcreteModelIR } from "../../src/translate/model/ir.js";
import { translateModels } from "../../src/translate/model/models.js";
import { modelStatuses } from "../../src/translate/model/status.js";
import { verifySigV4 } from "../helpers/sigv4-verify.js";

type Doc = Record<string, unknown>;

const docs = (spec: Doc): Doc[] => [
  {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { name: "gw", namespace: "default" },
    spec: { gatewayClassName: "sluice", listeners: [{ name: "http", port: 8080, protocol: "HTTP" }] },
  },
  {
    apiVersion: "sluice.dev/v1alpha1",
    kind: "GwModel",
    metadata: { name: "m", namespace: "default" },
    spec: { parentRefs: [{ name: "gw" }], ...spec },
  },
];

const AWS_KEYS = { accessKeyId: "AKIDBASE", secretAccessKey: "base-secret" };

/** The model's provider entry as the LLM table has it (credentials: none, or AWS keys for SigV4). */
function entryOf(spec: Doc, auth: Partial<ProviderAuth> = {}): LlmProviderEntry {
  const t = translateModels(makeInput(docs(spec) as never), { impliedGatewayClass: true });
  const m = t.tables[0]?.models["default/m"] as ConcreteModelIR | undefined;
  assert.ok(m?.provider, `no provider: ${m?.unavailable}`);
  const e = modelProviderEntry(m, () => ({ headers: {}, query: {}, ...auth }));
  assert.ok(e);
  return e;
}

/** The path sent for `format`, with and without the baseURL's path. */
function paths(spec: Doc, baseURL: string, format: ProviderFormat, model: string, stream = false): [string, string] {
  const host = baseURL.replace(/^(https?:\/\/[^/]+).*$/, "$1");
  const at = (s: Doc) => providerRequest(entryOf(s), format, model, stream, "{}")?.path ?? "(none)";
  return [at({ ...spec, baseURL: host }), at({ ...spec, baseURL })];
}
const listPaths = (spec: Doc, baseURL: string): [string, string] => {
  const host = baseURL.replace(/^(https?:\/\/[^/]+).*$/, "$1");
  const at = (s: Doc) => modelsRequest(entryOf(s))?.path ?? "(none)";
  return [at({ ...spec, baseURL: host }), at({ ...spec, baseURL })];
};

const GEMINI = { provider: "Provider04" };
const VERTEX = { provider: "Provider05", providerF: { projectId: "p1", region: "us-central1" } };
const BEDROCK = { provider: "Provider06", providerG: { region: "eu-west-1" } };
const AZURE = { provider: "Provider02", cloudC: { resourceName: "acme", resourceType: "OpenAI" } };
const CUSTOM = {
  provider: "Custom",
  custom: { formats: [{ type: "Completions" }, { type: "Embeddings", path: "/embed" }] },
};
const CF = "https://gateway.ai.cloudflare.com/v1/acct/gw";

test("Gemini: its /v1beta paths after the base path (generateContent, streaming, embeddings, count tokens, Models)", () => {
  const base = `${CF}/google-ai-studio`;
  const pre = "/v1/acct/gw/google-ai-studio";
  const m = "gemini-2.0-flash";
  assert.deepEqual(paths(GEMINI, base, "generate-content", m), [
    `/v1beta/models/${m}:generateContent`,
    `${pre}/v1beta/models/${m}:generateContent`,
  ]);
  assert.deepEqual(paths(GEMINI, base, "generate-content", m, true), [
    `/v1beta/models/${m}:streamGenerateContent?alt=sse`,
    `${pre}/v1beta/models/${m}:streamGenerateContent?alt=sse`,
  ]);
  assert.deepEqual(paths(GEMINI, base, "gemini-embed", "text-embedding-004"), [
    "/v1beta/models/text-embedding-004:batchEmbedContents",
    `${pre}/v1beta/models/text-embedding-004:batchEmbedContents`,
  ]);
  assert.deepEqual(paths(GEMINI, base, "gemini-count-tokens", m), [
    `/v1beta/models/${m}:countTokens`,
    `${pre}/v1beta/models/${m}:countTokens`,
  ]);
  assert.deepEqual(listPaths(GEMINI, base), ["/v1beta/models", `${pre}/v1beta/models`]);
  const e = entryOf({ ...GEMINI, baseURL: base });
  assert.equal(e.authority, "gateway.ai.cloudflare.com");
});

test("Vertex AI: /v1/projects/... after the base path (generateContent, predict, countTokens, Claude); no model list", () => {
  const base = "https://proxy.corp/vertex";
  const loc = "/v1/projects/p1/locations/us-central1/publishers";
  assert.deepEqual(paths(VERTEX, base, "generate-content", "gemini-2.0-flash"), [
    `${loc}/google/models/gemini-2.0-flash:generateContent`,
    `/vertex${loc}/google/models/gemini-2.0-flash:generateContent`,
  ]);
  assert.deepEqual(paths(VERTEX, base, "vertex-embed", "text-embedding-005"), [
    `${loc}/google/models/text-embedding-005:predict`,
    `/vertex${loc}/google/models/text-embedding-005:predict`,
  ]);
  assert.deepEqual(paths(VERTEX, base, "vertex-count-tokens", "gemini-2.0-flash"), [
    `${loc}/google/models/gemini-2.0-flash:countTokens`,
    `/vertex${loc}/google/models/gemini-2.0-flash:countTokens`,
  ]);
  assert.deepEqual(paths(VERTEX, base, "vertex-messages", "claude-sonnet-4@20250514"), [
    `${loc}/anthropic/models/claude-sonnet-4@20250514:rawPredict`,
    `/vertex${loc}/anthropic/models/claude-sonnet-4@20250514:rawPredict`,
  ]);
  assert.deepEqual(listPaths(VERTEX, base), ["(none)", "(none)"]);
});

test("Bedrock: /model/... after the base path (converse, Titan invoke, count-tokens), and SigV4 over the path sent", () => {
  const base = "https://proxy.corp/aws/bedrock-runtime";
  const m = "anthropic.claude-3-haiku-20240307-v1:0";
  const id = encodeURIComponent(m);
  assert.deepEqual(paths(BEDROCK, base, "converse", m), [
    `/model/${id}/converse`,
    `/aws/bedrock-runtime/model/${id}/converse`,
  ]);
  assert.deepEqual(paths(BEDROCK, base, "converse", m, true), [
    `/model/${id}/converse-stream`,
    `/aws/bedrock-runtime/model/${id}/converse-stream`,
  ]);
  assert.deepEqual(paths(BEDROCK, base, "titan-embed", "amazon.titan-embed-text-v2:0"), [
    "/model/amazon.titan-embed-text-v2%3A0/invoke",
    "/aws/bedrock-runtime/model/amazon.titan-embed-text-v2%3A0/invoke",
  ]);
  assert.deepEqual(paths(BEDROCK, base, "converse-count-tokens", m), [
    `/model/${id}/count-tokens`,
    `/aws/bedrock-runtime/model/${id}/count-tokens`,
  ]);
  // Signed as sent: a service checking the path it receives accepts it; the same request without the base path fails.
  const aws = { region: "", service: "bedrock", keys: AWS_KEYS };
  const e = entryOf({ ...BEDROCK, baseURL: base }, { aws });
  const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: "hi" }] }] });
  const r = providerRequest(e, "converse", m, false, body, { aws: AWS_KEYS });
  assert.ok(r);
  assert.equal(r.path, `/aws/bedrock-runtime/model/${id}/converse`);
  const lookup = (k: string) => (k === AWS_KEYS.accessKeyId ? AWS_KEYS : undefined);
  const received = (path: string) => ({
    method: "POST",
    path,
    headers: { ...r.headers, host: r.authority },
    body,
  });
  const expect = { region: "eu-west-1", service: "bedrock" };
  assert.ok("ok" in verifySigV4(received(r.path), expect, lookup));
  assert.ok("error" in verifySigV4(received(`/model/${id}/converse`), expect, lookup));
  // No model list on Bedrock's runtime host: the Models route type goes as it is (signed over the base path too).
  assert.equal(modelsRequest(e), undefined);
});

test("Azure OpenAI: /openai/... after the base path (chat, embeddings, Models)", () => {
  const base = "https://proxy.corp/azure";
  assert.deepEqual(paths(AZURE, base, "chat-completions", "gpt-4o"), [
    "/openai/v1/chat/completions",
    "/azure/openai/v1/chat/completions",
  ]);
  assert.deepEqual(paths(AZURE, base, "embeddings", "text-embedding-3-small"), [
    "/openai/v1/embeddings",
    "/azure/openai/v1/embeddings",
  ]);
  assert.deepEqual(listPaths(AZURE, base), ["/openai/v1/models", "/azure/openai/v1/models"]);
  const dep = { ...AZURE, cloudC: { ...AZURE.cloudC, apiVersion: "2024-10-21" } };
  const withDeployment = entryOf({ ...dep, baseURL: base });
  // The dated API form names the deployment in the path; the base path goes before it all the same.
  assert.match(
    providerRequest(withDeployment, "responses", "gpt-4o", false, "{}")?.path ?? "",
    /^\/azure\/openai\/responses\?api-version=2024-10-21$/,
  );
});

test("OpenAI family: the base path replaces the /v1 prefix; Anthropic keeps /v1 after it, as its SDK does", () => {
  assert.deepEqual(paths({ provider: "Provider01" }, "https://proxy.corp/openai/v1", "chat-completions", "gpt-4o"), [
    "/chat/completions",
    "/openai/v1/chat/completions",
  ]);
  assert.deepEqual(paths({ provider: "Provider13" }, "https://proxy.corp/groq/v1", "embeddings", "e"), [
    "/embeddings",
    "/groq/v1/embeddings",
  ]);
  assert.deepEqual(listPaths({ provider: "Provider01" }, "https://proxy.corp/openai/v1"), [
    "/models",
    "/openai/v1/models",
  ]);
  const anthropic = { provider: "Provider03" };
  const base = `${CF}/anthropic`;
  assert.deepEqual(paths(anthropic, base, "messages", "claude"), ["/v1/messages", "/v1/acct/gw/anthropic/v1/messages"]);
  assert.deepEqual(paths(anthropic, base, "count-tokens", "claude"), [
    "/v1/messages/count_tokens",
    "/v1/acct/gw/anthropic/v1/messages/count_tokens",
  ]);
  assert.deepEqual(listPaths(anthropic, base), ["/v1/models", "/v1/acct/gw/anthropic/v1/models"]);
  // Written as an OpenAI base URL is (ending in /v1): the same place, never /v1/v1.
  assert.deepEqual(paths(anthropic, "https://proxy.corp/anthropic/v1", "messages", "claude"), [
    "/v1/messages",
    "/anthropic/v1/messages",
  ]);
  assert.deepEqual(paths(anthropic, "http://127.0.0.1:9/v1", "messages", "claude"), ["/v1/messages", "/v1/messages"]);
});

test("custom provider: its formats' paths after the base path", () => {
  const base = "http://vllm.ai:8000/serving";
  assert.deepEqual(paths(CUSTOM, base, "chat-completions", "m"), [
    "/v1/chat/completions",
    "/serving/v1/chat/completions",
  ]);
  assert.deepEqual(paths(CUSTOM, base, "embeddings", "m"), ["/embed", "/serving/embed"]);
  assert.deepEqual(listPaths(CUSTOM, base), ["/v1/models", "/serving/v1/models"]);
});

test("providerPath: the one place requests forwarded as they are and Realtime sessions get the base path", () => {
  assert.equal(providerPath({}, "/v1/realtime?model=m"), "/v1/realtime?model=m");
  assert.equal(providerPath({ basePath: "/corp" }, "/v1/realtime?model=m"), "/corp/v1/realtime?model=m");
  assert.equal(providerPath({ basePath: "/corp" }, "model/x/invoke"), "/corp/model/x/invoke");
});

test("a baseURL with a path is served for every provider: no NotYetSupported Warning, the model available", () => {
  for (const spec of [GEMINI, VERTEX, BEDROCK, AZURE, CUSTOM, { provider: "Provider03" }, { provider: "Provider08" }]) {
    const all = docs({ ...spec, baseURL: "https://proxy.corp/some/path" });
    const t = translateModels(makeInput(all as never), { impliedGatewayClass: true });
    const m = t.tables[0]?.models["default/m"] as ConcreteModelIR | undefined;
    assert.equal(m?.unavailable, undefined, JSON.stringify(spec));
    assert.ok(m?.provider, JSON.stringify(spec));
    const status = modelStatuses(t).find((x) => x.name === "m")?.status as { parents: { conditions: Doc[] }[] };
    const conditions = status.parents[0]?.conditions ?? [];
    assert.equal(
      conditions.find((c) => c.type === "Warning"),
      undefined,
      `${JSON.stringify(spec)}: ${JSON.stringify(conditions)}`,
    );
    assert.equal(conditions.find((c) => c.type === "Accepted")?.status, "True");
  }
});
