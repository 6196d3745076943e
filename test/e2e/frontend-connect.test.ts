// frontend.connect mode Route through a real Envoy: a CONNECT request is matched by the HTTPRoute rules like any
// request (a rule for every path, with its header matches), then its stream is a raw TCP tunnel to the rule's backend,
// here a TCP echo server. A CONNECT no rule takes is 404; other requests are served as before.

import assert from "node:assert/strict";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

/** Sends CONNECT with `headers`; once answered 200, writes `payload` and returns the answer head and what came back. */
function tunnel(
  port: number,
  headers: Record<string, string>,
  payload: string,
): Promise<{ head: string; echoed: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let text = "";
    let sent = false;
    const done = () => {
      s.destroy();
      const end = text.indexOf("\r\n\r\n");
      resolve({ head: end < 0 ? text : text.slice(0, end), echoed: end < 0 ? "" : text.slice(end + 4) });
    };
    s.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      if (!sent && text.startsWith("HTTP/1.1 200") && text.includes("\r\n\r\n")) {
        sent = true;
        s.write(payload);
      }
      if (sent && text.endsWith(payload)) done();
    });
    s.on("end", done);
    s.on("error", reject);
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("");
    s.write(`CONNECT db.internal:5432 HTTP/1.1\r\nhost: db.internal:5432\r\n${extra}\r\n`);
  });
}

describe("frontend.connect Route: CONNECT tunnels through the HTTPRoute rules", { timeout: 60_000 }, () => {
  const sockets = new Set<Socket>();
  const echo = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.pipe(s);
  });
  let http: Upstream;
  let gw: TestGateway;

  before(async () => {
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
    http = await startEchoUpstream("web");
    const echoPort = (echo.address() as AddressInfo).port;
    gw = await startTestGateway(
      () => `${localService("echo", echoPort)}${localService("web", http.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /web } }]
      backendRefs: [{ name: web, port: 80 }]
    - matches: [{ headers: [{ name: x-tunnel, value: echo }] }]
      backendRefs: [{ name: echo, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: frontend, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    connect: { mode: Route }
`,
      "/web",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const s of sockets) s.destroy();
    echo.close();
    await http?.close();
  });

  test("a CONNECT a rule takes (by its header match) is a tunnel to that rule's backend", async () => {
    const r = await tunnel(gw.port, { "x-tunnel": "echo" }, "hello through the tunnel");
    assert.match(r.head, /^HTTP\/1\.1 200 /);
    assert.equal(r.echoed, "hello through the tunnel");
  });

  test("a CONNECT no rule takes is 404 (the /web rule has a path, so it takes none); HTTP requests as before", async () => {
    const r = await tunnel(gw.port, {}, "x");
    assert.match(r.head, /^HTTP\/1\.1 404 /);
    const web = await request(gw.port, "/web/page");
    assert.equal(web.status, 200);
    assert.equal((JSON.parse(web.body) as EchoBody).path, "/web/page");
  });
});
