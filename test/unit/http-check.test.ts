// Sluice's HTTP ext_authz check: the hot-path server answers HTTP/1.1 and gRPC on one port (told apart by the HTTP/2
// preface), an HTTP check is read back into the fields of the gRPC CheckRequest, and the answer is what Envoy's HTTP
// ext_authz client expects (200 allows; a denial's status, headers and body go to the client).

import assert from "node:assert/strict";
import { Agent, request as httpRequest } from "node:http";
import { after, before, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { compileExpression } from "../../src/cel/index.js";
import type { CheckFields } from "../../src/extauthz/check-request.js";
import { checkFieldsOfHttp, parseAddress } from "../../src/extauthz/http-check.js";
import { EMPTY_POLICY, type ExtAuthzPolicy, extAuthzHttpHandler } from "../../src/extauthz/server.js";
import {
  Authorization,
  CheckRequestSchema,
  CheckResponseSchema,
} from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { createGrpcClient } from "../../src/grpc/service.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";

test("parseAddress: Envoy's socket address forms; anything else is no address", () => {
  assert.deepEqual(parseAddress("127.0.0.1:8080"), { address: "127.0.0.1", port: 8080 });
  assert.deepEqual(parseAddress("[::1]:443"), { address: "::1", port: 443 });
  assert.deepEqual(parseAddress("[2001:db8::1]:1"), { address: "2001:db8::1", port: 1 });
  for (const bad of ["", "-", "/tmp/envoy.sock", "::1", "1.2.3.4", "1.2.3.4:", "1.2.3.4:70000", "[::1]", "[::1]:x"]) {
    assert.equal(parseAddress(bad), undefined, bad);
  }
});

/** The fields the server read from each HTTP check, by policy id. */
const seen: CheckFields[] = [];

const policies = new Map<string, ExtAuthzPolicy>();
function requireRule(expr: string): ExtAuthzPolicy {
  const c = compileExpression(expr);
  if (!("ok" in c)) throw new Error(JSON.stringify(c.errors));
  return {
    ...EMPTY_POLICY,
    authorization: { deny: [], require: [{ path: "test", action: "Require", expressions: [c.ok] }], allow: [] },
  };
}
policies.set("p-host", requireRule("request.host == 'api.test' && request.headers['x-a'] == '1'"));
policies.set("p-jwt", { ...requireRule("true"), jwt: true });

let server: UnaryGrpcServer;
let port = 0;
before(async () => {
  const handler = extAuthzHttpHandler({ policies: () => policies });
  server = new UnaryGrpcServer(
    new Map([
      [
        `/${Authorization.typeName}/Check`,
        async () => toBinary(CheckResponseSchema, create(CheckResponseSchema, { status: { code: 0 } })),
      ],
    ]),
    new Map(),
    {
      http1: (req) => {
        const parsed = checkFieldsOfHttp(req);
        if (typeof parsed !== "string") seen.push(parsed.fields);
        return handler(req);
      },
    },
  );
  port = await server.start("127.0.0.1", 0);
});
after(() => server.stop());

const agent = new Agent({ keepAlive: true, maxSockets: 1 });
after(() => agent.destroy());

function get(path: string, headers: Record<string, string | string[]>, method = "GET") {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, method, headers, agent }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

test("an HTTP check is decided like the gRPC one: 200 allows, a denial is 403 with its body", async () => {
  const headers = {
    host: "api.test",
    "x-a": "1",
    "x-sluice-authz-source": "v=10.1.2.3:5555",
    "x-sluice-authz-policy": "v=p-host",
  };
  const ok = await get("/sluice/authz/v1/items?x=1", headers);
  assert.equal(ok.status, 200);
  assert.equal(ok.body, "");
  const no = await get("/sluice/authz/v1/items", { ...headers, "x-a": "2" });
  assert.equal(no.status, 403);
  assert.equal(no.body, "forbidden");
  // Unknown or no policy, a path without the prefix, a policy that needs the gRPC check: all denied (fail closed).
  assert.equal((await get("/sluice/authz/", { ...headers, "x-sluice-authz-policy": "v=p-nope" })).status, 403);
  assert.equal((await get("/sluice/authz/", { ...headers, "x-sluice-authz-policy": "v=" })).status, 403);
  // A value without the mark is not one Envoy added: no policy.
  assert.equal((await get("/sluice/authz/", { ...headers, "x-sluice-authz-policy": "p-host" })).status, 403);
  assert.equal((await get("/elsewhere", headers)).status, 403);
  assert.equal((await get("/sluice/authz/", { ...headers, "x-sluice-authz-policy": "v=p-jwt" })).status, 403);
  // Envoy adds its header once: a repeated one names no policy.
  assert.equal(
    (await get("/sluice/authz/", { ...headers, "x-sluice-authz-policy": ["v=p-host", "v=p-host"] })).status,
    403,
  );
});

test("the fields of an HTTP check are the gRPC CheckRequest's: path, pseudo-headers, source, joined repeats", async () => {
  seen.length = 0;
  await get(
    "/sluice/authz/a/b?q=1",
    {
      host: "api.test",
      "x-sluice-authz-policy": "v=p-host",
      "x-sluice-authz-source": "v=[::1]:4242",
      "x-sluice-authz-scheme": "v=https",
      "x-sluice-authz-original-content-length": "v=12",
      "x-sluice-authz-original-x-envoy-internal": "v=",
      "x-sluice-authz-other": "v=anything",
      "x-envoy-internal": "true",
      "x-envoy-expected-rq-timeout-ms": "2000",
      "x-multi": ["a", "b"],
      // UTF-8 bytes, which node:http reads one character per byte.
      "x-name": Buffer.from("Zoë", "utf8").toString("latin1"),
    },
    "POST",
  );
  const f = seen.at(-1);
  assert.ok(f !== undefined);
  assert.equal(f.method, "POST");
  assert.equal(f.path, "/a/b?q=1");
  assert.equal(f.host, "api.test");
  assert.equal(f.scheme, "https");
  assert.equal(f.sourceAddress, "::1");
  assert.equal(f.sourcePort, 4242);
  assert.deepEqual(Object.fromEntries(f.headers), {
    ":authority": "api.test",
    ":method": "POST",
    ":path": "/a/b?q=1",
    ":scheme": "https",
    "content-length": "12",
    "x-multi": "a,b",
    "x-name": "Zoë",
  });
});

test("gRPC calls still work on the same port", async () => {
  const client = createGrpcClient(Authorization, `127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const code = await new Promise<number>((resolve, reject) => {
    client.check(create(CheckRequestSchema, {}), new grpc.Metadata(), {}, (e, r) => {
      client.close();
      if (e) reject(e);
      else resolve(r?.status?.code ?? -1);
    });
  });
  assert.equal(code, 0);
});
