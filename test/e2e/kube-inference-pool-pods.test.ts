// `sluice controller` against a real kube-apiserver, and a real Envoy: an InferencePool with `failureMode: FailOpen`
// whose endpoint picker has no ready endpoint (its Service has no EndpointSlice), so every request goes to one of the
// pool's ready Pods. The test plays the kubelet: it creates Pods and writes their status (Running, podIP, Ready), and
// the fallback follows the Pod watch: none ready → 503 naming the pool; a Pod ready → it gets the requests; a second
// → they alternate; one not ready or deleted → it leaves the turn. Each Pod is a model server on a loopback address of
// its own, at the pool's target port. The controller runs with exactly the RBAC in deploy/kubernetes (pods: list, watch).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { KubeClient } from "../../src/sources/kube/client.js";
import { clusterForController, gatewayEnvoy, SLUICE_GATEWAY_CLASS, startController } from "../helpers/controller.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { poolGwBackendYaml } from "../helpers/grpc-services.js";
import type { KubeCluster } from "../helpers/kube.js";
import { freePort, request, waitFor } from "../helpers/net.js";
import type { SluiceProcess, TestEnvoy } from "../helpers/processes.js";

describe("InferencePool FailOpen in Kubernetes: the fallback follows the pool's Pods", { timeout: 240_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  let controller: SluiceProcess;
  let envoy: TestEnvoy;
  let ns: string;
  let port: number;
  let target: number;
  let a: FakeProvider;
  let b: FakeProvider;
  const openai = () => new OpenAI({ apiKey: "client", baseURL: `http://127.0.0.1:${port}/pool/v1`, maxRetries: 0 });
  const chat = async (text: string): Promise<string> => {
    const r = await openai().chat.completions.create({ model: "llama", messages: [{ role: "user", content: text }] });
    return r.choices[0]?.message.content ?? "";
  };
  /** The servers that answered `n` requests, or the error. */
  const answers = async (n: number): Promise<string[]> => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      try {
        out.push((await chat(`q${i}`)).replace(/^Hello from (\S+): .*$/, "$1"));
      } catch (e) {
        out.push(e instanceof OpenAI.APIError ? `${e.status} ${e.message}` : String(e));
      }
    }
    return out;
  };
  const until = (what: string, want: (seen: string[]) => boolean) =>
    waitFor(
      what,
      async () => {
        const seen = await answers(4);
        return want(seen) ? seen : undefined;
      },
      30_000,
    );
  const createPod = (name: string) =>
    cluster.apply(`apiVersion: v1
kind: Pod
metadata: { name: ${name}, namespace: ${ns}, labels: { app: vllm-llama } }
spec: { containers: [{ name: vllm, image: vllm/vllm-openai }] }
`);
  /** What the kubelet would write: Running, the Pod's IP, and its Ready condition. */
  const podStatus = (name: string, ip: string, ready: boolean) =>
    admin.apply(
      `/api/v1/namespaces/${ns}/pods/${name}/status`,
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: ns },
        status: {
          phase: "Running",
          podIP: ip,
          podIPs: [{ ip }],
          conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
        },
      },
      "test-kubelet",
    );

  before(async () => {
    const c = await clusterForController();
    ({ cluster, admin, ns } = c);
    port = await freePort();
    target = await freePort();
    a = await startFakeProvider({ name: "pod-a", apiKey: "pool-key" }, target, "127.0.0.2");
    b = await startFakeProvider({ name: "pod-b", apiKey: "pool-key" }, target, "127.0.0.3");
    // No ServiceAccount controller here: the Pods' admission needs the namespace's default ServiceAccount.
    await cluster.apply(`${SLUICE_GATEWAY_CLASS}---
apiVersion: v1
kind: ServiceAccount
metadata: { name: default, namespace: ${ns} }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: ${ns} }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: llama, namespace: ${ns} }
spec:
  selector: { matchLabels: { app: vllm-llama } }
  targetPorts: [{ number: ${target} }]
  endpointPickerRef: { name: llama-epp, port: { number: 9002 }, failureMode: FailOpen }
---
apiVersion: v1
kind: Service
metadata: { name: llama-epp, namespace: ${ns} }
spec: { ports: [{ name: grpc, port: 9002, appProtocol: kubernetes.io/h2c }] }
${poolGwBackendYaml(ns)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /pool } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llama }]
`);
    controller = await startController(c.kubeconfig, c.system);
    envoy = await gatewayEnvoy(admin, controller, ns, "gw");
    await waitFor("the route to serve", async () =>
      (await request(port, "/pool/v1/chat/completions", { method: "OPTIONS" })).status !== 404 ? true : undefined,
    );
  });

  after(async () => {
    await envoy?.stop();
    await controller?.stop();
    await a?.close();
    await b?.close();
    await admin?.close();
    await cluster?.stop();
  });

  test("no Pod: 503 naming the pool", async () => {
    const seen = await until("503 without a Pod", (s) => s.every((x) => x.startsWith("503 ")));
    assert.match(seen[0] ?? "", /InferencePool .*\/llama: .*no ready Pod/);
  });

  test("a Pod created, then Running and Ready: the requests reach it", async () => {
    await createPod("llama-a");
    // Pending (no status yet): still nothing to go on to.
    assert.ok((await answers(2)).every((x) => x.startsWith("503 ")));
    await podStatus("llama-a", "127.0.0.2", false);
    assert.ok(
      (await answers(2)).every((x) => x.startsWith("503 ")),
      "Running but not Ready is not in the turn",
    );
    await podStatus("llama-a", "127.0.0.2", true);
    await until("pod a ready", (s) => s.every((x) => x === "pod-a"));
  });

  test("a second Pod ready: the requests alternate; one not ready or deleted leaves the turn", async () => {
    await createPod("llama-b");
    await podStatus("llama-b", "127.0.0.3", true);
    const both = await until("pods a and b in turn", (s) => s.includes("pod-a") && s.includes("pod-b"));
    assert.deepEqual(both.filter((x) => x === "pod-a").length, 2, both.join(", "));
    await podStatus("llama-a", "127.0.0.2", false);
    await until("pod a not ready", (s) => s.every((x) => x === "pod-b"));
    await admin.request("DELETE", `/api/v1/namespaces/${ns}/pods/llama-b`);
    await until("pod b deleted", (s) => s.every((x) => x.startsWith("503 ")));
    await podStatus("llama-a", "127.0.0.2", true);
    await until("pod a ready again", (s) => s.every((x) => x === "pod-a"));
  });
});
