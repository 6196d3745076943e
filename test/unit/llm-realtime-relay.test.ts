// The Realtime relay's pieces below the events: RFC 6455 framing (masking each way, fragments put together, control
// frames between fragments, protocol errors), the hot-path server's HTTP/1.1 hand-off of an upgrade (a check is still
// answered on the same port, an upgrade not taken is answered as a request), the relay's refusal of what Envoy did not
// forward to it (an HTTP ext_authz check carrying a client's headers), and the response guards' webhook stage on a
// Realtime session (a reject is Realtime's error event, and the guard is closed).

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from "node:net";
import { test } from "node:test";
import type { GuardContext } from "../../src/extproc/llm/guards/runner.js";
import { RealtimeResponseGuard } from "../../src/extproc/llm/realtime/events.js";
import {
  acceptKey,
  encodeFrame,
  FrameReader,
  MAX_MESSAGE_BYTES,
  OP_CONTINUATION,
  OP_PING,
  OP_TEXT,
  ProtocolError,
} from "../../src/extproc/llm/realtime/frames.js";
import { RealtimeRelay } from "../../src/extproc/llm/realtime/relay.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";
import type { GuardSpec } from "../../src/translate/llm/guards.js";

/** A frame with FIN as given (encodeFrame always sets it). */
function fragment(opcode: number, payload: string, fin: boolean, mask: boolean): Buffer {
  const f = encodeFrame(opcode, Buffer.from(payload), mask);
  if (!fin) f[0] = (f[0] as number) & 0x7f;
  return f;
}

test("acceptKey is RFC 6455's example", () => {
  assert.equal(acceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
});

test("frames: masked client frames read back, any size, split anywhere", () => {
  for (const size of [0, 125, 126, 65535, 65536, 200_000]) {
    const payload = Buffer.alloc(size, "a");
    const bytes = encodeFrame(OP_TEXT, payload, true);
    const reader = new FrameReader(true);
    const out = [...reader.push(bytes.subarray(0, 3)), ...reader.push(bytes.subarray(3))];
    assert.equal(out.length, 1, `size ${size}`);
    assert.equal(out[0]?.opcode, OP_TEXT);
    assert.ok(out[0]?.payload.equals(payload), `size ${size}`);
  }
});

test("frames: fragments are one message, a ping between them comes first", () => {
  const reader = new FrameReader(false);
  const out = reader.push(
    Buffer.concat([
      fragment(OP_TEXT, '{"type":', false, false),
      encodeFrame(OP_PING, Buffer.from("p"), false),
      fragment(OP_CONTINUATION, '"x"}', true, false),
    ]),
  );
  assert.deepEqual(
    out.map((m) => [m.opcode, m.payload.toString()]),
    [
      [OP_PING, "p"],
      [OP_TEXT, '{"type":"x"}'],
    ],
  );
});

test("frames: protocol errors", () => {
  const err = (reader: FrameReader, bytes: Buffer, code: number) =>
    assert.throws(
      () => reader.push(bytes),
      (e: unknown) => e instanceof ProtocolError && e.code === code,
    );
  err(new FrameReader(true), encodeFrame(OP_TEXT, Buffer.from("x"), false), 1002);
  err(new FrameReader(false), encodeFrame(OP_TEXT, Buffer.from("x"), true), 1002);
  err(new FrameReader(false), fragment(OP_PING, "x", false, false), 1002);
  err(new FrameReader(false), encodeFrame(OP_CONTINUATION, Buffer.from("x"), false), 1002);
  const huge = Buffer.from([0x81, 127, 0, 0, 0, 0, 0, 0, 0, 0]);
  huge.writeBigUInt64BE(BigInt(MAX_MESSAGE_BYTES + 1), 2);
  err(new FrameReader(false), huge, 1009);
  const reserved = encodeFrame(OP_TEXT, Buffer.from("x"), false);
  reserved[0] = (reserved[0] as number) | 0x40;
  err(new FrameReader(false), reserved, 1002);
});

/** A raw HTTP/1.1 exchange on `port`: what the server wrote before `until` matched or the connection ended. */
function exchange(port: number, bytes: string, until: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1", () => s.write(bytes));
    let got = "";
    s.on("data", (c: Buffer) => {
      got += c.toString("latin1");
      if (until.test(got)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on("end", () => resolve(got));
    s.on("error", reject);
  });
}

test("the hot-path server hands an upgrade to its taker with the bytes after the head; other requests as before", async () => {
  const taken: { url: string; rest: string }[] = [];
  const server = new UnaryGrpcServer(new Map(), new Map(), {
    log: () => {},
    http1: () => ({ status: 200, body: "checked" }),
    upgrade: (req, socket, rest) => {
      if (!req.url.startsWith("/relay")) return false;
      taken.push({ url: req.url, rest: rest.toString() });
      socket.on("data", (c: Buffer) => socket.end(`echo:${c.toString()}`));
      socket.write("HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n");
      socket.resume();
      return true;
    },
  });
  const port = await server.start("127.0.0.1", 0);
  try {
    const relayed = await exchange(
      port,
      "GET /relay HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\nearly",
      /101/,
    );
    assert.match(relayed, /^HTTP\/1\.1 101 /);
    assert.deepEqual(taken, [{ url: "/relay", rest: "early" }]);
    // An upgrade the taker does not want is a request like any other; so is a plain check.
    const other = await exchange(port, "GET /check HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\n\r\n", /checked/);
    assert.match(other, /^HTTP\/1\.1 200 OK/);
    const plain = await exchange(port, "GET /check HTTP/1.1\r\nhost: x\r\n\r\n", /checked/);
    assert.match(plain, /^HTTP\/1\.1 200 OK/);
    // After the hand-off, the socket's bytes are the taker's (the HTTP/1.1 parser does not see them).
    const echoed = await new Promise<string>((resolve, reject) => {
      const s = connect(port, "127.0.0.1", () =>
        s.write("GET /relay2 HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n"),
      );
      let got = "";
      s.on("data", (c: Buffer) => {
        got += c.toString("latin1");
        if (got.includes("\r\n\r\n") && !got.includes("echo:")) s.write("not http at all\r\n\r\n");
      });
      s.on("end", () => resolve(got));
      s.on("error", reject);
    });
    assert.match(echoed, /echo:not http at all/);
    assert.doesNotMatch(echoed, /400/);
  } finally {
    await server.stop();
  }
});

test("a webhook response guard rejecting a Realtime session's text: Realtime's error event, then nothing", async () => {
  const asked: unknown[] = [];
  const hook = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const b = JSON.parse(body) as { texts: string[] };
      asked.push(b);
      const bad = b.texts.some((t) => t.includes("secret"));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(bad ? { action: "reject", reason: "secret" } : { action: "pass" }));
    });
  });
  await new Promise<void>((r) => hook.listen(0, "127.0.0.1", r));
  const port = (hook.address() as AddressInfo).port;
  const spec: GuardSpec = {
    kind: "webhook",
    service: "default/hook",
    targets: [{ host: "127.0.0.1", port }],
    headers: [],
    forwardHeaderMatches: [],
    failureMode: "FailClosed",
    path: "backend.ai.promptGuard.response[0]",
    response: { message: "the answer was refused", statusCode: 403 },
  };
  const ctx: GuardContext = { headers: new Map(), vars: () => ({}), log: () => {} };
  try {
    const g = new RealtimeResponseGuard([spec], ctx);
    const delta = (d: string) =>
      JSON.stringify({ type: "response.output_text.delta", item_id: "i", output_index: 0, content_index: 0, delta: d });
    const out: string[] = [];
    for (const d of ["Fine so far. ", "Now the secret", " is out. ", "More."]) out.push(...(await g.push(delta(d))));
    out.push(...(await g.push(JSON.stringify({ type: "response.done", response: { output: [] } }))));
    // Events back to back after a check join the next check; the relay says when the provider went quiet.
    await new Promise((r) => setTimeout(r, 5));
    out.push(...(await g.idle()));
    const events = out.map((s) => JSON.parse(s) as Record<string, unknown>);
    const text = events
      .filter((e) => e.type === "response.output_text.delta")
      .map((e) => e.delta)
      .join("");
    assert.equal(text, "Fine so far. ");
    const last = events.at(-1) as { type: string; error: { message: string } };
    assert.equal(last.type, "error", JSON.stringify(events));
    assert.equal(last.error.message, "the answer was refused");
    assert.equal(g.closed, true);
    assert.deepEqual(await g.push(delta("after")), []);
    assert.ok(asked.length >= 2);
  } finally {
    await new Promise<void>((r) => hook.close(() => r()));
  }
});

test("the relay takes only the upgrades Envoy forwards to it, never an ext_authz check carrying a client's headers", async () => {
  const relay = new RealtimeRelay({ log: () => {} });
  // A socket pair: what the relay writes to `ours` arrives at `theirs`.
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const accepted = new Promise<Socket>((r) => server.once("connection", r));
  const theirs = connect((server.address() as AddressInfo).port, "127.0.0.1");
  const ours = await accepted;
  const headers = (connection: string) => [
    "upgrade",
    "websocket",
    "connection",
    connection,
    "x-sluice-realtime-entry",
    "someentry",
    "sec-websocket-key",
    "dGhlIHNhbXBsZSBub25jZQ==",
    "sec-websocket-version",
    "13",
  ];
  try {
    const none = Buffer.alloc(0);
    assert.equal(
      relay.upgrade({ method: "GET", url: "/sluice/authz/v1/realtime", rawHeaders: headers("Upgrade") }, ours, none),
      false,
    );
    assert.equal(
      relay.upgrade({ method: "GET", url: "/v1/realtime", rawHeaders: headers("keep-alive") }, ours, none),
      false,
    );
    assert.equal(
      relay.upgrade({ method: "GET", url: "/v1/realtime", rawHeaders: headers("upgrade").slice(2) }, ours, none),
      false,
    );
    // What Envoy forwards is the relay's: an entry it does not know is answered 503.
    const answer = new Promise<string>((r) => {
      let got = "";
      theirs.on("data", (c: Buffer) => {
        got += c.toString();
      });
      theirs.on("end", () => r(got));
    });
    assert.equal(
      relay.upgrade({ method: "GET", url: "/v1/realtime", rawHeaders: headers("Upgrade") }, ours, none),
      true,
    );
    assert.match(await answer, /^HTTP\/1\.1 503 .*unknown Realtime route/s);
  } finally {
    theirs.destroy();
    ours.destroy();
    relay.close();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
