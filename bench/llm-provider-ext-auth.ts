// What a GwPolicy's extAuth for one AI provider costs per request (extproc/llm/provider-ext-auth.ts): the same two fake
// providers (priority groups, so the upstream LLM stage runs) behind an AI GwBackend without it (`/plain`) and with a
// gRPC extAuth on the first provider (`/checked`: Sluice calls the service once per attempt; `/cached`: the same with a
// decision cache keyed on the client's Authorization header). Prints CPU time per request of Envoy and Sluice, and wall
// p50, from the same run; the authorization service runs in this process, so its CPU is counted in neither. CPU from
// /proc (10 ms ticks).
//
//   node dist/bench/llm-provider-ext-auth.js [requests]

import autocannon from "autocannon";
import { startFakeProvider } from "../test/helpers/fake-providers.js";
import { localService } from "../test/helpers/gateway.js";
import { startGrpcExtAuthz } from "../test/helpers/grpc-services.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 1500);
const primary = await startFakeProvider({ name: "primary" });
const backup = await startFakeProvider({ name: "backup" });
const authz = await startGrpcExtAuthz();
const backend = (name: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: 127.0.0.1, port: ${primary.port} }]
      - providers: [{ name: backup, providerA: {}, host: 127.0.0.1, port: ${backup.port} }]
`;
const policy = (name: string, more: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name}, sectionName: primary }]
  backend:
    extAuth:
      backendRef: { name: authz, port: 80 }
      grpc: {}
${more}`;
const rule = (name: string) => `    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]
`;
const env = await startLlmEnv(
  `${localService("authz", authz.port)}${backend("plain")}${backend("checked")}${backend("cached")}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rule("plain")}${rule("checked")}${rule("cached")}${policy("checked", "")}${policy(
  "cached",
  `      cache: { key: ["request.headers['authorization']"], ttl: 60s }
`,
)}`,
  "/plain/v1/chat/completions",
);

const body = JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 20 });
async function run(prefix: string) {
  const opts = {
    url: `${env.baseUrl}${prefix}/v1/chat/completions`,
    method: "POST" as const,
    headers: { "content-type": "application/json", authorization: "Bearer k", "x-allow": "yes" },
    body,
    connections: 4,
  };
  await autocannon({ ...opts, amount: 200 });
  const checks = authz.checks.length;
  const e0 = cpuMs(env.envoy.process.child.pid);
  const s0 = cpuMs(env.sluice.child.pid);
  const r = await autocannon({ ...opts, amount: N });
  return {
    prefix,
    ok: r["2xx"],
    errors: r.non2xx + r.errors,
    checks: authz.checks.length - checks,
    envoyUs: ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / N,
    sluiceUs: ((cpuMs(env.sluice.child.pid) - s0) * 1000) / N,
    p50ms: r.latency.p50,
  };
}

try {
  for (const prefix of ["/plain", "/checked", "/cached", "/plain", "/checked", "/cached"]) {
    const x = await run(prefix);
    // The helper keeps every CheckRequest: forget them between runs.
    authz.checks.length = 0;
    console.log(
      `${x.prefix.padEnd(9)} 2xx ${x.ok} other ${x.errors} checks ${x.checks}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
} finally {
  await env.stop();
  await primary.close();
  await backup.close();
  await authz.close();
}
