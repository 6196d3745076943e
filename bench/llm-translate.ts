// Micro-benchmark of the LLM translators: µs per ~1 KB chat-completions → messages request, per response, and per
// streamed chunk (Anthropic events → chat.completion.chunk), against JSON.parse+stringify of the same bytes (the
// floor any translation pays), measured in the same run. Run: node dist/bench/llm-translate.js
import { findDirection } from "../src/llm/registry.js";
import type { TranslateContext } from "../src/llm/translate/context.js";
import { microBench } from "./micro.js";

const ctx: TranslateContext = { id: (p) => `${p}1`, now: () => 1700000000 };
const text = "The quick brown fox jumps over the lazy dog. ".repeat(12);
const request = JSON.stringify({
  model: "claude-sonnet-4-5",
  messages: [
    { role: "system", content: "You are a helpful assistant." },
    { role: "user", content: text },
    { role: "assistant", content: "Sure." },
    { role: "user", content: text.slice(0, 200) },
  ],
  max_tokens: 256,
  temperature: 0.2,
  tools: [
    {
      type: "function",
      function: { name: "get_weather", parameters: { type: "object", properties: { location: { type: "string" } } } },
    },
  ],
});
const response = JSON.stringify({
  id: "msg_1",
  type: "message",
  role: "assistant",
  model: "claude-sonnet-4-5",
  content: [{ type: "text", text }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage: { input_tokens: 300, output_tokens: 120 },
});
const chunk = new TextEncoder().encode(
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, world!"}}\n\n',
);
const start = new TextEncoder().encode(
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}\n\n',
);

const bench = (name: string, iterations: number, fn: () => void) =>
  microBench(name, iterations, fn, { width: 58, digits: 2 });

const d = findDirection("chat-completions", "messages")!;
const meta = { model: "claude-sonnet-4-5", stream: true, includeUsage: true };
console.log(
  `request body ${request.length} bytes, response body ${response.length} bytes, stream chunk ${chunk.length} bytes`,
);
const base = bench("baseline: JSON.parse + JSON.stringify of the request", 100000, () => {
  JSON.stringify(JSON.parse(request));
});
const req = bench("chat-completions → messages request (parse+translate+stringify)", 100000, () => {
  const r = d.request(JSON.parse(request), undefined, ctx);
  if (r.ok) JSON.stringify(r.body);
});
const res = bench("messages → chat-completions response (parse+translate+stringify)", 100000, () => {
  const r = d.response(JSON.parse(response), meta, ctx);
  if (r.ok) JSON.stringify(r.body);
});
const stream = d.stream!(meta, ctx);
stream.push(start);
const per = bench("stream: one Anthropic text delta → one chat.completion.chunk", 200000, () => {
  stream.push(chunk);
});
console.log(
  `ratios vs baseline: request ${(req / base).toFixed(2)}x, response ${(res / base).toFixed(2)}x, chunk ${(per / base).toFixed(2)}x`,
);
