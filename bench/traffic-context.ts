// What Sluice's context ext_proc (src/extproc/context.ts) costs per request: the same JWT verified by Envoy's
// jwt_authn, read from the Authorization header natively (`/native`) and from `jwtAuthentication.location.expression`
// (`/expr`: a Sluice ext_proc call before jwt_authn). Prints CPU time per request of Envoy and Sluice for each route
// and wall p50, from the same run, so the difference is the context hop. CPU from /proc (10 ms ticks): run enough
// requests (default 3000 per route).
//
//   node dist/bench/traffic-context.js [requests]

import autocannon from "autocannon";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { localService, rulePolicy, startTestGateway } from "../test/helpers/gateway.js";
import { startEchoUpstream } from "../test/helpers/net.js";
import { cpuMs } from "./proc.js";

const N = Number(process.argv[2] ?? 3000);
const ISS = "https://issuer.test";

const key = await generateKeyPair("RS256", { extractable: true });
const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(key.publicKey)), kid: "k1", alg: "RS256" }] });
const token = await new SignJWT({ sub: "bench" })
  .setProtectedHeader({ alg: "RS256", kid: "k1" })
  .setIssuer(ISS)
  .setAudience("api")
  .setIssuedAt()
  .setExpirationTime("1h")
  .sign(key.privateKey);
const up = await startEchoUpstream("app");
const provider = `providers: [{ issuer: "${ISS}", audiences: [api], jwks: { inline: '${jwks}' } }]`;
const gw = await startTestGateway(
  () => `${localService("app", up.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["native", "expr", "open"]
  .map(
    (n) => `    - name: ${n}
      matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ name: app, port: 80 }]`,
  )
  .join("\n")}
${rulePolicy("native", `jwtAuthentication: { ${provider} }`)}${rulePolicy(
  "expr",
  `jwtAuthentication:
  ${provider}
  location: { expression: "request.headers['authorization'].substring(7)" }`,
)}`,
  "/open",
  (s) => s === 200,
);

async function run(path: string) {
  // Warm up (connections, JIT, the CEL compile cache).
  await autocannon({
    url: `http://127.0.0.1:${gw.port}${path}`,
    connections: 4,
    amount: 300,
    headers: { authorization: `Bearer ${token}` },
  });
  const e0 = cpuMs(gw.envoy.process.child.pid);
  const s0 = cpuMs(gw.sluice.child.pid);
  const r = await autocannon({
    url: `http://127.0.0.1:${gw.port}${path}`,
    connections: 4,
    amount: N,
    headers: { authorization: `Bearer ${token}` },
  });
  const envoy = ((cpuMs(gw.envoy.process.child.pid) - e0) * 1000) / N;
  const sluice = ((cpuMs(gw.sluice.child.pid) - s0) * 1000) / N;
  return { path, ok: r["2xx"], errors: r.non2xx + r.errors, envoyUs: envoy, sluiceUs: sluice, p50ms: r.latency.p50 };
}

try {
  for (const path of ["/native", "/expr", "/native", "/expr"]) {
    const x = await run(path);
    console.log(
      `${x.path.padEnd(8)} 2xx ${x.ok} other ${x.errors}  envoy ${x.envoyUs.toFixed(0)} µs/req  sluice ${x.sluiceUs.toFixed(0)} µs/req  p50 ${x.p50ms} ms`,
    );
  }
} finally {
  await gw.stop();
  await up.close();
}
