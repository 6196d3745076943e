// Protocol tests: a real grpc-js client calls envoy.service.auth.v3.Authorization/Check on the server.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { create, type JsonObject } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { compileApiKeyAuth } from "../../src/extauthz/api-keys.js";
import { compileAuthorization } from "../../src/extauthz/authorization.js";
import { compileBasicAuth } from "../../src/extauthz/basic-auth.js";
import {
  addExtAuthzService,
  type ExtAuthzPolicy,
  JWT_METADATA_NAMESPACE,
  JWT_PAYLOAD_KEY,
  POLICY_CONTEXT_KEY,
  type PolicyTable,
} from "../../src/extauthz/server.js";
import {
  Authorization,
  type CheckRequest,
  CheckRequestSchema,
  type CheckResponse,
} from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { createGrpcClient } from "../../src/grpc/service.js";

function policy(p: Partial<ExtAuthzPolicy> & { rules?: [string, string][] }): ExtAuthzPolicy {
  const { authorization, problems } = compileAuthorization(
    (p.rules ?? []).map(([action, expr], i) => ({
      path: `r${i}`,
      rule: { action: action as "Allow", policy: { matchExpressions: [expr] } },
    })),
  );
  assert.deepEqual(problems, []);
  const { rules: _r, ...rest } = p;
  return { jwt: false, ...rest, authorization };
}

const apiKey = compileApiKeyAuth(
  { location: { header: { name: "x-api-key" } } },
  [{ kind: "Secret", name: "ns/keys", data: { k1: JSON.stringify({ key: "secret-1", metadata: { group: "gold" } }) } }],
  "p",
).auth!;
const basicAuth = compileBasicAuth({ users: ["alice:$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/"], realm: "sluice" }, "p")
  .auth!;

let table: PolicyTable = new Map<string, ExtAuthzPolicy>([
  // The spec's decision matrix, as one Allow and one Require rule.
  [
    "matrix",
    policy({
      jwt: true,
      rules: [
        ["Allow", "jwt.sub == 'alice'"],
        ["Require", "request.headers['x-internal'] == 'true'"],
      ],
    }),
  ],
  ["cidr", policy({ rules: [["Allow", "cidr('10.0.0.0/8').containsIP(source.address)"]] })],
  [
    "apikey",
    policy({
      apiKey,
      rules: [["Require", "apiKey.group == 'gold' && request.path == '/items' && request.query.page == '2'"]],
      upstreamHeaders: { apiKeyMetadata: "x-key-meta" },
    }),
  ],
  [
    "basic",
    policy({
      basicAuth,
      rules: [["Deny", "basicAuth.username == 'mallory'"]],
      upstreamHeaders: { basicAuthUsername: "x-user" },
    }),
  ],
]);

const warnings: unknown[] = [];
let server: grpc.Server;
let client: grpc.Client & {
  check: (r: CheckRequest, cb: (e: grpc.ServiceError | null, r?: CheckResponse) => void) => void;
};

before(async () => {
  server = new grpc.Server();
  addExtAuthzService(server, { policies: () => table, logger: { warn: (m, f) => warnings.push({ m, f }) } });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  client = createGrpcClient(
    Authorization,
    `127.0.0.1:${port}`,
    grpc.credentials.createInsecure(),
  ) as unknown as typeof client;
});

after(() => {
  client.close();
  server.forceShutdown();
});

interface Req {
  policy?: string;
  headers?: Record<string, string>;
  path?: string;
  ip?: string;
  claims?: JsonObject;
}

function call(r: Req): Promise<CheckResponse> {
  const req = create(CheckRequestSchema, {
    attributes: {
      source: {
        address: {
          address: {
            case: "socketAddress",
            value: { address: r.ip ?? "127.0.0.1", portSpecifier: { case: "portValue", value: 40000 } },
          },
        },
      },
      request: {
        http: { method: "GET", path: r.path ?? "/", host: "example.com", scheme: "http", headers: r.headers ?? {} },
      },
      contextExtensions: r.policy === undefined ? {} : { [POLICY_CONTEXT_KEY]: r.policy },
      ...(r.claims
        ? { metadataContext: { filterMetadata: { [JWT_METADATA_NAMESPACE]: { [JWT_PAYLOAD_KEY]: r.claims } } } }
        : {}),
    },
  });
  return new Promise((resolve, reject) => client.check(req, (e, res) => (e ? reject(e) : resolve(res!))));
}

function httpStatus(r: CheckResponse): number {
  if (r.httpResponse.case === "okResponse") return 200;
  return r.httpResponse.value?.status?.code ?? -1;
}

describe("ext_authz server over gRPC", () => {
  it("the decision matrix", async () => {
    const cases: [JsonObject | undefined, string | undefined, number][] = [
      [{ sub: "alice" }, "true", 200],
      [{ sub: "alice" }, "false", 403],
      [{ sub: "bob" }, "true", 403],
      [{ sub: "bob" }, undefined, 403],
      [undefined, "true", 403], // no token: jwt is {} and jwt.sub fails, so Allow does not match
    ];
    for (const [claims, internal, want] of cases) {
      const r = await call({
        policy: "matrix",
        ...(claims ? { claims } : {}),
        headers: internal === undefined ? {} : { "x-internal": internal },
      });
      assert.equal(httpStatus(r), want, JSON.stringify({ claims, internal }));
      assert.equal(r.status?.code, want === 200 ? 0 : 7);
    }
  });

  it("source CIDR from the peer address, IPv4-mapped IPv6 included", async () => {
    assert.equal(httpStatus(await call({ policy: "cidr", ip: "10.2.3.4" })), 200);
    assert.equal(httpStatus(await call({ policy: "cidr", ip: "::ffff:10.2.3.4" })), 200);
    assert.equal(httpStatus(await call({ policy: "cidr", ip: "192.168.1.1" })), 403);
  });

  it("API key: 401 without or with a wrong key; metadata to CEL, dynamic metadata and upstream header", async () => {
    assert.equal(httpStatus(await call({ policy: "apikey", path: "/items?page=2" })), 401);
    const wrong = await call({ policy: "apikey", path: "/items?page=2", headers: { "x-api-key": "nope" } });
    assert.equal(httpStatus(wrong), 401);
    assert.equal(wrong.status?.code, 16);
    const ok = await call({ policy: "apikey", path: "/items?page=2", headers: { "x-api-key": "secret-1" } });
    assert.equal(httpStatus(ok), 200);
    assert.deepEqual(ok.dynamicMetadata, { apiKey: { group: "gold" } });
    assert.ok(ok.httpResponse.case === "okResponse");
    assert.deepEqual(
      ok.httpResponse.value.headers.map((h) => [h.header?.key, h.header?.value]),
      [["x-key-meta", '{"group":"gold"}']],
    );
    assert.equal(
      httpStatus(await call({ policy: "apikey", path: "/items?page=3", headers: { "x-api-key": "secret-1" } })),
      403,
    );
  });

  it("basic auth: 401 with WWW-Authenticate and the realm; username to CEL and upstream", async () => {
    const none = await call({ policy: "basic" });
    assert.equal(httpStatus(none), 401);
    assert.ok(none.httpResponse.case === "deniedResponse");
    assert.deepEqual(
      none.httpResponse.value.headers.map((h) => [h.header?.key, h.header?.value]),
      [["www-authenticate", 'Basic realm="sluice"']],
    );
    const auth = `Basic ${Buffer.from("alice:s3cret").toString("base64")}`;
    const ok = await call({ policy: "basic", headers: { authorization: auth } });
    assert.equal(httpStatus(ok), 200);
    assert.deepEqual(ok.dynamicMetadata, { basicAuth: { username: "alice" } });
    assert.ok(ok.httpResponse.case === "okResponse");
    assert.equal(ok.httpResponse.value.headers[0]?.header?.value, "alice");
  });

  it("an unknown or missing policy id fails closed with a log line", async () => {
    warnings.length = 0;
    assert.equal(httpStatus(await call({ policy: "nope" })), 403);
    assert.equal(httpStatus(await call({})), 403);
    assert.equal(warnings.length, 2);
  });

  it("picks up a new table without restarting", async () => {
    const old = table;
    table = new Map([["fresh", policy({})]]);
    assert.equal(httpStatus(await call({ policy: "fresh" })), 200);
    assert.equal(httpStatus(await call({ policy: "cidr", ip: "10.0.0.1" })), 403);
    table = old;
  });
});
