// A local fake of Vertex AI's Live API (BidiGenerateContent over a websocket, Google's JSON messages in binary frames as
// the real service sends them). It checks the OAuth Bearer token on the upgrade, wants `setup` (with a publisher
// model) first and answers `setupComplete`; each `clientContent` that completes a turn gets the model turn's text
// in a message per delta: `serverContent.modelTurn` text parts (TEXT modality), else audio parts each followed by the
// words as `outputTranscription` (when the setup asks for it), then `generationComplete` and `turnComplete` with usage (`usage`: per turn, as a test has it). It records the handshakes and the client messages.

import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { frame, GUID, type Handshake, parseFrames } from "./fake-realtime.js";

export const LIVE_PATH = "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent";

export interface FakeGeminiLive {
  readonly port: number;
  readonly handshakes: Handshake[];
  /** Client messages received, in order. */
  readonly messages: Record<string, unknown>[];
  /** How the last session was closed by the client: its close code and reason. */
  readonly closes: { code: number; reason: string }[];
  close(): Promise<void>;
}

export async function startFakeGeminiLive(o: {
  /** Whether the Bearer token of the upgrade is one the test's token endpoint issued. */
  bearer: (token: string) => boolean;
  /** The model's answer, message by message. */
  deltas: string[];
  /** The `usageMetadata` sent with the n-th turn's `turnComplete` (from 1; default 9 prompt, 7 response, 16 in all). */
  usage?: (turn: number) => Record<string, unknown>;
}): Promise<FakeGeminiLive> {
  const handshakes: Handshake[] = [];
  const messages: Record<string, unknown>[] = [];
  const closes: FakeGeminiLive["closes"] = [];
  const sockets = new Set<Duplex>();
  const server: Server = createServer((_req, res) => {
    res.writeHead(400, { "content-type": "application/json" });
    res.end(
      JSON.stringify({ error: { code: 400, message: "websocket upgrade required", status: "INVALID_ARGUMENT" } }),
    );
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    // A peer's reset (Envoy stopped at a test's end) is an ordinary end here, not an uncaught error.
    socket.on("error", () => {});
    handshakes.push({ path: req.url ?? "", headers: req.headers });
    const reject = (status: string, code: number, googleStatus: string) => {
      const body = JSON.stringify({ error: { code, message: googleStatus, status: googleStatus } });
      socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${body}`);
    };
    if (new URL(req.url ?? "/", "http://x").pathname !== LIVE_PATH) return reject("404 Not Found", 404, "NOT_FOUND");
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (token === undefined || !o.bearer(token)) return reject("401 Unauthorized", 401, "UNAUTHENTICATED");
    const accept = createHash("sha1")
      .update(String(req.headers["sec-websocket-key"] ?? "") + GUID)
      .digest("base64");
    socket.write(
      [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        `Sec-WebSocket-Accept: ${accept}`,
      ]
        .concat(["", ""])
        .join("\r\n"),
    );
    const send = (m: Record<string, unknown>) => socket.write(frame(0x2, Buffer.from(JSON.stringify(m))));
    const closeWith = (code: number, reason: string) => {
      const p = Buffer.alloc(2 + Buffer.byteLength(reason));
      p.writeUInt16BE(code, 0);
      p.write(reason, 2);
      socket.end(frame(0x8, p));
    };
    let setUp = false;
    let turns = 0;
    let audio = true;
    let transcribe = false;
    let buf: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      const parsed = parseFrames(Buffer.concat([buf, chunk]));
      buf = parsed.rest;
      for (const f of parsed.frames) {
        if (f.opcode === 0x8) {
          closes.push({
            code: f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005,
            reason: f.payload.subarray(2).toString("utf8"),
          });
          socket.end(frame(0x8, f.payload.subarray(0, 2)));
          return;
        }
        if (f.opcode === 0x9) {
          socket.write(frame(0xa, f.payload));
          continue;
        }
        if (f.opcode !== 0x1 && f.opcode !== 0x2) continue;
        const m = JSON.parse(f.payload.toString("utf8")) as Record<string, unknown>;
        messages.push(m);
        const setup = m.setup as
          | { model?: unknown; generationConfig?: { responseModalities?: unknown }; outputAudioTranscription?: unknown }
          | undefined;
        if (!setUp) {
          // The Live API wants the setup first, naming a publisher model of the project and location.
          if (
            typeof setup?.model !== "string" ||
            !/^projects\/[^/]+\/locations\/[^/]+\/publishers\//.test(setup.model)
          ) {
            return closeWith(1007, "Request contains an invalid argument.");
          }
          setUp = true;
          const modalities = setup.generationConfig?.responseModalities;
          audio = !(Array.isArray(modalities) && modalities.includes("TEXT"));
          transcribe = setup.outputAudioTranscription !== undefined;
          send({ setupComplete: {} });
          continue;
        }
        const cc = m.clientContent as { turnComplete?: unknown } | undefined;
        if (cc?.turnComplete === true) {
          for (const d of o.deltas) {
            if (!audio) {
              send({ serverContent: { modelTurn: { role: "model", parts: [{ text: d }] } } });
              continue;
            }
            // Audio answers: PCM in the model turn, the words in the output transcription (when asked for).
            const pcm = Buffer.alloc(32, d.length).toString("base64");
            send({
              serverContent: {
                modelTurn: { parts: [{ inlineData: { mimeType: "audio/pcm;rate=24000", data: pcm } }] },
              },
            });
            if (transcribe) send({ serverContent: { outputTranscription: { text: d } } });
          }
          send({ serverContent: { generationComplete: true } });
          send({
            serverContent: { turnComplete: true },
            usageMetadata: o.usage?.(++turns) ?? { promptTokenCount: 9, responseTokenCount: 7, totalTokenCount: 16 },
          });
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    handshakes,
    messages,
    closes,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
