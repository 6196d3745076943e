// The paced provider of bench/llm.ts's time-to-first-token figures, in a process of its own: an Anthropic Messages
// stream (x-api-key and anthropic-version checked as the main fake does) that sends its first text delta at once and
// the rest GAP_MS later, as a model that is still generating does. Time to first token then measures what the path
// adds to the first delta, not to the whole answer; a guard that held the first delta back would add the gap.
//
// The first delta is "Hello " (a word and a space, as the main fake splits words), or "Hello" when the request's
// model ends in "-midword" (a delta ending inside a word, as real tokenizers send: the next delta may go on with it).
// Prints the port it listens on.

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

const GAP_MS = Number(process.env["GAP_MS"] ?? "20");
const REST = "from the paced fake. The quick brown fox jumps over the lazy dog. ".repeat(4).split(/(?<= )/);

const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
const delta = (text: string) => ev("content_block_delta", { index: 0, delta: { type: "text_delta", text } });

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    let body: { model?: unknown; stream?: unknown } = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
    } catch {
      body = {};
    }
    if (req.headers["x-api-key"] !== "sk-bench" || req.headers["anthropic-version"] === undefined) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } }));
      return;
    }
    if (body.stream !== true) {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "invalid_request_error", message: "stream only" } }));
      return;
    }
    const model = String(body.model);
    const first = model.endsWith("-midword") ? "Hello" : "Hello ";
    const rest = model.endsWith("-midword") ? [" ", ...REST] : REST;
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(
      ev("message_start", {
        message: {
          id: "msg_paced",
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 11, output_tokens: 1 },
        },
      }) +
        ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        delta(first),
    );
    setTimeout(() => {
      res.end(
        rest.map(delta).join("") +
          ev("content_block_stop", { index: 0 }) +
          ev("message_delta", {
            delta: { stop_reason: "end_turn", stop_sequence: null },
            usage: { output_tokens: 40 },
          }) +
          ev("message_stop", {}),
      );
    }, GAP_MS);
  });
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
