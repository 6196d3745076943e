// The user's extAuth with a decision cache, end to end: Envoy's ext_authz calls Sluice, which answers from the cache or
// asks the user's gRPC or HTTP service. Call counts on the services show that one key reaches the service once
// within the ttl, another key calls it again, the ttl expires, denials are cached too, and a dead service gets the
// failure mode.

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { CheckRequest } from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { type EchoBody, freePort, request, sleep, startEchoUpstream, type Upstream } from "../helpers/net.js";

const H2 = "kubernetes.io/h2c";
const TTL_MS = 2000;

function rule(name: string): string {
  return `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
}

const cache = `cache: { key: ["request.headers['authorization']"], ttl: ${TTL_MS}ms }`;
const authz = (svc: string, mode: string, extra = "") =>
  `extAuth: { backendRef: { name: ${svc}, port: 80 }, failureMode: ${mode}, ${cache}${extra} }`;

describe("extAuth cache through Envoy and Sluice", () => {
  let gw: TestGateway;
  let up: Upstream;
  let grpcAuthz: GrpcTestServer & { checks: CheckRequest[] };
  let httpAuthz: Server;
  const httpChecks: IncomingMessage[] = [];

  before(async () => {
    up = await startEchoUpstream("app");
    grpcAuthz = await startGrpcExtAuthz();
    httpAuthz = createServer((req, res) => {
      httpChecks.push(req);
      if (req.headers["authorization"] === "Bearer good") res.writeHead(200, { "x-user-id": `u${httpChecks.length}` });
      else res.writeHead(401, { "www-authenticate": "Bearer" });
      res.end(req.headers["authorization"] === "Bearer good" ? "" : "no entry");
    });
    await new Promise<void>((r) => httpAuthz.listen(0, "127.0.0.1", r));
    const dead = await freePort();
    gw = await startTestGateway(
      () => `${localService("app", up.port)}${localService("grpcauthz", grpcAuthz.port, H2)}${localService(
        "httpauthz",
        (httpAuthz.address() as AddressInfo).port,
      )}${localService("dead", dead, H2)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["grpc", "http", "deadclosed", "deadopen", "open"].map(rule).join("\n")}
${rulePolicy("grpc", authz("grpcauthz", "FailClosed", ", grpc: { contextExtensions: { tenant: acme } }"))}${rulePolicy(
  "http",
  authz("httpauthz", "FailClosed", ", http: { path: \"'/check'\", allowedResponseHeaders: [x-user-id] }"),
)}${rulePolicy("deadclosed", authz("dead", "FailClosed"))}${rulePolicy("deadopen", authz("dead", "FailOpen"))}`,
      "/open",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
    await grpcAuthz?.close();
    await new Promise<void>((r) => (httpAuthz ? httpAuthz.close(() => r()) : r()));
  });

  const grpcCall = (authorization: string, allow = true) =>
    request(gw.port, "/grpc", { headers: { authorization, ...(allow ? { "x-allow": "yes" } : {}) } });

  test("gRPC: one key reaches the service once within the ttl, with its headers on every answer", async () => {
    const before = grpcAuthz.checks.length;
    for (let i = 0; i < 3; i++) {
      const r = await grpcCall("alice");
      assert.equal(r.status, 200, r.body);
      const h = (JSON.parse(r.body) as EchoBody).headers;
      assert.equal(h["x-authz"], "grpc");
      assert.equal(h["x-tenant"], "acme", "the user's context extensions reach the service");
    }
    assert.equal(grpcAuthz.checks.length, before + 1);
    assert.equal(grpcAuthz.checks.at(-1)?.attributes?.contextExtensions["sluice.policy"], undefined);
    assert.equal((await grpcCall("bob")).status, 200);
    assert.equal(grpcAuthz.checks.length, before + 2, "another key calls the service again");
    assert.equal((await grpcCall("bob")).status, 200);
    assert.equal(grpcAuthz.checks.length, before + 2);
  });

  test("gRPC: a deny is cached too, with the service's status and body", async () => {
    const before = grpcAuthz.checks.length;
    for (let i = 0; i < 3; i++) {
      const r = await grpcCall("mallory", false);
      assert.equal(r.status, 403);
      assert.equal(r.body, "denied by grpc");
    }
    assert.equal(grpcAuthz.checks.length, before + 1);
    // Still denied within the ttl even though this request would now be allowed: the key says it is the same.
    assert.equal((await grpcCall("mallory", true)).status, 403);
    assert.equal(grpcAuthz.checks.length, before + 1);
  });

  test("gRPC: after the ttl the service is asked again", async () => {
    assert.equal((await grpcCall("carol")).status, 200);
    const before = grpcAuthz.checks.length;
    assert.equal((await grpcCall("carol")).status, 200);
    assert.equal(grpcAuthz.checks.length, before);
    await sleep(TTL_MS + 300);
    assert.equal((await grpcCall("carol")).status, 200);
    assert.equal(grpcAuthz.checks.length, before + 1);
  });

  test("HTTP: allow and deny cached per key; allowed headers reach the upstream from the cache", async () => {
    const before = httpChecks.length;
    const first = await request(gw.port, "/http/x", { headers: { authorization: "Bearer good" } });
    const again = await request(gw.port, "/http/y", { headers: { authorization: "Bearer good" } });
    assert.equal(first.status, 200);
    assert.equal(again.status, 200);
    const id = (r: typeof first) => (JSON.parse(r.body) as EchoBody).headers["x-user-id"];
    assert.equal(id(again), id(first), "the same cached answer");
    assert.equal(httpChecks.length, before + 1);
    assert.equal(httpChecks.at(-1)?.url, "/check");
    for (let i = 0; i < 2; i++) {
      const denied = await request(gw.port, "/http/x", { headers: { authorization: "Bearer bad" } });
      assert.equal(denied.status, 401);
      assert.equal(denied.body, "no entry");
      assert.equal(denied.headers["www-authenticate"], "Bearer");
    }
    assert.equal(httpChecks.length, before + 2);
  });

  test("a dead service: FailClosed denies, FailOpen lets requests through", async () => {
    for (let i = 0; i < 2; i++) {
      assert.equal((await request(gw.port, "/deadclosed", { headers: { authorization: "a" } })).status, 403);
      assert.equal((await request(gw.port, "/deadopen", { headers: { authorization: "a" } })).status, 200);
    }
  });
});
