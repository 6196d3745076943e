// Micro-benchmark of the work this adds per request (src/extproc/llm/provider.ts modelsRequestOf, which every router
// stage now runs on the request headers to tell a model list request), against routeTypeOf on the same path (what the
// stage paid before), measured in the same run; then a model list translated between families
// (src/extproc/llm/models/list.ts listingAnswer) for 20 and 1000 models (Anthropic's whole list, a full provider page),
// against JSON.parse + JSON.stringify of the same text (what any buffered answer costs), and one embedContent batch
// of 8 contents to OpenAI's embeddings form and back (llm/translate/gemini-client-embed.ts).
// Run: node dist/bench/llm-model-lists.js

import { listingAnswer } from "../src/extproc/llm/models/list.js";
import { modelsRequestOf, routeTypeOf } from "../src/extproc/llm/provider.js";
import { embedToOpenAiRequest, openAiToEmbedResponse } from "../src/llm/translate/gemini-client-embed.js";
import type { RouteType } from "../src/translate/llm/table.js";
import { microBench } from "./micro.js";

const bench = (name: string, iterations: number, fn: () => void) => microBench(name, iterations, fn, { width: 66 });

const routes: (readonly [string, RouteType])[] = [
  ["/v1/chat/completions", "Completions"],
  ["/v1/models", "Models"],
  ["/v1/embeddings", "Embeddings"],
];
const chat = {
  ":method": "POST",
  ":path": "/openai/v1/chat/completions",
  authorization: "Bearer sk-client",
  "content-type": "application/json",
  "user-agent": "OpenAI/JS 5.0.0",
};
const base = bench("routeTypeOf (before)", 2_000_000, () => routeTypeOf(routes, chat[":path"]));
const added = bench("routeTypeOf + modelsRequestOf, a chat completion (now)", 2_000_000, () => {
  modelsRequestOf(routeTypeOf(routes, chat[":path"]), chat);
});
console.log(`  added per request: ${(added - base).toFixed(3)} µs`);

const anthropicList = (n: number) =>
  JSON.stringify({
    data: Array.from({ length: n }, (_, i) => ({
      type: "model",
      id: `claude-model-${i}`,
      display_name: `Claude Model ${i}`,
      created_at: new Date(1_700_000_000_000 + i * 86_400_000).toISOString(),
    })),
    has_more: false,
  });
for (const n of [20, 1000]) {
  const text = anthropicList(n);
  const iterations = n === 20 ? 100_000 : 2_000;
  const parse = bench(`JSON.parse + stringify, ${n} Anthropic models`, iterations, () => {
    JSON.stringify(JSON.parse(text));
  });
  for (const client of ["openai", "gemini"] as const) {
    const page = { op: "list" as const, page: {} };
    const t = bench(`listingAnswer anthropic → ${client}, ${n} models`, iterations, () => {
      listingAnswer({ client, call: page, from: "anthropic", kind: "anthropic" }, 200, text, {});
    });
    console.log(`  ratio to parse + stringify: ${(t / parse).toFixed(2)}`);
  }
}

const batch = {
  model: "text-embedding-3-small",
  requests: Array.from({ length: 8 }, (_, i) => ({
    model: "models/text-embedding-3-small",
    content: { parts: [{ text: `sentence number ${i} to embed` }] },
    taskType: "RETRIEVAL_DOCUMENT",
    outputDimensionality: 256,
  })),
};
const answer = {
  object: "list",
  data: Array.from({ length: 8 }, (_, index) => ({
    object: "embedding",
    index,
    embedding: Array.from({ length: 256 }, (_, i) => i / 256),
  })),
  usage: { prompt_tokens: 48, total_tokens: 48 },
};
const answerText = JSON.stringify(answer);
const parsed = bench("JSON.parse + stringify, 8 × 256 floats", 20_000, () => JSON.stringify(JSON.parse(answerText)));
const embed = bench("batchEmbedContents → embeddings → Google's (parse included)", 20_000, () => {
  embedToOpenAiRequest(batch, undefined, true);
  JSON.stringify(openAiToEmbedResponse(JSON.parse(answerText), true));
});
console.log(`  ratio to parse + stringify: ${(embed / parsed).toFixed(2)}`);
