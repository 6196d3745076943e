// A local fake of OpenAI's Realtime API over a websocket (RFC 6455 written out here: the handshake, masked client
// frames, unmasked server frames, ping/pong and close), speaking its JSON events: `session.created` on connect, and
// `response.done` for each `response.create` (with `deltas`, the text streamed first as `response.output_text.delta`
// events and a `response.output_text.done`), whose `response.usage` is `usage` (OpenAI's shape: input_tokens,
// output_tokens, total_tokens, input_token_details ...). It checks the provider's Bearer key and records each handshake.

import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { gwBackendRoute, routeTrafficPolicy } from "./gateway.js";

export interface Handshake {
  readonly path: string;
  readonly headers: IncomingMessage["headers"];
  /** The upgrade came over TLS. */
  readonly secure?: boolean;
}

export interface FakeRealtime {
  readonly port: number;
  readonly handshakes: Handshake[];
  /** Client events received, in order. */
  readonly events: Record<string, unknown>[];
  close(): Promise<void>;
}

export const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** A server frame (unmasked, final). */
export function frame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head =
    n < 126
      ? Buffer.from([0x80 | opcode, n])
      : n < 65536
        ? Buffer.from([0x80 | opcode, 126, n >> 8, n & 0xff])
        : Buffer.concat([
            Buffer.from([0x80 | opcode, 127]),
            Buffer.from(new BigUint64Array([BigInt(n)]).buffer).reverse(),
          ]);
  return Buffer.concat([head, payload]);
}

/** Parses complete frames from `buf`; returns them and what is left over. */
export function parseFrames(buf: Buffer): { frames: { opcode: number; payload: Buffer }[]; rest: Buffer } {
  const frames: { opcode: number; payload: Buffer }[] = [];
  let at = 0;
  for (;;) {
    if (buf.length - at < 2) break;
    const b0 = buf[at] ?? 0;
    const b1 = buf[at + 1] ?? 0;
    let len = b1 & 0x7f;
    let off = at + 2;
    if (len === 126) {
      if (buf.length < off + 2) break;
      len = buf.readUInt16BE(off);
      off += 2;
    } else if (len === 127) {
      if (buf.length < off + 8) break;
      len = Number(buf.readBigUInt64BE(off));
      off += 8;
    }
    const masked = (b1 & 0x80) !== 0;
    const maskLen = masked ? 4 : 0;
    if (buf.length < off + maskLen + len) break;
    const mask = buf.subarray(off, off + maskLen);
    const payload = Buffer.from(buf.subarray(off + maskLen, off + maskLen + len));
    if (masked) for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] ?? 0) ^ (mask[i % 4] ?? 0);
    frames.push({ opcode: b0 & 0x0f, payload });
    at = off + maskLen + len;
  }
  return { frames, rest: buf.subarray(at) };
}

export async function startFakeRealtime(o: {
  name: string;
  apiKey: string;
  deltas?: string[];
  /** Instead of `apiKey`: whether the `Authorization` header is accepted (a minted token the test's issuer checks). */
  authorize?: (authorization: string) => boolean;
  /** Serve over TLS with this certificate and key. */
  tls?: { readonly cert: string; readonly key: string };
  /** Each response.done's `response.usage` (default: 11 input, 7 output, 18 total). */
  usage?: Record<string, unknown>;
  /**
   * Answer every upgrade with this status line (e.g. `503 Service Unavailable`), after recording its handshake; other
   * requests get its status too.
   */
  refuse?: string;
}): Promise<FakeRealtime> {
  const handshakes: Handshake[] = [];
  const events: Record<string, unknown>[] = [];
  const sockets = new Set<Duplex>();
  const plain = (_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(o.refuse !== undefined ? Number(o.refuse.slice(0, 3)) : 426, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: "websocket upgrade required", type: "invalid_request_error" } }));
  };
  const server: Server = o.tls !== undefined ? createTlsServer(o.tls, plain) : createServer(plain);
  server.on("upgrade", (req: IncomingMessage, socket: Duplex) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    // An upgraded socket has no error listener of Node's: a peer that resets it (Envoy stopped at a test's end) would
    // otherwise throw ECONNRESET into whichever test runs then.
    socket.on("error", () => {});
    handshakes.push({ path: req.url ?? "", headers: req.headers, secure: o.tls !== undefined });
    const reject = (status: string, message: string) => {
      socket.end(
        `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ error: { message } })}`,
      );
    };
    if (o.refuse !== undefined) return reject(o.refuse, "overloaded");
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname !== "/v1/realtime" || !url.searchParams.get("model")) return reject("404 Not Found", "no route");
    const authorization = req.headers.authorization ?? "";
    const ok = o.authorize !== undefined ? o.authorize(authorization) : authorization === `Bearer ${o.apiKey}`;
    if (!ok) return reject("401 Unauthorized", "Incorrect API key");
    const key = String(req.headers["sec-websocket-key"] ?? "");
    const accept = createHash("sha1")
      .update(key + GUID)
      .digest("base64");
    const offered = String(req.headers["sec-websocket-protocol"] ?? "")
      .split(",")
      .map((p) => p.trim());
    socket.write(
      [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        `Sec-WebSocket-Accept: ${accept}`,
        ...(offered.includes("realtime") ? ["Sec-WebSocket-Protocol: realtime"] : []),
        "",
        "",
      ].join("\r\n"),
    );
    const send = (event: Record<string, unknown>) => socket.write(frame(0x1, Buffer.from(JSON.stringify(event))));
    send({
      type: "session.created",
      event_id: "event_001",
      session: { id: "sess_fake", object: "realtime.session", model: url.searchParams.get("model") },
    });
    let buf: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      const parsed = parseFrames(Buffer.concat([buf, chunk]));
      buf = parsed.rest;
      for (const f of parsed.frames) {
        if (f.opcode === 0x8) {
          socket.end(frame(0x8, f.payload.subarray(0, 2)));
          return;
        }
        if (f.opcode === 0x9) {
          socket.write(frame(0xa, f.payload));
          continue;
        }
        if (f.opcode !== 0x1) continue;
        const event = JSON.parse(f.payload.toString("utf8")) as Record<string, unknown>;
        events.push(event);
        if (event.type === "response.create") {
          const at = { response_id: "resp_fake", item_id: "item_fake", output_index: 0, content_index: 0 };
          for (const delta of o.deltas ?? []) send({ type: "response.output_text.delta", event_id: "e", ...at, delta });
          const text = o.deltas !== undefined ? o.deltas.join("") : `Hello from ${o.name}`;
          if (o.deltas !== undefined) send({ type: "response.output_text.done", event_id: "e", ...at, text });
          send({
            type: "response.done",
            event_id: `event_${String(events.length + 1).padStart(3, "0")}`,
            response: {
              id: "resp_fake",
              object: "realtime.response",
              status: "completed",
              output: [
                {
                  type: "message",
                  role: "assistant",
                  content: [{ type: "output_text", text }],
                },
              ],
              usage: o.usage ?? { total_tokens: 18, input_tokens: 11, output_tokens: 7 },
            },
          });
        }
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    handshakes,
    events,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Waits (up to 5 s) until `rt` has received `n` client events. */
export async function waitForEvents(rt: FakeRealtime, n: number): Promise<void> {
  for (let i = 0; i < 100 && rt.events.length < n; i++) await new Promise((r) => setTimeout(r, 50));
}

/**
 * GwBackend `name` (default `realtime`) for the fake at `rt.port`: providerA with key `sk-provider`, `/v1/realtime` a
 * Realtime route; `ai`: more lines under `policies.ai` (indented by 6, as in the document).
 */
export function realtimeBackendYaml(rt: Pick<FakeRealtime, "port">, o: { name?: string; ai?: string } = {}): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${o.name ?? "realtime"}, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${rt.port} }
  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/realtime: Realtime }
${o.ai ?? ""}`;
}

/**
 * realtimeBackendYaml's GwBackend behind two HTTPRoutes: `/limited/v1` with a local `tokens` limit of `tokens` an
 * hour (so its sessions go through Sluice's relay, which counts them), and `/direct/v1` without (a websocket Envoy
 * passes straight through).
 */
export function realtimeTokensLimitYaml(rt: Pick<FakeRealtime, "port">, tokens: number): string {
  return `${realtimeBackendYaml(rt)}${gwBackendRoute("limited", "realtime", { rewrite: "/v1" })}${gwBackendRoute(
    "direct",
    "realtime",
    { rewrite: "/v1" },
  )}${routeTrafficPolicy("budget", "limited", `    rateLimit: { local: [{ tokens: ${tokens}, unit: Hours }] }\n`)}`;
}
