// Prompt guards through a real Envoy, with the official `openai` and `@anthropic-ai/sdk` clients, streaming and not:
// request regex guards mask in place (the provider sees the mask) or reject with the CustomResponse in the client's
// own error format; a card number that fails the Luhn check goes through; response regex guards mask buffered and
// streamed answers, a card number split across stream chunks included (the fake streams one word per chunk); and a
// webhook guard (a real HTTP server in this test) passes, masks, rejects, and fails closed or open when it is down.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort } from "../helpers/net.js";

const CARD = "4111 1111 1111 1111";
const BAD_CARD = "4111 1111 1111 1112";

function backend(name: string, f: FakeProvider, kind: "providerA" | "providerD", guard: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { ${kind}: {}, host: 127.0.0.1, port: ${f.port} }
  policies:
    auth: { key: sk-test }
    ai:
      routes: { /v1/messages: Messages, /v1/chat/completions: Completions, /v1/responses: Responses }
      promptGuard:
${guard}
`;
}

function resources(openai: FakeProvider, claude: FakeProvider, webhookPort: number, deadPort: number): string {
  const all = "[Ssn, CreditCard, PhoneNumber, Email, CaSin]";
  const rules = ["mask", "reject", "resp", "hook", "hookopen", "hookclosed"]
    .flatMap((p) => [
      `    - matches: [{ path: { type: PathPrefix, value: /${p}-oa } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${p}-oa }]`,
      `    - matches: [{ path: { type: PathPrefix, value: /${p}-an } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${p}-an }]`,
    ])
    .join("\n");
  const guards: Record<string, string> = {
    mask: `        request: [{ regex: { builtins: ${all}, matches: ["sk-[a-z0-9]{6}"] } }]`,
    reject: `        request:
          - regex: { builtins: [CreditCard], action: Reject }
            response: { message: "no card numbers here", statusCode: 422 }`,
    resp: `        streaming: Enabled
        response: [{ regex: { builtins: ${all} } }]`,
    hook: `        request:
          - webhook:
              backendRef: { name: guard-hook, port: 80 }
              headers: { x-guard-model: "llm.model" }
              forwardHeaderMatches: [{ name: x-tenant, value: acme }]
        response:
          - webhook: { backendRef: { name: guard-hook, port: 80 } }`,
    hookopen: `        request: [{ webhook: { backendRef: { name: dead-hook, port: 80 }, failureMode: FailOpen } }]`,
    hookclosed: `        request: [{ webhook: { backendRef: { name: dead-hook, port: 80 } } }]`,
  };
  return [
    localService("guard-hook", webhookPort),
    localService("dead-hook", deadPort),
    ...Object.entries(guards).flatMap(([p, g]) => [
      backend(`${p}-oa`, openai, "providerA", g),
      backend(`${p}-an`, claude, "providerD", g),
    ]),
    `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rules}
`,
  ].join("\n");
}

interface HookCall {
  readonly direction: string;
  readonly texts: string[];
  readonly headers: Record<string, string | string[] | undefined>;
}

/** The webhook: rejects texts with "forbidden", masks "secret", passes the rest. */
function startWebhook(calls: HookCall[]): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const input = JSON.parse(body) as { direction: string; texts: string[] };
      calls.push({ ...input, headers: req.headers });
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

describe("prompt guards end to end", { timeout: 120_000 }, () => {
  let env: LlmEnv;
  let fakeOpenai: FakeProvider;
  let fakeClaude: FakeProvider;
  let hook: Server;
  const calls: HookCall[] = [];
  const openai = (p: string) => new OpenAI({ apiKey: "c", baseURL: `${env.baseUrl}/${p}-oa/v1`, maxRetries: 0 });
  const anthropic = (p: string) => new Anthropic({ apiKey: "c", baseURL: `${env.baseUrl}/${p}-an`, maxRetries: 0 });
  const lastSent = (f: FakeProvider) => JSON.stringify(f.requests.at(-1)?.json ?? {});
  const chat = (p: string, content: string, extra: { headers?: Record<string, string> } = {}) =>
    openai(p).chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content }] }, extra);
  const message = (p: string, content: string) =>
    anthropic(p).messages.create({
      model: "claude-sonnet-4",
      max_tokens: 64,
      system: "system prompt with jane@example.com",
      messages: [{ role: "user", content }],
    });

  before(async () => {
    fakeOpenai = await startFakeProvider({ name: "openai", apiKey: "sk-test" });
    fakeClaude = await startFakeProvider({ name: "claude", apiKey: "sk-test" });
    hook = await startWebhook(calls);
    const deadPort = await freePort();
    env = await startLlmEnv(
      resources(fakeOpenai, fakeClaude, (hook.address() as AddressInfo).port, deadPort),
      "/mask-oa/v1/chat/completions",
    );
  });
  after(async () => {
    await env?.stop();
    await fakeOpenai?.close();
    await fakeClaude?.close();
    hook?.close();
  });

  test("request Mask: every builtin and user pattern masked before the provider sees it; Luhn failure kept", async () => {
    const text = `card ${CARD}, not a card ${BAD_CARD}, ssn 123-45-6789, sin 046 454 286, call (555) 123-4567, mail jane@example.com, key sk-abc123`;
    const r = await chat("mask", text);
    const sent = lastSent(fakeOpenai);
    for (const secret of [CARD, "123-45-6789", "046 454 286", "(555) 123-4567", "jane@example.com", "sk-abc123"]) {
      assert.ok(!sent.includes(secret), `${secret} reached the provider`);
    }
    for (const m of ["<CREDIT_CARD>", "<SSN>", "<CA_SIN>", "<PHONE_NUMBER>", "<EMAIL>", "<MASKED>"]) {
      assert.ok(sent.includes(m), `${m} missing in ${sent}`);
    }
    assert.ok(sent.includes(BAD_CARD), "a number failing the Luhn check is not a card");
    assert.match(r.choices[0]?.message.content ?? "", /<CREDIT_CARD>/);

    // Anthropic format: the system prompt and the user message, streamed too.
    await message("mask", `card ${CARD}`);
    const sentA = lastSent(fakeClaude);
    assert.ok(!sentA.includes(CARD) && !sentA.includes("jane@example.com"), sentA);
    assert.ok(sentA.includes("<CREDIT_CARD>") && sentA.includes("<EMAIL>"));
    const stream = anthropic("mask").messages.stream({
      model: "claude-sonnet-4",
      max_tokens: 64,
      messages: [{ role: "user", content: `mail bob@example.org` }],
    });
    const final = await stream.finalText();
    assert.match(final, /<EMAIL>/);
    assert.ok(!lastSent(fakeClaude).includes("bob@example.org"));
  });

  test("request Reject: the CustomResponse in each client's error format; nothing reaches the provider", async () => {
    const before = fakeOpenai.requests.length;
    await assert.rejects(chat("reject", `card ${CARD}`), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 422);
      assert.match(e.message, /no card numbers here/);
      return true;
    });
    await assert.rejects(
      openai("reject").chat.completions.create({
        model: "gpt-4o",
        stream: true,
        messages: [{ role: "user", content: `card ${CARD}` }],
      }),
      (e: unknown) => e instanceof OpenAI.APIError && e.status === 422,
    );
    assert.equal(fakeOpenai.requests.length, before);
    await assert.rejects(message("reject", `card ${CARD}`), (e: unknown) => {
      assert.ok(e instanceof Anthropic.APIError);
      assert.equal(e.status, 422);
      assert.match(e.message, /no card numbers here/);
      assert.equal((e.error as { type?: string }).type, "error");
      return true;
    });
    // A number that fails the checksum passes.
    const ok = await chat("reject", `card ${BAD_CARD}`);
    assert.match(ok.choices[0]?.message.content ?? "", /4111 1111 1111 1112/);
  });

  test("response regex: buffered and streamed, a card split across chunks masked, in both formats", async () => {
    const text = `card ${CARD} mail jane@example.com end`;
    const r = await chat("resp", text);
    const answer = r.choices[0]?.message.content ?? "";
    assert.match(answer, /card <CREDIT_CARD> mail <EMAIL> end/);
    // The request itself was not masked (response guards only): the provider saw the card.
    assert.ok(lastSent(fakeOpenai).includes(CARD));

    const stream = await openai("resp").chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: text }],
    });
    let streamed = "";
    let chunks = 0;
    for await (const c of stream) {
      const d = c.choices[0]?.delta.content;
      if (d) {
        streamed += d;
        chunks++;
        assert.ok(!/\d{4}/.test(d), `a card digit group leaked in a chunk: ${d}`);
      }
    }
    assert.match(streamed, /card <CREDIT_CARD> mail <EMAIL> end/);
    assert.ok(chunks > 1, "still streamed, not buffered whole");

    const m = await message("resp", text);
    assert.match(m.content[0]?.type === "text" ? m.content[0].text : "", /<CREDIT_CARD>/);
    const ms = anthropic("resp").messages.stream({
      model: "claude-sonnet-4",
      max_tokens: 64,
      messages: [{ role: "user", content: text }],
    });
    const deltas: string[] = [];
    ms.on("text", (t) => deltas.push(t));
    const final = await ms.finalText();
    assert.match(final, /card <CREDIT_CARD> mail <EMAIL> end/);
    assert.ok(
      deltas.every((d) => !/\d{4}/.test(d)),
      deltas.join("|"),
    );
  });

  test("webhook: pass, mask, reject; headers from CEL and forwarded; request and response", async () => {
    calls.length = 0;
    const passed = await chat("hook", "hello there", { headers: { "x-tenant": "acme" } });
    assert.match(passed.choices[0]?.message.content ?? "", /hello there/);
    const req = calls.find((c) => c.direction === "request");
    assert.deepEqual(req?.texts, ["hello there"]);
    assert.equal(req?.headers["x-guard-model"], "gpt-4o");
    assert.equal(req?.headers["x-tenant"], "acme");
    assert.ok(calls.some((c) => c.direction === "response" && c.texts[0]?.includes("hello there")));

    const masked = await chat("hook", "my secret plan");
    assert.ok(lastSent(fakeOpenai).includes("my [redacted] plan"));
    assert.match(masked.choices[0]?.message.content ?? "", /\[redacted\]/);

    await assert.rejects(chat("hook", "a forbidden thing"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 403);
      assert.match(e.message, /The request was rejected due to inappropriate content/);
      return true;
    });
    await assert.rejects(message("hook", "a forbidden thing"), (e: unknown) => {
      assert.ok(e instanceof Anthropic.PermissionDeniedError);
      return true;
    });
  });

  test("webhook down: FailClosed rejects, FailOpen passes", async () => {
    await assert.rejects(chat("hookclosed", "hi"), (e: unknown) => e instanceof OpenAI.APIError && e.status === 403);
    const r = await chat("hookopen", "hi");
    assert.match(r.choices[0]?.message.content ?? "", /hi/);
  });
});
