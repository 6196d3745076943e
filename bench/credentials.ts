// What backend credentials cost through a real Envoy (docs/credentials.md): requests/s, p50/p99 latency and Sluice's
// CPU time per request (from /proc, robust to the machine's load) of six routes on one Gateway, as ratios to the route
// without credentials, measured in the same run (rounds interleave the routes; the median round is reported):
//   none     no backend.auth (baseline)
//   native   key into a header: Envoy's credential_injector, no call to Sluice
//   query    key at a query parameter: the credential ext_proc, headers only, nothing minted
//   jwt      jwtSign (ES256, 300 s ttl): the ext_proc and a cached JWT
//   sigv4    cloudA with a Secret's keys over a 1 KiB POST body: the ext_proc with the body buffered and signed
//   agentcore  a GwBackend cloudA.agentCore (its own cloudA keys): the same, plus the InvokeAgentRuntime rewrite
//            (the runtime endpoint is the echo server, by AWS_ENDPOINT_URL_BEDROCK_AGENTCORE)
// The load generator is autocannon; the backend is an echo server in this process.
//
//   node dist/bench/credentials.js [--connections 8] [--seconds 4] [--rounds 3]

import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { gatewayYaml, localService } from "../test/helpers/gateway.js";
import { freePort, request, startEchoUpstream, waitFor } from "../test/helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../test/helpers/processes.js";

const { values } = parseArgs({
  options: {
    connections: { type: "string", default: "8" },
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "3" },
  },
});
const ROUTES = ["none", "native", "query", "jwt", "sigv4", "agentcore"] as const;
const key = generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey.export({ type: "pkcs8", format: "pem" });

const echo = await startEchoUpstream("bench");
const port = await freePort();
const auth: Record<(typeof ROUTES)[number], string | undefined> = {
  none: undefined,
  native: "{ key: bench-key }",
  query: "{ key: bench-key, location: { queryParameter: { name: k } } }",
  jwt: "{ jwtSign: { signingKeyRef: { name: signer }, alg: ES256, claims: { sub: bench } } }",
  sigv4: "{ cloudA: { secretRef: { name: aws }, region: eu-west-1, serviceName: execute-api } }",
  // The GwBackend's own policies (below).
  agentcore: undefined,
};
/** CPU seconds (user + system) a process has used, from /proc. */
const cpuSeconds = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(f[11]) + Number(f[12])) / 100;
};
const cfg = tempConfigDir();
cfg.write(
  "gw.yaml",
  `${gatewayYaml(port)}${ROUTES.map((r) => localService(r, echo.port)).join("")}---
apiVersion: v1
kind: Secret
metadata: { name: signer, namespace: default }
stringData: { signingKey: ${JSON.stringify(String(key))} }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: AKIDBENCH, secretKey: bench-secret }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${ROUTES.map((r) => `    - matches: [{ path: { type: PathPrefix, value: /${r} } }]\n      backendRefs: [${r === "agentcore" ? "{ group: sluice.dev, kind: GwBackend, name: agentcore }" : `{ name: ${r}, port: 80 }`}]`).join("\n")}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: agentcore, namespace: default }
spec:
  cloudA: { agentCore: { agentRuntimeArn: "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/bench-Ab12Cd34Ef" } }
  policies: { auth: { cloudA: { secretRef: { name: aws } } } }
${ROUTES.filter((r) => auth[r] !== undefined)
  .map(
    (r) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${r}, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: ${r} }]
  backend: { auth: ${auth[r]} }
`,
  )
  .join("")}`,
);
const sluice = await startSluice("serve", cfg.dir, {
  env: { AWS_ENDPOINT_URL_BEDROCK_AGENTCORE: `http://127.0.0.1:${echo.port}` },
});
const sluicePid = sluice.child.pid as number;
const envoy = await startTestEnvoy(sluice);
const body = "x".repeat(1024);
try {
  for (const r of ROUTES) {
    await waitFor(`/${r}`, async () => ((await request(port, `/${r}/`)).status === 200 ? true : undefined), 20_000);
  }
  const connections = Number(values.connections);
  const seconds = Number(values.seconds);
  const results = new Map<string, { rps: number; p50: number; p99: number; cpuUs: number }[]>();
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const r of ROUTES) {
      const cpu0 = cpuSeconds(sluicePid);
      const res = await autocannon({
        url: `http://127.0.0.1:${port}/${r}/x`,
        connections,
        duration: seconds,
        method: "POST",
        body,
        headers: { "content-type": "application/json" },
      });
      if (res.non2xx > 0 || res.errors > 0) throw new Error(`/${r}: ${res.non2xx} non-2xx, ${res.errors} errors`);
      const list = results.get(r) ?? [];
      const cpuUs = ((cpuSeconds(sluicePid) - cpu0) * 1e6) / Math.max(1, res.requests.total);
      list.push({ rps: res.requests.average, p50: res.latency.p50, p99: res.latency.p99, cpuUs });
      results.set(r, list);
    }
  }
  const median = (r: string) => {
    const l = [...(results.get(r) ?? [])].sort((a, b) => a.rps - b.rps);
    return l[Math.floor(l.length / 2)] as { rps: number; p50: number; p99: number; cpuUs: number };
  };
  const base = median("none");
  console.log(
    `load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(" ")}; ${connections} connections, ${seconds} s x ${values.rounds} rounds`,
  );
  console.log("route      req/s    ratio  p50 ms  p99 ms  Sluice CPU µs/req");
  for (const r of ROUTES) {
    const m = median(r);
    console.log(
      `${r.padEnd(10)} ${m.rps.toFixed(0).padStart(6)}  ${(m.rps / base.rps).toFixed(2).padStart(5)}  ${String(m.p50).padStart(6)}  ${String(m.p99).padStart(6)}  ${m.cpuUs.toFixed(0).padStart(8)}`,
    );
  }
} finally {
  await envoy.stop();
  await sluice.stop();
  await echo.close();
  cfg.cleanup();
}
