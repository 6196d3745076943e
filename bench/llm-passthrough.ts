// Micro-benchmark of the passthrough stream (src/llm/stream.ts, `passthroughStream`): CPU time per 10k streamed events
// of a same-format stream, chat completions and Anthropic messages, one event per chunk (how a provider's writes
// usually reach the ext_proc) and 8 per chunk, against the passthrough as it was before it checked events (a parser
// on the side reading only usage events, the chunk passed on as it came), measured in the same run, and the least a
// JSON check can cost (that passthrough plus JSON.parse of every event). CPU time
// (process.cpuUsage), not wall time, so other load on the machine counts less; the median of several rounds.
// Run: node dist/bench/llm-passthrough.js [--rounds 7]
import { parseArgs } from "node:util";
import { type SseEvent, SseParser } from "../src/llm/codec/sse.js";
import { parseJson } from "../src/llm/json.js";
import { findDirection } from "../src/llm/registry.js";
import type { StreamTranslator } from "../src/llm/stream.js";
import type { TranslateContext } from "../src/llm/translate/context.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "7" } } });
const rounds = Number(values.rounds);
const EVENTS = 10_000;
const te = new TextEncoder();
const ctx: TranslateContext = { id: (p) => `${p}1`, now: () => 1_700_000_000 };

const chatDelta = (i: number) =>
  `data: {"id":"chatcmpl-8x","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" word${i}"},"logprobs":null,"finish_reason":null}]}\n\n`;
const messagesDelta = (i: number) =>
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word${i}"}}\n\n`;

/** The passthrough before events were checked (commit 826f4ac): bytes out unchanged, usage events parsed aside. */
function uncheckedPassthrough(): StreamTranslator {
  const parser = new SseParser();
  const look = (evs: SseEvent[]): void => {
    for (const ev of evs) {
      if (ev.data === "[DONE]" || !ev.data.includes("usage")) continue;
      parseJson(ev.data);
    }
  };
  return {
    push(chunk) {
      look(parser.push(chunk));
      return chunk;
    },
    end() {
      look(parser.end());
      return new Uint8Array(0);
    },
    usage: () => undefined,
    failure: () => undefined,
  };
}

/** The least a JSON check costs: the unchecked passthrough plus JSON.parse of every event (no holding back). */
function parseEveryEvent(): StreamTranslator {
  const parser = new SseParser();
  return {
    push(chunk) {
      for (const ev of parser.push(chunk)) if (ev.data !== "[DONE]") JSON.parse(ev.data);
      return chunk;
    },
    end: () => new Uint8Array(0),
    usage: () => undefined,
    failure: () => undefined,
  };
}

/** CPU µs to stream EVENTS events through a fresh translator, `perChunk` events a chunk. */
function cpu(make: () => StreamTranslator, chunks: readonly Uint8Array[]): number {
  const t = make();
  const c0 = process.cpuUsage();
  let n = 0;
  for (const c of chunks) n += t.push(c).byteLength;
  n += t.end().byteLength;
  const c = process.cpuUsage(c0);
  if (n === 0) throw new Error("nothing went out");
  return c.user + c.system;
}

function chunksOf(event: (i: number) => string, perChunk: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < EVENTS; i += perChunk) {
    let s = "";
    for (let j = i; j < i + perChunk && j < EVENTS; j++) s += event(j);
    out.push(te.encode(s));
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const meta = { model: "m", stream: true, includeUsage: true };

console.log(`CPU ms per ${EVENTS} events (median of ${rounds} rounds); ratio = checked / unchecked`);
for (const [name, client, event] of [
  ["chat-completions", "chat-completions", chatDelta],
  ["messages", "messages", messagesDelta],
] as const) {
  const d = findDirection(client, client);
  if (d?.stream === undefined) throw new Error(`no ${client} passthrough`);
  const stream = d.stream;
  for (const perChunk of [1, 8]) {
    const chunks = chunksOf(event, perChunk);
    const bytes = chunks.reduce((n, c) => n + c.byteLength, 0);
    const before: number[] = [];
    const after: number[] = [];
    const floor: number[] = [];
    // Warm-up, then alternate so both see the same machine.
    for (let r = 0; r < 2; r++) {
      cpu(uncheckedPassthrough, chunks);
      cpu(() => stream(meta, ctx), chunks);
      cpu(parseEveryEvent, chunks);
    }
    for (let r = 0; r < rounds; r++) {
      before.push(cpu(uncheckedPassthrough, chunks));
      after.push(cpu(() => stream(meta, ctx), chunks));
      floor.push(cpu(parseEveryEvent, chunks));
    }
    const b = median(before) / 1000;
    const a = median(after) / 1000;
    const f = median(floor) / 1000;
    console.log(
      `${name.padEnd(17)} ${String(perChunk).padStart(2)} event(s)/chunk, ${Math.round(bytes / EVENTS)} B/event: ` +
        `unchecked ${b.toFixed(1)} ms, checked ${a.toFixed(1)} ms (${(a / b).toFixed(2)}x, +${((a - b) / (EVENTS / 1000)).toFixed(2)} µs/event); ` +
        `unchecked + JSON.parse of each event ${f.toFixed(1)} ms`,
    );
  }
}
