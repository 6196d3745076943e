// `buffer.request.failureMode` and `buffer.response.failureMode: FailOpen` through a real Envoy
// (xds/buffer-fail-open.ts, extproc/buffer-hold.ts). Request: a body within maxBytes (default 2Mi, above Envoy's own
// 1Mi stream limit) is held until it ends (the backend sees the request only after the client's last chunk), a larger
// one is passed on unbuffered (the backend sees it before the client is done, whole) instead of the 413 FailClosed
// gives; a small maxBytes (1Ki) is honoured. Response: the same, against FailClosed's 502.

import assert from "node:assert/strict";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { sleep } from "../helpers/net.js";

interface Seen {
  readonly path: string;
  /** When the backend got the request's headers (ms, performance.now()). */
  readonly at: number;
  bytes: number;
}

function resources(port: number): string {
  const rule = (name: string) => `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
  return `${localService("app", port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["open", "openlimit", "closed", "none", "respopen", "respclosed"].map(rule).join("\n")}
${rulePolicy("open", "buffer: { request: { failureMode: FailOpen } }")}${rulePolicy(
  "openlimit",
  "buffer: { request: { maxBytes: 1Ki, failureMode: FailOpen } }",
)}${rulePolicy(
  "closed",
  "buffer: { request: { maxBytes: 1Ki } }",
)}${rulePolicy("respopen", "buffer: { response: { failureMode: FailOpen } }")}${rulePolicy(
  "respclosed",
  "buffer: { response: { maxBytes: 1Ki } }",
)}`;
}

/** A POST in two chunks with a pause between: when the second was sent, and the answer. */
async function twoChunks(
  port: number,
  path: string,
  first: number,
  second: number,
  pause = 500,
): Promise<{ secondAt: number; status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let secondAt = 0;
    const req = httpRequest(
      { host: "127.0.0.1", port, path, method: "POST", headers: { "transfer-encoding": "chunked" }, agent: false },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => (body += c.toString()));
        res.on("end", () => resolve({ secondAt, status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.write("a".repeat(first));
    void sleep(pause).then(() => {
      secondAt = performance.now();
      req.end("b".repeat(second));
    });
  });
}

describe("buffer.request.failureMode FailOpen through Sluice's ext_proc", { timeout: 60_000 }, () => {
  const seen: Seen[] = [];
  const responseSecondAt = new Map<string, number>();
  let server: Server;
  let gw: TestGateway;

  before(async () => {
    server = createServer((req, res) => {
      // /resp...?first=N&second=M[&pause=ms]: the response in two chunks, half a second (or pause) apart.
      const u = new URL(req.url ?? "/", "http://x");
      if (u.pathname.startsWith("/resp")) {
        req.resume();
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("a".repeat(Number(u.searchParams.get("first"))));
        void sleep(Number(u.searchParams.get("pause") ?? 500)).then(() => {
          responseSecondAt.set(u.pathname, performance.now());
          res.end("b".repeat(Number(u.searchParams.get("second"))));
        });
        return;
      }
      const s: Seen = { path: req.url ?? "", at: performance.now(), bytes: 0 };
      seen.push(s);
      req.on("data", (c: Buffer) => (s.bytes += c.length));
      req.on("end", () => {
        res.writeHead(200);
        res.end(String(s.bytes));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as AddressInfo).port;
    gw = await startTestGateway(
      () => resources(port),
      "/none",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    server?.closeAllConnections();
    await new Promise<void>((r) => server?.close(() => r()));
  });

  const last = (path: string) => {
    const s = seen.filter((x) => x.path === path).at(-1);
    assert.ok(s !== undefined, `the backend saw ${path}`);
    return s;
  };

  test("a body within maxBytes is held until it ends", async () => {
    const r = await twoChunks(gw.port, "/open/small", 300, 300);
    assert.equal(r.status, 200);
    assert.equal(r.body, "600");
    assert.ok(last("/open/small").at >= r.secondAt, "the backend saw the request only after the last chunk");
  });

  test("without a buffer policy the same request streams (the comparison the first test relies on)", async () => {
    const r = await twoChunks(gw.port, "/none/small", 300, 300);
    assert.equal(r.status, 200);
    assert.ok(last("/none/small").at < r.secondAt, "the backend saw the request before the last chunk");
  });

  test("a body above Envoy's own 1Mi stream limit but within maxBytes (2Mi) is still held", async () => {
    const r = await twoChunks(gw.port, "/open/mid", 1_600_000, 1096);
    assert.equal(r.status, 200);
    assert.equal(r.body, String(1_600_000 + 1096));
    assert.ok(last("/open/mid").at >= r.secondAt, "the backend saw the request only after the last chunk");
  });

  test("a larger body passes on unbuffered and whole, instead of 413", async () => {
    // A longer pause: moving 2Mi through Envoy and Sluice takes a while on a loaded machine.
    const r = await twoChunks(gw.port, "/open/large", 2_300_000, 1096, 2000);
    assert.equal(r.status, 200);
    assert.equal(r.body, String(2_300_000 + 1096));
    assert.ok(last("/open/large").at < r.secondAt, "the backend saw the request before the last chunk");
  });

  test("FailClosed (the default) answers 413 for the same body", async () => {
    const r = await twoChunks(gw.port, "/closed/large", 3000, 1096);
    assert.equal(r.status, 413);
  });

  test("a small maxBytes (1Ki) is honoured: a body within it is held, a larger one passes on", async () => {
    const small = await twoChunks(gw.port, "/openlimit/small", 300, 300);
    assert.equal(small.status, 200);
    assert.equal(small.body, "600");
    assert.ok(last("/openlimit/small").at >= small.secondAt, "held until the last chunk");
    const r = await twoChunks(gw.port, "/openlimit/mid", 3000, 1096);
    assert.equal(r.status, 200);
    assert.equal(r.body, "4096");
    assert.ok(last("/openlimit/mid").at < r.secondAt, "passed on once maxBytes was reached");
  });

  /** A GET: when the response's headers arrived, its status and length. */
  const get = (path: string) =>
    new Promise<{ headersAt: number; status: number; length: number }>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port: gw.port, path, agent: false }, (res) => {
        const headersAt = performance.now();
        let length = 0;
        res.on("data", (c: Buffer) => (length += c.length));
        res.on("end", () => resolve({ headersAt, status: res.statusCode ?? 0, length }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });

  test("response FailOpen: a small response is held until it ends", async () => {
    const r = await get("/respopen/small?first=300&second=300");
    assert.equal(r.status, 200);
    assert.equal(r.length, 600);
    assert.ok(r.headersAt >= (responseSecondAt.get("/respopen/small") ?? Infinity), "held until the last chunk");
  });

  test("response FailOpen: a response above Envoy's 1Mi stream limit but within maxBytes is still held", async () => {
    const r = await get("/respopen/mid?first=1600000&second=1096");
    assert.equal(r.status, 200);
    assert.equal(r.length, 1_601_096);
    assert.ok(r.headersAt >= (responseSecondAt.get("/respopen/mid") ?? Infinity), "held until the last chunk");
  });

  test("response FailOpen: a larger response passes on unbuffered and whole, instead of 502", async () => {
    const r = await get("/respopen/large?first=2300000&second=1096&pause=2000");
    assert.equal(r.status, 200);
    assert.equal(r.length, 2_301_096);
    assert.ok(r.headersAt < (responseSecondAt.get("/respopen/large") ?? 0), "passed on before the last chunk");
  });

  test("response FailClosed (the default) answers 502 for a response above maxBytes", async () => {
    const r = await get("/respclosed/large?first=3000&second=1096");
    assert.equal(r.status, 502);
  });

  test("status: neither failureMode nor maxBytes with FailOpen is reported", async () => {
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "open")?.status ?? {});
    assert.match(status, /applies traffic\.buffer/);
    assert.doesNotMatch(status, /failureMode/);
    const resp = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "respopen")?.status ?? {});
    assert.doesNotMatch(resp, /failureMode|maxBytes/);
    assert.doesNotMatch(status, /maxBytes/);
    const limited = JSON.stringify(
      resources.find((x) => x.kind === "GwPolicy" && x.name === "openlimit")?.status ?? {},
    );
    assert.match(limited, /applies traffic\.buffer/);
    assert.doesNotMatch(limited, /maxBytes/);
  });
});
