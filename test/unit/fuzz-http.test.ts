// Fuzzing both HTTP parsers of the hot-path server. HTTP/1.1 (src/grpc/http1.ts): any head either parses or is refused
// with 400/431 (never another exception); well-formed heads parse to exactly their fields; pipelined requests split
// at any points are answered the same. HTTP/2 (src/grpc/unary-server.ts): any sequence of frames, well-formed or
// not, on a real connection, leaves the server without a bug of its own (those are logged) and serving others.

import assert from "node:assert/strict";
import { connect as h2connect } from "node:http2";
import { connect as tcpConnect } from "node:net";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { parseHead } from "../../src/grpc/http1.js";
import { frame, UnaryGrpcServer } from "../../src/grpc/unary-server.js";
import { holds, splitAt, within } from "./fuzz-support.js";

const logged: string[] = [];
const urls: string[] = [];
let server: UnaryGrpcServer;
let port = 0;

before(async () => {
  server = new UnaryGrpcServer(
    new Map([["/t.S/U", async (m: Uint8Array) => m]]),
    new Map([
      [
        "/t.S/B",
        (call) => {
          call.on("data", (m) => call.write(m));
          call.on("end", () => call.end());
          call.on("error", () => {});
        },
      ],
    ]),
    {
      log: (l) => logged.push(l),
      http1: (req) => {
        urls.push(req.url);
        return { status: 200 };
      },
      limits: { handshakeTimeoutMs: 2000, idleTimeoutMs: 2000, headTimeoutMs: 2000 },
    },
  );
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

const token = fc.string({
  unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789-!#$%&'*+.^_`|~"),
  minLength: 1,
  maxLength: 12,
});
const fieldValue = fc
  .string({
    unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c === 0x7f ? 0x20 : c)),
    maxLength: 30,
  })
  .map((v) => v.trim());
const anyText = fc.string({
  unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)),
  maxLength: 200,
});

test("HTTP/1.1 heads: anything parses or is a 400/431, quickly", () =>
  holds(
    "http1 arbitrary heads",
    fc.property(
      fc.oneof(
        anyText,
        fc
          .tuple(token, anyText, fc.array(anyText, { maxLength: 6 }))
          .map(([m, u, h]) => `${m} /${u} HTTP/1.1\r\n${h.join("\r\n")}`),
      ),
      (head) => {
        within(200, "parseHead", () => {
          try {
            parseHead(head);
          } catch (e) {
            const status = (e as { status?: number }).status;
            assert.ok(status === 400 || status === 431, `threw ${String(e)}`);
          }
        });
      },
    ),
  ));

test("HTTP/1.1 heads: well-formed fields parse to exactly themselves", () =>
  holds(
    "http1 well-formed heads",
    fc.property(
      token.filter((n) => !["content-length", "transfer-encoding", "connection"].includes(n.toLowerCase())),
      fc.array(fc.tuple(token, fieldValue), { maxLength: 8 }),
      (method, fields) => {
        const safe = fields.filter(([n]) => !["content-length", "transfer-encoding"].includes(n.toLowerCase()));
        const head = `${method.toUpperCase()} /p?q=1 HTTP/1.1\r\n${safe.map(([n, v]) => `${n}: ${v}`).join("\r\n")}`;
        const { request } = parseHead(safe.length === 0 ? head.slice(0, -2) : head);
        assert.equal(request.method, method.toUpperCase());
        assert.deepEqual(request.rawHeaders, safe.flat());
      },
    ),
  ));

/** Writes `chunks` on a new connection and reads until the server closes or `ms` pass. */
async function exchange(chunks: readonly Uint8Array[], ms: number): Promise<Buffer> {
  const socket = tcpConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  const parts: Buffer[] = [];
  socket.on("data", (c: Buffer) => parts.push(c));
  const done = new Promise<void>((resolve) => {
    socket.once("close", () => resolve());
    setTimeout(resolve, ms);
  });
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  for (const c of chunks) {
    if (socket.destroyed) break;
    socket.write(c);
    await new Promise((r) => setImmediate(r));
  }
  await done;
  socket.destroy();
  return Buffer.concat(parts);
}

test("HTTP/1.1 pipelined requests split anywhere get the same answers in order", () =>
  holds(
    "http1 pipelined splits",
    fc.asyncProperty(
      fc.array(fc.tuple(token, fc.integer({ min: 0, max: 20 })), { minLength: 1, maxLength: 4 }),
      fc.array(fc.nat(), { maxLength: 6 }),
      async (requests, cuts) => {
        const text = requests
          .map(([p, n], i) => {
            const close = i === requests.length - 1 ? "connection: close\r\n" : "";
            return `POST /${p} HTTP/1.1\r\nhost: x\r\n${close}content-length: ${n}\r\n\r\n${"b".repeat(n)}`;
          })
          .join("");
        urls.length = 0;
        const answer = await exchange(splitAt(Buffer.from(text, "latin1"), cuts), 1500);
        assert.equal(answer.toString("latin1").match(/HTTP\/1\.1 200 /g)?.length, requests.length);
        assert.deepEqual(
          urls,
          requests.map(([p]) => `/${p}`),
        );
      },
    ),
  ));

// ---- HTTP/2 ----

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

function h2frame(type: number, flags: number, id: number, payload: Uint8Array): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(Math.min(payload.byteLength, 0xffffff), 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id >>> 0, 5);
  return Buffer.concat([h, payload]);
}

/** A request header block for `path` (literals without indexing), so that some fuzzed streams reach a handler. */
function request(path: string): Buffer {
  const lit = (n: string, v: string) =>
    Buffer.concat([Buffer.from([0, n.length]), Buffer.from(n), Buffer.from([v.length]), Buffer.from(v)]);
  return Buffer.concat([
    lit(":method", "POST"),
    lit(":scheme", "http"),
    lit(":path", path),
    lit("content-type", "application/grpc"),
  ]);
}

const frameArb = fc.oneof(
  // Any type, flags, stream and payload.
  fc.record({
    type: fc.integer({ min: 0, max: 12 }),
    flags: fc.nat(255),
    id: fc.nat(9),
    payload: fc.uint8Array({ maxLength: 40 }),
  }),
  // Plausible requests and their bodies, so that stream states are exercised.
  fc.record({
    type: fc.constant(1),
    flags: fc.constantFrom(4, 5, 0x24, 0x0c),
    id: fc.constantFrom(1, 3, 5, 7),
    payload: fc.constantFrom("/t.S/U", "/t.S/B", "/nope").map(request),
  }),
  fc.record({
    type: fc.constant(0),
    flags: fc.constantFrom(0, 1, 8, 9),
    id: fc.constantFrom(1, 3, 5, 7),
    payload: fc.constant(frame(new Uint8Array([1, 2, 3]))),
  }),
);

async function goodCall(): Promise<void> {
  const session = h2connect(`http://127.0.0.1:${port}`);
  try {
    const body = await new Promise<Buffer>((resolve, reject) => {
      const s = session.request({ ":method": "POST", ":path": "/t.S/U", "content-type": "application/grpc" });
      const parts: Buffer[] = [];
      s.on("data", (c: Buffer) => parts.push(c));
      s.on("end", () => resolve(Buffer.concat(parts)));
      s.on("error", reject);
      s.end(frame(new Uint8Array([9, 9])));
    });
    assert.deepEqual([...body], [...frame(new Uint8Array([9, 9]))]);
  } finally {
    session.close();
  }
}

test("HTTP/2: any frames, split anywhere, never reach a bug of the server, which keeps serving", async () => {
  await holds(
    "http2 arbitrary frames",
    fc.asyncProperty(
      fc.array(frameArb, { maxLength: 12 }),
      fc.array(fc.nat(), { maxLength: 4 }),
      async (frames, cuts) => {
        const bytes = Buffer.concat([PREFACE, ...frames.map((f) => h2frame(f.type, f.flags, f.id, f.payload))]);
        await exchange(splitAt(bytes, cuts), 60);
        assert.deepEqual(
          logged.filter((l) => l.startsWith("gRPC server")),
          [],
        );
      },
    ),
  );
  await goodCall();
});
