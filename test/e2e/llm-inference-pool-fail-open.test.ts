// An InferencePool with `failureMode: FailOpen`, end to end through a real Envoy: when the pool's endpoint picker does
// not answer, the request still reaches one of the pool's ready Pods (given as Pod resources in the YAML, each a model
// server on a loopback address of its own at the pool's target port), in turn, whether the picker has no ready endpoint
// or its endpoint refuses connections (out after a TCP check); when the picker answers, its choice wins; a pool without a ready Pod answers 503 naming the pool; FailClose still fails without the picker.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import {
  type GrpcTestServer,
  inferencePoolYaml,
  poolGwBackendYaml,
  startEndpointPicker,
} from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, waitFor } from "../helpers/net.js";

interface PodSpec {
  readonly name: string;
  readonly ip: string;
  readonly ready: boolean;
  readonly app?: string;
}

function podYaml(p: PodSpec): string {
  return `---
apiVersion: v1
kind: Pod
metadata: { name: ${p.name}, namespace: default, labels: { app: ${p.app ?? "vllm-llama"} } }
status:
  podIP: ${p.ip}
  conditions: [{ type: Ready, status: "${p.ready ? "True" : "False"}" }]
`;
}

/**
 * `picker`: the picker's port, or `down`: its one endpoint not ready, as when its Pod is gone. Envoy fails open only
 * when the picker fails before the request body reaches its filter (with FULL_DUPLEX_STREAMED, a failure after that is
 * a failure whatever failure_mode_allow says): a picker cluster without a ready endpoint fails at once.
 */
function resources(
  picker: number | "down",
  failureMode: "FailClose" | "FailOpen",
  targetPort: number,
  pods: readonly PodSpec[],
): string {
  let pool = inferencePoolYaml(picker === "down" ? 1 : picker, failureMode, targetPort);
  if (picker === "down") {
    const up = "endpoints: [{ addresses: [127.0.0.1] }]";
    assert.ok(pool.includes(up));
    pool = pool.replace(up, "endpoints: [{ addresses: [127.0.0.1], conditions: { ready: false } }]");
  }
  return `${pool}${pods.map(podYaml).join("")}${poolGwBackendYaml()}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /pool } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llama }]
`;
}

describe("InferencePool with FailOpen: the pool's ready Pods when the picker does not answer", {
  timeout: 120_000,
}, () => {
  let port: number;
  let a: FakeProvider;
  let b: FakeProvider;
  let other: FakeProvider;
  let picker: GrpcTestServer & { readonly picked: string[] };
  let env: LlmEnv;
  // Ready and selected: a and b. Not ready: c (nothing listens there). Not selected (another app): other.
  const pods: PodSpec[] = [
    { name: "llama-a", ip: "127.0.0.2", ready: true },
    { name: "llama-b", ip: "127.0.0.3", ready: true },
    { name: "llama-c", ip: "127.0.0.4", ready: false },
    { name: "mistral", ip: "127.0.0.5", ready: true, app: "vllm-mistral" },
  ];
  const openai = () => new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/pool/v1`, maxRetries: 0 });
  const chat = async (text: string): Promise<string> => {
    const r = await openai().chat.completions.create({ model: "llama", messages: [{ role: "user", content: text }] });
    return r.choices[0]?.message.content ?? "";
  };
  const count = () => a.requests.length + b.requests.length;

  before(async () => {
    port = await freePort();
    a = await startFakeProvider({ name: "pod-a", apiKey: "pool-key" }, port, "127.0.0.2");
    b = await startFakeProvider({ name: "pod-b", apiKey: "pool-key" }, port, "127.0.0.3");
    other = await startFakeProvider({ name: "mistral", apiKey: "pool-key" }, port, "127.0.0.5");
    // The picker always names pod b.
    picker = await startEndpointPicker(() => `127.0.0.3:${port}`);
    env = await startLlmEnv(resources(picker.port, "FailOpen", port, pods), "/pool/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await picker?.close();
    await a?.close();
    await b?.close();
    await other?.close();
  });

  test("the picker up: its choice wins over the Pod Sluice left for the picker's failure", async () => {
    const before = picker.picked.length;
    for (let i = 0; i < 4; i++) assert.equal(await chat(`up ${i}`), `Hello from pod-b: up ${i}`);
    assert.equal(picker.picked.length - before, 4, "the picker was asked each time");
    assert.equal(a.requests.length, 0, "the fallback Pod a got nothing while the picker answered");
  });

  test("the picker down: each request reaches a ready Pod of the pool, in turn", async () => {
    env.write(resources("down", "FailOpen", port, pods));
    // Until Envoy has the picker's new address, the old picker answers (always pod b): wait for pod a.
    await waitFor(
      "a request on the fallback Pod a",
      async () => ((await chat("fallback?")).startsWith("Hello from pod-a") ? true : undefined),
      20_000,
    );
    const picked = picker.picked.length;
    const [fromA, fromB] = [a.requests.length, b.requests.length];
    const answers: string[] = [];
    for (let i = 0; i < 6; i++) answers.push(await chat(`down ${i}`));
    assert.equal(picker.picked.length, picked, "the picker was not reached");
    assert.equal(a.requests.length - fromA, 3, answers.join(" | "));
    assert.equal(b.requests.length - fromB, 3, answers.join(" | "));
    assert.equal(other.requests.length, 0, "a Pod the selector does not match gets nothing");
    for (const x of answers) assert.match(x, /^Hello from pod-[ab]: down \d$/);
    assert.equal(a.requests.at(-1)?.headers.authorization, "Bearer pool-key");
  });

  test("a picker endpoint listed but refusing: out after a TCP check, then requests reach the Pods", async () => {
    const nobody = await freePort();
    env.write(resources(nobody, "FailOpen", port, pods));
    const fromA = a.requests.length;
    await waitFor(
      "requests on pod a with the picker refusing",
      async () => ((await chat("refused?").catch(() => "")).startsWith("Hello from pod-a") ? true : undefined),
      20_000,
    );
    const answers: string[] = [];
    for (let i = 0; i < 4; i++) answers.push(await chat(`refused ${i}`));
    assert.ok(a.requests.length - fromA >= 3, answers.join(" | "));
    for (const x of answers) assert.match(x, /^Hello from pod-[ab]: refused \d$/);
  });

  test("Pods that become not ready leave the turn; with none ready the client gets 503 naming the pool", async () => {
    const onlyB = pods.map((p) => (p.name === "llama-a" ? { ...p, ready: false } : p));
    env.write(resources("down", "FailOpen", port, onlyB));
    await waitFor(
      "pod a out of the turn",
      async () => {
        const fromA = a.requests.length;
        for (let i = 0; i < 3; i++) await chat(`only b ${i}`);
        return a.requests.length === fromA ? true : undefined;
      },
      20_000,
    );
    env.write(
      resources(
        "down",
        "FailOpen",
        port,
        pods.map((p) => ({ ...p, ready: false })),
      ),
    );
    const seen = count();
    const e = await waitFor(
      "503 without a ready Pod",
      async () => {
        try {
          await chat("anyone?");
          return undefined;
        } catch (e) {
          return e instanceof OpenAI.APIError && e.status === 503 ? e : undefined;
        }
      },
      20_000,
    );
    assert.match(e.message, /InferencePool default\/llama/);
    assert.match(e.message, /no ready Pod/);
    assert.ok(count() - seen <= 3, "no Pod once none is ready");
  });

  test("FailClose: without the picker the request fails as before, although Pods are ready", async () => {
    env.write(resources("down", "FailClose", port, pods));
    const e = await waitFor(
      "FailClose in Envoy",
      async () => {
        try {
          await chat("closed?");
          return undefined;
        } catch (e) {
          return e instanceof OpenAI.APIError && !/no ready Pod/.test(e.message) ? e : undefined;
        }
      },
      20_000,
    );
    assert.ok(e.status !== undefined && e.status >= 500, `status ${e.status}`);
    const seen = count();
    await assert.rejects(chat("still closed?"), OpenAI.APIError);
    assert.equal(count(), seen, "no Pod reached with FailClose");
  });
});
