// A guarded Realtime session to a `custom` provider whose backendRef is an InferencePool, through a real Envoy: Node's
// WebSocket client → Envoy → Sluice's Realtime relay, which asks the pool's endpoint picker (a picker speaking the
// extension's protocol in full duplex mode, test/helpers/grpc-services.ts) once, at the upgrade, and opens the
// provider's websocket on the model server it names; the whole session stays there, guarded. A Realtime route to a pool
// without prompt guards goes through the relay too (Envoy's picker filter would hold the upgrade for a body that never
// ends). A pool whose picker cannot be reached answers the upgrade 503, nothing dialled.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { type GrpcTestServer, inferencePoolYaml, startEndpointPicker } from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort } from "../helpers/net.js";
import { openRealtime, refusedUpgrade } from "../helpers/realtime-client.js";

const CARD = "4111 1111 1111 1111";

function backend(name: string, pool: string, guarded = true): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { group: inference.networking.k8s.io, kind: InferencePool, name: ${pool} }
        formats: [{ type: Completions }]
  policies:
    auth: { key: pool-key }
    ai:
      routes: { /v1/realtime: Realtime }
${guarded ? "      promptGuard:\n        request: [{ regex: { builtins: [CreditCard] } }]\n" : ""}`;
}

/** InferencePool `dead`, whose picker's one endpoint is a port nothing listens on. */
function deadPool(port: number): string {
  return `---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: dead, namespace: default }
spec:
  selector: { matchLabels: { app: none } }
  targetPorts: [{ number: 8000 }]
  endpointPickerRef: { name: dead-epp, port: { number: 9002 } }
---
apiVersion: v1
kind: Service
metadata: { name: dead-epp, namespace: default }
spec:
  ports: [{ name: grpc, port: 9002, appProtocol: kubernetes.io/h2c }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: dead-epp-1, namespace: default, labels: { kubernetes.io/service-name: dead-epp } }
addressType: IPv4
ports: [{ name: grpc, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1] }]
`;
}

function resources(pickerPort: number, deadPort: number): string {
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `${inferencePoolYaml(pickerPort)}${deadPool(deadPort)}${backend("pooled", "llama")}${backend("unpicked", "dead")}${backend("open", "llama", false)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${["pooled", "unpicked", "open"].map(rule).join("")}
`;
}

const userText = (text: string) =>
  JSON.stringify({
    type: "conversation.item.create",
    item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
  });

describe("guarded Realtime sessions to an InferencePool: the picker chooses once per session", {
  timeout: 60_000,
}, () => {
  let a: FakeRealtime;
  let b: FakeRealtime;
  let picker: GrpcTestServer & { readonly picked: string[] };
  let env: LlmEnv;
  /** The server the picker names next. */
  let choice: () => FakeRealtime;

  before(async () => {
    a = await startFakeRealtime({ name: "a", apiKey: "pool-key" });
    b = await startFakeRealtime({ name: "b", apiKey: "pool-key" });
    choice = () => a;
    picker = await startEndpointPicker(() => `127.0.0.1:${choice().port}`);
    env = await startLlmEnv(resources(picker.port, await freePort()), "/pooled/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await picker?.close();
    for (const s of [a, b]) await s?.close();
  });

  test("each session goes to the server the picker names for its model, and stays there", async () => {
    for (const [server, other] of [
      [a, b],
      [b, a],
    ] as const) {
      choice = () => server;
      const picks = picker.picked.length;
      const handshakes = [server.handshakes.length, other.handshakes.length];
      const { ws, next } = await openRealtime(env.port, "/pooled/v1/realtime", "client-key");
      assert.equal((await next()).type, "session.created");
      // The picker is asked once, at the upgrade: later picks would name the other server.
      choice = () => other;
      const events = server.events.length;
      ws.send(userText(`card ${CARD}`));
      ws.send(userText("second"));
      await waitForEvents(server, events + 2);
      ws.close();
      assert.deepEqual(picker.picked.slice(picks), [`gpt-realtime→127.0.0.1:${server.port}`]);
      assert.equal(server.handshakes.length, (handshakes[0] ?? 0) + 1);
      assert.equal(other.handshakes.length, handshakes[1], "the other server is never dialled");
      const h = server.handshakes.at(-1);
      assert.equal(h?.headers.authorization, "Bearer pool-key");
      assert.equal(h?.path, "/v1/realtime?model=gpt-realtime");
      const seen = JSON.stringify(server.events.slice(events));
      assert.match(seen, /card <CREDIT_CARD>/);
      assert.match(seen, /second/);
      assert.doesNotMatch(seen, /4111/);
    }
  });

  test("without prompt guards too: the relay takes the upgrade and the picker chooses once", async () => {
    choice = () => b;
    const picks = picker.picked.length;
    const handshakes = b.handshakes.length;
    const { ws, next } = await openRealtime(env.port, "/open/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    const events = b.events.length;
    ws.send(userText(`card ${CARD}`));
    await waitForEvents(b, events + 1);
    ws.close();
    assert.deepEqual(picker.picked.slice(picks), [`gpt-realtime→127.0.0.1:${b.port}`]);
    assert.equal(b.handshakes.length, handshakes + 1);
    // No guard on this backend: the text goes as the client sent it.
    assert.match(JSON.stringify(b.events.slice(events)), /4111/);
  });

  test("a pool whose picker cannot be reached answers 503 naming it; no server is dialled", async () => {
    const handshakes = a.handshakes.length + b.handshakes.length;
    const r = await refusedUpgrade(env.port, "/unpicked/v1/realtime?model=gpt-realtime");
    assert.equal(r.status, 503);
    assert.match(r.body, /InferencePool default\/dead: its endpoint picker default\/dead-epp did not choose/);
    assert.equal(a.handshakes.length + b.handshakes.length, handshakes);
  });
});
