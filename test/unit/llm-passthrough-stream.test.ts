// The passthrough stream (src/llm/stream.ts, `passthroughStream`: client and provider speak the same format): whole
// events go out byte for byte as the provider sent them, however Envoy splits them; a malformed event ends the
// stream with an error event in the client's format after the events before it, and nothing after it goes out.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { SseParser } from "../../src/llm/codec/sse.js";
import { findDirection } from "../../src/llm/registry.js";
import { passthroughStream, type StreamTranslator } from "../../src/llm/stream.js";
import type { TranslateContext } from "../../src/llm/translate/context.js";
import type { TokenUsage } from "../../src/llm/usage.js";
import { holds, splitAt } from "./fuzz-support.js";

const te = new TextEncoder();
const td = new TextDecoder();
const ctx: TranslateContext = { id: (p) => `${p}1`, now: () => 1_700_000_000 };
const meta = { model: "m", stream: true, includeUsage: true };

function stream(client: "chat-completions" | "messages" | "responses"): StreamTranslator {
  const d = findDirection(client, client);
  assert.ok(d?.stream, `${client} passthrough`);
  return d.stream(meta, ctx);
}

/** Feeds the pieces, then ends; returns every byte let out, in order. */
function run(t: StreamTranslator, pieces: readonly Uint8Array[]): Uint8Array {
  const out: number[] = [];
  for (const p of pieces) out.push(...t.push(p));
  out.push(...t.end());
  return Uint8Array.from(out);
}

const chatChunk = (content: string) =>
  `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`;
const chatUsage =
  'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}\n\n';

/** A chat stream with what a provider may send besides plain events: a comment, CRLF and CR line ends, multi-byte
 * text, a two-line data field, an event field, blank lines between events, the `[DONE]` sentinel. */
const chatStream = te.encode(
  [
    ": keep-alive\n\n",
    chatChunk("Héllo ✓ "),
    `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",\r\ndata: "choices":[{"index":0,"delta":{"content":"wörld"},"finish_reason":null}]}\r\n\r\n`,
    "\n",
    `event: message\rdata: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\r\r`,
    chatUsage,
    "data: [DONE]\n\n",
  ].join(""),
);

test("a passthrough stream split at every byte offset, and byte by byte, goes out byte-identical, usage read", () => {
  for (let k = 0; k <= chatStream.length; k++) {
    const t = stream("chat-completions");
    const out = run(t, [chatStream.subarray(0, k), chatStream.subarray(k)]);
    assert.deepEqual(out, chatStream, `split at ${k}`);
    assert.equal(t.failure(), undefined, `split at ${k}`);
    assert.deepEqual(
      [t.usage()?.inputTokens, t.usage()?.outputTokens, t.usage()?.totalTokens],
      [11, 7, 18],
      `split at ${k}`,
    );
  }
  const t = stream("chat-completions");
  const bytes = Array.from(chatStream, (_, i) => chatStream.subarray(i, i + 1));
  assert.deepEqual(run(t, bytes), chatStream);
  assert.equal(t.usage()?.totalTokens, 18);
});

test("only whole events leave: a chunk ending inside an event lets out the events before it", () => {
  const t = stream("chat-completions");
  const first = te.encode(chatChunk("a"));
  const second = te.encode(chatChunk("b"));
  const out1 = t.push(Uint8Array.from([...first, ...second.subarray(0, 20)]));
  assert.deepEqual(out1, first);
  const out2 = t.push(second.subarray(20));
  assert.deepEqual(out2, second);
  // A chunk of whole events goes out as it came (a view of it, not a re-serialised copy).
  const whole = te.encode(chatChunk("c") + chatChunk("d"));
  const out3 = t.push(whole);
  assert.equal(out3.buffer, whole.buffer);
  assert.equal(out3.byteLength, whole.byteLength);
});

test("a split event's pieces pass through byte-identically wherever the split falls (property)", () =>
  holds(
    "passthrough split",
    fc.property(
      fc.array(fc.string({ maxLength: 40 }), { minLength: 1, maxLength: 6 }),
      fc.constantFrom("\n", "\r\n", "\r"),
      fc.array(fc.nat(), { maxLength: 12 }),
      (texts, eol, cuts) => {
        const body = texts
          .map((s) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: s } }] })}${eol}${eol}`)
          .join("");
        const bytes = te.encode(`${body}data: [DONE]${eol}${eol}`);
        const t = stream("chat-completions");
        assert.deepEqual(run(t, splitAt(bytes, cuts)), bytes);
        assert.equal(t.failure(), undefined);
      },
    ),
  ));

/** The events of an SSE byte stream, as a client's parser reads them. */
function events(bytes: Uint8Array): { event?: string; data: string }[] {
  const p = new SseParser();
  return [...p.push(bytes), ...p.end()];
}

const broken = 'data: {"id":"c1","choices":[{"delta":{"content":"cut\n\n';

test("a malformed event ends a chat stream with OpenAI's error event, after the deltas before it, at any split", () => {
  for (const eol of ["\n", "\r\n", "\r"]) {
    const lines = (s: string) => s.replace(/\n/g, eol);
    const good = lines(chatChunk("Hello ") + chatChunk("there "));
    // The broken event has two lines: neither may leave before its end is seen.
    const bad = lines(`event: message\n${broken}`);
    const bytes = te.encode(`${good}${bad}${lines(chatChunk("after") + chatUsage)}data: [DONE]${eol}${eol}`);
    for (let k = 0; k <= bytes.length; k++) {
      const why = `${JSON.stringify(eol)} split at ${k}`;
      const t = stream("chat-completions");
      const text = td.decode(run(t, [bytes.subarray(0, k), bytes.subarray(k)]));
      assert.ok(text.startsWith(good), `${why}: ${text}`);
      const rest = text.slice(good.length);
      assert.match(rest, /^data: \{"error":/, `${why}: nothing of the broken event left: ${text}`);
      const evs = events(te.encode(rest));
      assert.equal(evs.length, 1, `${why}: ${text}`);
      const e = JSON.parse(evs[0]?.data ?? "") as { error: { type: string; message: string } };
      assert.equal(e.error.type, "server_error");
      assert.match(e.error.message, /^malformed event from upstream: /);
      assert.ok(!text.includes("after") && !text.includes("[DONE]"), `${why}: nothing after the broken event`);
      assert.equal(t.failure()?.status, 502);
      assert.equal(t.usage(), undefined, "the usage event came after the broken one");
    }
  }
});

test("non-JSON garbage ends a messages stream with Anthropic's error event; usage read before it stays", () => {
  const start =
    'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}\n\n';
  const delta =
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n';
  const t = stream("messages");
  const text = td.decode(run(t, [te.encode(`${start}${delta}event: content_block_delta\ndata: <html>oops\n\n`)]));
  assert.ok(text.startsWith(start + delta), text);
  const rest = events(te.encode(text.slice(start.length + delta.length)));
  assert.deepEqual(
    rest.map((e) => e.event),
    ["error"],
  );
  const e = JSON.parse(rest[0]?.data ?? "") as { type: string; error: { type: string; message: string } };
  assert.equal(e.type, "error");
  assert.equal(e.error.type, "api_error");
  assert.match(e.error.message, /^malformed event from upstream: /);
  assert.equal(t.usage()?.inputTokens, 5);
});

test("a responses stream's error event follows the last sequence number the client had", () => {
  const ev = (type: string, seq: number) => `event: ${type}\ndata: {"type":"${type}","sequence_number":${seq}}\n\n`;
  const good = ev("response.created", 0) + ev("response.in_progress", 1);
  const t = stream("responses");
  const text = td.decode(run(t, [te.encode(`${good}event: response.output_text.delta\ndata: {"type":`)]));
  assert.ok(text.startsWith(good), text);
  const rest = events(te.encode(text.slice(good.length)));
  assert.equal(rest[0]?.event, "error");
  const e = JSON.parse(rest[0]?.data ?? "") as { type: string; sequence_number: number; message: string };
  assert.equal(e.type, "error");
  assert.equal(e.sequence_number, 2);
  assert.match(e.message, /^malformed event from upstream: /);
});

test("a stream cut inside an event is an error; a last event without its blank line is let out", () => {
  const cut = stream("chat-completions");
  const a = chatChunk("a");
  const text = td.decode(run(cut, [te.encode(`${a}data: {"id":`)]));
  assert.ok(text.startsWith(a));
  assert.match(text.slice(a.length), /^data: \{"error":\{"message":"malformed event from upstream: /);
  const whole = stream("chat-completions");
  const bytes = te.encode(`${a}${chatUsage.trimEnd()}`);
  assert.deepEqual(run(whole, [bytes]), bytes);
  assert.equal(whole.failure(), undefined);
  assert.equal(whole.usage()?.totalTokens, 18);
});

test("an event past the bound ends the stream with an error; nothing of it goes out", () => {
  const errorEvent = () => "data: ERR\n\n";
  const usage = (): TokenUsage | undefined => undefined;
  const t = passthroughStream(usage, errorEvent, undefined, 100);
  const a = te.encode('data: {"a":1}\n\n');
  assert.deepEqual(t.push(Uint8Array.from([...a, ...te.encode('data: {"x":"')])), a);
  let out = "";
  for (let i = 0; i < 10; i++) out += td.decode(t.push(te.encode("y".repeat(20))));
  assert.equal(out, "data: ERR\n\n");
  assert.match(t.failure()?.message ?? "", /longer than 100 characters/);
  assert.equal(t.end().byteLength, 0);
});

const notJson = (s: string) => {
  try {
    JSON.parse(s);
    return false;
  } catch {
    return true;
  }
};

/** One error event and nothing else, with the message a JSON parse of `bad` gives. */
function assertOneError(rest: string, bad: string | undefined): void {
  const evs = events(te.encode(rest));
  assert.equal(evs.length, 1, rest);
  const e = JSON.parse(evs[0]?.data ?? "") as { error: { type: string; message: string } };
  assert.equal(e.error.type, "server_error");
  if (bad !== undefined) {
    let why = "";
    try {
      JSON.parse(bad);
    } catch (err) {
      why = (err as Error).message;
    }
    assert.equal(e.error.message, `malformed event from upstream: ${why}`);
  }
}

test("corrupt or truncated streams, split anywhere: the events before the fault, then one error event (property)", () =>
  holds(
    "passthrough corrupt",
    fc.property(
      fc.array(fc.string({ maxLength: 30 }), { minLength: 1, maxLength: 6 }),
      fc.nat(),
      fc.option(
        fc.string({ minLength: 1, maxLength: 20 }).filter((g) => !/[\r\n]/.test(g) && g !== "[DONE]" && notJson(g)),
        { nil: undefined },
      ),
      fc.nat(),
      fc.array(fc.nat(), { maxLength: 8 }),
      (texts, at, garbage, cutAt, cuts) => {
        const evs = texts.map((s) => `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: s } }] })}\n\n`);
        const k = at % evs.length;
        let input: string;
        if (garbage !== undefined) input = [...evs.slice(0, k), `data: ${garbage}\n\n`, ...evs.slice(k)].join("");
        else input = evs.join("").slice(0, cutAt % (evs.join("").length + 1));
        const bytes = te.encode(input);
        const whole = stream("chat-completions");
        const expected = td.decode(run(whole, [bytes]));
        const t = stream("chat-completions");
        const text = td.decode(run(t, splitAt(bytes, cuts)));
        assert.equal(text, expected, "splitting changes nothing");
        if (garbage !== undefined) {
          const prefix = evs.slice(0, k).join("");
          assert.ok(text.startsWith(prefix), text);
          assertOneError(text.slice(prefix.length), garbage);
          return;
        }
        if (t.failure() === undefined) {
          assert.equal(text, input, "a stream cut where an event is still whole JSON goes out as it came");
          return;
        }
        // Cut inside an event: the whole events before it, then the error.
        const last = input.lastIndexOf("\n\n");
        const end = last < 0 ? 0 : last + 2;
        assert.ok(text.startsWith(input.slice(0, end)), text);
        assertOneError(text.slice(end), undefined);
      },
    ),
  ));

test("the provider's own error event passes through as sent and is reported as the stream's failure", () => {
  const a = chatChunk("a");
  const err = 'data: {"error":{"message":"Rate limit reached","type":"rate_limit_error","param":null,"code":null}}\n\n';
  const t = stream("chat-completions");
  const bytes = te.encode(a + err);
  assert.deepEqual(run(t, [bytes]), bytes);
  assert.deepEqual(t.failure(), {
    status: 429,
    kind: "rate_limit",
    message: "Rate limit reached",
    code: "rate_limit_error",
  });
  const m = stream("messages");
  const overloaded =
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';
  assert.deepEqual(run(m, [te.encode(overloaded)]), te.encode(overloaded));
  assert.equal(m.failure()?.status, 529);
  // A delta whose text mentions an error is not one.
  const quiet = stream("chat-completions");
  run(quiet, [te.encode(chatChunk('{"error": {"message": "x"}}'))]);
  assert.equal(quiet.failure(), undefined);
});
