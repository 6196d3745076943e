// The SSE parser's bound on one event (src/llm/codec/sse.ts, MAX_SSE_EVENT): a provider that never ends a line, or
// never ends an event, stops the parser instead of growing its memory, and the client of a translated stream gets an
// error in its own format after the text it already had; a response guard lets nothing of an unreadable event through.

import assert from "node:assert/strict";
import { test } from "node:test";
import { StreamGuard } from "../../src/extproc/llm/guards/stream.js";
import { MAX_SSE_EVENT, SseParser } from "../../src/llm/codec/sse.js";
import { findDirection } from "../../src/llm/registry.js";
import type { GuardSpec } from "../../src/translate/llm/guards.js";

const te = new TextEncoder();
const td = new TextDecoder();

test("an endless line stops the parser at its bound; events before it are handed out", () => {
  const p = new SseParser(1000);
  const first = p.push('data: {"a":1}\n\ndata: {"b":');
  assert.deepEqual(
    first.map((e) => e.data),
    ['{"a":1}'],
  );
  assert.equal(p.overflow, undefined);
  for (let i = 0; i < 20 && p.overflow === undefined; i++) assert.deepEqual(p.push("x".repeat(100)), []);
  assert.match(String(p.overflow), /longer than 1000 characters/);
  // Stopped: no more events, even whole ones, and nothing held for the end.
  assert.deepEqual(p.push('\n\ndata: {"c":1}\n\n'), []);
  assert.deepEqual(p.end(), []);
});

test("many data lines without the blank line that ends the event count toward the same bound", () => {
  const p = new SseParser(1000);
  let events = 0;
  for (let i = 0; i < 100 && p.overflow === undefined; i++) events += p.push(`data: ${"y".repeat(40)}\n`).length;
  assert.equal(events, 0);
  assert.ok(p.overflow !== undefined, "stopped");
  // Below the bound, a long event is whole.
  const q = new SseParser(1000);
  const got = q.push(`data: ${"z".repeat(900)}\n\n`);
  assert.equal(got[0]?.data.length, 900);
  assert.equal(q.overflow, undefined);
});

test("a provider's endless line (the default bound, 64 KiB pieces): the chat-completions client gets an error event, quickly", () => {
  const d = findDirection("chat-completions", "messages");
  assert.ok(d?.stream);
  let n = 0;
  const t = d.stream({ model: "claude-sonnet-4-5", stream: true, includeUsage: false } as never, {
    id: (prefix) => `${prefix}${++n}`,
    now: () => 1700000000,
  });
  const out: string[] = [];
  out.push(
    td.decode(
      t.push(
        te.encode(
          'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n' +
            'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n' +
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"',
        ),
      ),
    ),
  );
  const piece = te.encode("a".repeat(64 * 1024));
  const t0 = performance.now();
  const before = process.memoryUsage().heapUsed;
  // Twice the bound: the translator must stop holding after the first.
  for (let sent = 0; sent < 2 * MAX_SSE_EVENT; sent += piece.byteLength) out.push(td.decode(t.push(piece)));
  out.push(td.decode(t.end()));
  const ms = performance.now() - t0;
  const text = out.join("");
  assert.match(text, /"content":"Hel"/, "the text before the endless line was delivered");
  const errors = text.split("\n").filter((l) => l.startsWith('data: {"error"'));
  assert.equal(errors.length, 1, text.slice(-500));
  assert.match(errors[0] ?? "", /"type":"server_error"/);
  assert.match(errors[0] ?? "", /longer than \d+ characters/);
  assert.ok(!text.includes("[DONE]"), "a failed stream has no [DONE]");
  assert.ok(!text.includes("aaaa"), "nothing of the endless line reached the client");
  assert.ok(ms < 20_000, `${ms.toFixed(0)} ms`);
  // Held: at most the bound (one-byte string) plus garbage not yet collected, not the 32 MB sent.
  assert.ok(process.memoryUsage().heapUsed - before < 3 * MAX_SSE_EVENT, "bounded memory");
});

test("a response guard on a passthrough stream lets nothing of an unreadable event out", () => {
  const spec: GuardSpec = {
    kind: "regex",
    patterns: [],
    builtins: ["Email"],
    action: "Mask",
    path: "backend.ai.promptGuard.response[0]",
    response: { message: "", statusCode: 403 },
  };
  const g = new StreamGuard("chat-completions", [spec]);
  const ok = g.push(
    te.encode(
      'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hi "},"finish_reason":null}]}\n\n',
    ),
    false,
  );
  assert.ok(!(ok instanceof Promise));
  const piece = te.encode(`data: {"x":"${"b".repeat(64 * 1024)}`);
  let leaked = 0;
  for (let sent = 0; sent < MAX_SSE_EVENT + 2 * piece.byteLength; sent += piece.byteLength) {
    const out = g.push(piece, false);
    assert.ok(!(out instanceof Promise));
    leaked += out.byteLength;
  }
  assert.equal(leaked, 0, "no raw bytes of the endless line went out");
});
