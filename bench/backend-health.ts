// What Sluice's backend health scoring (xds/backend-health.ts, src/health/) costs per request: the same echo backend
// behind a Service without a health policy (`/plain`), with the default condition (`/scored`: any 5xx, headers
// only) and with a condition reading the body (`/body`: the body streamed to Sluice). Prints CPU time per request of
// Envoy and Sluice for each route and wall p50, from the same run, so the difference is the health ext_proc (in
// observability mode: Envoy does not wait for it). CPU from /proc (10 ms ticks): run enough requests (default 3000).
//
//   node dist/bench/backend-health.js [requests]

import autocannon from "autocannon";
import { localService, prefixRoute, servicePolicy, startTestGateway } from "../test/helpers/gateway.js";
import { startEchoUpstream } from "../test/helpers/net.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 3000);
const up = await startEchoUpstream("app");
const health: Record<string, string> = {
  scored: "{ eviction: { healthThreshold: 10 } }",
  body: `{ unhealthyCondition: 'response.code >= 500 || response.body.contains("overloaded")' }`,
};
const gw = await startTestGateway(
  () =>
    `${["plain", "scored", "body"].map((n) => localService(n, up.port)).join("")}${prefixRoute(["plain", "scored", "body"])}${Object.entries(
      health,
    )
      .map(([n, h]) => servicePolicy(n, `    health: ${h}`))
      .join("")}`,
  "/plain",
  (s) => s === 200,
);

async function run(path: string) {
  // Warm up (connections, JIT, the CEL compile cache).
  await autocannon({ url: `http://127.0.0.1:${gw.port}${path}`, connections: 4, amount: 300 });
  const e0 = cpuMs(gw.envoy.process.child.pid);
  const s0 = cpuMs(gw.sluice.child.pid);
  const r = await autocannon({ url: `http://127.0.0.1:${gw.port}${path}`, connections: 4, amount: N });
  const envoy = ((cpuMs(gw.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(gw.sluice.child.pid) - s0) * 1000) / N;
  return { path, ok: r["2xx"], errors: r.non2xx + r.errors, envoyUs: envoy, sluiceUs: sluice, p50ms: r.latency.p50 };
}

try {
  for (const path of ["/plain", "/scored", "/body", "/plain", "/scored", "/body"]) {
    const x = await run(path);
    console.log(
      `${x.path.padEnd(8)} 2xx ${x.ok} other ${x.errors}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
} finally {
  await gw.stop();
  await up.close();
}
