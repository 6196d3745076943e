// The hot-path server's defences (docs/http2.md, "Limits"), each attacked over a raw socket: the attacking connection
// gets its stream reset or its connection closed with the documented code, and a client on another connection is
// served at the same time. Limits are set low here so that each attack is quick; the mechanisms are those of the
// defaults.

import assert from "node:assert/strict";
import { connect as h2connect } from "node:http2";
import { type Socket, connect as tcpConnect } from "node:net";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { Http1Request } from "../../src/grpc/http1.js";
import { frame, UnaryGrpcServer } from "../../src/grpc/unary-server.js";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 };
const CODE = { NO_ERROR: 0, COMPRESSION_ERROR: 9, REFUSED_STREAM: 7, CANCEL: 8, ENHANCE_YOUR_CALM: 11 };

const logged: string[] = [];
const http1Urls: string[] = [];
let hangingCalls = 0;
let server: UnaryGrpcServer;
let port = 0;

before(async () => {
  server = new UnaryGrpcServer(
    new Map([["/test.Echo/Unary", async () => new Uint8Array(1024).fill(7)]]),
    new Map([
      [
        "/test.Hang/Bidi",
        (call) => {
          hangingCalls++;
          call.on("error", () => {});
        },
      ],
      [
        // Answers each message and stays open, as an ext_proc stream does until Envoy closes and resets it.
        "/test.Answer/Bidi",
        (call) => {
          call.on("error", () => {});
          call.on("data", (m) => call.write(m));
        },
      ],
    ]),
    {
      log: (line) => logged.push(line),
      http1: (req: Http1Request) => {
        http1Urls.push(req.url);
        return { status: 200 };
      },
      limits: {
        maxConcurrentStreams: 10,
        maxHeaderListSize: 16 * 1024,
        maxHeaderBlockBytes: 32 * 1024,
        maxContinuationFrames: 8,
        resetBurst: 50,
        resetsPerSecond: 10,
        controlBurst: 100,
        controlPerSecond: 10,
        stallTimeoutMs: 300,
        idleTimeoutMs: 400,
        handshakeTimeoutMs: 400,
        headTimeoutMs: 400,
        maxHeadBytes: 16 * 1024,
      },
    },
  );
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

/** A unary call on a connection of its own, with Node's HTTP/2 client: the server is serving others. */
async function goodCall(): Promise<void> {
  const session = h2connect(`http://127.0.0.1:${port}`);
  try {
    const body = await new Promise<Buffer>((resolve, reject) => {
      const s = session.request({
        ":method": "POST",
        ":path": "/test.Echo/Unary",
        "content-type": "application/grpc",
        te: "trailers",
      });
      const parts: Buffer[] = [];
      s.on("data", (c: Buffer) => parts.push(c));
      s.on("end", () => resolve(Buffer.concat(parts)));
      s.on("error", reject);
      s.end(frame(new Uint8Array([1])));
    });
    assert.equal(body.byteLength, 5 + 1024, "the other connection's call is answered in full");
  } finally {
    session.close();
  }
}

function int(value: number, prefixBits: number, first: number): number[] {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let v = value - max;
  while (v >= 128) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return out;
}

/** An HPACK literal field, without indexing (or with incremental indexing), no Huffman coding. */
function literal(name: string, value: string, indexing = false): Buffer {
  const n = Buffer.from(name, "latin1");
  const v = Buffer.from(value, "latin1");
  return Buffer.concat([
    Buffer.from([indexing ? 0x40 : 0x00, ...int(n.byteLength, 7, 0)]),
    n,
    Buffer.from(int(v.byteLength, 7, 0)),
    v,
  ]);
}

function requestBlock(path: string): Buffer {
  return Buffer.concat([
    literal(":method", "POST"),
    literal(":scheme", "http"),
    literal(":path", path),
    literal(":authority", "x"),
    literal("content-type", "application/grpc"),
  ]);
}

interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly id: number;
  readonly payload: Buffer;
}

/** A raw HTTP/2 client: writes frames as given, reads the server's frames, and knows when the server closed. */
class RawH2 {
  readonly frames: Frame[] = [];
  readonly closed: Promise<void>;
  #buf = Buffer.alloc(0);
  #waiters: (() => void)[] = [];

  private constructor(readonly socket: Socket) {
    socket.on("data", (c: Buffer) => {
      this.#buf = Buffer.concat([this.#buf, c]);
      while (this.#buf.byteLength >= 9) {
        const length = this.#buf.readUIntBE(0, 3);
        if (this.#buf.byteLength < 9 + length) break;
        this.frames.push({
          type: this.#buf[3] ?? 0,
          flags: this.#buf[4] ?? 0,
          id: this.#buf.readUInt32BE(5) & 0x7fffffff,
          payload: this.#buf.subarray(9, 9 + length),
        });
        this.#buf = this.#buf.subarray(9 + length);
      }
      for (const w of this.#waiters.splice(0)) w();
    });
    socket.on("error", () => {});
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
    void this.closed.then(() => {
      for (const w of this.#waiters.splice(0)) w();
    });
  }

  static async open(settings: [number, number][] = [], preface = true): Promise<RawH2> {
    const socket = tcpConnect(port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    const c = new RawH2(socket);
    if (preface) {
      const p = Buffer.alloc(6 * settings.length);
      settings.forEach(([id, v], i) => {
        p.writeUInt16BE(id, 6 * i);
        p.writeUInt32BE(v, 6 * i + 2);
      });
      socket.write(Buffer.concat([PREFACE, RawH2.frame(T.SETTINGS, 0, 0, p)]));
    }
    return c;
  }

  static frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
    const h = Buffer.alloc(9);
    h.writeUIntBE(payload.byteLength, 0, 3);
    h[3] = type;
    h[4] = flags;
    h.writeUInt32BE(id, 5);
    return Buffer.concat([h, payload]);
  }

  write(...frames: Buffer[]): void {
    if (!this.socket.destroyed) this.socket.write(Buffer.concat(frames));
  }

  /** The first frame (already read or to come) that matches, within `ms`. */
  async waitFor(match: (f: Frame) => boolean, ms = 3000): Promise<Frame> {
    const deadline = Date.now() + ms;
    for (;;) {
      const f = this.frames.find(match);
      if (f !== undefined) return f;
      if (this.socket.destroyed || Date.now() > deadline) throw new Error("no such frame from the server");
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  async goaway(ms = 3000): Promise<number> {
    const f = await this.waitFor((f) => f.type === T.GOAWAY, ms);
    return f.payload.readUInt32BE(4);
  }

  async resetCode(id: number, ms = 3000): Promise<number> {
    const f = await this.waitFor((f) => f.type === T.RST_STREAM && f.id === id, ms);
    return f.payload.readUInt32BE(0);
  }
}

async function closedWithin(c: RawH2, ms: number): Promise<void> {
  await Promise.race([
    c.closed,
    sleep(ms).then(() => {
      throw new Error(`connection still open after ${ms} ms`);
    }),
  ]);
}

test("rapid reset: streams opened and reset past the budget end the connection (GOAWAY ENHANCE_YOUR_CALM)", async () => {
  // The burst is built before the connection opens: building it takes this process (the server's too) long enough
  // under load for the test's 400 ms protocol-detection timeout to close the connection before its first bytes are read.
  const burst: Buffer[] = [];
  for (let id = 1; id < 2 * 2000; id += 2) {
    burst.push(RawH2.frame(T.HEADERS, 0x4, id, requestBlock("/test.Hang/Bidi")));
    burst.push(RawH2.frame(T.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8])));
  }
  const c = await RawH2.open();
  const before = hangingCalls;
  c.write(...burst);
  const serving = goodCall();
  assert.equal(await c.goaway(), CODE.ENHANCE_YOUR_CALM);
  await closedWithin(c, 2000);
  await serving;
  const started = hangingCalls - before;
  assert.ok(started <= 60, `the server started ${started} calls for 2000 opened and reset (budget 50)`);
  await goodCall();
});

test("resets of streams the server already answered cost nothing: 200 answered and reset (budget 50) keep the connection", async () => {
  const c = await RawH2.open();
  for (let i = 0; i < 200; i++) {
    const id = 2 * i + 1;
    c.write(
      RawH2.frame(T.HEADERS, 0x4, id, requestBlock("/test.Answer/Bidi")),
      RawH2.frame(T.DATA, 0, id, frame(new Uint8Array([i & 0xff]))),
    );
    await c.waitFor((f) => f.type === T.DATA && f.id === id, 3000);
    c.write(RawH2.frame(T.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8])));
  }
  // Still served on the same connection, and no GOAWAY came.
  c.write(
    RawH2.frame(T.HEADERS, 0x4, 401, requestBlock("/test.Answer/Bidi")),
    RawH2.frame(T.DATA, 0, 401, frame(new Uint8Array([7]))),
  );
  await c.waitFor((f) => f.type === T.DATA && f.id === 401, 3000);
  assert.equal(
    c.frames.some((f) => f.type === T.GOAWAY),
    false,
  );
  c.socket.destroy();
});

test("HPACK: a table size update above the advertised 4096 bytes is a COMPRESSION_ERROR", async () => {
  const c = await RawH2.open();
  c.write(
    RawH2.frame(
      T.HEADERS,
      0x5,
      1,
      Buffer.concat([Buffer.from(int(65_536, 5, 0x20)), requestBlock("/test.Echo/Unary")]),
    ),
  );
  assert.equal(await c.goaway(), CODE.COMPRESSION_ERROR);
  await closedWithin(c, 2000);
  await goodCall();
});

test("HPACK: a small block that decodes to a header list above SETTINGS_MAX_HEADER_LIST_SIZE ends the connection", async () => {
  const c = await RawH2.open();
  // One 3000-byte field added to the dynamic table, then referenced by its one-byte index again and again: about
  // 200 bytes on the wire for a list of 100 KB.
  const block = Buffer.concat([
    requestBlock("/test.Echo/Unary"),
    literal("x-big", "y".repeat(3000), true),
    Buffer.alloc(100, 0x80 | 62),
  ]);
  c.write(RawH2.frame(T.HEADERS, 0x5, 1, block));
  assert.equal(await c.goaway(), CODE.COMPRESSION_ERROR);
  await closedWithin(c, 2000);
  await goodCall();
});

test("CONTINUATION flood: empty CONTINUATIONs past the frame limit, and a block past the byte limit", async () => {
  const empty = await RawH2.open();
  const frames = [RawH2.frame(T.HEADERS, 0x1, 1, requestBlock("/test.Echo/Unary"))];
  for (let i = 0; i < 1000; i++) frames.push(RawH2.frame(T.CONTINUATION, 0, 1));
  empty.write(...frames);
  const serving = goodCall();
  assert.equal(await empty.goaway(), CODE.ENHANCE_YOUR_CALM);
  await closedWithin(empty, 2000);
  await serving;

  const large = await RawH2.open();
  const parts = [RawH2.frame(T.HEADERS, 0x1, 1, requestBlock("/test.Echo/Unary"))];
  for (let i = 0; i < 4; i++) parts.push(RawH2.frame(T.CONTINUATION, 0, 1, Buffer.alloc(16_000, 0x80 | 2)));
  large.write(...parts);
  assert.equal(await large.goaway(), CODE.ENHANCE_YOUR_CALM);
  await closedWithin(large, 2000);
  await goodCall();
});

test("PING and SETTINGS floods: past the control-frame budget, GOAWAY ENHANCE_YOUR_CALM", async () => {
  for (const flood of [
    () => RawH2.frame(T.PING, 0, 0, Buffer.alloc(8)),
    () => RawH2.frame(T.SETTINGS, 0, 0, Buffer.from([0, 4, 0, 1, 0, 0])),
  ]) {
    const c = await RawH2.open();
    c.write(...Array.from({ length: 2000 }, flood));
    const serving = goodCall();
    assert.equal(await c.goaway(), CODE.ENHANCE_YOUR_CALM);
    await closedWithin(c, 2000);
    await serving;
    const answered = c.frames.filter((f) => (f.type === T.PING || f.type === T.SETTINGS) && f.flags & 1).length;
    assert.ok(answered <= 110, `${answered} acknowledgements for 2000 frames (budget 100)`);
  }
});

test("stalled flow control: a response that waits for a window the client never opens is reset (CANCEL)", async () => {
  const c = await RawH2.open([[0x4, 0]]); // SETTINGS_INITIAL_WINDOW_SIZE = 0: no DATA may be sent
  c.write(
    RawH2.frame(T.HEADERS, 0x4, 1, requestBlock("/test.Echo/Unary")),
    RawH2.frame(T.DATA, 0x1, 1, frame(new Uint8Array([1]))),
  );
  const serving = goodCall();
  assert.equal(await c.resetCode(1, 3000), CODE.CANCEL);
  await serving;
  assert.equal(
    c.frames.some((f) => f.type === T.DATA),
    false,
    "no DATA beyond the window",
  );
  c.socket.destroy();
});

test("too many concurrent streams: the stream above SETTINGS_MAX_CONCURRENT_STREAMS is refused", async () => {
  const c = await RawH2.open();
  const settings = await c.waitFor((f) => f.type === T.SETTINGS && (f.flags & 1) === 0);
  let advertised = -1;
  for (let i = 0; i < settings.payload.byteLength; i += 6)
    if (settings.payload.readUInt16BE(i) === 0x3) advertised = settings.payload.readUInt32BE(i + 2);
  assert.equal(advertised, 10);
  const frames: Buffer[] = [];
  for (let i = 0; i < 11; i++) frames.push(RawH2.frame(T.HEADERS, 0x4, 1 + 2 * i, requestBlock("/test.Hang/Bidi")));
  c.write(...frames);
  assert.equal(await c.resetCode(21), CODE.REFUSED_STREAM);
  assert.equal(
    c.frames.some((f) => f.type === T.RST_STREAM && f.id < 21),
    false,
    "the ten streams within the limit stay open",
  );
  await goodCall();
  c.socket.destroy();
});

test("idle connections: one without streams is closed (GOAWAY NO_ERROR); one without a preface is dropped", async () => {
  const idle = await RawH2.open();
  const silent = await RawH2.open([], false);
  await goodCall();
  assert.equal(await idle.goaway(2000), CODE.NO_ERROR);
  await closedWithin(idle, 2000);
  await closedWithin(silent, 2000);
  await goodCall();
});

/** Writes raw bytes on a new connection and returns all the server answered before it closed (or `ms` passed). */
async function http1Exchange(bytes: string | Buffer[], ms = 2000): Promise<{ text: string; closed: boolean }> {
  const socket = tcpConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  const parts: Buffer[] = [];
  socket.on("data", (c: Buffer) => parts.push(c));
  const closed = new Promise<boolean>((resolve) => {
    socket.once("close", () => resolve(true));
    setTimeout(() => resolve(false), ms);
  });
  if (typeof bytes === "string") socket.write(bytes);
  else
    for (const b of bytes) {
      socket.write(b);
      await sleep(100);
    }
  const wasClosed = await closed;
  socket.destroy();
  return { text: Buffer.concat(parts).toString("latin1"), closed: wasClosed };
}

test("HTTP/1.1 request smuggling shapes: 400, closed, and the request behind never reaches the handler", async () => {
  const smuggled = "GET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n";
  const shapes = {
    "CL and TE": "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    "TE and CL": "POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n0\r\n\r\n",
    "duplicate CL": "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\ncontent-length: 40\r\n\r\n",
    "CL list": "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 0, 40\r\n\r\n",
    "CL with a sign": "POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: +0\r\n\r\n",
    "obs-fold": "POST /a HTTP/1.1\r\nhost: x\r\nx-a: b\r\n transfer-encoding: chunked\r\n\r\n",
    "space before the colon": "POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding : chunked\r\n\r\n",
    "bad chunk size": "POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n\r\n",
    "obfuscated TE": "POST /a HTTP/1.1\r\nhost: x\r\ntransfer-encoding: xchunked\r\n\r\n",
    "bare LF in a value": "POST /a HTTP/1.1\r\nhost: x\r\nx-a: b\ncontent-length: 40\r\n\r\n",
  };
  for (const [shape, head] of Object.entries(shapes)) {
    http1Urls.length = 0;
    const serving = goodCall();
    const { text, closed } = await http1Exchange(head + smuggled);
    await serving;
    assert.match(text, /^HTTP\/1\.1 400 /, `${shape}: answered 400`);
    assert.equal(text.match(/HTTP\/1\.1 /g)?.length, 1, `${shape}: one answer only`);
    assert.ok(closed, `${shape}: connection closed`);
    assert.deepEqual(http1Urls, [], `${shape}: no request reached the handler`);
  }
  // The same connection-level shapes, well formed, are served: the checks are not refusing everything.
  const ok = await http1Exchange(`POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc${smuggled}`, 500);
  assert.equal(ok.text.match(/HTTP\/1\.1 200 /g)?.length, 2);
  assert.deepEqual(http1Urls, ["/a", "/smuggled"]);
});

test("HTTP/1.1 oversized head: 431 and closed; slow head: 400 and closed; others served meanwhile", async () => {
  const serving = goodCall();
  const big = await http1Exchange(`GET /big HTTP/1.1\r\nhost: x\r\nx-a: ${"a".repeat(20_000)}\r\n\r\n`);
  assert.match(big.text, /^HTTP\/1\.1 431 /);
  assert.ok(big.closed);
  const started = Date.now();
  const slow = await http1Exchange([Buffer.from("GET /slow HTTP/1.1\r\n"), Buffer.from("host: x\r\n")], 3000);
  assert.match(slow.text, /^HTTP\/1\.1 400 /);
  assert.ok(slow.closed);
  assert.ok(Date.now() - started < 2000, "closed at the head timeout, not the test's");
  await serving;
  assert.ok(!http1Urls.includes("/big") && !http1Urls.includes("/slow"));
  assert.deepEqual(
    logged.filter((l) => l.startsWith("gRPC server")),
    [],
    "no attack reached a bug",
  );
});
