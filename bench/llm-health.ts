// What Sluice's health scoring of AI providers (xds/llm-health.ts, src/health/) costs per request: the same two fake
// providers (priority groups, so the upstream LLM stage runs) behind an AI GwBackend without scoring (`/plain`: a
// STRICT_DNS cluster) and with it (`/scored`: EDS, the health ext_proc last before the codec, a condition reading the
// status). Prints CPU time per request of Envoy and Sluice and wall p50 for each, from the same run, so the difference
// is the health ext_proc stream (observability mode: Envoy does not wait for it). CPU from /proc (10 ms ticks).
//
//   node dist/bench/llm-health.js [requests]

import autocannon from "autocannon";
import { startFakeProvider } from "../test/helpers/fake-providers.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 1500);
const primary = await startFakeProvider({ name: "primary" });
const backup = await startFakeProvider({ name: "backup" });
const backend = (name: string, health: string) => `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: localhost, port: ${primary.port} }]
      - providers: [{ name: backup, providerA: {}, host: 127.0.0.1, port: ${backup.port} }]
${health}
---`;
const env = await startLlmEnv(
  `${backend("plain", "")}${backend(
    "scored",
    `  policies:
    health: { unhealthyCondition: "response.code == 429 || response.code >= 500", eviction: { restoreHealth: 100 } }`,
  )}
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /plain } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: plain }]
    - matches: [{ path: { type: PathPrefix, value: /scored } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: scored }]
`,
  "/plain/v1/chat/completions",
);

const body = JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 20 });
async function run(prefix: string) {
  const opts = {
    url: `${env.baseUrl}${prefix}/v1/chat/completions`,
    method: "POST" as const,
    headers: { "content-type": "application/json", authorization: "Bearer k" },
    body,
    connections: 4,
  };
  await autocannon({ ...opts, amount: 200 });
  const e0 = cpuMs(env.envoy.process.child.pid);
  const s0 = cpuMs(env.sluice.child.pid);
  const r = await autocannon({ ...opts, amount: N });
  return {
    prefix,
    ok: r["2xx"],
    errors: r.non2xx + r.errors,
    envoyUs: ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / N,
    sluiceUs: ((cpuMs(env.sluice.child.pid) - s0) * 1000) / N,
    p50ms: r.latency.p50,
  };
}

try {
  for (const prefix of ["/plain", "/scored", "/plain", "/scored"]) {
    const x = await run(prefix);
    console.log(
      `${x.prefix.padEnd(8)} 2xx ${x.ok} other ${x.errors}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
} finally {
  await env.stop();
  await primary.close();
  await backup.close();
}
