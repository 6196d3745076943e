// What InferencePool FailOpen's fallback (docs/llm.md) costs per request with the picker answering: two GwBackends
// over the same two model servers and the same picker, `closed` (a FailClose pool) and `open` (a FailOpen pool with
// two ready Pods, where the router-level LLM ext_proc leaves one in envoy.lb for every request and the picker's answer
// replaces it). Measured alternately in one run. CPU from /proc (10 ms ticks).
//
//   node dist/bench/llm-pool-fallback.js [requests]

import { startFakeProvider } from "../test/helpers/fake-providers.js";
import { inferencePoolYaml, startEndpointPicker } from "../test/helpers/grpc-services.js";
import { startLlmEnv } from "../test/helpers/llm-env.js";
import { freePort } from "../test/helpers/net.js";
import { measureRoutes } from "./llm-pair.js";

const N = Number(process.argv[2] ?? 1500);
const port = await freePort();
const a = await startFakeProvider({ name: "pod-a" }, port, "127.0.0.2");
const b = await startFakeProvider({ name: "pod-b" }, port, "127.0.0.3");
let turn = 0;
const picker = await startEndpointPicker(() => `127.0.0.${2 + (turn++ % 2)}:${port}`);
// The same pool twice, as `closed` and `open`, each with its GwBackend and route.
const pool = (name: string, mode: "FailClose" | "FailOpen") =>
  inferencePoolYaml(picker.port, mode, port)
    .replace("metadata: { name: llama, namespace: default }", `metadata: { name: ${name}, namespace: default }`)
    .concat(`---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { group: inference.networking.k8s.io, kind: InferencePool, name: ${name} }
        formats: [{ type: Completions }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /${name} } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }] }]
`);
const pod = (name: string, ip: string) => `---
apiVersion: v1
kind: Pod
metadata: { name: ${name}, namespace: default, labels: { app: vllm-llama } }
status: { podIP: ${ip}, conditions: [{ type: Ready, status: "True" }] }
`;
// The picker's Service and EndpointSlice appear twice with the same names: the second replaces the first.
const env = await startLlmEnv(
  `${pool("closed", "FailClose")}${pool("open", "FailOpen")}${pod("a", "127.0.0.2")}${pod("b", "127.0.0.3")}`,
  "/closed/v1/chat/completions",
);
try {
  await measureRoutes(env, ["closed", "open"], N);
  console.log(`requests at pod a ${a.requests.length}, pod b ${b.requests.length} (the picker alternates)`);
} finally {
  await env.stop();
  await picker.close();
  await a.close();
  await b.close();
}
