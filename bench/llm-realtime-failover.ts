// What failover costs a Realtime session through Sluice's relay when it opens (upgrade sent → session.created), three
// routes measured alternately in one run, each relayed for a `tokens` limit: one provider (the baseline), two priority
// groups whose first provider serves (the provider list built and the health scoring read, nothing tried twice), and
// two groups whose first refuses the upgrade 503 (one more handshake before the second opens). Medians of N sessions
// each. Run: node dist/bench/llm-realtime-failover.js [N]

import { type FakeRealtime, realtimeBackendYaml, startFakeRealtime } from "../test/helpers/fake-realtime.js";
import { gwBackendRoute, routeTrafficPolicy } from "../test/helpers/gateway.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { openRealtime } from "../test/helpers/realtime-client.js";

const N = Number(process.argv[2] ?? 200);

function twoGroups(name: string, first: FakeRealtime, second: FakeRealtime): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: first, providerA: {}, host: 127.0.0.1, port: ${first.port} }]
      - providers: [{ name: second, providerA: {}, host: 127.0.0.1, port: ${second.port} }]
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/realtime: Realtime }
${gwBackendRoute(name, name, { rewrite: "/v1" })}`;
}

const budget = (route: string) =>
  routeTrafficPolicy(`budget-${route}`, route, "    rateLimit: { local: [{ tokens: 1000000000, unit: Hours }] }\n");

const rt = await startFakeRealtime({ name: "rt", apiKey: "sk-provider" });
const down = await startFakeRealtime({ name: "down", apiKey: "sk-provider", refuse: "503 Service Unavailable" });
const env = await startLlmEnv(
  realtimeBackendYaml(rt) +
    gwBackendRoute("single", "realtime", { rewrite: "/v1" }) +
    budget("single") +
    twoGroups("serving", rt, down) +
    budget("serving") +
    twoGroups("failing", down, rt) +
    budget("failing"),
  "/single/v1/realtime",
);

async function open(prefix: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const { ws, next } = await openRealtime(env.port, `/${prefix}/v1/realtime`, "client-key");
  await next();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  ws.close();
  return ms;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
try {
  const routes = ["single", "serving", "failing"] as const;
  for (const r of routes) for (let i = 0; i < 10; i++) await open(r);
  const times: Record<string, number[]> = { single: [], serving: [], failing: [] };
  for (let i = 0; i < N; i++) for (const r of routes) times[r]?.push(await open(r));
  const base = median(times.single ?? []);
  console.log(`${N} sessions per route, opened one after the other, alternating`);
  for (const r of routes) {
    const m = median(times[r] ?? []);
    console.log(
      `${r.padEnd(8)} median ${m.toFixed(2).padStart(6)} ms to session.created, ${(m / base).toFixed(2)}x single`,
    );
  }
  console.log(`the refusing provider answered ${down.handshakes.length} upgrades`);
} finally {
  await env.stop();
  await rt.close();
  await down.close();
}
