// Model lists between families, end to end through a real Envoy with each family's official SDK: the `openai` client
// lists an Anthropic and a Gemini provider (every page of theirs, in OpenAI's list object), the Anthropic client pages
// through an OpenAI and a Gemini provider's list (`limit`, `after_id`, paged by Sluice), and Google's `@google/genai`
// pages through and gets models of OpenAI and Anthropic providers (`pageSize`, `pageToken`, `models.get`), on a
// Completions route too. The same family goes as it is (its own paging). Errors reach each SDK in its own format, and
// a priority group that fails over to a provider of another family is translated for the one that answered.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { prefixRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

function resources(f: FakeProvider, down: FakeProvider): string {
  const backend = (name: string, provider: string, key = "sk-provider") => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { ${provider}, host: 127.0.0.1, port: ${f.port} }
  policies:
    auth: { key: ${key} }
    ai:
      routes: { /v1/models: Models, /v1/chat/completions: Completions }
`;
  return `${backend("openai", "providerA: {}")}${backend("claude", "providerD: {}")}${backend("gemini", "providerE: {}")}${backend("wrongkey", "providerD: {}", "sk-wrong")}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: failover, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: down, providerD: {}, host: 127.0.0.1, port: ${down.port} }
      - providers:
          - { name: up, providerA: {}, host: 127.0.0.1, port: ${f.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/models: Models }
${prefixRoute(["openai", "claude", "gemini", "wrongkey", "failover"], { name: "llm", to: "GwBackend" })}`;
}

describe("model lists between families", { timeout: 90_000 }, () => {
  let fake: FakeProvider;
  let down: FakeProvider;
  let env: LlmEnv;
  const openai = (prefix: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });
  const anthropic = (prefix: string) =>
    new Anthropic({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}`, maxRetries: 0 });
  const google = (prefix: string) =>
    new GoogleGenAI({ apiKey: "client-key", httpOptions: { baseUrl: `${env.baseUrl}/${prefix}` } });
  const seen = () => fake.requests.at(-1);

  before(async () => {
    fake = await startFakeProvider({ name: "prov", apiKey: "sk-provider" });
    down = await startFakeProvider({ name: "down", apiKey: "sk-provider" });
    down.failWith = 503;
    env = await startLlmEnv(resources(fake, down), "/openai/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
    await down?.close();
  });

  test("openai lists an Anthropic provider: its largest page, as OpenAI's list object", async () => {
    const models = [];
    for await (const m of openai("claude").models.list()) models.push(m);
    assert.deepEqual(
      models.map((m) => [m.id, m.owned_by, m.created]),
      [
        ["prov-opus", "anthropic", Date.parse("2025-09-01T00:00:00Z") / 1000],
        ["prov-sonnet", "anthropic", Date.parse("2025-06-01T00:00:00Z") / 1000],
        ["prov-haiku", "anthropic", Date.parse("2024-10-01T00:00:00Z") / 1000],
      ],
    );
    assert.equal(seen()?.path, "/v1/models?limit=1000");
    assert.equal(seen()?.headers["x-api-key"], "sk-provider");
    assert.equal(typeof seen()?.headers["anthropic-version"], "string");
    // One model: the provider's own get.
    const one = await openai("claude").models.retrieve("prov-sonnet");
    assert.deepEqual([one.id, one.object], ["prov-sonnet", "model"]);
    assert.equal(seen()?.path, "/v1/models/prov-sonnet");
  });

  test("openai lists a Gemini provider: models/ taken off the names", async () => {
    const ids: string[] = [];
    for await (const m of openai("gemini").models.list()) ids.push(m.id);
    assert.deepEqual(ids, ["prov-pro", "prov-flash", "prov-embedding"]);
    assert.equal(seen()?.path, "/v1beta/models?pageSize=1000");
    assert.equal(seen()?.headers["x-goog-api-key"], "sk-provider");
  });

  test("Anthropic's SDK pages through an OpenAI and a Gemini provider's list, paged by Sluice", async () => {
    const pages: string[][] = [];
    let page = await anthropic("openai").models.list({ limit: 1 });
    pages.push(page.data.map((m) => m.id));
    while (page.hasNextPage()) {
      page = await page.getNextPage();
      pages.push(page.data.map((m) => m.id));
    }
    assert.deepEqual(pages, [["prov-large"], ["prov-small"]]);
    assert.equal(seen()?.path, "/v1/models", "OpenAI's list has no paging: the whole list is asked each time");
    const all: string[] = [];
    for await (const m of anthropic("gemini").models.list({ limit: 2 })) {
      assert.equal(m.type, "model");
      all.push(`${m.id}|${m.display_name}`);
    }
    assert.deepEqual(all, ["prov-pro|prov pro", "prov-flash|prov flash", "prov-embedding|prov embedding"]);
    const one = await anthropic("openai").models.retrieve("prov-small");
    assert.deepEqual([one.id, one.type, one.display_name], ["prov-small", "model", "prov-small"]);
  });

  test("the same family goes as it is: Anthropic's SDK pages through Anthropic's own list", async () => {
    const ids: string[] = [];
    for await (const m of anthropic("claude").models.list({ limit: 2 })) ids.push(m.id);
    assert.deepEqual(ids, ["prov-opus", "prov-sonnet", "prov-haiku"]);
    assert.equal(seen()?.path, "/v1/models?limit=2&after_id=prov-sonnet", "the client's own paging reaches it");
  });

  test("@google/genai pages through OpenAI and Anthropic providers and gets one model", async () => {
    const names: string[] = [];
    const pager = await google("openai").models.list({ config: { pageSize: 1 } });
    for await (const m of pager) names.push(`${m.name}|${m.supportedActions?.join(",")}`);
    assert.deepEqual(names, ["models/prov-large|generateContent", "models/prov-small|generateContent"]);
    assert.equal(seen()?.path, "/v1/models");
    const claude: string[] = [];
    for await (const m of await google("claude").models.list({ config: { pageSize: 2 } })) {
      claude.push(`${m.name}|${m.displayName}|${m.supportedActions?.join(",")}`);
    }
    assert.deepEqual(claude, [
      "models/prov-opus|prov opus|generateContent,countTokens",
      "models/prov-sonnet|prov sonnet|generateContent,countTokens",
      "models/prov-haiku|prov haiku|generateContent,countTokens",
    ]);
    // A Google client's paths on a Completions route (no Models route names /v1beta/models).
    const one = await google("claude").models.get({ model: "prov-haiku" });
    assert.deepEqual([one.name, one.displayName], ["models/prov-haiku", "prov haiku"]);
    assert.equal(seen()?.path, "/v1/models/prov-haiku");
    // Gemini to Gemini: as it is, the provider's own answer and paging.
    const own = await google("gemini").models.get({ model: "prov-flash" });
    assert.deepEqual([own.name, own.version], ["models/prov-flash", "001"]);
    assert.equal(seen()?.path, "/v1beta/models/prov-flash");
  });

  test("errors reach each SDK in its own format", async () => {
    await assert.rejects(
      openai("wrongkey").models.list(),
      (e: unknown) => e instanceof OpenAI.AuthenticationError && /invalid x-api-key/.test(e.message),
    );
    await assert.rejects(
      google("openai").models.get({ model: "nope" }),
      (e: unknown) => e instanceof ApiError && e.status === 404 && /does not exist/.test(e.message),
    );
    await assert.rejects(
      anthropic("gemini").models.retrieve("nope"),
      (e: unknown) => e instanceof Anthropic.NotFoundError && /not found/.test(e.message),
    );
  });

  test("a failover to a provider of another family is translated for the one that answered", async () => {
    const before = down.requests.length;
    const page = await anthropic("failover").models.list({ limit: 5 });
    assert.deepEqual(
      page.data.map((m) => m.id),
      ["prov-large", "prov-small"],
    );
    assert.ok(down.requests.length > before, "the first group was asked first");
  });
});
