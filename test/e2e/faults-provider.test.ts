// A provider that misbehaves (test/helpers/fault-provider.ts), through a real Envoy and Sluice's LLM ext_proc, with
// the official `openai` and `@anthropic-ai/sdk` clients: it stalls (buffered: no answer; streamed: after the first
// delta), resets the connection (before any answer; mid-stream), or sends a malformed SSE event / an event-stream
// message with a bad CRC mid-stream. Each client, against a provider of its own format (passthrough), of the other SSE
// format (translated) and Bedrock (the binary event stream), gets what docs/faults.md states, within the route's
// timeout (2 s here): an API error in its own format where Envoy or Sluice still answers (after a malformed frame
// too, passthrough or translated), and the stream cut where the answer had already begun. And a healthy stream that
// outlasts Envoy's default route timeout (15 s) on a route that sets no timeout is delivered whole.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FaultProvider, startFaultProvider } from "../helpers/fault-provider.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { sampleSum, scrape } from "../helpers/prom-text.js";

const AWS = {
  accessKeyId: "AKIDFAULTS",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYFAULTSKEY",
  region: "eu-west-1",
};
const KEY = "sk-fault-provider";
const TIMEOUT_MS = 2000;
/** A pause in a healthy stream longer than Envoy's default route timeout (15 s). */
const LONG_MS = 16_000;
/** What a loaded machine adds (scheduling, the SDKs, every case running at once). */
const SLACK_MS = 3000;

function resources(port: number): string {
  const backend = (name: string, provider: string, auth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      ${provider}
      host: 127.0.0.1
      port: ${port}
  policies:
    auth: ${auth}
    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages: Messages
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      timeouts: { request: ${TIMEOUT_MS}ms }
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { key: ${KEY}, accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
${backend("oa", "providerA: {}", "{ secretRef: { name: keys, key: key } }")}${backend(
  "long",
  "providerA: {}",
  "{ secretRef: { name: keys, key: key } }",
)}${backend("claude", "providerD: {}", "{ secretRef: { name: keys, key: key } }")}${backend(
  "bedrock",
  `providerG: { region: ${AWS.region}, model: anthropic.claude-3-haiku-20240307-v1:0 }`,
  "{ cloudA: { secretRef: { name: keys } } }",
)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("oa")}${rule("claude")}${rule("bedrock")}
    - matches: [{ path: { type: PathPrefix, value: /long } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: long }]
`;
}

type Client = "openai" | "anthropic";
type Fault = "ok" | "stall" | "reset" | "malformed";

interface Result {
  readonly name: string;
  readonly client: Client;
  /** The user message sent (the fault word and a tag making it unique). */
  readonly content: string;
  /** The text received before the end or the error. */
  readonly text: string;
  readonly error?: unknown;
  /** From the request's start to its end or error. */
  readonly ms: number;
  /** When the request's end or error came (performance.now()). */
  readonly at: number;
}

/** The client's API error class with this status whose body is that client's error object of `type`. */
function inFormat(r: Result, status: number | undefined, type: string): boolean {
  const e = r.error;
  if (r.client === "openai") {
    return e instanceof OpenAI.APIError && e.status === status && (e.error as { type?: string })?.type === type;
  }
  return (
    e instanceof Anthropic.APIError &&
    e.status === status &&
    (e.error as { type?: string; error?: { type?: string } })?.type === "error" &&
    (e.error as { error?: { type?: string } }).error?.type === type
  );
}

/** The connection ended under the stream (Envoy reset it): undici's "terminated", which both SDKs raise as it is. */
const cut = (r: Result) => r.error instanceof TypeError && r.error.message === "terminated";

describe("a provider that stalls, resets or sends malformed frames", { timeout: 120_000 }, () => {
  let provider: FaultProvider;
  let env: LlmEnv;

  before(async () => {
    provider = await startFaultProvider({ name: "fault", apiKey: KEY, aws: AWS });
    env = await startLlmEnv(resources(provider.port), "/oa/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await provider?.close();
  });

  let tag = 0;
  async function run(client: Client, backend: string, fault: Fault | string, stream: boolean): Promise<Result> {
    const name = `${client}→${backend} ${fault}${stream ? " streamed" : ""}`;
    const content = `${fault} #${++tag}`;
    const t0 = performance.now();
    let text = "";
    try {
      if (client === "openai") {
        const c = new OpenAI({ apiKey: "c", baseURL: `${env.baseUrl}/${backend}/v1`, maxRetries: 0, timeout: 30_000 });
        const body = { model: "gpt-4o", messages: [{ role: "user" as const, content }] };
        if (!stream) text = (await c.chat.completions.create(body)).choices[0]?.message.content ?? "";
        else
          for await (const ch of await c.chat.completions.create({ ...body, stream: true })) {
            text += ch.choices[0]?.delta?.content ?? "";
          }
      } else {
        const c = new Anthropic({ apiKey: "c", baseURL: `${env.baseUrl}/${backend}`, maxRetries: 0, timeout: 30_000 });
        const body = { model: "claude-x", max_tokens: 32, messages: [{ role: "user" as const, content }] };
        if (!stream) {
          const m = await c.messages.create(body);
          text = m.content.map((b) => (b.type === "text" ? b.text : "")).join("");
        } else {
          for await (const e of await c.messages.create({ ...body, stream: true })) {
            if (e.type === "content_block_delta" && e.delta.type === "text_delta") text += e.delta.text;
          }
        }
      }
      const at = performance.now();
      return { name, client, content, text, ms: at - t0, at };
    } catch (error) {
      const at = performance.now();
      return { name, client, content, text, error, ms: at - t0, at };
    }
  }

  const PAIRS: readonly [Client, string][] = [
    ["openai", "oa"],
    ["anthropic", "claude"],
    ["openai", "claude"],
    ["openai", "bedrock"],
    ["anthropic", "bedrock"],
  ];

  test("every client and provider format, every fault, at once", async () => {
    const cases = PAIRS.flatMap(([c, b]) =>
      (["ok", "stall", "reset", "malformed"] as const).flatMap((f) =>
        [false, true].map(async (s) => ({ c, b, f, s, r: await run(c, b, f, s) })),
      ),
    );
    // A healthy stream longer than Envoy's default route timeout (15 s) on a route that sets none: delivered whole.
    const long = run("openai", "long", `slow ${LONG_MS}`, true);
    const results = await Promise.all(cases);
    const report = results
      .map(({ r }) => `${r.name}: ${Math.round(r.ms)} ms, text ${JSON.stringify(r.text)}, ${String(r.error)}`)
      .join("\n");
    console.log(report);
    // Not before `from` (counted from the client's start), and bounded: within the route timeout of the provider
    // getting the request (counted from there, so what a loaded machine makes the clients wait before does not count).
    const within = (r: Result, from: number) => {
      const arrived = provider.arrivals.get(r.content) ?? Number.NaN;
      const since = r.at - arrived;
      const why = `${r.name}: ${Math.round(r.ms)} ms from the start, ${Math.round(since)} ms from the provider\n${report}`;
      assert.ok(r.ms >= from - 100, why);
      assert.ok(since < TIMEOUT_MS + SLACK_MS, why);
    };
    for (const { c, b, f, s, r } of results) {
      const why = `${r.name}\n${report}`;
      if (f === "ok" || (f === "malformed" && !s)) {
        // Unharmed (a buffered answer has no frames to break).
        assert.equal(r.error, undefined, why);
        assert.equal(r.text, `Hello from fault: ${r.content}`, why);
      } else if (f === "stall" && !s) {
        // Envoy's route timeout: 504, translated into the client's format by the LLM ext_proc.
        assert.ok(inFormat(r, 504, "timeout_error"), why);
        within(r, TIMEOUT_MS);
      } else if (f === "reset" && !s) {
        // Envoy's 503 (reset before the answer), translated: OpenAI's server_error, Anthropic's overloaded_error.
        assert.ok(inFormat(r, 503, c === "openai" ? "server_error" : "overloaded_error"), why);
        within(r, 0);
      } else if (f === "stall") {
        // The status and first delta were sent: at the route timeout Envoy can only cut the stream.
        assert.equal(r.text, "Hello ", why);
        assert.ok(cut(r), why);
        within(r, TIMEOUT_MS);
      } else if (f === "reset") {
        // The provider's reset ends the client's stream the same way, at once. (When the reset beats the response
        // headers through Sluice, Envoy answers 502 instead: docs/faults.md.)
        assert.ok(cut(r) || (r.error as { status?: number } | undefined)?.status === 502, why);
        within(r, 0);
      } else {
        // Malformed: Sluice ends the stream with an error event in the client's format, which the SDK raises as its
        // API error (not its own parser's SyntaxError); the deltas before it arrived. Translated streams find it in
        // their decoder; passthrough streams check each whole event before letting it out.
        assert.equal(r.text, "Hello ", why);
        const e = r.error;
        assert.ok(!(e instanceof SyntaxError), why);
        const body = JSON.stringify((e as { error?: unknown } | undefined)?.error);
        if (c === "openai") assert.ok(e instanceof OpenAI.APIError && /"type":"server_error"/.test(body), why);
        else assert.ok(e instanceof Anthropic.APIError && /"type":"api_error"/.test(body), why);
        assert.match(
          body,
          b === "bedrock" ? /event stream: message CRC mismatch/ : /malformed event from upstream: .*JSON/,
          why,
        );
        within(r, 0);
      }
    }
    assert.ok((provider.seen.get("stall") ?? 0) >= 10 && (provider.seen.get("reset") ?? 0) >= 10);
    const l = await long;
    assert.equal(l.error, undefined, `${l.name}: ${String(l.error)} after ${Math.round(l.ms)} ms`);
    assert.equal(l.text, `Hello from fault: ${l.content}`);
    assert.ok(l.ms > LONG_MS);
  });

  test("a stream ended by a malformed frame is counted as a failed request and logged, passthrough as translated", async () => {
    for (const [c, b] of [
      ["openai", "oa"],
      ["anthropic", "claude"],
      ["openai", "claude"],
    ] as const) {
      const logged = env.sluice.output.length;
      const before = await scrape(env.sluice.adminPort);
      const r = await run(c, b, "malformed", true);
      const after = await scrape(env.sluice.adminPort);
      const d = (name: string, labels: Record<string, string>) =>
        sampleSum(after, name, labels) - sampleSum(before, name, labels);
      assert.equal(r.text, "Hello ", r.name);
      assert.equal(d("sluice_llm_errors_total", { error_type: "502" }), 1, r.name);
      assert.equal(d("sluice_llm_requests_total", { outcome: "error" }), 1, r.name);
      assert.equal(d("sluice_llm_requests_total", { outcome: "ok" }), 0, r.name);
      // Logged (stderr is read as it comes: allow it a moment), without the parser's detail, which quotes the
      // provider's text.
      const line = /stream ended with an error event: malformed event from upstream(.?)/;
      let lines = "";
      for (let i = 0; i < 40 && !line.test(lines); i++) {
        await new Promise((done) => setTimeout(done, 50));
        lines = env.sluice.output.slice(logged).join("\n");
      }
      assert.notEqual(line.exec(lines)?.[1], ":", `${r.name}\n${lines}`);
      assert.ok(line.test(lines), `${r.name}\n${lines}`);
    }
  });

  test("nothing is left behind: the provider's stalled connections are closed, the gateway serves on", async () => {
    // Envoy closed its upstream side of every stalled stream at the route timeout.
    const t0 = Date.now();
    while (provider.stalledOpen() > 0 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 100));
    assert.equal(provider.stalledOpen(), 0, "stalled answers whose connection Envoy kept open");
    const r = await run("openai", "claude", "ok", true);
    assert.equal(r.text, `Hello from fault: ${r.content}`);
  });
});
