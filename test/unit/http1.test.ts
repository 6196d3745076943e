// The hot-path server's HTTP/1.1 side (src/grpc/http1.ts): framing of requests as Envoy's HTTP ext_authz client and
// other clients send them, split anywhere across reads, pipelined, with bodies to drop; and what is refused.

import assert from "node:assert/strict";
import { Agent, request as httpRequest } from "node:http";
import { connect } from "node:net";
import { after, before, test } from "node:test";
import { type Http1Request, MAX_HEAD, parseHead, serializeAnswer } from "../../src/grpc/http1.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";

const seen: Http1Request[] = [];
const logged: string[] = [];
let server: UnaryGrpcServer;
let port = 0;

before(async () => {
  server = new UnaryGrpcServer(new Map(), new Map(), {
    log: (line) => logged.push(line),
    http1: (req) => {
      seen.push(req);
      if (req.url === "/throw") throw new Error("boom");
      if (req.url === "/deny") return { status: 403, headers: [["x-why", "no"]], body: "forbidden ✗" };
      return { status: 200 };
    },
  });
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

/** Sends `chunks` on one connection, each written separately, and returns everything read until the server closes. */
function raw(chunks: readonly (string | Buffer)[], opts: { endAfter?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    s.setNoDelay(true);
    let out = "";
    s.on("data", (d: Buffer) => (out += d.toString("latin1")));
    s.on("error", reject);
    s.on("close", () => resolve(out));
    s.on("connect", async () => {
      for (const c of chunks) {
        s.write(c);
        await new Promise((r) => setTimeout(r, 2));
      }
      if (opts.endAfter !== false) s.end();
    });
  });
}

/** The status lines in a stream of answers. */
function statuses(out: string): number[] {
  return [...out.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

test("node's HTTP client: keep-alive, method, path, raw headers in order and repeats, a denial's headers and body", async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const get = (path: string, headers: Record<string, string | string[]>) =>
    new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, path, method: "POST", headers, agent }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on("error", reject);
      req.end();
    });
  seen.length = 0;
  const ok = await get("/a/b?x=1", { "X-One": "1", "x-multi": ["a", "b"] });
  assert.equal(ok.status, 200);
  assert.equal(ok.body, "");
  const no = await get("/deny", {});
  assert.equal(no.status, 403);
  assert.equal(no.headers["x-why"], "no");
  assert.equal(no.body, "forbidden ✗");
  assert.equal(no.headers["content-length"], String(Buffer.byteLength("forbidden ✗")));
  const first = seen[0];
  assert.ok(first !== undefined);
  assert.equal(first.method, "POST");
  assert.equal(first.url, "/a/b?x=1");
  const pairs: [string, string][] = [];
  for (let i = 0; i < first.rawHeaders.length; i += 2) pairs.push([first.rawHeaders[i]!, first.rawHeaders[i + 1]!]);
  assert.deepEqual(
    pairs.filter(([n]) => n.toLowerCase().startsWith("x-")),
    [
      ["X-One", "1"],
      ["x-multi", "a"],
      ["x-multi", "b"],
    ],
  );
  agent.destroy();
});

test("a request split byte by byte, and three pipelined in one write, are each answered once and in order", async () => {
  seen.length = 0;
  const req = "GET /one HTTP/1.1\r\nhost: h\r\n\r\n";
  const split = await raw([...req].map((c) => c));
  assert.deepEqual(statuses(split), [200]);
  const three = "GET /1 HTTP/1.1\r\n\r\nGET /deny HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\nconnection: close\r\n\r\n";
  const out = await raw([three], { endAfter: false });
  assert.deepEqual(statuses(out), [200, 403, 200]);
  assert.match(out, /connection: close\r\n\r\n$/);
  assert.deepEqual(
    seen.map((r) => r.url),
    ["/one", "/1", "/deny", "/3"],
  );
});

test("a Content-Length body is read and dropped; the next request on the connection is still framed right", async () => {
  seen.length = 0;
  const out = await raw(["POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhel", "lo", "GET /b HTTP/1.1\r\n\r\n"]);
  assert.deepEqual(statuses(out), [200, 200]);
  assert.deepEqual(
    seen.map((r) => r.url),
    ["/a", "/b"],
  );
});

test("HTTP/1.0 closes after its answer unless it asks for keep-alive; header values lose surrounding whitespace", async () => {
  seen.length = 0;
  const out = await raw(["GET /x HTTP/1.0\r\nx-v: \t padded \t\r\n\r\n"], { endAfter: false });
  assert.deepEqual(statuses(out), [200]);
  assert.match(out, /connection: close/);
  assert.deepEqual(seen[0]?.rawHeaders, ["x-v", "padded"]);
  const kept = await raw(["GET /y HTTP/1.0\r\nconnection: keep-alive\r\n\r\nGET /z HTTP/1.0\r\n\r\n"], {
    endAfter: false,
  });
  assert.deepEqual(statuses(kept), [200, 200]);
});

test("what breaks the framing gets 400 (or 431) and the connection closed; the server keeps serving others", async () => {
  const bad = [
    "GET /x HTTP/2.0\r\n\r\n",
    "GET  /x HTTP/1.1\r\n\r\n",
    "GET /x\r\n\r\n",
    "GET /x HTTP/1.1\r\nno-colon\r\n\r\n",
    "GET /x HTTP/1.1\r\n: empty-name\r\n\r\n",
    "GET /x HTTP/1.1\r\nbad name: v\r\n\r\n",
    "GET /x HTTP/1.1\r\nx-a: 1\r\n folded\r\n\r\n",
    "GET /x HTTP/1.1\r\nx-a: bare\nlf\r\n\r\n",
    "GET /x HTTP/1.1\r\nx-a: nul\0\r\n\r\n",
    "GET /x HTTP/1.1\r\ncontent-length: 1x\r\n\r\n",
    "GET /x HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
    "POST /x HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
  ];
  for (const b of bad) {
    const out = await raw([b], { endAfter: false });
    assert.deepEqual(statuses(out), [400], JSON.stringify(b));
    assert.match(out, /connection: close/);
  }
  // A good request after a bad one on the same connection is not answered: the connection is gone.
  assert.deepEqual(statuses(await raw(["BAD\r\n\r\nGET / HTTP/1.1\r\n\r\n"], { endAfter: false })), [400]);
  // The same content-length twice is one length.
  assert.deepEqual(statuses(await raw(["GET / HTTP/1.1\r\ncontent-length: 0\r\ncontent-length: 0\r\n\r\n"])), [200]);
  assert.deepEqual(statuses(await raw(["GET / HTTP/1.1\r\n\r\n"])), [200]);
});

test("a head over the limit is refused with 431 before it is all read", async () => {
  const big = `GET / HTTP/1.1\r\nx-big: ${"a".repeat(MAX_HEAD)}`;
  const out = await raw([big.slice(0, 4_000_000), big.slice(4_000_000), "b".repeat(100_000)], { endAfter: false });
  assert.deepEqual(statuses(out), [431]);
});

test("a handler that throws answers 500, logged; the connection goes on", async () => {
  logged.length = 0;
  const out = await raw(["GET /throw HTTP/1.1\r\n\r\nGET /ok HTTP/1.1\r\n\r\n"]);
  assert.deepEqual(statuses(out), [500, 200]);
  assert.ok(logged.some((l) => l.includes("boom")));
});

test("parseHead and serializeAnswer on their own", () => {
  const { request, close, length } = parseHead("\r\nDELETE /p?q HTTP/1.1\r\nContent-Length: 7\r\nConnection: Close");
  assert.equal(request.method, "DELETE");
  assert.equal(request.url, "/p?q");
  assert.equal(close, true);
  assert.equal(length, 7);
  assert.equal(
    serializeAnswer({ status: 401, headers: [["www-authenticate", 'Basic realm="r"']], body: "no" }, false).toString(),
    'HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Basic realm="r"\r\ncontent-length: 2\r\n\r\nno',
  );
  // Framing headers come from the server, never the handler; a header that would break the framing is a bug.
  assert.equal(
    serializeAnswer({ status: 200, headers: [["content-length", "99"]] }, true).toString(),
    "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
  );
  assert.throws(() => serializeAnswer({ status: 403, headers: [["x", "a\r\nb"]] }, false));
});
