// What Sluice's health scoring of AI providers (xds/llm-health.ts, src/health/) costs per request: the same two fake
// providers (priority groups, so the upstream LLM stage runs) behind an AI GwBackend without scoring (`/plain`: a
// STRICT_DNS cluster) and with it (`/scored`: EDS, the health ext_proc last before the codec, a condition reading the
// status). Prints CPU time per request of Envoy and Sluice and wall p50 for each, from the same run, so the difference
// is the health ext_proc stream (observability mode: Envoy does not wait for it). CPU from /proc (10 ms ticks).
//
//   node dist/bench/llm-health.js [requests]

import { startLlmPair } from "./llm-pair.js";

const N = Number(process.argv[2] ?? 1500);
const pair = await startLlmPair({
  base: "plain",
  other: "scored",
  primaryHost: "localhost",
  backendLines: `  policies:
    health: { unhealthyCondition: "response.code == 429 || response.code >= 500", eviction: { restoreHealth: 100 } }`,
});
try {
  await pair.measure(N);
} finally {
  await pair.stop();
}
