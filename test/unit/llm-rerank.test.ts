// Rerank to the cloud rerank APIs: docs/llm.md's table is the code's, and each row does what it says.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { findDirection } from "../../src/llm/registry.js";
import { rerankMarkdown } from "../../src/llm/translate/rerank.js";

const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };
const bedrock = findDirection("rerank", "bedrock-rerank")!;
const vertex = findDirection("rerank", "vertex-rank")!;
const arn = "arn:aws:bedrock:eu-west-1::foundation-model/cohere.rerank-v3-5:0";
const meta = { model: "m", stream: false, includeUsage: false };

test("docs/llm.md shows the rerank table the translators follow", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  assert.ok(doc.includes(rerankMarkdown()), "docs/llm.md's rerank table differs from rerankMarkdown()");
});

test("Bedrock: documents as TEXT or JSON sources, top_n capped at the count, max_tokens_per_doc to the model", () => {
  const r = bedrock.request(
    {
      model: "x",
      query: "q",
      documents: ["a", { text: "b" }, { title: "t", text: "c" }],
      top_n: 9,
      max_tokens_per_doc: 64,
    },
    arn,
    ctx,
  );
  assert.equal(r.ok, true, JSON.stringify(r));
  if (!r.ok) return;
  assert.deepEqual(r.body.sources, [
    { type: "INLINE", inlineDocumentSource: { type: "TEXT", textDocument: { text: "a" } } },
    { type: "INLINE", inlineDocumentSource: { type: "TEXT", textDocument: { text: "b" } } },
    { type: "INLINE", inlineDocumentSource: { type: "JSON", jsonDocument: { title: "t", text: "c" } } },
  ]);
  assert.deepEqual(r.body.rerankingConfiguration, {
    type: "BEDROCK_RERANKING_MODEL",
    bedrockRerankingConfiguration: {
      modelConfiguration: { modelArn: arn, additionalModelRequestFields: { max_tokens_per_doc: 64 } },
      numberOfResults: 3,
    },
  });
  const bare = bedrock.request({ model: "x", query: "q", documents: ["a"] }, "cohere.rerank-v3-5:0", ctx);
  assert.equal(!bare.ok && bare.error.param, "model");
});

test("fields the APIs do not have are refused naming them; the answers come back in the Cohere shape", () => {
  const r = bedrock.request({ model: "x", query: "q", documents: ["a"], rank_fields: ["t"] }, arn, ctx);
  assert.equal(!r.ok && r.error.param, "rank_fields");
  const empty = vertex.request({ model: "x", query: "q", documents: [] }, undefined, ctx);
  assert.equal(!empty.ok && empty.error.param, "documents");
  const b = bedrock.response(
    {
      results: [
        { index: 1, relevanceScore: 0.7 },
        { index: 0, relevanceScore: 0.1 },
      ],
    },
    meta,
    ctx,
  );
  assert.deepEqual(b.ok && b.body, {
    id: "rerank-1",
    results: [
      { index: 1, relevance_score: 0.7 },
      { index: 0, relevance_score: 0.1 },
    ],
  });
  const v = vertex.response({ records: [{ id: "2", score: 0.9 }] }, meta, ctx);
  assert.deepEqual(v.ok && v.body.results, [{ index: 2, relevance_score: 0.9 }]);
  const bad = vertex.response({ records: [{ id: "x", score: 1 }] }, meta, ctx);
  assert.equal(!bad.ok && bad.error.status, 502);
});
