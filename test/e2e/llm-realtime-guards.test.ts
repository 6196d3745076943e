// Prompt guards on Realtime websocket sessions through a real Envoy: Node's own WebSocket client (as OpenAI's SDK opens
// it) → Envoy → Sluice's Realtime relay → a fake Realtime provider. A card number in an input_text reaches the
// provider masked; a Reject guard answers Realtime's error event and nothing reaches the provider; a card number the
// provider streams split across deltas reaches the client masked; a webhook response guard rejecting part way leaves
// the client the text checked so far, Realtime's error event and a 1008 close. A Realtime route without guards is
// still a websocket Envoy passes straight to the provider (no relay in the path).

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, realtimeBackendYaml, startFakeRealtime } from "../helpers/fake-realtime.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime, untilEvent, userTextEvent } from "../helpers/realtime-client.js";

function backend(name: string, rt: FakeRealtime, guard: string | undefined): string {
  return realtimeBackendYaml(rt, { name, ...(guard !== undefined ? { ai: `      promptGuard:\n${guard}\n` } : {}) });
}

function rule(prefix: string, name: string): string {
  return `    - matches: [{ path: { type: PathPrefix, value: /${prefix}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
}

function resources(
  masked: FakeRealtime,
  rejected: FakeRealtime,
  direct: FakeRealtime,
  hooked: FakeRealtime,
  hookPort: number,
): string {
  return [
    localService("guard-hook", hookPort),
    backend(
      "hooked",
      hooked,
      `        streaming: Enabled
        response: [{ webhook: { backendRef: { name: guard-hook, port: 80 } } }]`,
    ),
    backend(
      "masked",
      masked,
      `        streaming: Enabled
        request: [{ regex: { builtins: [CreditCard] } }]
        response: [{ regex: { builtins: [CreditCard] } }]`,
    ),
    backend(
      "rejected",
      rejected,
      `        request:
          - regex: { builtins: [CreditCard], action: Reject }
            response: { message: "no card numbers here", statusCode: 422 }`,
    ),
    backend("direct", direct, undefined),
    `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rule("masked", "masked")}
${rule("rejected", "rejected")}
${rule("direct", "direct")}
${rule("hooked", "hooked")}
`,
  ].join("\n");
}

/** A websocket to `path` through Envoy, with the events it receives queued. */
const open = (env: LlmEnv, path: string) => openRealtime(env.port, path, "client-key");

async function close(ws: WebSocket): Promise<number> {
  const closed = new Promise<number>((r) => ws.addEventListener("close", (e) => r(e.code)));
  ws.close(1000, "bye");
  return closed;
}

describe("prompt guards on Realtime sessions through Envoy", { timeout: 60_000 }, () => {
  let masked: FakeRealtime;
  let rejected: FakeRealtime;
  let direct: FakeRealtime;
  let hooked: FakeRealtime;
  let hook: Server;
  const hookTexts: string[][] = [];
  let env: LlmEnv;

  before(async () => {
    masked = await startFakeRealtime({
      name: "masked",
      apiKey: "sk-provider",
      deltas: ["Your card is 4111 1111 ", "1111 1111, noted."],
    });
    rejected = await startFakeRealtime({ name: "rejected", apiKey: "sk-provider" });
    direct = await startFakeRealtime({ name: "direct", apiKey: "sk-provider" });
    hooked = await startFakeRealtime({
      name: "hooked",
      apiKey: "sk-provider",
      deltas: ["All good. ", "The secret ", "is out. ", "More text."],
    });
    // The webhook guard: rejects a text that tells the secret. It answers after 100 ms, so the provider's next events
    // arrive while a check is out and are checked together once the provider is quiet (the relay's idle check).
    hook = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        const { texts } = JSON.parse(body) as { texts: string[] };
        hookTexts.push(texts);
        const bad = texts.some((t) => t.includes("secret"));
        setTimeout(() => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify(bad ? { action: "reject", reason: "secret" } : { action: "pass" }));
        }, 100);
      });
    });
    await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
    const hookPort = (hook.address() as AddressInfo).port;
    env = await startLlmEnv(resources(masked, rejected, direct, hooked, hookPort), "/direct/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await masked?.close();
    await rejected?.close();
    await direct?.close();
    await hooked?.close();
    hook?.closeAllConnections();
    await new Promise<void>((r) => (hook === undefined ? r() : hook.close(() => r())));
  });

  test("a card number in input_text reaches the provider masked; one split across deltas reaches the client masked", async () => {
    const { ws, next } = await open(env, "/masked/v1/realtime");
    assert.equal(ws.protocol, "realtime");
    assert.equal((await next()).type, "session.created");
    ws.send(userTextEvent("pay with 4111 1111 1111 1111 please"));
    ws.send(JSON.stringify({ type: "response.create" }));
    const events = await untilEvent(next, "response.done");
    const sent = masked.events[0] as { item: { content: { text: string }[] } };
    assert.equal(masked.events[1]?.type, "response.create");
    assert.doesNotMatch(sent.item.content[0]?.text ?? "", /4111/);
    assert.match(sent.item.content[0]?.text ?? "", /^pay with .+ please$/);
    const deltas = events.filter((e) => e.type === "response.output_text.delta");
    const text = deltas.map((e) => e.delta).join("");
    assert.match(text, /^Your card is .+, noted\.$/);
    assert.doesNotMatch(text, /4111|1111 1111/);
    for (const d of deltas) assert.equal(d.item_id, "item_fake");
    assert.equal(events.find((e) => e.type === "response.output_text.done")?.text, text);
    assert.doesNotMatch(JSON.stringify(events.at(-1)), /4111/);
    assert.equal(await close(ws), 1000);
    const h = masked.handshakes.at(-1);
    assert.equal(h?.path, "/v1/realtime?model=gpt-realtime");
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    assert.equal(h?.headers["sec-websocket-protocol"], "realtime", "the client's key is not passed on");
    // Sluice opened this websocket, not Envoy (Envoy adds x-forwarded-proto to what it forwards).
    assert.equal(h?.headers["x-forwarded-proto"], undefined);
  });

  test("a Reject guard answers Realtime's error event and the event does not reach the provider", async () => {
    const { ws, next } = await open(env, "/rejected/v1/realtime");
    assert.equal((await next()).type, "session.created");
    ws.send(userTextEvent("my card is 4111 1111 1111 1111"));
    const err = await next();
    assert.equal(err.type, "error");
    const e = err.error as Record<string, unknown>;
    assert.equal(e.message, "no card numbers here");
    assert.equal(e.event_id, "evt_client_1");
    // The session goes on: a clean event passes.
    ws.send(userTextEvent("hello"));
    ws.send(JSON.stringify({ type: "response.create" }));
    assert.equal((await untilEvent(next, "response.done")).at(-1)?.type, "response.done");
    assert.deepEqual(
      rejected.events.map((x) => x.type),
      ["conversation.item.create", "response.create"],
    );
    assert.equal((rejected.events[0] as { item: { content: { text: string }[] } }).item.content[0]?.text, "hello");
    await close(ws);
  });

  test("a Realtime route without guards stays a websocket Envoy passes to the provider", async () => {
    const { ws, next } = await open(env, "/direct/v1/realtime");
    assert.equal((await next()).type, "session.created");
    ws.send(userTextEvent("4111 1111 1111 1111"));
    ws.send(JSON.stringify({ type: "response.create" }));
    await untilEvent(next, "response.done");
    assert.equal(
      (direct.events[0] as { item: { content: { text: string }[] } }).item.content[0]?.text,
      "4111 1111 1111 1111",
    );
    const h = direct.handshakes.at(-1);
    assert.equal(h?.headers.authorization, "Bearer sk-provider");
    assert.equal(h?.headers["x-forwarded-proto"], "http", "forwarded by Envoy itself");
    await close(ws);
  });

  test("a webhook response guard rejecting part way: the text checked so far, Realtime's error event, and the session closed", async () => {
    const { ws, next } = await open(env, "/hooked/v1/realtime");
    assert.equal((await next()).type, "session.created");
    const closed = new Promise<number>((r) => ws.addEventListener("close", (e) => r(e.code)));
    ws.send(JSON.stringify({ type: "response.create" }));
    const events = await untilEvent(next, "error");
    const text = events
      .filter((e) => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    // The first sentence passed its check, unless it was checked in one call with the rejected one (events that come
    // back to back after a check join the next): nothing of the secret either way.
    assert.ok(text === "All good. " || text === "", text);
    assert.ok(
      hookTexts.some((t) => t.some((x) => x.includes("secret"))),
      JSON.stringify(hookTexts),
    );
    assert.equal((events.at(-1)?.error as { code?: string } | undefined)?.code, "prompt_guard_rejected");
    const noClose = new Promise<number>((r) => setTimeout(() => r(-1), 10_000).unref());
    assert.equal(await Promise.race([closed, noClose]), 1008, "the relay closes the session (-1: it did not)");
  });
});
