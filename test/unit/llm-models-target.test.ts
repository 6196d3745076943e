// modelsTarget (src/llm/providers.ts): where each provider kind lists its models for the `Models` route type, in its
// own URL form (the API documentation of each: OpenAI GET /v1/models, Azure OpenAI GET /openai/models?api-version= and
// the v1 form /openai/v1/models, Anthropic GET /v1/models, Gemini GET /v1beta/models).

import assert from "node:assert/strict";
import { test } from "node:test";
import { modelsTarget } from "../../src/llm/providers.js";

test("each provider kind's model list: path and the headers it needs", () => {
  const at = (p: Parameters<typeof modelsTarget>[0]) => {
    const t = modelsTarget(p);
    return t === undefined ? undefined : { host: t.host, path: t.path, headers: t.headers };
  };
  assert.deepEqual(at({ kind: "openai", apiKey: "k" }), {
    host: "api.openai.com",
    path: "/v1/models",
    headers: { authorization: "Bearer k" },
  });
  assert.equal(at({ kind: "openai", pathPrefix: "/api/v2" })?.path, "/api/v2/models");
  assert.deepEqual(
    at({
      kind: "azure-openai",
      endpoint: "https://res.openai.azure.com/",
      deploymentName: "d",
      apiVersion: "2024-10-21",
    }),
    {
      host: "res.openai.azure.com",
      path: "/openai/models?api-version=2024-10-21",
      headers: {},
    },
  );
  assert.equal(at({ kind: "azure-openai", endpoint: "res.openai.azure.com" })?.path, "/openai/v1/models");
  assert.equal(
    at({ kind: "azure-foundry", resourceName: "r", projectName: "p" })?.path,
    "/api/projects/p/openai/v1/models",
  );
  const anthropic = at({ kind: "anthropic", apiKey: "a" });
  assert.equal(anthropic?.path, "/v1/models");
  assert.equal(anthropic?.headers["x-api-key"], "a");
  assert.ok(anthropic?.headers["anthropic-version"]);
  assert.deepEqual(at({ kind: "gemini", apiKey: "g" }), {
    host: "generativelanguage.googleapis.com",
    path: "/v1beta/models",
    headers: { "x-goog-api-key": "g" },
  });
  assert.equal(at({ kind: "bedrock", region: "us-east-1" }), undefined);
  assert.equal(at({ kind: "vertex", projectId: "p" }), undefined);
});
