// A Service backend's `backend.transformation` across retries, through a real Envoy. Envoy's upstream filters change the
// router's own request headers, so without care a retry starts from the headers the first attempt's transformation
// left: a header added twice, a value computed from an already transformed one, a removed header missing from the
// expression's view. Each attempt first undoes the previous one's changes, from the journal the previous attempt
// sealed into the request's dynamic metadata (src/extproc/attempt-journal.ts): every attempt the backend sees is the
// request as if the attempts before it never happened. The backend fails a request's first attempts with a 503
// (`x-fail: <times>`), then echoes it; the route retries 503s; one Service has two endpoints, so retries go to the
// other one too.

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";

interface Seen {
  readonly port: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Every attempt seen, by the client's `x-id`; shared by the backends so a request's attempts are counted across them. */
const seen = new Map<string, Seen[]>();

async function startFlaky(): Promise<{ port: number; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const id = String(req.headers["x-id"] ?? "");
      const list = seen.get(id) ?? [];
      list.push({
        port: (server.address() as AddressInfo).port,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      });
      seen.set(id, list);
      if (list.length <= Number(req.headers["x-fail"] ?? "0")) {
        res.writeHead(503).end(`failed attempt ${list.length}`);
        return;
      }
      res.writeHead(200).end(`ok after ${list.length}`);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as AddressInfo).port, server };
}

/** The request headers without the one Envoy's router sets anew for each attempt (the time left). */
function comparable(h: IncomingHttpHeaders): IncomingHttpHeaders {
  const { "x-envoy-expected-rq-timeout-ms": _, ...rest } = h;
  return rest;
}

const TRANSFORM = `    transformation:
      request:
        add: [{ name: x-added, value: "'v'" }]
        set:
          - { name: x-count, value: "request.headers['x-count'] + '1'" }
          - { name: x-had-secret, value: "string('x-secret' in request.headers)" }
          - { name: x-fresh, value: "'x-fresh' in request.headers ? 'seen before' : 'new'" }
        remove: [x-secret]`;

describe("a Service backend's transformation across retries", { timeout: 90_000 }, () => {
  const servers: Server[] = [];
  let gw: TestGateway;

  before(async () => {
    const one = await startFlaky();
    const pairA = await startFlaky();
    const pairB = await startFlaky();
    servers.push(one.server, pairA.server, pairB.server);
    gw = await startTestGateway(
      () => `${localService("one", one.port)}${localService("pair", [pairA.port, pairB.port])}${localService(
        "body",
        one.port,
      )}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["one", "pair", "body"]
  .map(
    (n) => `    - name: ${n}
      matches: [{ path: { type: PathPrefix, value: /${n} } }]
      backendRefs: [{ name: ${n}, port: 80 }]`,
  )
  .join("\n")}
${rulePolicy("one", "retry: { codes: [503], attempts: 3 }")}${rulePolicy(
  "pair",
  "retry: { codes: [503], attempts: 3 }",
)}${rulePolicy("body", "retry: { codes: [503], attempts: 3 }")}${servicePolicy("one", TRANSFORM, "one-transform")}${servicePolicy(
  "pair",
  TRANSFORM,
  "pair-transform",
)}${servicePolicy(
  "body",
  `${TRANSFORM}
        body: "'{\\"wrapped\\":' + request.body + '}'"`,
  "body-transform",
)}`,
      "/one",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const s of servers) {
      s.closeAllConnections();
      s.close();
    }
  });

  let next = 0;
  async function attempts(path: string, fail: number, opts: { method?: string; body?: string } = {}) {
    const id = `${path}-${next++}`;
    const r = await request(gw.port, path, {
      ...opts,
      headers: { "x-id": id, "x-fail": String(fail), "x-count": "0", "x-added": "c", "x-secret": "s3" },
    });
    return { status: r.status, body: r.body, attempts: seen.get(id) ?? [] };
  }

  /** Each attempt is the client's request transformed once. */
  function assertFresh(list: readonly Seen[]): void {
    for (const [i, a] of list.entries()) {
      const at = `attempt ${i + 1}`;
      assert.equal(a.headers["x-added"], "c, v", at);
      assert.equal(a.headers["x-count"], "01", at);
      assert.equal(a.headers["x-secret"], undefined, at);
      assert.equal(a.headers["x-had-secret"], "true", at);
      assert.equal(a.headers["x-fresh"], "new", at);
      assert.deepEqual(comparable(a.headers), comparable(list[0]?.headers ?? {}), at);
    }
  }

  test("a retry after a 503 sees the request as if the first attempt never happened", async () => {
    const r = await attempts("/one", 1);
    assert.equal(r.status, 200);
    assert.equal(r.body, "ok after 2");
    assert.equal(r.attempts.length, 2);
    assertFresh(r.attempts);
    // Without a retry, the one attempt is transformed as well.
    const once = await attempts("/one", 0);
    assert.equal(once.attempts.length, 1);
    assertFresh(once.attempts);
  });

  test("three attempts over two endpoints: each undoes the one before", async () => {
    const r = await attempts("/pair", 2);
    assert.equal(r.status, 200);
    assert.equal(r.body, "ok after 3");
    assert.equal(r.attempts.length, 3);
    assertFresh(r.attempts);
    // Both endpoints took attempts of the request (round robin over the two).
    assert.equal(new Set(r.attempts.map((a) => a.port)).size, 2);
  });

  test("a rewritten body: each attempt gets the client's body rewritten once, with its length", async () => {
    const r = await attempts("/body", 2, { method: "POST", body: '{"n":1}' });
    assert.equal(r.status, 200);
    assert.equal(r.attempts.length, 3);
    assertFresh(r.attempts);
    for (const a of r.attempts) {
      assert.equal(a.body, '{"wrapped":{"n":1}}');
      assert.equal(a.headers["content-length"], String(Buffer.byteLength(a.body)));
    }
  });

  test("requests in flight at once keep their own journals", async () => {
    // Three at a time per cluster: Envoy's default circuit breaker allows three retries in flight per cluster.
    for (let wave = 0; wave < 3; wave++) {
      const all = await Promise.all(
        Array.from({ length: 6 }, (_, i) => attempts(i % 2 ? "/one" : "/pair", 1 + ((i + wave) % 2))),
      );
      for (const r of all) {
        assert.equal(r.status, 200);
        assertFresh(r.attempts);
      }
    }
  });
});
