// A provider that misbehaves on request, for the fault tests (test/e2e/faults-*.test.ts) and bench/soak.ts. It speaks
// three wire formats as the real services do: OpenAI chat completions (Bearer key; JSON or SSE chunks ending in
// `data: [DONE]`), Anthropic Messages (x-api-key and anthropic-version; JSON or typed SSE events) and Bedrock Converse
// / ConverseStream (SigV4 verified; JSON or the binary event stream). What it does is chosen by the first word of the
// last user message, so one provider serves every case and the client's request says which:
//
// - `stall`: a stream sends its first text delta and then nothing more, the connection left open; a buffered answer
//   never comes (no status line).
// - `reset`: a stream sends its first delta and then resets the TCP connection (RST); a buffered request is reset
//   before any answer.
// - `malformed`: a stream sends its first delta, then one broken frame (SSE data that is not JSON; an event-stream
//   message whose CRC does not match), then the rest as usual.
// - `slow <ms>`: a stream sends its first delta at once and the rest `<ms>` later; a buffered answer waits `<ms>`.
// - anything else: an ordinary answer, "Hello from <name>: <text>".

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { encodeJsonEvent } from "../../src/llm/codec/eventstream.js";
import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { verifySigV4 } from "./sigv4-verify.js";

export interface FaultProvider {
  readonly port: number;
  /** Requests answered so far, by behaviour word ("ok" for ordinary ones). */
  readonly seen: Map<string, number>;
  /** When each request arrived (performance.now()), by its last user message. */
  readonly arrivals: Map<string, number>;
  /** Stalled answers whose connection the peer has not closed yet. */
  stalledOpen(): number;
  close(): Promise<void>;
}

export interface FaultProviderOptions {
  readonly name: string;
  /** OpenAI Bearer key and Anthropic x-api-key accepted. */
  readonly apiKey: string;
  /** Bedrock: the one key pair SigV4 must be signed with. */
  readonly aws?: AwsCredentials & { readonly region: string };
}

type Obj = Record<string, unknown>;
type Behaviour = { kind: "stall" | "reset" | "malformed" | "ok" } | { kind: "slow"; ms: number };

function lastUserText(b: Obj): string {
  const msgs = Array.isArray(b.messages) ? (b.messages as Obj[]) : [];
  for (let i = msgs.length - 1; i >= 0; i--) {
    const m = msgs[i];
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) {
      const t = (m.content as Obj[]).find((c) => typeof c.text === "string");
      if (t !== undefined) return String(t.text);
    }
  }
  return "";
}

function behaviourOf(text: string): Behaviour {
  const [word, arg] = text.trim().split(/\s+/);
  if (word === "stall" || word === "reset" || word === "malformed") return { kind: word };
  if (word === "slow") return { kind: "slow", ms: Number(arg ?? "1000") };
  return { kind: "ok" };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** One wire format: its buffered answer, the frames of a stream (first, rest), a broken frame, and its errors. */
interface Format {
  readonly contentType: string;
  auth(req: IncomingMessage, body: string): string | undefined;
  unauthorized(res: ServerResponse, why: string): void;
  buffered(text: string): Obj;
  first(): (string | Uint8Array)[];
  rest(text: string): (string | Uint8Array)[];
  broken(): string | Uint8Array;
}

const WORDS = (text: string) => text.split(/(?<= )/);

function openaiFormat(o: FaultProviderOptions, model: string): Format {
  const chunk = (delta: Obj, finish: string | null, extra: Obj = {}) =>
    `data: ${JSON.stringify({
      id: "chatcmpl-fault",
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...extra,
    })}\n\n`;
  return {
    contentType: "text/event-stream",
    auth: (req) => (req.headers.authorization === `Bearer ${o.apiKey}` ? undefined : "Incorrect API key provided"),
    unauthorized: (res, why) =>
      json(res, 401, { error: { message: why, type: "invalid_request_error", code: "invalid_api_key" } }),
    buffered: (text) => ({
      id: "chatcmpl-fault",
      object: "chat.completion",
      created: 1_700_000_000,
      model,
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
      usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
    }),
    first: () => [chunk({ role: "assistant", content: "" }, null), chunk({ content: "Hello " }, null)],
    rest: (text) => [
      ...WORDS(text).map((w) => chunk({ content: w }, null)),
      chunk({}, "stop"),
      `data: ${JSON.stringify({ id: "chatcmpl-fault", object: "chat.completion.chunk", created: 1_700_000_000, model, choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })}\n\n`,
      "data: [DONE]\n\n",
    ],
    broken: () => 'data: {"id":"chatcmpl-fault","choices":[{"delta":{"content":"cut\n\n',
  };
}

function anthropicFormat(o: FaultProviderOptions, model: string): Format {
  const ev = (type: string, data: Obj) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const delta = (text: string) => ev("content_block_delta", { index: 0, delta: { type: "text_delta", text } });
  return {
    contentType: "text/event-stream",
    auth: (req) =>
      req.headers["x-api-key"] !== o.apiKey
        ? "invalid x-api-key"
        : req.headers["anthropic-version"] === undefined
          ? "anthropic-version required"
          : undefined,
    unauthorized: (res, why) =>
      json(res, 401, { type: "error", error: { type: "authentication_error", message: why } }),
    buffered: (text) => ({
      id: "msg_fault",
      type: "message",
      role: "assistant",
      model,
      content: [{ type: "text", text }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 11, output_tokens: 7 },
    }),
    first: () => [
      ev("message_start", {
        message: {
          id: "msg_fault",
          type: "message",
          role: "assistant",
          model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 11, output_tokens: 1 },
        },
      }),
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      delta("Hello "),
    ],
    rest: (text) => [
      ...WORDS(text).map(delta),
      ev("content_block_stop", { index: 0 }),
      ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 7 } }),
      ev("message_stop", {}),
    ],
    broken: () => 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"te\n\n',
  };
}

function bedrockFormat(o: FaultProviderOptions): Format {
  const delta = (text: string) => encodeJsonEvent("contentBlockDelta", { contentBlockIndex: 0, delta: { text } });
  return {
    contentType: "application/vnd.amazon.eventstream",
    auth: (req, body) => {
      const aws = o.aws;
      if (aws === undefined) return "no AWS credentials configured";
      const r = verifySigV4(
        { method: req.method ?? "", path: req.url ?? "", headers: req.headers, body },
        { region: aws.region, service: "bedrock" },
        (id) => (id === aws.accessKeyId ? aws : undefined),
      );
      return "error" in r ? r.error : undefined;
    },
    unauthorized: (res, why) => json(res, 403, { message: why }, { "x-amzn-errortype": "UnrecognizedClientException" }),
    buffered: (text) => ({
      output: { message: { role: "assistant", content: [{ text }] } },
      stopReason: "end_turn",
      usage: { inputTokens: 11, outputTokens: 7, totalTokens: 18 },
      metrics: { latencyMs: 5 },
    }),
    first: () => [encodeJsonEvent("messageStart", { role: "assistant" }), delta("Hello ")],
    rest: (text) => [
      ...WORDS(text).map(delta),
      encodeJsonEvent("contentBlockStop", { contentBlockIndex: 0 }),
      encodeJsonEvent("messageStop", { stopReason: "end_turn" }),
      encodeJsonEvent("metadata", { usage: { inputTokens: 11, outputTokens: 7, totalTokens: 18 }, metrics: {} }),
    ],
    broken: () => {
      // A whole message whose payload was altered after its CRC was computed.
      const m = Buffer.from(delta("garbled "));
      m[m.length - 8] = (m[m.length - 8] ?? 0) ^ 0xff;
      return m;
    },
  };
}

export async function startFaultProvider(o: FaultProviderOptions): Promise<FaultProvider> {
  const seen = new Map<string, number>();
  const arrivals = new Map<string, number>();
  const sockets = new Set<Socket>();
  const stalled = new Set<ServerResponse>();
  const stall = (res: ServerResponse) => {
    stalled.add(res);
    res.on("close", () => stalled.delete(res));
  };
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, f: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      f();
    }, ms);
    timers.add(t);
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let b: Obj = {};
      try {
        b = JSON.parse(raw) as Obj;
      } catch {
        b = {};
      }
      const path = req.url ?? "";
      const format = path.includes("/v1/messages")
        ? anthropicFormat(o, String(b.model))
        : path.startsWith("/model/")
          ? bedrockFormat(o)
          : path.includes("/chat/completions")
            ? openaiFormat(o, String(b.model))
            : undefined;
      if (format === undefined) {
        json(res, 404, { error: { message: `no route ${path}`, type: "invalid_request_error" } });
        return;
      }
      const bad = format.auth(req, raw);
      if (bad !== undefined) {
        format.unauthorized(res, bad);
        return;
      }
      const text = lastUserText(b);
      arrivals.set(text, performance.now());
      const how = behaviourOf(text);
      seen.set(how.kind, (seen.get(how.kind) ?? 0) + 1);
      const answer = `from ${o.name}: ${text}`;
      const stream = path.endsWith("/converse-stream") || b.stream === true;
      if (!stream) {
        if (how.kind === "stall") {
          stall(res);
          return;
        }
        if (how.kind === "reset") {
          req.socket.resetAndDestroy();
          return;
        }
        const send = () => json(res, 200, format.buffered(`Hello ${answer}`));
        if (how.kind === "slow") later(how.ms, send);
        else send();
        return;
      }
      res.writeHead(200, { "content-type": format.contentType, "cache-control": "no-cache" });
      for (const f of format.first()) res.write(f);
      const rest = () => {
        for (const f of format.rest(answer)) res.write(f);
        res.end();
      };
      switch (how.kind) {
        case "stall":
          stall(res);
          return;
        case "reset":
          // Well after the first frames have left, so the client has started reading the stream.
          later(300, () => req.socket.resetAndDestroy());
          return;
        case "malformed":
          res.write(format.broken());
          rest();
          return;
        case "slow":
          later(how.ms, rest);
          return;
        default:
          rest();
      }
    });
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    arrivals,
    stalledOpen: () => stalled.size,
    close: () =>
      new Promise<void>((r) => {
        for (const t of timers) clearTimeout(t);
        server.closeAllConnections();
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
