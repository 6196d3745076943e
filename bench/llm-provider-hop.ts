// What a provider's hop costs per request (xds/llm-provider-hop.ts): the same two fake providers (priority groups, so
// the upstream LLM stage runs) behind an AI GwBackend without connection settings of the primary's own (`/plain`: its
// endpoint in the AI cluster) and with them (`/hop`: `policies.tcp.connectTimeout`, so the primary is reached through
// its internal listener, HCM and cluster). Every request goes to the primary. Prints CPU time per request of Envoy and
// Sluice and wall p50 for each, alternating cases in the same run, so the difference is the hop. CPU from /proc (10 ms
// ticks).
//
//   node dist/bench/llm-provider-hop.js [requests]

import autocannon from "autocannon";
import { startFakeProvider } from "../test/helpers/fake-providers.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 1500);
const primary = await startFakeProvider({ name: "primary" });
const backup = await startFakeProvider({ name: "backup" });
const backend = (name: string, own: string) => `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: 127.0.0.1, port: ${primary.port}${own} }]
      - providers: [{ name: backup, providerA: {}, host: 127.0.0.1, port: ${backup.port} }]
---`;
const env = await startLlmEnv(
  `${backend("plain", "")}${backend("hop", ", policies: { tcp: { connectTimeout: 2s } }")}
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /plain } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: plain }]
    - matches: [{ path: { type: PathPrefix, value: /hop } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: hop }]
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
  for (const prefix of ["/plain", "/hop", "/plain", "/hop"]) {
    const x = await run(prefix);
    console.log(
      `${x.prefix.padEnd(8)} 2xx ${x.ok} other ${x.errors}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
  const dump = JSON.stringify(await env.envoy.configDump());
  if (!dump.includes('"llm-provider/backend/default/hop/primary"')) throw new Error("the /hop case has no hop");
} finally {
  await env.stop();
  await primary.close();
  await backup.close();
}
