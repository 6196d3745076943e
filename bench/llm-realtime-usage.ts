// Micro-benchmark of the Realtime relay's token accounting (src/extproc/llm/realtime/usage.ts), the work it adds per
// provider event: an audio delta (the bulk of a voice session, ~8 KB of base64), a text delta and a response.done
// with usage (parsed, counted in the metrics, debited from a `tokens` bucket), and Google's Live API messages (an
// audio part, ~8 KB of base64, and a turnComplete with usageMetadata: its growth counted in a fresh session, and a
// report adding nothing in one that has seen it), against encodeFrame of the same event (what the relay pays anyway to
// send it on), measured in the same run. Run: node dist/bench/llm-realtime-usage.js

import { encodeFrame, OP_TEXT } from "../src/extproc/llm/realtime/frames.js";
import { SessionTokens } from "../src/extproc/llm/realtime/usage.js";
import { TokenLimiter } from "../src/extproc/llm/token-limits.js";
import { setRequestMetrics } from "../src/observability/metrics.js";
import type { LlmRouteEntry } from "../src/translate/llm/table.js";
import { microBench } from "./micro.js";

const at = { response_id: "resp_1", item_id: "item_1", output_index: 0, content_index: 0 };
const audio = Buffer.from(
  JSON.stringify({ type: "response.output_audio.delta", event_id: "e1", ...at, delta: "A".repeat(8000) }),
);
const text = Buffer.from(
  JSON.stringify({ type: "response.output_text.delta", event_id: "e2", ...at, delta: "Hello there" }),
);
const done = Buffer.from(
  JSON.stringify({
    type: "response.done",
    event_id: "e3",
    response: {
      id: "resp_1",
      object: "realtime.response",
      status: "completed",
      output: [
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello there ".repeat(40) }] },
      ],
      usage: {
        total_tokens: 640,
        input_tokens: 600,
        output_tokens: 40,
        input_token_details: { cached_tokens: 512, text_tokens: 100, audio_tokens: 500 },
        output_token_details: { text_tokens: 10, audio_tokens: 30 },
      },
    },
  }),
);

const liveAudio = Buffer.from(
  JSON.stringify({
    serverContent: {
      modelTurn: { parts: [{ inlineData: { mimeType: "audio/pcm;rate=24000", data: "A".repeat(8000) } }] },
    },
  }),
);
const liveUsage = Buffer.from(
  JSON.stringify({
    serverContent: { turnComplete: true },
    usageMetadata: {
      promptTokenCount: 600,
      cachedContentTokenCount: 512,
      responseTokenCount: 40,
      totalTokenCount: 640,
      promptTokensDetails: [{ modality: "AUDIO", tokenCount: 500 }],
      responseTokensDetails: [{ modality: "AUDIO", tokenCount: 40 }],
    },
  }),
);

const bench = (name: string, iterations: number, fn: () => void) => microBench(name, iterations, fn);

setRequestMetrics(true);
const entry = {
  id: "bench",
  tokenLimits: [{ key: "bench|route|0", tokens: 1e12, burst: 1e12, unitMs: 60_000 }],
  tokenCosts: [],
} as unknown as LlmRouteEntry;
const tokens = new SessionTokens(new TokenLimiter(), entry, { provider: "default", model: "gpt-realtime" });
console.log(`audio delta ${audio.length} bytes, text delta ${text.length} bytes, response.done ${done.length} bytes`);
for (const [label, event, n] of [
  ["audio delta", audio, 200_000],
  ["text delta", text, 1_000_000],
  ["response.done", done, 200_000],
  ["Live API audio message", liveAudio, 200_000],
  ["Live API usageMetadata adding nothing", liveUsage, 200_000],
] as const) {
  const base = bench(`baseline: encodeFrame of the ${label}`, n, () => {
    encodeFrame(OP_TEXT, event, false);
  });
  const counted = bench(`count the ${label} (usage.ts SessionTokens.count)`, n, () => {
    tokens.count(event);
  });
  console.log(`  ${label}: +${counted.toFixed(3)} µs, ${(counted / base).toFixed(2)}x the frame's encoding`);
}
const n = 200_000;
const base = bench("baseline: encodeFrame of the Live API usageMetadata", n, () => {
  encodeFrame(OP_TEXT, liveUsage, false);
});
const fresh = bench("count Live API usageMetadata in a fresh session (counted)", n, () => {
  new SessionTokens(new TokenLimiter(), entry, { provider: "default", model: "gemini-live" }).count(liveUsage);
});
console.log(`  Live API usage counted: +${fresh.toFixed(3)} µs, ${(fresh / base).toFixed(2)}x the frame's encoding`);
