// What a provider's hop costs per request (xds/llm-provider-hop.ts): the same two fake providers (priority groups, so
// the upstream LLM stage runs) behind an AI GwBackend without connection settings of the primary's own (`/plain`: its
// endpoint in the AI cluster) and with them (`/hop`: `policies.tcp.connectTimeout`, so the primary is reached through
// its internal listener, HCM and cluster). Every request goes to the primary. Prints CPU time per request of Envoy and
// Sluice and wall p50 for each, alternating cases in the same run, so the difference is the hop. CPU from /proc (10 ms
// ticks).
//
//   node dist/bench/llm-provider-hop.js [requests]

import { startLlmPair } from "./llm-pair.js";

const N = Number(process.argv[2] ?? 1500);
const pair = await startLlmPair({
  base: "plain",
  other: "hop",
  primaryPolicies: ", policies: { tcp: { connectTimeout: 2s } }",
});
try {
  await pair.measure(N);
  const dump = JSON.stringify(await pair.env.envoy.configDump());
  if (!dump.includes('"llm-provider/backend/default/hop/primary"')) throw new Error("the /hop case has no hop");
} finally {
  await pair.stop();
}
