// GwPolicy frontend through a real Envoy: an access log on Envoy's stdout as JSON lines (default fields minus the
// removed ones, a CEL attribute, a CEL filter that keeps other requests out), the PROXY protocol (v1 here, Optional:
// the address it carries becomes the client's, and plain connections still work) and an HTTP option (too many
// request headers answered 431).

import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";

function resources(upstream: number): string {
  return `${localService("echo", upstream)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: echo, port: 80 }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: frontend, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    http: { http1MaxHeaders: 20 }
    proxyProtocol: { version: V1, mode: Optional }
    connect: { mode: Deny }
    accessLog:
      filter: "request.path.startsWith('/api')"
      attributes:
        remove: [user_agent]
        add: [{ name: tenant, expression: "request.headers['x-tenant']" }]
`;
}

/** The JSON body of a raw HTTP/1.1 response (chunked or not). */
const jsonBody = (response: string): EchoBody =>
  JSON.parse(response.slice(response.indexOf("{"), response.lastIndexOf("}") + 1)) as EchoBody;

/** One HTTP/1.1 request on a raw connection that starts with `prefix` (a PROXY header); the response text. */
function raw(port: number, prefix: string, path: string, method = "GET"): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("end", () => resolve(Buffer.concat(chunks).toString()));
    s.on("error", reject);
    s.write(
      `${prefix}${method} ${path} HTTP/1.1\r\nhost: ${method === "CONNECT" ? path : "x"}\r\nconnection: close\r\n\r\n`,
    );
  });
}

describe("GwPolicy frontend through Envoy", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    gw = await startTestGateway(
      () => resources(upstream.port),
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test("access log: JSON lines with the CEL attribute, without removed fields, only where the filter holds", async () => {
    await request(gw.port, "/other", { headers: { "x-tenant": "skipped" } });
    await request(gw.port, "/api/items?page=2", { headers: { "x-tenant": "acme", "user-agent": "probe/1" } });
    const entry = await waitFor("the access log entry", async () => {
      const line = gw.envoy.output.find((l) => l.includes('"tenant":"acme"'));
      return line === undefined ? undefined : (JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>);
    });
    assert.equal(entry.path, "/api/items?page=2");
    assert.equal(entry.method, "GET");
    assert.equal(entry.status, 200);
    assert.equal(entry.user_agent, undefined, "removed");
    assert.equal(typeof entry.request_id, "string");
    assert.ok(!gw.envoy.output.some((l) => l.includes("skipped")), "the filter keeps /other out");
  });

  test("PROXY protocol: the address it carries is the client's; a plain connection still works (Optional)", async () => {
    const proxied = await raw(gw.port, "PROXY TCP4 203.0.113.7 127.0.0.1 5555 80\r\n", "/pp");
    assert.match(proxied, /^HTTP\/1\.1 200/);
    const seen = jsonBody(proxied);
    assert.equal(seen.headers["x-forwarded-for"], "203.0.113.7");
    const plain = await raw(gw.port, "", "/plain");
    assert.match(plain, /^HTTP\/1\.1 200/);
    const direct = jsonBody(plain);
    assert.notEqual(direct.headers["x-forwarded-for"], "203.0.113.7");
  });

  test("http1MaxHeaders: a request with more headers is refused with 431", async () => {
    const headers = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`x-h${i}`, "v"]));
    assert.equal((await request(gw.port, "/", { headers })).status, 431);
    assert.equal((await request(gw.port, "/", { headers: { "x-few": "1" } })).status, 200);
  });

  test("connect Deny: a CONNECT request is answered 403, other methods are served", async () => {
    const denied = await raw(gw.port, "", "example.com:443", "CONNECT");
    assert.match(denied, /^HTTP\/1\.1 403 /);
    assert.match(denied, /CONNECT is denied by policy/);
    assert.match(await raw(gw.port, "", "/after"), /^HTTP\/1\.1 200/);
  });
});
