// traffic.transformation end to end through a real Envoy: Sluice's ext_proc computes request and response headers,
// bodies and dynamic metadata with CEL per request (src/extproc/transformation.ts). Headers set, added and removed,
// a body built from the request's, a response rewritten from its status and body, the conditional form picking an
// entry per request, an expression that fails leaving its header out, a direct response whose body and headers are
// CEL, a CEL delay, and a route that needs no body not sending one to Sluice (Envoy's own count of ext_proc
// messages).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

function resources(upstream: number): string {
  const rule = (name: string) => `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: echo, port: 80 }]`;
  return `${localService("echo", upstream)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["headers", "body", "response", "conditional", "direct", "delayed"].map(rule).join("\n")}
${rulePolicy(
  "headers",
  `
transformation:
  request:
    set:
      - { name: x-greeting, value: "'hello ' + request.headers['x-name'] + ' on ' + request.method + ' ' + request.path" }
      - { name: x-broken, value: "request.headers['x-missing'] + '!'" }
    add: [{ name: x-tag, value: "'from-sluice'" }]
    remove: [x-secret]
`,
)}${rulePolicy(
  "body",
  `
transformation:
  request:
    set: [{ name: x-body-size, value: "string(size(request.body))" }]
    body: "'{\\"wrapped\\":' + request.body + ',\\"by\\":\\"' + request.headers['x-name'] + '\\"}'"
`,
)}${rulePolicy(
  "response",
  `
transformation:
  response:
    set: [{ name: x-status, value: "string(response.code) + '/' + response.headers['x-upstream']" }]
    remove: [x-upstream]
    body: "response.body.contains('\\"upstream\\":\\"echo\\"') ? 'rewritten' : 'unexpected'"
`,
)}${rulePolicy(
  "conditional",
  `
transformation:
  conditional:
    - condition: "request.headers['x-tier'] == 'gold'"
      policy: { request: { set: [{ name: x-lane, value: "'fast'" }] } }
    - policy: { request: { set: [{ name: x-lane, value: "'slow'" }] } }
`,
)}${rulePolicy(
  "delayed",
  `
delay:
  duration: "request.headers['x-wait']"
`,
)}${rulePolicy(
  "direct",
  `
directResponse:
  status: 418
  bodyExpression: "{'path': request.path, 'who': request.headers['x-name'], 'n': size(request.body)}"
  headers:
    - { name: content-type, value: "'application/json'" }
    - { name: x-method, value: "request.method" }
`,
)}`;
}

describe("traffic.transformation through Sluice's ext_proc", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;
  const echo = (body: string): EchoBody => JSON.parse(body) as EchoBody;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    gw = await startTestGateway(
      () => resources(upstream.port),
      "/conditional",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test("request headers set from CEL, added and removed; a failing expression leaves its header out", async () => {
    const r = await request(gw.port, "/headers/x?q=1", { headers: { "x-name": "ada", "x-secret": "s3" } });
    assert.equal(r.status, 200);
    const seen = echo(r.body);
    assert.equal(seen.headers["x-greeting"], "hello ada on GET /headers/x");
    assert.equal(seen.headers["x-tag"], "from-sluice");
    assert.equal(seen.headers["x-secret"], undefined);
    assert.equal(seen.headers["x-broken"], undefined);
    assert.equal(seen.headers["x-name"], "ada");
  });

  test("a request body built from the client's, with its new length", async () => {
    const r = await request(gw.port, "/body", {
      method: "POST",
      headers: { "x-name": "bob", "content-type": "application/json" },
      body: '{"n":1}',
    });
    assert.equal(r.status, 200);
    const seen = echo(r.body);
    assert.deepEqual(JSON.parse(seen.body), { wrapped: { n: 1 }, by: "bob" });
    assert.equal(seen.headers["x-body-size"], "7");
    assert.equal(seen.headers["content-length"], String(Buffer.byteLength(seen.body)));
  });

  test("a response rewritten from its status, headers and body", async () => {
    const r = await request(gw.port, "/response");
    assert.equal(r.status, 200);
    assert.equal(r.headers["x-status"], "200/echo");
    assert.equal(r.headers["x-upstream"], undefined);
    assert.equal(r.body, "rewritten");
  });

  test("the conditional form: the first entry whose condition holds, else the fallback", async () => {
    const gold = echo((await request(gw.port, "/conditional", { headers: { "x-tier": "gold" } })).body);
    const other = echo((await request(gw.port, "/conditional", { headers: { "x-tier": "tin" } })).body);
    assert.equal(gold.headers["x-lane"], "fast");
    assert.equal(other.headers["x-lane"], "slow");
  });

  test("a direct response with a CEL body (JSON for a map) and CEL headers, from the request and its body", async () => {
    const r = await request(gw.port, "/direct/x", { method: "PUT", headers: { "x-name": "eve" }, body: "12345" });
    assert.equal(r.status, 418);
    assert.equal(r.headers["x-method"], "PUT");
    assert.equal(r.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(r.body), { path: "/direct/x", who: "eve", n: 5 });
    assert.equal(upstream.requests.filter((q) => q.path.startsWith("/direct")).length, 0);
  });

  test("delay.duration as CEL: the delay the request asks for; none when it fails; a client's own fault header never", async () => {
    const timed = async (headers: Record<string, string>, path = "/delayed") => {
      const t0 = performance.now();
      const r = await request(gw.port, path, { headers });
      return { status: r.status, ms: performance.now() - t0 };
    };
    const waited = await timed({ "x-wait": "400ms" });
    assert.equal(waited.status, 200);
    assert.ok(waited.ms >= 380, `${waited.ms} ms`);
    const none = await timed({ "x-envoy-fault-delay-request": "3000" });
    assert.equal(none.status, 200);
    assert.ok(none.ms < 1500, `no x-wait, and the client's fault header is removed: ${none.ms} ms`);
    const elsewhere = await timed({ "x-envoy-fault-delay-request": "3000" }, "/headers");
    assert.ok(elsewhere.ms < 1500, `other routes read no fault header: ${elsewhere.ms} ms`);
  });

  test("only what a route needs goes to Sluice: no body for header-only transformations", async () => {
    // Envoy's counters of the filter (its stat prefix), summed over listeners.
    const stats = async () => {
      const m = new Map<string, number>();
      const text = (await request(gw.envoy.adminPort, "/stats?filter=sluice_transformation")).body;
      for (const line of text.split("\n")) {
        const [name, value] = line.split(": ");
        const key = name?.split(".").at(-1);
        if (key !== undefined && value !== undefined) m.set(key, (m.get(key) ?? 0) + Number(value));
      }
      return m;
    };
    const before0 = await stats();
    await request(gw.port, "/headers", { method: "POST", headers: { "x-name": "c" }, body: "ignored body" });
    const after0 = await stats();
    const delta = (k: string) => (after0.get(k) ?? 0) - (before0.get(k) ?? 0);
    assert.equal(delta("streams_started"), 1);
    assert.equal(delta("stream_msgs_sent"), 1, "request headers only");
  });
});
