// Frontend access log attributes and metric labels reading `llm.*` through a real Envoy: the values Sluice's LLM
// ext_proc leaves in dynamic metadata (sluice.dev/llm) when the provider's answer is done, read by Envoy's CEL at the
// end of the stream. An OpenAI client, a fake provider speaking the chat completions format.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { frontendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";
import { parsePrometheusText, sampleValue } from "../helpers/prom-text.js";

function resources(p: FakeProvider): string {
  return `
apiVersion: v1
kind: Service
metadata: { name: inference, namespace: default }
spec:
  ports: [{ name: http, port: 80 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: inference-a, namespace: default, labels: { kubernetes.io/service-name: inference } }
addressType: IPv4
ports: [{ name: http, port: ${p.port} }]
endpoints: [{ addresses: [127.0.0.1] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: selfhosted, namespace: default }
spec:
  ai:
    provider:
      custom:
        backendRef: { name: inference, port: 80 }
        formats: [{ type: Completions }]
  policies:
    auth: { key: in-cluster-key }
    ai:
      routes:
        /v1/chat/completions: Completions
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /selfhosted } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: selfhosted }]
${frontendPolicy(`    accessLog:
      filter: "llm.totalTokens > 0"
      attributes:
        add:
          - { name: model, expression: "llm.requestModel" }
          - { name: in_tokens, expression: "llm.inputTokens" }
          - { name: total_tokens, expression: "llm.totalTokens" }
    metrics:
      attributes:
        add:
          - { name: model, expression: "llm.requestModel" }
`)}`;
}

describe("frontend access logs and metrics reading llm.*", { timeout: 60_000 }, () => {
  let provider: FakeProvider;
  let env: LlmEnv;

  before(async () => {
    provider = await startFakeProvider({ name: "pod-a", apiKey: "in-cluster-key" });
    env = await startLlmEnv(resources(provider), "/selfhosted/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await provider?.close();
  });

  test("the request's model and token counts reach the access log entry and a metric label", async () => {
    const c = new OpenAI({ apiKey: "client", baseURL: `${env.baseUrl}/selfhosted/v1`, maxRetries: 0 });
    const r = await c.chat.completions.create({
      model: "llama-telemetry",
      messages: [{ role: "user", content: "count my tokens" }],
    });
    const usage = r.usage;
    assert.ok(usage !== undefined && usage.total_tokens > 0, "the provider reports usage");
    const line = await waitFor(
      "the access log entry",
      async () => env.envoy.output.find((l) => l.includes('"model":"llama-telemetry"')),
      10_000,
    );
    const entry = JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>;
    assert.equal(Number(entry.in_tokens), usage.prompt_tokens);
    assert.equal(Number(entry.total_tokens), usage.total_tokens);
    const value = await waitFor(
      "the labelled counter",
      async () => {
        const res = await fetch(`http://127.0.0.1:${env.envoy.adminPort}/stats/prometheus`);
        const n = sampleValue(parsePrometheusText(await res.text()), "envoy_sluice_frontend_requests", {
          model: "llama-telemetry",
        });
        return n > 0 ? n : undefined;
      },
      10_000,
    );
    assert.equal(value, 1);
  });
});
