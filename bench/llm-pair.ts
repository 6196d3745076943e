// Two AI GwBackends over the same two fake providers (priority groups, so the upstream LLM stage runs), one route
// prefix each, measured alternately in one run: what a setting of the second costs per request against the first.
// Used by llm-health.ts and llm-provider-hop.ts. CPU from /proc (10 ms ticks).

import autocannon from "autocannon";
import { type FakeProvider, startFakeProvider } from "../test/helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../test/helpers/llm-env.js";
import { cpuMs } from "./proc.js";

export interface LlmPair {
  readonly env: LlmEnv;
  /** Alternates `/<base>` and `/<other>`, twice each, printing Envoy's and Sluice's CPU per request and wall p50. */
  measure(requests: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * GwBackends `base` and `other`, routed at `/<base>` and `/<other>`: the same providers (the primary at `primaryHost`),
 * `other` with what is measured (its primary's own policies, or lines of its own after `ai`).
 */
export async function startLlmPair(opts: {
  readonly base: string;
  readonly other: string;
  readonly primaryHost?: string;
  /** `, policies: {...}` on the other GwBackend's primary provider. */
  readonly primaryPolicies?: string;
  /** Lines after the other GwBackend's `ai` (its own `policies`). */
  readonly backendLines?: string;
  /** Lines after the base GwBackend's `ai`. */
  readonly baseLines?: string;
  /** More resources (YAML after `---`); the HTTPRoute is `llm`, its rules named `base` and `other`. */
  readonly resources?: string;
}): Promise<LlmPair> {
  const primary: FakeProvider = await startFakeProvider({ name: "primary" });
  const backup: FakeProvider = await startFakeProvider({ name: "backup" });
  const backend = (name: string, own: string, lines: string) => `
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: primary, providerA: {}, host: ${opts.primaryHost ?? "127.0.0.1"}, port: ${primary.port}${own} }]
      - providers: [{ name: backup, providerA: {}, host: 127.0.0.1, port: ${backup.port} }]
${lines}
---`;
  const env = await startLlmEnv(
    `${backend(opts.base, "", opts.baseLines ?? "")}${backend(opts.other, opts.primaryPolicies ?? "", opts.backendLines ?? "")}
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: base
      matches: [{ path: { type: PathPrefix, value: /${opts.base} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${opts.base} }]
    - name: other
      matches: [{ path: { type: PathPrefix, value: /${opts.other} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${opts.other} }]
${opts.resources !== undefined ? `---\n${opts.resources}` : ""}`,
    `/${opts.base}/v1/chat/completions`,
  );
  return {
    env,
    async measure(requests) {
      await measureRoutes(env, [opts.base, opts.other], requests);
    },
    async stop() {
      await env.stop();
      await primary.close();
      await backup.close();
    },
  };
}

/**
 * Chat completions through `/<prefix>/v1/chat/completions` of each prefix, in turn, twice: Envoy's and Sluice's CPU per
 * request (after 200 to warm up) and wall p50, one line per run.
 */
export async function measureRoutes(env: LlmEnv, prefixes: readonly string[], requests: number): Promise<void> {
  const body = JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 20 });
  const run = async (prefix: string, n: number) => {
    const request = {
      url: `${env.baseUrl}${prefix}/v1/chat/completions`,
      method: "POST" as const,
      headers: { "content-type": "application/json", authorization: "Bearer k" },
      body,
      connections: 4,
    };
    await autocannon({ ...request, amount: 200 });
    const e0 = cpuMs(env.envoy.process.child.pid);
    const s0 = cpuMs(env.sluice.child.pid);
    const r = await autocannon({ ...request, amount: n });
    const envoyUs = ((cpuMs(env.envoy.process.child.pid) - e0) * 1000) / n;
    const sluiceUs = ((cpuMs(env.sluice.child.pid) - s0) * 1000) / n;
    console.log(
      `${prefix.padEnd(8)} 2xx ${r["2xx"]} other ${r.non2xx + r.errors}  envoy ${envoyUs.toFixed(0)} µs/req  sluice ${sluiceUs.toFixed(0)} µs/req  p50 ${r.latency.p50} ms`,
    );
  };
  for (let round = 0; round < 2; round++) for (const prefix of prefixes) await run(`/${prefix}`, requests);
}
