// Fuzzing the LLM stream decoders (src/llm/codec/sse.ts, src/llm/codec/eventstream.ts and their wrappers in
// src/llm/stream.ts) as Envoy feeds them: in pieces split anywhere, truncated, or corrupted. Splitting never changes
// what is decoded; corrupt or truncated input is an error, never an exception or a hang; nothing else is invented.

import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  EventStreamDecoder,
  type EventStreamMessage,
  encodeEventStreamMessage,
  type HeaderValue,
} from "../../src/llm/codec/eventstream.js";
import { type SseEvent, SseParser, serializeSse } from "../../src/llm/codec/sse.js";
import { awsEventStreamDecoder, sseDecoder } from "../../src/llm/stream.js";
import { holds, splitAt, within } from "./fuzz-support.js";

const te = new TextEncoder();

function sseAll(chunks: readonly Uint8Array[]): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}

const noBreaks = fc.string({ maxLength: 30 }).map((s) => s.replace(/[\r\n]/g, ""));
const sseEvent: fc.Arbitrary<SseEvent> = fc
  .record({
    event: fc.option(
      noBreaks.filter((s) => s !== "" && !s.startsWith(" ")),
      { nil: undefined },
    ),
    data: fc.string({ maxLength: 60 }).map((s) => s.replace(/\r\n?/g, "\n")),
    id: fc.option(
      noBreaks.map((s) => s.replace(/\0/g, "").replace(/^ /, "")),
      { nil: undefined },
    ),
  })
  .map((e) => {
    const out: SseEvent = { data: e.data };
    if (e.event !== undefined) out.event = e.event;
    if (e.id !== undefined) out.id = e.id;
    return out;
  });

test("SSE: serialized events split at any points (inside UTF-8 sequences and CRLF pairs too) decode to themselves", () =>
  holds(
    "sse round trip",
    fc.property(fc.array(sseEvent, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 10 }), (events, cuts) => {
      const bytes = te.encode(events.map(serializeSse).join(""));
      const got = sseAll(splitAt(bytes, cuts));
      // The id field persists across events (last event id), as the spec says; compare what was sent.
      assert.deepEqual(
        got.map((e) => [e.event, e.data]),
        events.map((e) => [e.event, e.data]),
      );
    }),
  ));

test("SSE: any bytes decode the same however they are split, without throwing", () =>
  holds(
    "sse split invariance",
    fc.property(
      fc.oneof(
        fc.uint8Array({ maxLength: 300 }),
        fc.string({ maxLength: 200 }).map((s) => te.encode(s.replace(/x/g, "\n"))),
      ),
      fc.array(fc.nat(), { maxLength: 10 }),
      (bytes, cuts) => {
        const whole = within(500, "sse", () => sseAll([bytes]));
        assert.deepEqual(sseAll(splitAt(bytes, cuts)), whole);
      },
    ),
  ));

test("SSE decoder with JSON events: truncated or corrupt streams end in an error or events, never an exception", () =>
  holds(
    "sse json decoder",
    fc.property(
      fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 5 }),
      fc.nat(),
      fc.array(fc.tuple(fc.nat(), fc.nat(255)), { maxLength: 3 }),
      fc.array(fc.nat(), { maxLength: 5 }),
      (values, cut, flips, cuts) => {
        const full = te.encode(values.map((v) => `data: ${JSON.stringify(v)}\n\n`).join(""));
        const bytes = full.slice(0, full.byteLength === 0 ? 0 : cut % (full.byteLength + 1));
        for (const [at, v] of flips) if (bytes.byteLength > 0) bytes[at % bytes.byteLength] = v;
        const dec = sseDecoder((_ev, json) => ({ json }));
        const events: unknown[] = [];
        const errors: unknown[] = [];
        for (const c of splitAt(bytes, cuts))
          dec.push(
            c,
            (e) => events.push(e),
            (e) => errors.push(e),
          );
        dec.end(
          (e) => events.push(e),
          (e) => errors.push(e),
        );
        assert.ok(events.length <= values.length, "no more events than were sent");
        if (bytes.byteLength === full.byteLength && flips.length === 0) {
          assert.deepEqual(errors, []);
          assert.deepEqual(
            events,
            values.map((json) => ({ json })),
          );
        }
      },
    ),
  ));

const headerValue: fc.Arbitrary<HeaderValue> = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.boolean(),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
  fc.uint8Array({ maxLength: 20 }),
);
const message: fc.Arbitrary<EventStreamMessage> = fc.record({
  headers: fc.dictionary(
    fc.string({ minLength: 1, maxLength: 12 }).filter((k) => te.encode(k).byteLength < 256),
    headerValue,
    { maxKeys: 4 },
  ),
  payload: fc.uint8Array({ maxLength: 80 }),
});

/** Headers as plain data: byte values as arrays (the decoder hands out Buffers), no prototype differences. */
function plain(h: Record<string, HeaderValue>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, v instanceof Uint8Array ? [...v] : v]));
}

function esAll(chunks: readonly Uint8Array[]): { messages: EventStreamMessage[]; error: string | undefined } {
  const d = new EventStreamDecoder();
  const messages: EventStreamMessage[] = [];
  let error: string | undefined;
  for (const c of chunks) {
    const r = d.push(c);
    messages.push(...r.messages);
    error ??= r.error;
  }
  error ??= d.end();
  return { messages, error };
}

test("event stream: messages split at any points decode to themselves", () =>
  holds(
    "eventstream round trip",
    fc.property(fc.array(message, { maxLength: 5 }), fc.array(fc.nat(), { maxLength: 10 }), (messages, cuts) => {
      const bytes = Buffer.concat(messages.map((m) => encodeEventStreamMessage(m)));
      const got = esAll(splitAt(bytes, cuts));
      assert.equal(got.error, undefined);
      assert.deepEqual(
        got.messages.map((m) => [plain(m.headers), [...m.payload]]),
        messages.map((m) => [plain(m.headers), [...m.payload]]),
      );
    }),
  ));

test("event stream: a truncated or corrupted stream is an error, and no corrupted message is passed on", () =>
  holds(
    "eventstream corrupt",
    fc.property(
      fc.array(message, { minLength: 1, maxLength: 4 }),
      fc.nat(),
      fc.option(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { nil: undefined }),
      fc.array(fc.nat(), { maxLength: 6 }),
      (messages, cut, flip, cuts) => {
        const full = Buffer.concat(messages.map((m) => encodeEventStreamMessage(m)));
        // At least one byte, at most all but one: a message is always cut short.
        const bytes = Buffer.from(full.subarray(0, 1 + (cut % (full.byteLength - 1))));
        if (flip !== undefined) {
          const at = flip[0] % bytes.byteLength;
          bytes[at] = (bytes[at] ?? 0) ^ flip[1];
        }
        const got = within(500, "event stream", () => esAll(splitAt(bytes, cuts)));
        // A cut exactly between two messages leaves a valid stream; any other cut, and any flipped bit, is reported.
        let boundary = 0;
        const boundaries = new Set(messages.map((m) => (boundary += encodeEventStreamMessage(m).byteLength)));
        if (flip === undefined && boundaries.has(bytes.byteLength)) assert.equal(got.error, undefined);
        else assert.notEqual(got.error, undefined, "a truncated or corrupted stream is reported");
        // Every message passed on is one that was sent, in order (CRCs catch the flipped bits).
        got.messages.forEach((m, i) => {
          assert.deepEqual([...m.payload], [...(messages[i] as EventStreamMessage).payload]);
        });
      },
    ),
  ));

test("Bedrock event-stream decoder: arbitrary bytes end in events or an error, never an exception", () =>
  holds(
    "aws event stream decoder",
    fc.property(fc.array(fc.uint8Array({ maxLength: 100 }), { maxLength: 5 }), (chunks) => {
      const dec = awsEventStreamDecoder();
      const errors: unknown[] = [];
      for (const c of chunks)
        dec.push(
          c,
          () => {},
          (e) => errors.push(e),
        );
      dec.end(
        () => {},
        (e) => errors.push(e),
      );
      if (chunks.some((c) => c.byteLength > 0)) assert.ok(errors.length > 0, "random bytes are not a valid stream");
    }),
  ));

// Found by fuzzing: a long line arriving in small pieces was rescanned from its start on every piece, so 160 KB in
// 10-byte chunks took about a minute of CPU (the event loop blocked for every other request).
test("SSE: a long line in many small chunks is parsed in linear time", () => {
  const p = new SseParser();
  const piece = te.encode("x".repeat(10));
  const events = within(3000, "20 000 small chunks of one line", () => {
    p.push(te.encode("data: "));
    for (let i = 0; i < 20_000; i++) p.push(piece);
    return p.push(te.encode("\n\n"));
  });
  assert.equal(events.length, 1);
  assert.equal(events[0]?.data.length, 200_000);
});

// Found by the event-stream round trip: headers were collected in a plain object, so one named `__proto__` set that
// object's prototype instead of being a header.
test("event stream: a header named __proto__ is a header like any other", () => {
  const headers = JSON.parse('{"__proto__": "x", ":event-type": "e"}') as Record<string, HeaderValue>;
  const got = esAll([encodeEventStreamMessage({ headers, payload: new Uint8Array([1]) })]);
  assert.equal(got.error, undefined);
  assert.deepEqual(plain(got.messages[0]?.headers ?? {}), JSON.parse('{"__proto__": "x", ":event-type": "e"}'));
});
