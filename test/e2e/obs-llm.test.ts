// LLM metrics and traces end to end (issue 23): the official openai SDK through a real Envoy to a fake provider.
// The token counters on /metrics (read with a Prometheus text parser) grow by exactly the usage the provider
// reported, streamed or not; a model the configuration does not name is counted as "other"; and one request gives an
// Envoy span and Sluice's child span, with GenAI attributes, at a local OTLP receiver under the same trace id.
// Sluice logs at debug level in JSON here: every line is checked for the test's secrets.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver, tracingYaml } from "../helpers/otlp.js";
import { type Family, sampleSum, sampleValue, scrape } from "../helpers/prom-text.js";

const PROVIDER_KEY = "sk-obs-provider-secret-4711";
const CLIENT_KEY = "client-obs-secret-0815";
const MODEL = "gpt-4o-mini";

function resources(provider: number, collector: number): string {
  return `${tracingYaml(collector)}---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { openai: ${PROVIDER_KEY} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: openai, namespace: default }
spec:
  ai:
    provider:
      providerA: { model: ${MODEL} }
      host: 127.0.0.1
      port: ${provider}
  policies:
    auth: { secretRef: { name: keys, key: openai } }
    ai:
      routes:
        /v1/chat/completions: Completions
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: chat, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }] }]
`;
}

/** The change of each series between two scrapes. */
function delta(before: Map<string, Family>, after: Map<string, Family>, name: string, match: Record<string, string>) {
  return sampleSum(after, name, match) - sampleSum(before, name, match);
}

describe("LLM metrics and traces through Envoy", { timeout: 120_000 }, () => {
  let fake: FakeProvider;
  let otlp: OtlpReceiver;
  let env: LlmEnv;
  const client = () => new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });

  before(async () => {
    fake = await startFakeProvider({ name: "openai", apiKey: PROVIDER_KEY });
    otlp = await startOtlpReceiver();
    env = await startLlmEnv(resources(fake.port, otlp.port), "/v1/chat/completions", {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp.tracesUrl,
      SLUICE_LOG_LEVEL: "debug",
      SLUICE_LOG_FORMAT: "json",
    });
  });
  after(async () => {
    await env?.stop();
    await fake?.close();
    await otlp?.close();
  });

  test("a non-streamed completion adds exactly the reported usage", async () => {
    const before = await scrape(env.sluice.adminPort);
    const r = await client().chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
    assert.ok(r.usage !== undefined && r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0);
    const after = await scrape(env.sluice.adminPort);
    const labels = { gateway: "default/gw", model: MODEL };
    assert.equal(delta(before, after, "sluice_llm_tokens_total", { ...labels, type: "input" }), r.usage.prompt_tokens);
    assert.equal(
      delta(before, after, "sluice_llm_tokens_total", { ...labels, type: "output" }),
      r.usage.completion_tokens,
    );
    assert.equal(delta(before, after, "sluice_llm_requests_total", { ...labels, outcome: "ok" }), 1);
    const genai = { gen_ai_request_model: MODEL, gen_ai_operation_name: "chat", gen_ai_provider_name: "openai" };
    assert.equal(
      delta(before, after, "gen_ai_client_token_usage_sum", { ...genai, gen_ai_token_type: "input" }),
      r.usage.prompt_tokens,
    );
    assert.equal(
      delta(before, after, "gen_ai_client_token_usage_sum", { ...genai, gen_ai_token_type: "output" }),
      r.usage.completion_tokens,
    );
    assert.equal(delta(before, after, "gen_ai_client_operation_duration_seconds_count", genai), 1);
    // The route's labels are the HTTPRoute's.
    const family = after.get("sluice_llm_requests_total");
    assert.ok(
      family?.samples.some((s) => s.labels["route"]?.includes("chat") === true),
      JSON.stringify(family),
    );
  });

  test("a reasoning completion adds its cached and reasoning tokens exactly, streamed or not", async () => {
    const labels = { gateway: "default/gw", model: MODEL };
    for (const stream of [false, true]) {
      const before = await scrape(env.sluice.adminPort);
      let usage: OpenAI.CompletionUsage | undefined;
      if (stream) {
        const s = await client().chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "think first" }],
          reasoning_effort: "low",
          stream: true,
          stream_options: { include_usage: true },
        });
        for await (const chunk of s) if (chunk.usage) usage = chunk.usage;
      } else {
        const r = await client().chat.completions.create({
          model: MODEL,
          messages: [{ role: "user", content: "think first" }],
          reasoning_effort: "low",
        });
        usage = r.usage;
      }
      const reasoning = usage?.completion_tokens_details?.reasoning_tokens ?? 0;
      const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
      assert.ok(reasoning > 0 && cached > 0, `the provider reported reasoning and cached tokens (stream ${stream})`);
      const after = await waitFor(
        "the reasoning tokens counted",
        async () => {
          const a = await scrape(env.sluice.adminPort);
          return delta(before, a, "sluice_llm_tokens_total", { ...labels, type: "reasoning" }) > 0 ? a : undefined;
        },
        10_000,
      );
      const d = (type: string) => delta(before, after, "sluice_llm_tokens_total", { ...labels, type });
      assert.equal(d("reasoning"), reasoning, `reasoning tokens (stream ${stream})`);
      assert.equal(d("cached_input"), cached, `cached input tokens (stream ${stream})`);
      assert.equal(d("output"), usage?.completion_tokens, `output tokens, reasoning included (stream ${stream})`);
    }
  });

  test("a streamed completion adds exactly the usage of its last chunk, and a time to first token", async () => {
    const before = await scrape(env.sluice.adminPort);
    const stream = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "stream please" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    assert.ok(usage !== undefined && usage.prompt_tokens > 0);
    const after = await scrape(env.sluice.adminPort);
    const labels = { gateway: "default/gw", model: MODEL };
    assert.equal(delta(before, after, "sluice_llm_tokens_total", { ...labels, type: "input" }), usage.prompt_tokens);
    assert.equal(
      delta(before, after, "sluice_llm_tokens_total", { ...labels, type: "output" }),
      usage.completion_tokens,
    );
    assert.equal(
      delta(before, after, "gen_ai_server_time_to_first_token_seconds_count", { gen_ai_request_model: MODEL }),
      1,
    );
  });

  test("a model the configuration does not name is counted as other, never as itself", async () => {
    const before = await scrape(env.sluice.adminPort);
    const name = "client-invented-model-93";
    await client().chat.completions.create({ model: name, messages: [{ role: "user", content: "hi" }] });
    const after = await scrape(env.sluice.adminPort);
    assert.equal(delta(before, after, "sluice_llm_requests_total", { model: "other", outcome: "ok" }), 1);
    for (const f of after.values())
      for (const s of f.samples) assert.ok(!Object.values(s.labels).includes(name), `${s.name} has ${name}`);
  });

  test("a provider error is counted by the status the client got", async () => {
    const before = await scrape(env.sluice.adminPort);
    fake.failWith = 429;
    try {
      await assert.rejects(
        client().chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
        (e: unknown) => e instanceof OpenAI.APIError && e.status === 429,
      );
    } finally {
      fake.failWith = undefined;
    }
    const after = await scrape(env.sluice.adminPort);
    assert.equal(delta(before, after, "sluice_llm_errors_total", { model: MODEL, error_type: "429" }), 1);
    assert.equal(delta(before, after, "sluice_llm_requests_total", { model: MODEL, outcome: "error" }), 1);
    assert.equal(sampleValue(after, "sluice_llm_requests_total", { model: "none", outcome: "ok" }), 0);
  });

  test("one request: Envoy's span and Sluice's child span reach the OTLP receiver with the same trace id", async () => {
    const marker = `trace-marker-${Date.now()}`;
    await client().chat.completions.create({ model: MODEL, messages: [{ role: "user", content: marker }] });
    // Envoy exports in batches (every 5 s or 5 spans); Sluice every second.
    const pair = await waitFor(
      "a Sluice GenAI span whose parent is one of Envoy's spans",
      async () => {
        const envoySpans = otlp.spans.filter((s) => s.service !== "sluice");
        for (const s of otlp.spans) {
          if (s.service !== "sluice" || s.attributes["gen_ai.usage.input_tokens"] === undefined) continue;
          const parent = envoySpans.find((e) => e.traceId === s.traceId && e.spanId === s.parentSpanId);
          if (parent !== undefined) return { sluice: s, parent };
        }
        return undefined;
      },
      30_000,
    );
    assert.equal(pair.sluice.traceId, pair.parent.traceId);
    assert.match(pair.sluice.traceId, /^[0-9a-f]{32}$/);
    assert.equal(pair.sluice.name, `chat ${MODEL}`);
    assert.equal(pair.sluice.attributes["gen_ai.request.model"], MODEL);
    assert.equal(pair.sluice.attributes["gen_ai.provider.name"], "openai");
    assert.equal(typeof pair.sluice.attributes["gen_ai.usage.input_tokens"], "number");
    assert.equal(pair.sluice.kind, 2, "SPAN_KIND_SERVER");
    // Envoy's own request span is in the same trace.
    assert.ok(
      otlp.spans.some((s) => s.service !== "sluice" && s.traceId === pair.sluice.traceId && s.parentSpanId === ""),
    );
  });

  test("logs: JSON lines, the request's ids on request lines, no secret anywhere", async () => {
    const lines = env.sluice.output;
    assert.ok(lines.length > 0);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const p of parsed) {
      assert.equal(typeof p["level"], "string");
      assert.equal(typeof p["module"], "string");
      assert.equal(typeof p["msg"], "string");
    }
    const done = parsed.filter((p) => p["msg"] === "llm ext_proc: response complete");
    assert.ok(done.length >= 3, "a debug line per completed request");
    for (const p of done) assert.ok(p["trace_id"] !== undefined || p["request_id"] !== undefined, JSON.stringify(p));
    // Traced requests carry Envoy's trace id.
    assert.ok(done.some((p) => typeof p["trace_id"] === "string" && /^[0-9a-f]{32}$/.test(p["trace_id"] as string)));
    for (const l of lines) {
      assert.ok(!l.includes(PROVIDER_KEY), `provider key in: ${l}`);
      assert.ok(!l.includes(CLIENT_KEY), `client key in: ${l}`);
    }
  });
});
