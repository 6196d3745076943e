// The hot-path HTTP/2 server (src/grpc/unary-server.ts) at the protocol level, with Node's own HTTP/2 client (nghttp2:
// HPACK with Huffman coding and the dynamic table, flow control, PING) as the peer: header blocks across many streams,
// a response larger than the client's windows, a request larger than the default windows, bidirectional calls
// (several messages each way, messages split across frames, half-close, reset), PING, protocol errors.

import assert from "node:assert/strict";
import { type ClientHttp2Session, constants, connect as h2connect } from "node:http2";
import { connect as tcpConnect } from "node:net";
import { after, before, test } from "node:test";
import { type BidiCall, frame, UnaryGrpcServer, type UnaryHandler } from "../../src/grpc/unary-server.js";

const te = new TextEncoder();
const calls: BidiCall[] = [];
const events: string[] = [];
const logged: string[] = [];
let server: UnaryGrpcServer;
let port = 0;

before(async () => {
  server = new UnaryGrpcServer(
    new Map<string, UnaryHandler>([
      [
        "/test.Echo/Throw",
        () => {
          throw new Error("a bug");
        },
      ],
      // Echoes the request headers it was given and the message, or a message of the size asked for.
      [
        "/test.Echo/Unary",
        async (message, headers) => {
          const size = Number(headers["x-size"] ?? "-1");
          if (size >= 0) return new Uint8Array(size).fill(120);
          if (headers["x-fail"] !== undefined) throw new Error("handler failed: ünïcode");
          const h = Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith("x-")));
          return te.encode(JSON.stringify({ headers: h, length: message.byteLength }));
        },
      ],
    ]),
    new Map([
      [
        "/test.Echo/Bidi",
        (call) => {
          calls.push(call);
          call.on("data", (m) => {
            const text = Buffer.from(m).toString();
            events.push(`data:${text.length}`);
            if (text === "throw") throw new Error("a bug in a data handler");
            if (text === "end-now") call.end();
            else call.write(te.encode(`echo:${text}`));
          });
          call.on("end", () => {
            events.push("end");
            call.end();
          });
          call.on("error", (e) => events.push(`error:${e.message}`));
        },
      ],
    ]),
    { log: (line) => logged.push(line) },
  );
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

function session(settings: Parameters<typeof h2connect>[1] = {}): ClientHttp2Session {
  const s = h2connect(`http://127.0.0.1:${port}`, settings);
  s.on("error", () => {});
  return s;
}

interface Reply {
  status: number | undefined;
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
  messages: Buffer[];
}

/** Splits a gRPC response body into its messages. */
function messages(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let pos = 0; pos + 5 <= body.byteLength; ) {
    const n = body.readUInt32BE(pos + 1);
    out.push(body.subarray(pos + 5, pos + 5 + n));
    pos += 5 + n;
  }
  return out;
}

function unary(s: ClientHttp2Session, headers: Record<string, string>, body: Uint8Array): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = s.request({
      ":method": "POST",
      ":path": "/test.Echo/Unary",
      "content-type": "application/grpc",
      ...headers,
    });
    const chunks: Buffer[] = [];
    let status: number | undefined;
    let trailers: Record<string, unknown> = {};
    req.on("response", (h) => {
      status = Number(h[":status"]);
      if (h["grpc-status"] !== undefined) trailers = h; // trailers-only
    });
    req.on("trailers", (t) => {
      trailers = t;
    });
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () =>
      resolve({
        status,
        grpcStatus: trailers["grpc-status"] as string | undefined,
        grpcMessage: trailers["grpc-message"] as string | undefined,
        messages: messages(Buffer.concat(chunks)),
      }),
    );
    req.on("error", reject);
    req.end(frame(body));
  });
}

test("many streams on one connection: every header block decoded (dynamic table, Huffman, eviction)", async () => {
  const s = session();
  const replies = await Promise.all(
    Array.from({ length: 300 }, (_, i) =>
      unary(
        s,
        {
          // New values each time (Huffman-coded literals that enter the dynamic table and push older ones out), and
          // repeated ones (indexed).
          "x-request-id": `${i}-${"abcdefghijklmnopqrstuvwxyz".repeat(1 + (i % 5))}`,
          "x-same": "constant value",
          "x-odd-chars": `~!@#$%^&*()_+{}|:"<>?\`-=[]\\;',./ ${i}`,
        },
        te.encode("m".repeat(i)),
      ),
    ),
  );
  replies.forEach((r, i) => {
    assert.equal(r.status, 200);
    assert.equal(r.grpcStatus, "0");
    const body = JSON.parse(r.messages[0]?.toString() ?? "{}") as { headers: Record<string, string>; length: number };
    assert.equal(body.length, i);
    assert.equal(body.headers["x-request-id"], `${i}-${"abcdefghijklmnopqrstuvwxyz".repeat(1 + (i % 5))}`);
    assert.equal(body.headers["x-same"], "constant value");
    assert.equal(body.headers["x-odd-chars"], `~!@#$%^&*()_+{}|:"<>?\`-=[]\\;',./ ${i}`);
  });
  s.close();
});

test("flow control: a response larger than the client's windows, a request larger than the default windows", async () => {
  // The client allows 1,000 bytes per stream until it reads them: the server must wait for WINDOW_UPDATEs.
  const s = session({ settings: { initialWindowSize: 1000 } });
  const big = await unary(s, { "x-size": String(3_000_000) }, new Uint8Array(0));
  assert.equal(big.grpcStatus, "0");
  assert.equal(big.messages[0]?.byteLength, 3_000_000);
  const upload = await unary(s, {}, new Uint8Array(2_500_000).fill(1));
  assert.equal(JSON.parse(upload.messages[0]?.toString() ?? "{}").length, 2_500_000);
  s.close();
});

test("failures: a failing handler is INTERNAL with its message; an unknown method is UNIMPLEMENTED", async () => {
  const s = session();
  const failed = await unary(s, { "x-fail": "1" }, new Uint8Array(0));
  assert.equal(failed.status, 200);
  assert.equal(failed.grpcStatus, "13");
  assert.equal(decodeURIComponent(failed.grpcMessage ?? ""), "handler failed: ünïcode");
  const unknown = await new Promise<Record<string, unknown>>((resolve) => {
    const req = s.request({ ":method": "POST", ":path": "/no.Such/Method", "content-type": "application/grpc" });
    req.on("response", (h) => resolve(h));
    req.end(frame(new Uint8Array(0)));
  });
  assert.equal(unknown["grpc-status"], "12");
  s.close();
});

test("bidirectional: messages both ways (split across DATA frames), half-close ends the call", async () => {
  const s = session();
  const req = s.request({ ":method": "POST", ":path": "/test.Echo/Bidi", "content-type": "application/grpc" });
  const got: Buffer[] = [];
  let trailers: Record<string, unknown> = {};
  req.on("data", (c: Buffer) => got.push(c));
  req.on("trailers", (t) => {
    trailers = t;
  });
  const done = new Promise<void>((resolve) => req.on("end", () => resolve()));
  const one = frame(te.encode("first"));
  // One message written in two pieces, then two messages in one write.
  req.write(one.subarray(0, 3));
  await new Promise((r) => setTimeout(r, 20));
  req.write(one.subarray(3));
  req.write(Buffer.concat([frame(te.encode("second")), frame(te.encode("x".repeat(40_000)))]));
  req.end();
  await done;
  assert.deepEqual(
    messages(Buffer.concat(got)).map((m) => m.toString().slice(0, 12)),
    ["echo:first", "echo:second", "echo:xxxxxxx"],
  );
  assert.equal(trailers["grpc-status"], "0");
  assert.ok(events.includes("end"));
  s.close();
});

test("bidirectional: the server ends the call while the client still has its side open; a client reset is an error", async () => {
  const s = session();
  const req = s.request({ ":method": "POST", ":path": "/test.Echo/Bidi", "content-type": "application/grpc" });
  const closed = new Promise<number>((resolve) => req.on("close", () => resolve(req.rstCode)));
  let trailers: Record<string, unknown> = {};
  req.on("trailers", (t) => {
    trailers = t;
  });
  req.on("data", () => {});
  req.write(frame(te.encode("end-now")));
  // Trailers, then the server closes the stream with NO_ERROR (it no longer needs the request).
  assert.equal(await closed, constants.NGHTTP2_NO_ERROR);
  assert.equal(trailers["grpc-status"], "0");

  const before = events.length;
  const reset = s.request({ ":method": "POST", ":path": "/test.Echo/Bidi", "content-type": "application/grpc" });
  reset.on("error", () => {});
  reset.write(frame(te.encode("hello")));
  await new Promise((r) => setTimeout(r, 50));
  reset.destroy(new Error("client gives up"));
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(
    events.slice(before).some((e) => e.startsWith("error:")),
    events.slice(before).join(" "),
  );
  s.close();
});

test("a handler that throws fails its own call (INTERNAL, logged); the connection goes on", async () => {
  const s = session();
  const thrown = await new Promise<Record<string, unknown>>((resolve) => {
    const req = s.request({ ":method": "POST", ":path": "/test.Echo/Throw", "content-type": "application/grpc" });
    req.on("response", (h) => resolve(h));
    req.end(frame(new Uint8Array(0)));
  });
  assert.equal(thrown["grpc-status"], "13");
  const bidi = await new Promise<Record<string, unknown>>((resolve) => {
    const req = s.request({ ":method": "POST", ":path": "/test.Echo/Bidi", "content-type": "application/grpc" });
    req.on("response", (h) => {
      if (h["grpc-status"] !== undefined) resolve(h);
    });
    req.on("trailers", (t) => resolve(t));
    req.on("data", () => {});
    req.on("error", () => {});
    req.write(frame(te.encode("throw")));
  });
  assert.equal(bidi["grpc-status"], "13");
  assert.ok(logged.some((l) => l.includes("a bug in a data handler")));
  assert.equal((await unary(s, {}, te.encode("still serving"))).grpcStatus, "0");
  s.close();
});

test("PING is answered; the connection keeps serving", async () => {
  const s = session();
  await new Promise((resolve) => s.once("connect", resolve));
  await new Promise<void>((resolve, reject) =>
    s.ping(Buffer.from("12345678"), (err, _ms, payload) => {
      if (err) reject(err);
      else {
        assert.equal(payload.toString(), "12345678");
        resolve();
      }
    }),
  );
  assert.equal((await unary(s, {}, te.encode("after ping"))).grpcStatus, "0");
  s.close();
});

test("a peer that does not speak HTTP/2 is closed, and others are unaffected", async () => {
  const closed = await new Promise<string>((resolve) => {
    const sock = tcpConnect(port, "127.0.0.1", () => sock.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    const got: Buffer[] = [];
    sock.on("data", (c: Buffer) => got.push(c));
    sock.on("close", () => resolve(Buffer.concat(got).toString("latin1")));
    sock.on("error", () => {});
  });
  // Our SETTINGS, then GOAWAY (type 7) with PROTOCOL_ERROR.
  assert.match(closed, /not an HTTP\/2 connection preface/);
  const s = session();
  assert.equal((await unary(s, {}, te.encode("still here"))).grpcStatus, "0");
  s.close();
});
