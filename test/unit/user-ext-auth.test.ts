// A user's extAuth with a decision cache, fronted by Sluice: a real grpc-js client calls Sluice's unary ext_authz
// server (as Envoy does, naming the entry with `sluice.policy`), which answers from the cache or calls a real gRPC or
// HTTP authorization service. Call counts on the services show hits, misses, expiry and the failure modes.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import { create, fromBinary, type JsonObject, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { loadAndTranslate } from "../../src/cli/load.js";
import { extAuthzService } from "../../src/cli/services.js";
import { EMPTY_AUTHORIZATION } from "../../src/extauthz/authorization.js";
import { DecisionCache, type ExtAuthCacheSpec } from "../../src/extauthz/decision-cache.js";
import {
  type ExtAuthzPolicy,
  extAuthzUnaryHandlers,
  JWT_METADATA_NAMESPACE,
  JWT_PAYLOAD_KEY,
  POLICY_CONTEXT_KEY,
  type PolicyTable,
} from "../../src/extauthz/server.js";
import {
  carryOverState,
  type UserExtAuth,
  UserExtAuthClients,
  type UserExtAuthConfig,
  UserExtAuthState,
} from "../../src/extauthz/user-ext-auth.js";
import {
  Authorization,
  type CheckRequest,
  CheckRequestSchema,
  type CheckResponse,
  CheckResponseSchema,
} from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { addGrpcService, createGrpcClient, type GrpcClient } from "../../src/grpc/service.js";
import { UnaryGrpcServer } from "../../src/grpc/unary-server.js";
import { freePort, sleep } from "../helpers/net.js";

// ---- The user's services.

/**
 * A gRPC ext_authz: allows when `x-allow: yes` (with header `x-call: <n>` and dynamic metadata `ttl` from `x-ttl`),
 * denies with 403 "denied by grpc" otherwise. `mode` makes it fail with UNAVAILABLE or answer after `slowMs`.
 */
const grpcService = {
  server: new grpc.Server(),
  port: 0,
  checks: [] as CheckRequest[],
  mode: "ok" as "ok" | "unavailable" | "slow",
  slowMs: 300,
};

function grpcAnswer(req: CheckRequest, n: number) {
  const headers = req.attributes?.request?.http?.headers ?? {};
  const ttl = headers["x-ttl"];
  if (headers["x-allow"] !== "yes") {
    return create(CheckResponseSchema, {
      status: { code: 7 },
      httpResponse: { case: "deniedResponse", value: { status: { code: 403 }, body: "denied by grpc" } },
    });
  }
  return create(CheckResponseSchema, {
    status: { code: 0 },
    httpResponse: { case: "okResponse", value: { headers: [{ header: { key: "x-call", value: String(n) } }] } },
    ...(ttl !== undefined ? { dynamicMetadata: { ttl } } : {}),
  });
}

/** An HTTP ext_authz: 200 for `authorization: Bearer good` (with `x-user-id`, `x-other`), 503 for `Bearer broken`. */
const httpService = { server: undefined as Server | undefined, port: 0, checks: [] as IncomingMessage[] };

// ---- Sluice's ext_authz with a table of hand-built entries.

let table: PolicyTable = new Map();
const clients = new UserExtAuthClients();
const warnings: unknown[] = [];
let sluice: UnaryGrpcServer;
let client: GrpcClient<typeof Authorization.method>;
let deadPort = 0;

function entry(
  config: Partial<UserExtAuthConfig> & { cache: ExtAuthCacheSpec; port?: number },
): ExtAuthzPolicy & { userExtAuth: UserExtAuth } {
  const { cache: spec, port, ...rest } = config;
  const compiled = DecisionCache.compile<Uint8Array>(spec, "cache");
  assert.deepEqual(compiled.problems, []);
  return {
    authorization: EMPTY_AUTHORIZATION,
    jwt: false,
    userExtAuth: {
      service: "Service default/authz port 80",
      protocol: "grpc",
      targets: [{ host: "127.0.0.1", port: port ?? grpcService.port }],
      authority: "authz",
      contextExtensions: { tenant: "acme" },
      timeoutMs: 2000,
      failureMode: "FailClosed",
      jwt: false,
      ...rest,
      scope: JSON.stringify(config),
      state: new UserExtAuthState(compiled.cache!),
    },
  };
}

const byAuthorization = { key: ["request.headers['authorization']"], ttl: "1h" };

function setTable(entries: Record<string, ExtAuthzPolicy>): void {
  table = new Map(Object.entries(entries));
}

interface Req {
  headers?: Record<string, string>;
  path?: string;
  method?: string;
  body?: Uint8Array;
  claims?: JsonObject;
}

function call(policy: string, r: Req = {}): Promise<CheckResponse> {
  const req = create(CheckRequestSchema, {
    attributes: {
      request: {
        http: {
          method: r.method ?? "GET",
          path: r.path ?? "/items?x=1",
          host: "example.com",
          scheme: "http",
          headers: { ":method": r.method ?? "GET", ":path": r.path ?? "/items?x=1", ...r.headers },
          ...(r.body !== undefined ? { rawBody: r.body } : {}),
        },
      },
      contextExtensions: { [POLICY_CONTEXT_KEY]: policy },
      ...(r.claims
        ? { metadataContext: { filterMetadata: { [JWT_METADATA_NAMESPACE]: { [JWT_PAYLOAD_KEY]: r.claims } } } }
        : {}),
    },
  });
  return new Promise((resolve, reject) =>
    client.check(req, new grpc.Metadata(), {}, (e, res) => (e ? reject(e) : resolve(res!))),
  );
}

function statusOf(r: CheckResponse): number {
  return r.httpResponse.case === "okResponse" ? 200 : (r.httpResponse.value?.status?.code ?? -1);
}

function headersOf(r: CheckResponse): Record<string, string> {
  const list = r.httpResponse.case === undefined ? [] : r.httpResponse.value.headers;
  return Object.fromEntries(list.map((h) => [h.header?.key ?? "", h.header?.value ?? ""]));
}

before(async () => {
  addGrpcService(grpcService.server, Authorization, {
    check(call, callback) {
      grpcService.checks.push(call.request);
      const n = grpcService.checks.length;
      if (grpcService.mode === "unavailable") {
        callback({ code: grpc.status.UNAVAILABLE, details: "not today" });
        return;
      }
      const answer = grpcAnswer(call.request, n);
      if (grpcService.mode === "slow") setTimeout(() => callback(null, answer), grpcService.slowMs);
      else callback(null, answer);
    },
  });
  grpcService.port = await new Promise<number>((resolve, reject) =>
    grpcService.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) =>
      e ? reject(e) : resolve(p),
    ),
  );
  httpService.server = createServer((req, res) => {
    httpService.checks.push(req);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      (req as IncomingMessage & { body?: string }).body = Buffer.concat(chunks).toString("utf8");
      const auth = req.headers["authorization"];
      if (auth === "Bearer good") {
        res.writeHead(200, { "x-user-id": "u1", "x-other": "no", "x-envoy-auth-headers-to-remove": "x-secret" });
        res.end();
      } else if (auth === "Bearer broken") {
        res.writeHead(503);
        res.end("down");
      } else {
        res.writeHead(401, {
          "www-authenticate": 'Bearer realm="x"',
          "content-type": "text/plain",
          "set-cookie": ["a=1", "b=2"],
        });
        res.end("who are you?");
      }
    });
  });
  await new Promise<void>((r) => httpService.server!.listen(0, "127.0.0.1", r));
  httpService.port = (httpService.server.address() as AddressInfo).port;
  deadPort = await freePort();
  sluice = new UnaryGrpcServer(
    extAuthzUnaryHandlers({ policies: () => table, clients, logger: { warn: (m, f) => warnings.push({ m, f }) } }),
  );
  const port = await sluice.start("127.0.0.1", 0);
  client = createGrpcClient(Authorization, `127.0.0.1:${port}`, grpc.credentials.createInsecure());
});

after(async () => {
  client.close();
  await sluice.stop();
  clients.close();
  grpcService.server.forceShutdown();
  await new Promise<void>((r) => httpService.server?.close(() => r()));
});

beforeEach(() => {
  grpcService.checks.length = 0;
  grpcService.mode = "ok";
  httpService.checks.length = 0;
  warnings.length = 0;
});

describe("extAuth cache over a gRPC service", () => {
  it("the same key reaches the service once; another key calls it again; the answer is the service's", async () => {
    setTable({ p: entry({ cache: byAuthorization }) });
    const first = await call("p", { headers: { authorization: "a", "x-allow": "yes" } });
    const again = await call("p", { headers: { authorization: "a", "x-allow": "yes", "x-other": "ignored" } });
    assert.equal(statusOf(first), 200);
    assert.deepEqual(headersOf(first), { "x-call": "1" });
    assert.deepEqual(headersOf(again), { "x-call": "1" }, "answered from the cache");
    assert.equal(grpcService.checks.length, 1);
    await call("p", { headers: { authorization: "b", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 2);
  });

  it("passes the CheckRequest on with the user's context extensions only, body and all", async () => {
    setTable({ p: entry({ cache: byAuthorization }) });
    await call("p", { headers: { authorization: "body", "x-allow": "yes" }, body: new TextEncoder().encode("héllo") });
    const seen = grpcService.checks[0]?.attributes;
    assert.deepEqual(seen?.contextExtensions, { tenant: "acme" });
    assert.equal(seen?.request?.http?.path, "/items?x=1");
    assert.equal(seen?.request?.http?.headers["authorization"], "body");
    // Envoy sends Sluice bytes; the user's service gets the text its own filter would have sent.
    assert.equal(seen?.request?.http?.body, "héllo");
    assert.equal(seen?.request?.http?.rawBody.byteLength, 0);
  });

  it("a deny is cached too, with its status and body", async () => {
    setTable({ p: entry({ cache: byAuthorization }) });
    for (let i = 0; i < 3; i++) {
      const r = await call("p", { headers: { authorization: "mallory" } });
      assert.equal(statusOf(r), 403);
      assert.ok(r.httpResponse.case === "deniedResponse");
      assert.equal(r.httpResponse.value.body, "denied by grpc");
      assert.equal(r.status?.code, 7);
    }
    assert.equal(grpcService.checks.length, 1);
  });

  it("an entry expires after the ttl", async () => {
    setTable({ p: entry({ cache: { key: ["request.headers['authorization']"], ttl: "300ms" } }) });
    await call("p", { headers: { authorization: "a", "x-allow": "yes" } });
    await call("p", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 1);
    await sleep(400);
    const r = await call("p", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.deepEqual(headersOf(r), { "x-call": "2" });
    assert.equal(grpcService.checks.length, 2);
  });

  it("a CEL ttl reads the service's dynamic metadata (extauthz); a failing ttl caches nothing", async () => {
    setTable({ p: entry({ cache: { key: ["request.headers['authorization']"], ttl: "extauthz.ttl" } }) });
    await call("p", { headers: { authorization: "a", "x-allow": "yes", "x-ttl": "300ms" } });
    await call("p", { headers: { authorization: "a", "x-allow": "yes", "x-ttl": "300ms" } });
    assert.equal(grpcService.checks.length, 1);
    await sleep(400);
    await call("p", { headers: { authorization: "a", "x-allow": "yes", "x-ttl": "300ms" } });
    assert.equal(grpcService.checks.length, 2);
    // No `ttl` in the metadata: extauthz.ttl fails, so the decision is not kept.
    await call("p", { headers: { authorization: "b", "x-allow": "yes" } });
    await call("p", { headers: { authorization: "b", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 4);
  });

  it("a key that fails to evaluate: the request is still checked, and nothing is cached", async () => {
    setTable({ p: entry({ cache: { key: ["request.headers['x-user']"], ttl: "1h" } }) });
    for (let i = 0; i < 3; i++) assert.equal(statusOf(await call("p", { headers: { "x-allow": "yes" } })), 200);
    assert.equal(grpcService.checks.length, 3);
    assert.equal(table.get("p")?.userExtAuth?.state.cache?.size, 0);
    await call("p", { headers: { "x-user": "u", "x-allow": "yes" } });
    await call("p", { headers: { "x-user": "u", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 4);
  });

  it("maxEntries bounds the cache: the least recently used key is evicted", async () => {
    setTable({ p: entry({ cache: { ...byAuthorization, maxEntries: 2 } }) });
    for (const k of ["a", "b", "a", "c"]) await call("p", { headers: { authorization: k, "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 3, "a hit once, c evicted b");
    await call("p", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 3);
    await call("p", { headers: { authorization: "b", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 4);
    assert.equal(table.get("p")?.userExtAuth?.state.cache?.size, 2);
  });

  it("concurrent requests with one key share one call", async () => {
    setTable({ p: entry({ cache: byAuthorization }) });
    grpcService.mode = "slow";
    grpcService.slowMs = 100;
    const all = await Promise.all(
      Array.from({ length: 5 }, () => call("p", { headers: { authorization: "a", "x-allow": "yes" } })),
    );
    assert.deepEqual(
      all.map((r) => statusOf(r)),
      [200, 200, 200, 200, 200],
    );
    assert.equal(grpcService.checks.length, 1);
  });

  it("the key may read JWT claims; the jwt_authn metadata is not passed on", async () => {
    setTable({ p: entry({ cache: { key: ["jwt.sub"], ttl: "1h" }, jwt: true }) });
    await call("p", { claims: { sub: "alice" }, headers: { "x-allow": "yes" } });
    await call("p", { claims: { sub: "alice" }, headers: { "x-allow": "yes", authorization: "other" } });
    await call("p", { claims: { sub: "bob" }, headers: { "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 2);
    assert.equal(grpcService.checks[0]?.attributes?.metadataContext, undefined);
  });
});

describe("extAuth cache: failure modes (never cached)", () => {
  it("a service that cannot be reached: FailClosed denies with 403, FailOpen allows", async () => {
    setTable({
      closed: entry({ cache: byAuthorization, port: deadPort }),
      open: entry({ cache: byAuthorization, port: deadPort, failureMode: "FailOpen" }),
    });
    const closed = await call("closed", { headers: { authorization: "a" } });
    assert.equal(statusOf(closed), 403);
    assert.equal(statusOf(await call("open", { headers: { authorization: "a" } })), 200);
    assert.equal(table.get("closed")?.userExtAuth?.state.cache?.size, 0);
    assert.equal(table.get("open")?.userExtAuth?.state.cache?.size, 0);
    assert.equal(warnings.length, 2, "one line per entry");
  });

  it("a non-OK gRPC status is a failure, and the next request asks again", async () => {
    setTable({
      closed: entry({ cache: byAuthorization }),
      open: entry({ cache: byAuthorization, failureMode: "FailOpen" }),
    });
    grpcService.mode = "unavailable";
    assert.equal(statusOf(await call("closed", { headers: { authorization: "a", "x-allow": "yes" } })), 403);
    assert.equal(statusOf(await call("open", { headers: { authorization: "a" } })), 200);
    grpcService.mode = "ok";
    const r = await call("closed", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.equal(statusOf(r), 200);
    assert.equal(grpcService.checks.length, 3);
  });

  it("a service slower than the timeout is a failure", async () => {
    setTable({
      closed: entry({ cache: byAuthorization, timeoutMs: 100 }),
      open: entry({ cache: byAuthorization, timeoutMs: 100, failureMode: "FailOpen" }),
    });
    grpcService.mode = "slow";
    grpcService.slowMs = 400;
    assert.equal(statusOf(await call("closed", { headers: { authorization: "a", "x-allow": "yes" } })), 403);
    assert.equal(statusOf(await call("open", { headers: { authorization: "a" } })), 200);
    assert.equal(table.get("closed")?.userExtAuth?.state.cache?.size, 0);
  });

  it("no endpoints: every call fails and the failure mode decides", async () => {
    setTable({ closed: entry({ cache: byAuthorization, targets: [] }) });
    assert.equal(statusOf(await call("closed", { headers: { authorization: "a", "x-allow": "yes" } })), 403);
  });
});

describe("extAuth cache over an HTTP service", () => {
  const http = (over: Partial<UserExtAuthConfig> = {}) =>
    entry({
      cache: byAuthorization,
      protocol: "http",
      port: httpService.port,
      contextExtensions: {},
      http: {
        path: "/check",
        allowedRequestHeaders: ["authorization", "x-user"],
        headersToAdd: [{ key: "x-from", value: "sluice" }],
        allowedUpstreamHeaders: ["x-user-id"],
      },
      ...over,
    });

  it("sends Envoy's HTTP check request: method, path, host, allowed and added headers, body", async () => {
    setTable({ p: http() });
    const r = await call("p", {
      method: "POST",
      headers: { authorization: "Bearer good", "x-user": "u", "x-not-sent": "1" },
      body: new TextEncoder().encode("payload"),
    });
    assert.equal(statusOf(r), 200);
    const seen = httpService.checks[0]!;
    assert.equal(seen.method, "POST");
    assert.equal(seen.url, "/check");
    assert.equal(seen.headers.host, "example.com");
    assert.equal(seen.headers["x-user"], "u");
    assert.equal(seen.headers["x-from"], "sluice");
    assert.equal(seen.headers["x-not-sent"], undefined);
    assert.equal((seen as IncomingMessage & { body?: string }).body, "payload");
  });

  it("200 allows with the allowed headers (cached); others are dropped; headers to remove are passed", async () => {
    setTable({ p: http() });
    const r = await call("p", { headers: { authorization: "Bearer good" } });
    await call("p", { headers: { authorization: "Bearer good" } });
    assert.equal(httpService.checks.length, 1);
    assert.equal(statusOf(r), 200);
    assert.deepEqual(headersOf(r), { "x-user-id": "u1" });
    assert.ok(r.httpResponse.case === "okResponse");
    assert.deepEqual(r.httpResponse.value.headersToRemove, ["x-secret"]);
  });

  it("the original path when none is configured", async () => {
    setTable({
      p: http({ http: { allowedRequestHeaders: ["authorization"], headersToAdd: [], allowedUpstreamHeaders: [] } }),
    });
    await call("p", { headers: { authorization: "Bearer good" } });
    assert.equal(httpService.checks[0]?.url, "/items?x=1");
  });

  it("another status denies with the service's status, headers and body, and is cached", async () => {
    setTable({ p: http() });
    const r = await call("p", { headers: { authorization: "Bearer bad" } });
    await call("p", { headers: { authorization: "Bearer bad" } });
    assert.equal(httpService.checks.length, 1);
    assert.equal(statusOf(r), 401);
    assert.ok(r.httpResponse.case === "deniedResponse");
    assert.equal(r.httpResponse.value.body, "who are you?");
    const headers = r.httpResponse.value.headers.map((h) => [h.header?.key, h.header?.value]);
    assert.deepEqual(
      headers.filter(([k]) => k !== "date"),
      [
        ["www-authenticate", 'Bearer realm="x"'],
        ["content-type", "text/plain"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
      ],
    );
  });

  it("5xx is a failure: FailClosed 403, FailOpen allows, not cached", async () => {
    setTable({ closed: http(), open: http({ failureMode: "FailOpen" }) });
    assert.equal(statusOf(await call("closed", { headers: { authorization: "Bearer broken" } })), 403);
    assert.equal(statusOf(await call("open", { headers: { authorization: "Bearer broken" } })), 200);
    await call("open", { headers: { authorization: "Bearer broken" } });
    assert.equal(httpService.checks.length, 3);
  });

  it("a service that cannot be reached: FailClosed denies, FailOpen allows", async () => {
    setTable({ closed: http({ targets: [{ host: "127.0.0.1", port: deadPort }] }) });
    assert.equal(statusOf(await call("closed", { headers: { authorization: "Bearer good" } })), 403);
    setTable({ open: http({ targets: [{ host: "127.0.0.1", port: deadPort }], failureMode: "FailOpen" }) });
    assert.equal(statusOf(await call("open", { headers: { authorization: "Bearer good" } })), 200);
  });
});

describe("extAuth cache across translations", () => {
  it("an entry of the same scope keeps the cache, whatever its id and endpoints; another scope starts empty", async () => {
    const old = entry({ cache: byAuthorization });
    setTable({ old });
    await call("old", { headers: { authorization: "a", "x-allow": "yes" } });
    const moved: ExtAuthzPolicy = {
      ...old,
      userExtAuth: {
        ...old.userExtAuth,
        targets: [...old.userExtAuth.targets],
        state: new UserExtAuthState(DecisionCache.compile<Uint8Array>(byAuthorization, "c").cache!),
      },
    };
    const other = entry({ cache: { ...byAuthorization, ttl: "2h" } });
    table = carryOverState(
      new Map([
        ["new", moved],
        ["other", other],
      ]),
      [table],
    );
    assert.equal(table.get("new")?.userExtAuth?.state, old.userExtAuth.state);
    assert.equal(table.get("other")?.userExtAuth?.state, other.userExtAuth.state);
    await call("new", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 1, "answered from the carried cache");
    await call("other", { headers: { authorization: "a", "x-allow": "yes" } });
    assert.equal(grpcService.checks.length, 2);
  });
});

describe("extAuth cache in the ext_authz service across translations", () => {
  const yaml = (endpoint: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: v1
kind: Service
metadata: { name: authz, namespace: default }
spec: { ports: [{ name: p, port: 80, appProtocol: kubernetes.io/h2c }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: authz-1, namespace: default, labels: { kubernetes.io/service-name: authz } }
addressType: IPv4
ports: [{ name: p, port: ${grpcService.port} }]
endpoints: [{ addresses: [${endpoint}] }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: authz, port: 80 }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: p, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    extAuth:
      backendRef: { name: authz, port: 80 }
      grpc: { contextExtensions: { tenant: acme } }
      cache: { key: ["request.headers['authorization']"], ttl: 1h }
`;

  it("a new translation that moves the service keeps its decisions (new id, same cache)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-ua-"));
    const svc = extAuthzService({ log: () => {} });
    try {
      const translateWith = async (endpoint: string) => {
        writeFileSync(join(dir, "all.yaml"), yaml(endpoint));
        const { result } = await loadAndTranslate([dir]);
        svc.update(result);
        const ids = [...result.extAuthzPolicies].filter(([, p]) => p.userExtAuth !== undefined).map(([id]) => id);
        assert.equal(ids.length, 1);
        return ids[0]!;
      };
      const check = async (id: string, authorization: string) => {
        const req = create(CheckRequestSchema, {
          attributes: {
            request: { http: { method: "GET", path: "/", host: "h", headers: { authorization, "x-allow": "yes" } } },
            contextExtensions: { [POLICY_CONTEXT_KEY]: id },
          },
        });
        const handler = svc.unary?.get(`/${Authorization.typeName}/Check`);
        return statusOf(fromBinary(CheckResponseSchema, await handler!(toBinary(CheckRequestSchema, req), {})));
      };
      const first = await translateWith("127.0.0.1");
      assert.equal(await check(first, "a"), 200);
      assert.deepEqual(grpcService.checks[0]?.attributes?.contextExtensions, { tenant: "acme" });
      // Nothing listens on 127.0.0.2: a hit shows the cache moved; a miss fails closed at the new endpoint.
      const second = await translateWith("127.0.0.2");
      assert.notEqual(second, first);
      assert.equal(await check(second, "a"), 200);
      assert.equal(grpcService.checks.length, 1);
      assert.equal(await check(second, "b"), 403);
      assert.equal(grpcService.checks.length, 1);
    } finally {
      svc.close?.();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
