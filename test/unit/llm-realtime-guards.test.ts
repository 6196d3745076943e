// Prompt guards on Realtime events (src/extproc/llm/realtime/events.ts): the user texts of client events masked in
// place or refused with Realtime's error event; the provider's text and transcript deltas masked as a stream, a card
// number split across deltas caught, `.done` events and finished items given the masked text, audio untouched.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { GuardContext } from "../../src/extproc/llm/guards/runner.js";
import { clientEventSlots, guardClientEvent, RealtimeResponseGuard } from "../../src/extproc/llm/realtime/events.js";
import type { GuardSpec } from "../../src/translate/llm/guards.js";

const CARD = "4111 1111 1111 1111";
const ctx: GuardContext = { headers: new Map(), vars: () => ({}), log: () => {} };

function regex(action: "Mask" | "Reject"): GuardSpec {
  return {
    kind: "regex",
    patterns: [],
    builtins: ["CreditCard"],
    action,
    path: "backend.ai.promptGuard.request[0]",
    response: { message: "card numbers are not allowed", statusCode: 403 },
  };
}

const item = (text: string) => ({
  type: "conversation.item.create",
  event_id: "evt_1",
  item: {
    type: "message",
    role: "user",
    content: [
      { type: "input_text", text },
      { type: "input_audio", audio: "AAAA" },
    ],
  },
});

async function pushAll(g: RealtimeResponseGuard, events: object[]): Promise<Record<string, unknown>[]> {
  const out: string[] = [];
  for (const e of events) out.push(...(await g.push(JSON.stringify(e))));
  out.push(...(await g.end()));
  return out.map((s) => JSON.parse(s) as Record<string, unknown>);
}

describe("Realtime client events through request guards", () => {
  test("the texts read: input_text parts, session and response instructions, response input items", () => {
    assert.deepEqual(clientEventSlots(item("hi")).texts(), ["hi"]);
    assert.deepEqual(clientEventSlots({ type: "session.update", session: { instructions: "be brief" } }).texts(), [
      "be brief",
    ]);
    assert.deepEqual(
      clientEventSlots({
        type: "response.create",
        response: {
          instructions: "answer",
          input: [{ type: "message", content: [{ type: "input_text", text: "q" }] }],
        },
      }).texts(),
      ["answer", "q"],
    );
    assert.deepEqual(clientEventSlots({ type: "input_audio_buffer.append", audio: "4111111111111111" }).texts(), []);
  });

  test("Mask rewrites the text in the event; other parts are kept", async () => {
    const o = await guardClientEvent(JSON.stringify(item(`pay with ${CARD} please`)), [regex("Mask")], ctx);
    assert.ok("forward" in o);
    const e = JSON.parse(o.forward) as ReturnType<typeof item>;
    assert.doesNotMatch(e.item.content[0]?.text ?? "", /4111/);
    assert.match(e.item.content[0]?.text ?? "", /^pay with .+ please$/);
    assert.deepEqual(e.item.content[1], { type: "input_audio", audio: "AAAA" });
  });

  test("an event without a match goes out byte for byte", async () => {
    const raw = JSON.stringify(item("nothing to see"));
    assert.deepEqual(await guardClientEvent(raw, [regex("Mask")], ctx), { forward: raw });
    assert.deepEqual(await guardClientEvent("not json", [regex("Mask")], ctx), { forward: "not json" });
  });

  test("Reject answers Realtime's error event naming the client's event", async () => {
    const o = await guardClientEvent(JSON.stringify(item(`card ${CARD}`)), [regex("Reject")], ctx);
    assert.ok("reply" in o);
    const e = JSON.parse(o.reply) as { type: string; error: Record<string, unknown> };
    assert.equal(e.type, "error");
    assert.equal(e.error.message, "card numbers are not allowed");
    assert.equal(e.error.event_id, "evt_1");
    assert.equal(e.error.type, "invalid_request_error");
  });

  test("a 16-digit number failing the card checksum is not masked", async () => {
    const raw = JSON.stringify(item("ref 4111 1111 1111 1112"));
    assert.deepEqual(await guardClientEvent(raw, [regex("Reject")], ctx), { forward: raw });
  });
});

describe("Realtime provider events through response guards", () => {
  const delta = (d: string, type = "response.output_text.delta") => ({
    type,
    event_id: "e",
    response_id: "r",
    item_id: "item_1",
    output_index: 0,
    content_index: 0,
    delta: d,
  });

  test("a card number split across deltas is masked; the deltas keep their item and indexes", async () => {
    const g = new RealtimeResponseGuard([regex("Mask")], ctx);
    const out = await pushAll(g, [
      delta("Your card is 4111 1111 "),
      delta("1111 1111, noted."),
      {
        type: "response.output_text.done",
        item_id: "item_1",
        output_index: 0,
        content_index: 0,
        text: `Your card is ${CARD}, noted.`,
      },
      {
        type: "response.done",
        response: { output: [{ content: [{ type: "output_text", text: `Your card is ${CARD}, noted.` }] }] },
      },
    ]);
    const deltas = out.filter((e) => e.type === "response.output_text.delta");
    const text = deltas.map((e) => e.delta).join("");
    assert.doesNotMatch(text, /4111|1111 1111/);
    assert.match(text, /^Your card is .+, noted\.$/);
    for (const d of deltas) {
      assert.equal(d.item_id, "item_1");
      assert.equal(d.output_index, 0);
      assert.equal(d.content_index, 0);
      assert.equal(
        Object.keys(d).some((k) => k.startsWith("__")),
        false,
      );
    }
    const done = out.find((e) => e.type === "response.output_text.done");
    assert.equal(done?.text, text);
    const final = JSON.stringify(out.find((e) => e.type === "response.done"));
    assert.doesNotMatch(final, /4111/);
  });

  test("audio transcripts are masked, audio is passed as it came without releasing the held transcript", async () => {
    const g = new RealtimeResponseGuard([regex("Mask")], ctx);
    const audio = {
      type: "response.audio.delta",
      item_id: "item_1",
      output_index: 0,
      content_index: 0,
      delta: "NDExMTExMTExMTExMTExMQ==",
    };
    // The card number comes split across transcript deltas, with a chunk of audio between them (as a voice answer's
    // events interleave).
    const out = await pushAll(g, [
      delta("card 4111 1111 ", "response.audio_transcript.delta"),
      audio,
      delta("1111 1111", "response.audio_transcript.delta"),
      {
        type: "response.audio_transcript.done",
        item_id: "item_1",
        output_index: 0,
        content_index: 0,
        transcript: `card ${CARD}`,
      },
      {
        type: "response.output_item.done",
        item: { id: "item_1", content: [{ type: "audio", transcript: `card ${CARD}` }] },
      },
    ]);
    const types = out.map((e) => e.type);
    const done = types.indexOf("response.audio_transcript.done");
    assert.deepEqual(types.slice(done), ["response.audio_transcript.done", "response.output_item.done"]);
    assert.deepEqual(
      out.filter((e) => e.type === "response.audio.delta"),
      [audio],
      "audio is not read",
    );
    const transcript = out.slice(0, done).filter((e) => e.type === "response.audio_transcript.delta");
    const said = transcript.map((e) => e.delta).join("");
    assert.equal(said, "card <CREDIT_CARD>");
    assert.equal(out[done]?.transcript, said, "the done event repeats the masked transcript");
    assert.equal(out[done]?.text, undefined);
    const part = (out[done + 1]?.item as { content: Record<string, unknown>[] } | undefined)?.content[0];
    assert.equal(part?.text, undefined);
    assert.equal(part?.transcript, said);
  });

  test("text without a match goes out as it came", async () => {
    const g = new RealtimeResponseGuard([regex("Mask")], ctx);
    const out = await pushAll(g, [delta("Hello "), delta("there.")]);
    assert.equal(out.map((e) => e.delta).join(""), "Hello there.");
  });

  test("response guards apply with streaming Enabled only", () => {
    assert.equal(RealtimeResponseGuard.applies({ request: [], response: [regex("Mask")], streaming: true }), true);
    assert.equal(RealtimeResponseGuard.applies({ request: [], response: [regex("Mask")], streaming: false }), false);
    assert.equal(RealtimeResponseGuard.applies(undefined), false);
  });
});

describe("Google's Live API messages", () => {
  const model = (text: string) => ({ serverContent: { modelTurn: { role: "model", parts: [{ text }] } } });
  const audio = { serverContent: { modelTurn: { parts: [{ inlineData: { mimeType: "audio/pcm", data: "AAAA" } }] } } };

  test("client texts read: the setup's system instruction, clientContent turns, realtimeInput text", () => {
    const texts = (m: object) => clientEventSlots(m as Record<string, unknown>).texts();
    assert.deepEqual(texts({ setup: { model: "m", systemInstruction: { parts: [{ text: "be brief" }] } } }), [
      "be brief",
    ]);
    assert.deepEqual(
      texts({
        clientContent: {
          turns: [
            { role: "user", parts: [{ text: "a" }, { inlineData: { data: "AAAA" } }] },
            { role: "model", parts: [{ text: "b" }] },
          ],
          turnComplete: true,
        },
      }),
      ["a", "b"],
    );
    assert.deepEqual(texts({ realtimeInput: { text: "typed" } }), ["typed"]);
    assert.deepEqual(texts({ realtimeInput: { audio: { data: "AAAA", mimeType: "audio/pcm" } } }), []);
  });

  test("Mask rewrites the turn's text; Reject closes the session with the guard's message", async () => {
    const turn = {
      clientContent: { turns: [{ role: "user", parts: [{ text: `card ${CARD}` }] }], turnComplete: true },
    };
    const masked = await guardClientEvent(JSON.stringify(turn), [regex("Mask")], ctx);
    assert.ok("forward" in masked);
    assert.deepEqual(JSON.parse(masked.forward), {
      clientContent: { turns: [{ role: "user", parts: [{ text: "card <CREDIT_CARD>" }] }], turnComplete: true },
    });
    const rejected = await guardClientEvent(JSON.stringify(turn), [regex("Reject")], ctx);
    assert.deepEqual(rejected, { close: "card numbers are not allowed" });
  });

  test("the model's text and transcript masked across messages; audio and turn events kept in place", async () => {
    const g = new RealtimeResponseGuard([regex("Mask")], ctx);
    const out = await pushAll(g, [
      { setupComplete: {} },
      model("Your card 4111 1111 "),
      audio,
      { serverContent: { outputTranscription: { text: "card 4111 1111 " } } },
      model("1111 1111 is noted."),
      { serverContent: { outputTranscription: { text: "1111 1111" } } },
      { serverContent: { turnComplete: true }, usageMetadata: { totalTokenCount: 5 } },
    ]);
    const text = out.map((m) => JSON.stringify(m)).join("\n");
    assert.doesNotMatch(text, /4111|__sluice/);
    const parts = out.flatMap(
      (m) => (m.serverContent as { modelTurn?: { parts: { text?: string }[] } } | undefined)?.modelTurn?.parts ?? [],
    );
    assert.equal(parts.map((p) => p.text ?? "").join(""), "Your card <CREDIT_CARD> is noted.");
    const said = out
      .map(
        (m) => (m.serverContent as { outputTranscription?: { text: string } } | undefined)?.outputTranscription?.text,
      )
      .join("");
    assert.equal(said, "card <CREDIT_CARD>");
    assert.deepEqual(out[0], { setupComplete: {} });
    assert.ok(
      out.some((m) => JSON.stringify(m) === JSON.stringify(audio)),
      "audio is not read",
    );
    assert.deepEqual(out.at(-1), { serverContent: { turnComplete: true }, usageMetadata: { totalTokenCount: 5 } });
  });

  test("a response guard's reject closes the session: no event, the guard's message as the close reason", async () => {
    // A remote guard (the moderation service stands in here) rejecting any text that holds a card number.
    const spec = {
      kind: "moderationA",
      config: { kind: "moderationA" },
      path: "backend.ai.promptGuard.response[0]",
      response: { message: "the answer was withheld", statusCode: 403 },
    } as unknown as GuardSpec;
    const remote: GuardContext["remote"] = () => ({
      check: async (input) =>
        input.texts.some((t) => /4111/.test(t)) ? { action: "reject", reason: "card" } : { action: "pass" },
    });
    const g = new RealtimeResponseGuard([spec], { ...ctx, remote });
    const out = await pushAll(g, [
      { setupComplete: {} },
      model("Fine. "),
      model(`Your card is ${CARD}. `),
      { serverContent: { turnComplete: true } },
    ]);
    assert.equal(g.closed, true);
    assert.equal(g.closeReason, "the answer was withheld");
    assert.doesNotMatch(JSON.stringify(out), /4111|error/);
    assert.match(JSON.stringify(out), /Fine\. /);
  });
});
