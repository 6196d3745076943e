// The user's own services end to end through Envoy: ext_authz over gRPC and HTTP (allow, deny, and a dead service
// under FailClosed and FailOpen), and ext_proc in each body mode mutating headers and bodies.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, startExtProc, startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { type EchoBody, freePort, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const H2 = "kubernetes.io/h2c";

function rule(name: string): string {
  return `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
}

const authz = (svc: string, mode: string, extra = "") =>
  `extAuth: { backendRef: { name: ${svc}, port: 80 }, failureMode: ${mode}${extra} }`;
const proc = (mode: string) =>
  `extProc: { backendRef: { name: proc, port: 80 }, processingOptions: { requestBodyMode: ${mode}, responseBodyMode: ${mode} } }`;

describe("user ext_authz and ext_proc through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;
  let grpcAuthz: GrpcTestServer & { checks: unknown[] };
  let httpAuthz: Server;
  const httpChecks: IncomingMessage[] = [];
  let extProc: GrpcTestServer & { phases: string[] };

  before(async () => {
    up = await startEchoUpstream("app");
    grpcAuthz = await startGrpcExtAuthz();
    extProc = await startExtProc();
    httpAuthz = createServer((req, res) => {
      httpChecks.push(req);
      if (req.headers["authorization"] === "Bearer good") {
        res.writeHead(200, { "x-user-id": "u1", "x-not-allowed": "1" });
      } else res.writeHead(401);
      res.end();
    });
    await new Promise<void>((r) => httpAuthz.listen(0, "127.0.0.1", r));
    const dead = await freePort();
    const modes = ["streamed", "buffered", "partial", "nobody"];
    gw = await startTestGateway(
      () => `${localService("app", up.port)}${localService("grpcauthz", grpcAuthz.port, H2)}${localService(
        "httpauthz",
        (httpAuthz.address() as AddressInfo).port,
      )}${localService("dead", dead, H2)}${localService("proc", extProc.port, H2)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["grpc", "http", "deadclosed", "deadopen", "deadhttpclosed", "deadhttpopen", ...modes, "open"].map(rule).join("\n")}
${rulePolicy("grpc", authz("grpcauthz", "FailClosed", ", grpc: { contextExtensions: { tenant: acme } }"))}${rulePolicy(
  "http",
  authz(
    "httpauthz",
    "FailClosed",
    `, http: { path: "'/check'", allowedRequestHeaders: [authorization], allowedResponseHeaders: [x-user-id] }`,
  ),
)}${rulePolicy("deadclosed", authz("dead", "FailClosed"))}${rulePolicy("deadopen", authz("dead", "FailOpen"))}${rulePolicy(
  "deadhttpclosed",
  authz("dead", "FailClosed", ", http: {}"),
)}${rulePolicy("deadhttpopen", authz("dead", "FailOpen", ", http: {}"))}${rulePolicy("streamed", proc("FullDuplexStreamed"))}${rulePolicy(
  "buffered",
  proc("Buffered"),
)}${rulePolicy("partial", proc("BufferedPartial"))}${rulePolicy("nobody", proc("None"))}`,
      "/open",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
    await grpcAuthz?.close();
    await extProc?.close();
    await new Promise<void>((r) => (httpAuthz ? httpAuthz.close(() => r()) : r()));
  });

  test("gRPC ext_authz: allows with its headers and the context extensions, denies with its answer", async () => {
    const ok = await request(gw.port, "/grpc", { headers: { "x-allow": "yes" } });
    assert.equal(ok.status, 200);
    const h = (JSON.parse(ok.body) as EchoBody).headers;
    assert.equal(h["x-authz"], "grpc");
    assert.equal(h["x-tenant"], "acme");
    const denied = await request(gw.port, "/grpc");
    assert.equal(denied.status, 403);
    assert.equal(denied.body, "denied by grpc");
  });

  test("HTTP ext_authz: 200 allows and copies allowed headers, anything else denies", async () => {
    const before = up.requests.length;
    const ok = await request(gw.port, "/http/x", { headers: { authorization: "Bearer good" } });
    assert.equal(ok.status, 200);
    const h = (JSON.parse(ok.body) as EchoBody).headers;
    assert.equal(h["x-user-id"], "u1");
    assert.equal(h["x-not-allowed"], undefined);
    assert.equal(httpChecks.at(-1)?.url, "/check");
    const denied = await request(gw.port, "/http/x", { headers: { authorization: "Bearer bad" } });
    assert.equal(denied.status, 401);
    assert.equal(up.requests.length, before + 1);
  });

  test("a dead authorization service: FailClosed denies, FailOpen lets requests through", async () => {
    assert.equal((await request(gw.port, "/deadclosed")).status, 403);
    assert.equal((await request(gw.port, "/deadopen")).status, 200);
    assert.equal((await request(gw.port, "/deadhttpclosed")).status, 403);
    assert.equal((await request(gw.port, "/deadhttpopen")).status, 200);
  });

  for (const [path, mode] of [
    ["streamed", "FullDuplexStreamed"],
    ["buffered", "Buffered"],
    ["partial", "BufferedPartial"],
  ] as const) {
    test(`ext_proc ${mode}: headers and bodies mutated both ways`, async () => {
      const r = await request(gw.port, `/${path}`, { method: "POST", body: "hello processor" });
      assert.equal(r.status, 200, r.body);
      assert.equal(r.headers["x-processed"], "response");
      // The response body is the upper-cased JSON echo of what the upstream received.
      assert.match(r.body, /"BODY":"HELLO PROCESSOR"/);
      assert.match(r.body, /"X-PROCESSED":"REQUEST"/);
    });
  }

  test("ext_proc None: headers mutated, bodies untouched", async () => {
    const r = await request(gw.port, "/nobody", { method: "POST", body: "hello processor" });
    assert.equal(r.status, 200);
    assert.equal(r.headers["x-processed"], "response");
    const echo = JSON.parse(r.body) as EchoBody;
    assert.equal(echo.body, "hello processor");
    assert.equal(echo.headers["x-processed"], "request");
  });
});
