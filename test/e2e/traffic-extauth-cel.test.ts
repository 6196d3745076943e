// The CEL of a user's extAuth, end to end: Envoy's ext_authz calls Sluice, which builds the call to the user's service
// from the request (HTTP path, added headers and body; gRPC metadata), turns a denial into a redirect, and passes what
// the service answered on to the route's authorization as `extauthz` (HTTP: responseMetadata read from the answer;
// gRPC: the service's dynamic metadata). What the services receive is recorded and checked.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type GrpcTestServer, startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const H2 = "kubernetes.io/h2c";

function rule(name: string): string {
  return `    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
}

interface HttpCheck {
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

const requireAdmin = `authorization: { action: Require, policy: { matchExpressions: ["extauthz.role == 'admin'"] } }`;

describe("extAuth CEL through Envoy and Sluice", () => {
  let gw: TestGateway;
  let up: Upstream;
  let grpcAuthz: Awaited<ReturnType<typeof startGrpcExtAuthz>> & GrpcTestServer;
  let httpAuthz: Server;
  const httpChecks: HttpCheck[] = [];

  before(async () => {
    up = await startEchoUpstream("app");
    grpcAuthz = await startGrpcExtAuthz();
    // 200 for a known user with its role in `x-role`; 401 for anyone else.
    const roles: Record<string, string> = { alice: "admin", bob: "viewer" };
    httpAuthz = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        httpChecks.push({ url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString() });
        const role = roles[String(req.headers["x-user"])];
        if (role !== undefined) res.writeHead(200, { "x-role": role, "x-level": "3" }).end();
        else res.writeHead(401, { "content-type": "text/plain" }).end("who are you");
      });
    });
    await new Promise<void>((r) => httpAuthz.listen(0, "127.0.0.1", r));
    const httpPort = (httpAuthz.address() as AddressInfo).port;
    const http = (fields: string, mode = "FailClosed") =>
      `extAuth: { backendRef: { name: httpauthz, port: 80 }, failureMode: ${mode}, http: { allowedRequestHeaders: [x-user], ${fields} } }`;
    gw = await startTestGateway(
      () => `${localService("app", up.port)}${localService("grpcauthz", grpcAuthz.port, H2)}${localService(
        "httpauthz",
        httpPort,
      )}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${["meta", "call", "redirect", "badexpr", "crlf", "grpcmeta", "open"].map(rule).join("\n")}
${rulePolicy(
  "meta",
  `${http(`responseMetadata: { role: "response.headers['x-role']", level: "int(response.headers['x-level'])", code: "response.code" }`)}
${requireAdmin}`,
)}${rulePolicy(
  "call",
  http(
    `path: "'/check' + request.path", addRequestHeaders: { x-checked: "request.headers['x-user'] + '!'", x-const: "'c'" }, body: "{'user': request.headers['x-user'], 'method': request.method}"`,
  ),
)}${rulePolicy("redirect", http(`redirect: "'/login?next=' + request.path"`))}${rulePolicy(
  "badexpr",
  http(`path: "'/check/' + request.headers['x-missing']"`, "FailOpen"),
)}${rulePolicy("crlf", http(`addRequestHeaders: { x-q: "request.query['q']" }`, "FailOpen"))}${rulePolicy(
  "grpcmeta",
  `extAuth: { backendRef: { name: grpcauthz, port: 80 }, grpc: { requestMetadata: { x-tenant-id: "request.headers['x-tenant'] + '-t'" } } }
${requireAdmin}`,
)}`,
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

  test("HTTP responseMetadata reaches the authorization as extauthz: the role decides", async () => {
    const alice = await request(gw.port, "/meta/x", { headers: { "x-user": "alice" } });
    assert.equal(alice.status, 200, alice.body);
    const bob = await request(gw.port, "/meta/x", { headers: { "x-user": "bob" } });
    assert.equal(bob.status, 403, "allowed by the service, but extauthz.role is viewer");
    const nobody = await request(gw.port, "/meta/x", { headers: { "x-user": "eve" } });
    assert.equal(nobody.status, 401, "the service's own denial comes first");
    assert.equal(nobody.body, "who are you");
  });

  test("a client cannot set extauthz itself", async () => {
    // Envoy's ext_authz metadata is not a request header; a header of the same name changes nothing.
    const r = await request(gw.port, "/meta/x", {
      headers: { "x-user": "bob", "x-role": "admin", sluice_extauthz: "{}" },
    });
    assert.equal(r.status, 403);
  });

  test("HTTP: the path, the added headers and the body of the call come from CEL", async () => {
    const before = httpChecks.length;
    const r = await request(gw.port, "/call/deep?q=1", {
      method: "POST",
      headers: { "x-user": "alice" },
      body: "ignored",
    });
    assert.equal(r.status, 200, r.body);
    assert.equal((JSON.parse(r.body) as EchoBody).body, "ignored", "the client's body still reaches the upstream");
    const check = httpChecks[before];
    assert.ok(check !== undefined);
    assert.equal(check.url, "/check/call/deep");
    assert.equal(check.headers["x-checked"], "alice!");
    assert.equal(check.headers["x-const"], "c");
    assert.deepEqual(JSON.parse(check.body), { user: "alice", method: "POST" });
  });

  test("HTTP: a denial becomes a redirect to the evaluated path", async () => {
    const r = await request(gw.port, "/redirect/page", { headers: { "x-user": "eve" } });
    assert.equal(r.status, 302);
    assert.equal(r.headers["location"], "/login?next=/redirect/page");
    const ok = await request(gw.port, "/redirect/page", { headers: { "x-user": "bob" } });
    assert.equal(ok.status, 200, "an allowed request is not redirected");
  });

  test("an expression that fails denies, even with FailOpen, and the service is not called", async () => {
    const before = httpChecks.length;
    const r = await request(gw.port, "/badexpr", { headers: { "x-user": "alice" } });
    assert.equal(r.status, 403);
    assert.equal(httpChecks.length, before);
  });

  test("a value HTTP cannot carry (CR LF from a decoded query parameter) denies, even with FailOpen", async () => {
    const before = httpChecks.length;
    const bad = await request(gw.port, "/crlf?q=a%0D%0Ax-user:%20alice", { headers: { "x-user": "alice" } });
    assert.equal(bad.status, 403, "not let in as if the service had failed");
    assert.equal(httpChecks.length, before);
    const good = await request(gw.port, "/crlf?q=fine", { headers: { "x-user": "alice" } });
    assert.equal(good.status, 200);
    assert.equal(httpChecks.at(-1)?.headers["x-q"], "fine");
  });

  test("gRPC: requestMetadata reaches the service; its dynamic metadata is extauthz", async () => {
    const before = grpcAuthz.metadata.length;
    const admin = await request(gw.port, "/grpcmeta", {
      headers: { "x-allow": "yes", "x-role": "admin", "x-tenant": "acme" },
    });
    assert.equal(admin.status, 200, admin.body);
    assert.equal(grpcAuthz.metadata[before]?.["x-tenant-id"], "acme-t");
    const viewer = await request(gw.port, "/grpcmeta", {
      headers: { "x-allow": "yes", "x-role": "viewer", "x-tenant": "acme" },
    });
    assert.equal(viewer.status, 403);
    const denied = await request(gw.port, "/grpcmeta", { headers: { "x-role": "admin", "x-tenant": "acme" } });
    assert.equal(denied.status, 403);
    assert.equal(denied.body, "denied by grpc");
  });
});
