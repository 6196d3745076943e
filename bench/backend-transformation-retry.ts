// What a Service backend's transformation costs across attempts (extproc/attempt-journal.ts): each attempt seals the
// request header changes it made into the request's dynamic metadata, and the next opens and undoes them. Routes:
// `/plain` (no transformation), `/once` (a header transformation, one attempt: one seal per request), `/retried` (the
// same, the backend failing every request's first attempt with a 503 and the route retrying it: two streams, two
// seals and one open per request). Prints CPU time per request of Envoy and Sluice and wall p50 for each, from the same
// run; and the seal + open of a three-header journal alone, in this process. CPU from /proc (10 ms ticks): run enough
// requests (default 3000).
//
//   node dist/bench/backend-transformation-retry.js [requests]

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import autocannon from "autocannon";
import { openJournal, sealJournal } from "../src/extproc/attempt-journal.js";
import { localService, rulePolicy, servicePolicy, startTestGateway } from "../test/helpers/gateway.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 3000);

// A 503 for every other request on /retried (each request's first attempt, as requests are sequential per connection
// and the retry follows at once), a 200 otherwise.
let flip = 0;
const backend = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    if ((req.url ?? "").startsWith("/retried") && flip++ % 2 === 0) res.writeHead(503).end("again");
    else res.writeHead(200).end("ok");
  });
});
await new Promise<void>((r) => backend.listen(0, "127.0.0.1", r));
const port = (backend.address() as AddressInfo).port;

const TRANSFORM = `    transformation:
      request:
        add: [{ name: x-added, value: "'v'" }]
        set: [{ name: x-count, value: "request.headers['x-count'] + '1'" }]
        remove: [x-secret]`;
const names = ["plain", "once", "retried"];
const gw = await startTestGateway(
  () => `${names.map((n) => localService(n, port)).join("")}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${names.map((n) => `    - name: ${n}\n      matches: [{ path: { type: PathPrefix, value: /${n} } }]\n      backendRefs: [{ name: ${n}, port: 80 }]`).join("\n")}
${rulePolicy("retried", "retry: { codes: [503], attempts: 2 }")}${servicePolicy("once", TRANSFORM, "once-t")}${servicePolicy(
  "retried",
  TRANSFORM,
  "retried-t",
)}`,
  "/plain",
  (s) => s === 200,
);

async function run(path: string) {
  const opts = {
    url: `http://127.0.0.1:${gw.port}${path}`,
    // One connection: a request's retry comes right after its first attempt, so the backend's alternation holds.
    connections: 1,
    headers: { "x-count": "0", "x-added": "c", "x-secret": "s3" },
  };
  await autocannon({ ...opts, amount: 300 });
  const e0 = cpuMs(gw.envoy.process.child.pid);
  const s0 = cpuMs(gw.sluice.child.pid);
  const r = await autocannon({ ...opts, amount: N });
  const envoy = ((cpuMs(gw.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(gw.sluice.child.pid) - s0) * 1000) / N;
  return { path, ok: r["2xx"], errors: r.non2xx + r.errors, envoyUs: envoy, sluiceUs: sluice, p50ms: r.latency.p50 };
}

try {
  for (const path of ["/plain", "/once", "/retried", "/plain", "/once", "/retried"]) {
    const x = await run(path);
    console.log(
      `${x.path.padEnd(9)} 2xx ${x.ok} other ${x.errors}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
  const journal = new Map([
    ["x-added", { original: "c", written: "c,v" }],
    ["x-count", { original: "0", written: "01" }],
    ["x-secret", { original: "s3" }],
  ]);
  const M = 100_000;
  const t0 = process.cpuUsage();
  for (let i = 0; i < M; i++) openJournal(sealJournal(journal));
  const t = process.cpuUsage(t0);
  console.log(`seal + open of a three-header journal: ${((t.user + t.system) / M).toFixed(1)} µs CPU`);
} finally {
  await gw.stop();
  backend.closeAllConnections();
  backend.close();
}
