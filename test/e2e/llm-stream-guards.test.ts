// Webhook and remote guards on streamed responses (`streaming: Enabled`) through a real Envoy, with the official
// `openai` and `@anthropic-ai/sdk` streaming clients: text reaches the client in checked sentences, a mask replaces a
// sentence, regex guards mask a split card before the webhook sees it, and a reject part way ends the stream with the
// error event of the client's format, which each SDK raises as an API error after the text that passed; the same with
// guardrailsA against the Bedrock fake (SigV4 verified, test/helpers/fake-guards.ts). The provider is paced (a pause
// after each sentence, as a model still generating), so the text before a reject has gone out.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeBedrockGuardrails, startFakeBedrockGuardrails } from "../helpers/fake-guards.js";
import { localService, prefixRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort } from "../helpers/net.js";

const PAUSE_MS = 60;
const REGION = "eu-west-1";
const GUARDRAIL = { identifier: "gr-stream", version: "1" };
const KEYS = { accessKeyId: "AKIDSTREAMGUARD", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSTREAMGUARD" };

/**
 * A provider streaming the user's last message back one word per event, pausing after each sentence: OpenAI chat
 * completions (Bearer key) and Anthropic Messages (x-api-key, anthropic-version), as their APIs stream.
 */
function startPacedProvider(): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", async () => {
      let b: { messages?: { role: string; content: unknown }[]; stream?: boolean } = {};
      try {
        b = JSON.parse(body) as typeof b;
      } catch {
        // The readiness probe (OPTIONS, no body) gets the 400 below.
      }
      const anthropic = req.url?.endsWith("/v1/messages") === true;
      const authorized = anthropic
        ? req.headers["x-api-key"] === "sk-test" && req.headers["anthropic-version"] !== undefined
        : req.headers.authorization === "Bearer sk-test";
      if (!authorized || b.stream !== true) {
        res.writeHead(authorized ? 400 : 401, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ error: { message: authorized ? "stream only" : "bad key", type: "invalid_request" } }),
        );
        return;
      }
      const last = b.messages?.at(-1)?.content;
      const text =
        typeof last === "string"
          ? last
          : ((last as { text?: string }[] | undefined)?.map((p) => p.text).join("") ?? "");
      const words = text.split(/(?<= )/);
      res.writeHead(200, { "content-type": "text/event-stream" });
      const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1700000000, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(
        anthropic
          ? ev("message_start", {
              message: {
                id: "msg_paced",
                type: "message",
                role: "assistant",
                model: "m",
                content: [],
                stop_reason: null,
                stop_sequence: null,
                usage: { input_tokens: 5, output_tokens: 1 },
              },
            }) + ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } })
          : chunk({ role: "assistant", content: "" }),
      );
      for (const w of words) {
        res.write(
          anthropic
            ? ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: w } })
            : chunk({ content: w }),
        );
        if (/[.!?] $/.test(w)) await new Promise((r) => setTimeout(r, PAUSE_MS));
      }
      res.end(
        anthropic
          ? ev("content_block_stop", { index: 0 }) +
              ev("message_delta", {
                delta: { stop_reason: "end_turn", stop_sequence: null },
                usage: { output_tokens: words.length },
              }) +
              ev("message_stop", {})
          : `${chunk({}, "stop")}data: [DONE]\n\n`,
      );
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** The webhook: rejects texts with "forbidden", masks "secret", passes the rest; records what it was asked. */
function startWebhook(calls: string[][]): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const input = JSON.parse(body) as { direction: string; texts: string[] };
      if (input.direction === "response") calls.push(input.texts);
      const answer = input.texts.some((t) => t.includes("forbidden"))
        ? { action: "reject", reason: "forbidden word" }
        : input.texts.some((t) => t.includes("secret"))
          ? { action: "mask", texts: input.texts.map((t) => t.replaceAll("secret", "[redacted]")) }
          : { action: "pass" };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function resources(hookPort: number, deadPort: number, pacedPort: number): string {
  const backend = (name: string, provider: string, guard: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: ${provider}
  policies:
    auth: { key: sk-test }
    ai:
      routes: { /v1/messages: Messages, /v1/chat/completions: Completions, /v1/responses: Responses }
      promptGuard:
        streaming: Enabled
        response: ${guard}
`;
  const hook = "[{ regex: { builtins: [CreditCard] } }, { webhook: { backendRef: { name: guard-hook, port: 80 } } }]";
  const paced = (kind: string) => `{ ${kind}: {}, host: 127.0.0.1, port: ${pacedPort} }`;
  const custom = "{ custom: { backendRef: { name: paced, port: 80 }, formats: [{ type: Completions }] } }";
  const names = ["hook-oa", "hook-an", "hook-custom", "closed-oa", "open-oa", "gra-an"];
  const guardrail = `[{ guardrailsA: { identifier: ${GUARDRAIL.identifier}, version: "${GUARDRAIL.version}", region: ${REGION}, policies: { auth: { cloudA: { secretRef: { name: aws } } } } }, response: { message: "blocked by the guardrail" } }]`;
  return [
    `apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${KEYS.accessKeyId}, secretKey: "${KEYS.secretAccessKey}" }
`,
    backend("gra-an", paced("providerD"), guardrail),
    localService("guard-hook", hookPort),
    localService("dead-hook", deadPort),
    localService("paced", pacedPort),
    backend("hook-oa", paced("providerA"), hook),
    backend("hook-an", paced("providerD"), hook),
    // Responses clients, translated to chat completions (a custom provider speaking that format only).
    backend("hook-custom", custom, hook),
    backend("closed-oa", paced("providerA"), "[{ webhook: { backendRef: { name: dead-hook, port: 80 } } }]"),
    backend(
      "open-oa",
      paced("providerA"),
      "[{ webhook: { backendRef: { name: dead-hook, port: 80 }, failureMode: FailOpen } }]",
    ),
    prefixRoute(names, { name: "llm", to: "GwBackend" }),
  ].join("\n");
}

describe("webhook and remote guards on streamed responses, end to end", { timeout: 120_000 }, () => {
  let env: LlmEnv;
  let paced: Server;
  let hook: Server;
  let bedrock: FakeBedrockGuardrails;
  const calls: string[][] = [];
  const openai = (p: string) => new OpenAI({ apiKey: "c", baseURL: `${env.baseUrl}/${p}/v1`, maxRetries: 0 });
  const anthropic = (p: string) => new Anthropic({ apiKey: "c", baseURL: `${env.baseUrl}/${p}`, maxRetries: 0 });

  /** The text deltas an OpenAI chat stream gave, and the error it ended with (if any). */
  async function chatStream(p: string, content: string): Promise<{ deltas: string[]; error?: unknown }> {
    const stream = await openai(p).chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content }],
    });
    const deltas: string[] = [];
    try {
      for await (const c of stream) {
        const d = c.choices[0]?.delta.content;
        if (d) deltas.push(d);
      }
    } catch (error) {
      return { deltas, error };
    }
    return { deltas };
  }

  before(async () => {
    paced = await startPacedProvider();
    hook = await startWebhook(calls);
    bedrock = await startFakeBedrockGuardrails({ region: REGION, guardrail: GUARDRAIL });
    bedrock.trust(KEYS);
    bedrock.block.push({ word: "weapons", policy: "topic", name: "Weapons" });
    bedrock.anonymize.push({ pattern: /[\w.]+@[\w.]+\.com/, type: "EMAIL" });
    const port = (s: Server) => (s.address() as AddressInfo).port;
    env = await startLlmEnv(resources(port(hook), await freePort(), port(paced)), "/hook-oa/v1/chat/completions", {
      AWS_ENDPOINT_URL_BEDROCK_RUNTIME: bedrock.url,
    });
  });
  after(async () => {
    await env?.stop();
    paced?.closeAllConnections();
    paced?.close();
    hook?.close();
    await bedrock?.close();
  });

  test("chat completions: checked sentences, a mask, a split card masked before the webhook sees it", async () => {
    calls.length = 0;
    const r = await chatStream("hook-oa", "Hello there. My secret plan is 4111 1111 1111 1111 today. The end.");
    assert.equal(r.error, undefined);
    assert.equal(r.deltas.join(""), "Hello there. My [redacted] plan is <CREDIT_CARD> today. The end.");
    // One delta per checked sentence (the provider pauses after each), not one per word.
    assert.deepEqual(r.deltas, ["Hello there. ", "My [redacted] plan is <CREDIT_CARD> today. ", "The end."]);
    assert.deepEqual(calls, [["Hello there. "], ["My secret plan is <CREDIT_CARD> today. "], ["The end."]]);
  });

  test("chat completions: a reject part way; the SDK raises an APIError after the text that passed", async () => {
    const r = await chatStream("hook-oa", "All fine here. Then a forbidden thing. More text.");
    assert.deepEqual(r.deltas, ["All fine here. "]);
    assert.ok(r.error instanceof OpenAI.APIError, String(r.error));
    assert.match(r.error.message, /The response was rejected due to inappropriate content/);
  });

  test("messages: mask, and a reject part way raised by the Anthropic SDK as an APIError", async () => {
    const client = anthropic("hook-an");
    const params = (content: string) => ({
      model: "claude-sonnet-4",
      max_tokens: 64,
      messages: [{ role: "user" as const, content }],
    });
    const ok = client.messages.stream(params("One secret. Two."));
    assert.equal(await ok.finalText(), "One [redacted]. Two.");

    const bad = client.messages.stream(params("All fine here. Then a forbidden thing. More text."));
    const texts: string[] = [];
    bad.on("text", (t) => texts.push(t));
    await assert.rejects(bad.finalText(), (e: unknown) => {
      assert.ok(e instanceof Anthropic.APIError, String(e));
      assert.match(e.message, /The response was rejected due to inappropriate content/);
      return true;
    });
    assert.deepEqual(texts, ["All fine here. "]);
  });

  test("responses: deltas and the completed response carry the mask; a reject raises an APIError", async () => {
    const stream = await openai("hook-custom").responses.create({
      model: "gpt-4o",
      input: "My secret plan. Done.",
      stream: true,
    });
    let deltas = "";
    let completed = "";
    for await (const ev of stream) {
      if (ev.type === "response.output_text.delta") deltas += ev.delta;
      if (ev.type === "response.completed") {
        for (const item of ev.response.output) {
          if (item.type !== "message") continue;
          for (const c of item.content) if (c.type === "output_text") completed += c.text;
        }
      }
    }
    assert.equal(deltas, "My [redacted] plan. Done.");
    assert.equal(completed, "My [redacted] plan. Done.");

    const bad = await openai("hook-custom").responses.create({
      model: "gpt-4o",
      input: "All fine here. Then a forbidden thing.",
      stream: true,
    });
    let before = "";
    await assert.rejects(
      (async () => {
        for await (const ev of bad) if (ev.type === "response.output_text.delta") before += ev.delta;
      })(),
      (e: unknown) => e instanceof OpenAI.APIError && /rejected due to inappropriate content/.test(e.message),
    );
    assert.equal(before, "All fine here. ");
  });

  test("webhook down: FailClosed ends the stream before any text, FailOpen passes it", async () => {
    const closed = await chatStream("closed-oa", "Hi there. Bye.");
    assert.deepEqual(closed.deltas, []);
    assert.ok(closed.error instanceof OpenAI.APIError);
    const open = await chatStream("open-oa", "Hi there. Bye.");
    assert.equal(open.error, undefined);
    assert.equal(open.deltas.join(""), "Hi there. Bye.");
  });

  test("guardrailsA (Bedrock, SigV4) on a stream: anonymized sentences masked, a blocked one ends the stream", async () => {
    const client = anthropic("gra-an");
    const params = (content: string) => ({
      model: "claude-sonnet-4",
      max_tokens: 64,
      messages: [{ role: "user" as const, content }],
    });
    const before = bedrock.requests.length;
    const ok = client.messages.stream(params("Write to jane@example.com today. Thanks."));
    assert.equal(await ok.finalText(), "Write to {EMAIL} today. Thanks.");
    const asked = bedrock.requests.slice(before).map((r) => r.json as { source: string });
    assert.ok(asked.length >= 2 && asked.every((j) => j.source === "OUTPUT"), JSON.stringify(asked));

    const bad = client.messages.stream(params("All fine here. Now about weapons. More."));
    const texts: string[] = [];
    bad.on("text", (t) => texts.push(t));
    await assert.rejects(bad.finalText(), (e: unknown) => {
      assert.ok(e instanceof Anthropic.APIError, String(e));
      assert.match(e.message, /blocked by the guardrail/);
      return true;
    });
    assert.deepEqual(texts, ["All fine here. "]);
  });
});
