// frontend.connect mode Tunnel through a real Envoy: a CONNECT to the Gateway's own port opens a tunnel whose stream
// re-enters that port as a new downstream connection, so an HTTP request written inside the tunnel is routed by the
// Gateway's HTTPRoutes like any other (here to an echo upstream). A CONNECT naming a port the Gateway does not bind
// is refused (404), and requests outside a tunnel are served as before.

import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

/** CONNECT to `authority`; once answered 200, writes `inner` into the tunnel; resolves with everything read. */
function throughTunnel(port: number, authority: string, inner: string): Promise<{ head: string; rest: string }> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let text = "";
    let sent = false;
    const finish = () => {
      s.destroy();
      const end = text.indexOf("\r\n\r\n");
      resolve({ head: end < 0 ? text : text.slice(0, end), rest: end < 0 ? "" : text.slice(end + 4) });
    };
    const timer = setTimeout(finish, 5000);
    s.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return;
      if (!text.startsWith("HTTP/1.1 200")) {
        clearTimeout(timer);
        finish();
        return;
      }
      if (!sent) {
        sent = true;
        s.write(inner);
        return;
      }
      // The inner response is complete when its body (JSON from the echo upstream) has closed, with its last chunk.
      if (/\}\s*(0\s*)?$/.test(text.slice(end + 4)) && text.slice(end + 4).includes("\r\n\r\n")) {
        clearTimeout(timer);
        finish();
      }
    });
    s.on("end", finish);
    s.on("error", reject);
    s.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`);
  });
}

describe("frontend.connect mode Tunnel", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    gw = await startTestGateway(
      () => `${localService("echo", upstream.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - backendRefs: [{ name: echo, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tunnel, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    connect: { mode: Tunnel }
`,
      "/",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
  });

  test("a CONNECT to the Gateway's own port: the tunnel's stream is a new connection routed by the HTTPRoute", async () => {
    const r = await throughTunnel(
      gw.port,
      `127.0.0.1:${gw.port}`,
      "GET /inside?x=1 HTTP/1.1\r\nhost: inner.example\r\nconnection: close\r\n\r\n",
    );
    assert.match(r.head, /^HTTP\/1\.1 200/);
    const innerHead = r.rest.slice(0, r.rest.indexOf("\r\n\r\n"));
    assert.match(innerHead, /^HTTP\/1\.1 200/);
    // The JSON body (chunked: between the chunk size line and the last chunk).
    const body = JSON.parse(r.rest.slice(r.rest.indexOf("{"), r.rest.lastIndexOf("}") + 1)) as EchoBody;
    assert.equal(body.path, "/inside?x=1");
    assert.equal(body.headers["host"], "inner.example");
  });

  test("a CONNECT naming a port the Gateway does not bind is refused", async () => {
    const r = await throughTunnel(gw.port, "127.0.0.1:1", "");
    assert.match(r.head, /^HTTP\/1\.1 404/);
  });

  test("plain requests are served as before", async () => {
    const r = await request(gw.port, "/plain");
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.body) as EchoBody).path, "/plain");
  });
});
