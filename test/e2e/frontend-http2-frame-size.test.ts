// frontend.http.http2FrameSize through a real Envoy: the Gateway's HTTP/2 SETTINGS advertise the policy's
// SETTINGS_MAX_FRAME_SIZE (a custom SETTINGS parameter, Envoy having no named field for it) and a DATA frame larger
// than HTTP/2's default 16 KiB is accepted, where Envoy otherwise ends the connection with FRAME_SIZE_ERROR. A raw
// HTTP/2 client, since client libraries never send frames larger than they must.

import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { startEchoUpstream, type Upstream } from "../helpers/net.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const DATA = 0;
const HEADERS = 1;
const SETTINGS = 4;
const GOAWAY = 7;
const MAX_FRAME_SIZE = 5;

function frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.byteLength, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

/** An HPACK literal field without indexing, no Huffman coding (lengths below 127). */
function literal(name: string, value: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x00, name.length]),
    Buffer.from(name),
    Buffer.from([value.length]),
    Buffer.from(value),
  ]);
}

interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly id: number;
  readonly payload: Buffer;
}

/** Connects, sends the preface, and collects the server's frames. */
async function rawH2(
  port: number,
): Promise<{ socket: Socket; frames: Frame[]; next: (m: (f: Frame) => boolean) => Promise<Frame> }> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  const frames: Frame[] = [];
  let buf = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  socket.on("data", (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    while (buf.byteLength >= 9 && buf.byteLength >= 9 + buf.readUIntBE(0, 3)) {
      const length = buf.readUIntBE(0, 3);
      frames.push({
        type: buf[3] ?? 0,
        flags: buf[4] ?? 0,
        id: buf.readUInt32BE(5) & 0x7fffffff,
        payload: buf.subarray(9, 9 + length),
      });
      buf = buf.subarray(9 + length);
    }
    wake?.();
  });
  socket.on("close", () => wake?.());
  socket.write(Buffer.concat([PREFACE, frame(SETTINGS, 0, 0)]));
  const next = async (match: (f: Frame) => boolean): Promise<Frame> => {
    const deadline = Date.now() + 5000;
    for (;;) {
      const f = frames.find(match);
      if (f !== undefined) return f;
      if (socket.destroyed || Date.now() > deadline)
        throw new Error(`no such frame; got types ${frames.map((x) => x.type)}`);
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, 200);
      });
    }
  };
  return { socket, frames, next };
}

describe("frontend.http.http2FrameSize", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    gw = await startTestGateway(
      () => `${localService("echo", upstream.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: echo, port: 80 }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: frames, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    http: { http2FrameSize: 64Ki }
`,
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test("SETTINGS advertise the frame size, and a 40000-byte DATA frame is served", async () => {
    const c = await rawH2(gw.port);
    try {
      const settings = await c.next((f) => f.type === SETTINGS && (f.flags & 1) === 0);
      const advertised = new Map<number, number>();
      for (let i = 0; i + 6 <= settings.payload.byteLength; i += 6)
        advertised.set(settings.payload.readUInt16BE(i), settings.payload.readUInt32BE(i + 2));
      assert.equal(advertised.get(MAX_FRAME_SIZE), 64 * 1024);
      const body = Buffer.alloc(40_000, "x");
      const block = Buffer.concat([
        literal(":method", "POST"),
        literal(":scheme", "http"),
        literal(":path", "/big"),
        literal(":authority", "x"),
        literal("content-length", String(body.byteLength)),
      ]);
      c.socket.write(
        Buffer.concat([
          frame(SETTINGS, 1, 0),
          frame(HEADERS, 0x4, 1, block),
          // One frame, END_STREAM: larger than 16 KiB, within the connection's initial 64 KiB window.
          frame(DATA, 0x1, 1, body),
        ]),
      );
      const answer = await c.next((f) => (f.type === HEADERS && f.id === 1) || f.type === GOAWAY);
      assert.equal(answer.type, HEADERS, `a response, not GOAWAY (code ${answer.payload.readUInt32BE(4)})`);
    } finally {
      c.socket.destroy();
    }
  });
});
