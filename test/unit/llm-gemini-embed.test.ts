// A generateContent client's embeddings: docs/llm.md's table is the code's, and the directions each provider family
// gets (the request and answer shapes are in the goldens, test/golden/llm/*embed-content*).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { clientFormatOf, googleMethodOf } from "../../src/extproc/llm/provider.js";
import { findDirection } from "../../src/llm/registry.js";
import { embedMarkdown } from "../../src/llm/translate/gemini-client-embed.js";

test("docs/llm.md shows the embedContent table the translators follow", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  assert.ok(doc.includes(embedMarkdown()), "docs/llm.md's embedContent table differs from embedMarkdown()");
});

test("embedContent and batchEmbedContents paths are Google's embeddings clients on Completions and Embeddings routes", () => {
  for (const t of ["Completions", "Embeddings"] as const) {
    assert.equal(clientFormatOf(t, "/v1beta/models/text-embedding-3-small:embedContent"), "embed-content");
    assert.equal(clientFormatOf(t, "/v1beta/models/m:batchEmbedContents"), "batch-embed-contents");
  }
  assert.equal(clientFormatOf("Messages", "/v1beta/models/m:embedContent"), "messages");
  assert.deepEqual(googleMethodOf("/v1beta/models/gemini-embedding-001:batchEmbedContents"), {
    model: "gemini-embedding-001",
    stream: false,
  });
  for (const client of ["embed-content", "batch-embed-contents"] as const) {
    for (const provider of ["embeddings", "vertex-embed", "titan-embed"] as const) {
      assert.ok(findDirection(client, provider), `${client}→${provider}`);
    }
    assert.equal(findDirection(client, "messages"), undefined, "Anthropic has no embeddings API");
  }
  assert.ok(findDirection("embed-content", "gemini-embed-content"));
  assert.ok(findDirection("batch-embed-contents", "gemini-embed"));
});
