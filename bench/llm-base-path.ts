// Micro-benchmark of a GwModel `baseURL` path (provider.ts providerPath): µs per provider request built for a Gemini
// generateContent and a SigV4-signed Bedrock Converse, with and without a base path, measured in the same run (the
// ratio is what a base path costs). Run: node dist/bench/llm-base-path.js
import { providerRequest } from "../src/extproc/llm/provider.js";
import type { LlmProviderEntry } from "../src/translate/llm/table.js";

const keys = { accessKeyId: "AKIDBENCH", secretAccessKey: "bench-secret" };
const body = JSON.stringify({ messages: [{ role: "user", content: [{ text: "hello ".repeat(100) }] }] });
const gemini: LlmProviderEntry = {
  name: "g",
  kind: "gemini",
  authority: "gateway.ai.cloudflare.com",
  settings: {},
  auth: { headers: { "x-goog-api-key": "k" }, query: {} },
  ai: {},
};
const bedrock: LlmProviderEntry = {
  name: "b",
  kind: "bedrock",
  authority: "proxy.corp",
  settings: { region: "eu-west-1" },
  auth: { headers: {}, query: {}, aws: { keys, region: "", service: "bedrock" } },
  ai: {},
};

function perCall(p: LlmProviderEntry, format: "generate-content" | "converse", n: number): number {
  const creds = p.kind === "bedrock" ? { aws: keys } : {};
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) providerRequest(p, format, "model-x", false, body, creds);
  return Number(process.hrtime.bigint() - t0) / 1000 / n;
}

const rows: [string, LlmProviderEntry, "generate-content" | "converse", number][] = [
  ["gemini generateContent", gemini, "generate-content", 400_000],
  ["bedrock converse (SigV4)", bedrock, "converse", 40_000],
];
for (const [label, p, format, n] of rows) {
  const based = { ...p, basePath: "/v1/acct/gw/provider" };
  perCall(p, format, n / 10);
  perCall(based, format, n / 10);
  // Interleaved rounds, best of five each, so both see the same machine load.
  let plain = Number.POSITIVE_INFINITY;
  let withBase = Number.POSITIVE_INFINITY;
  for (let r = 0; r < 5; r++) {
    plain = Math.min(plain, perCall(p, format, n));
    withBase = Math.min(withBase, perCall(based, format, n));
  }
  console.log(
    `${label}: ${plain.toFixed(3)} us without a base path, ${withBase.toFixed(3)} us with one (x${(withBase / plain).toFixed(2)})`,
  );
}
