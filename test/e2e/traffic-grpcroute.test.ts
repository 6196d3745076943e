// GwPolicies targeting a GRPCRoute (the whole route, or one rule by name) through a real Envoy, with real gRPC calls
// (grpc-js client → Envoy → grpc-js server): a rule's request headers reach the server, a route-wide authorization
// denies with gRPC's PERMISSION_DENIED, and an HTTPRoute with the same name keeps its own policy.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString()) as Record<string, unknown>,
};
const METHODS = ["/demo.Greeter/SayHello", "/demo.Greeter/SayBye"];

async function startGrpcServer(): Promise<{ port: number; close(): void }> {
  const server = new grpc.Server();
  const service: grpc.ServiceDefinition = Object.fromEntries(
    METHODS.map((path) => [
      path,
      {
        path,
        requestStream: false,
        responseStream: false,
        requestSerialize: json.serialize,
        requestDeserialize: json.deserialize,
        responseSerialize: json.serialize,
        responseDeserialize: json.deserialize,
      },
    ]),
  );
  const impl: grpc.UntypedServiceImplementation = {};
  for (const path of METHODS) {
    impl[path] = (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, { method: path, via: call.metadata.get("x-via")[0] ?? null });
  }
  server.addService(service, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, close: () => server.forceShutdown() };
}

function call(
  port: number,
  path: string,
  metadata: Record<string, string> = {},
): Promise<{ ok: Record<string, unknown> } | { code: grpc.status }> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, json.serialize, json.deserialize, {}, md, { deadline: Date.now() + 5000 }, (e, r) => {
      client.close();
      resolve(e !== null || r === undefined ? { code: e?.code ?? grpc.status.UNKNOWN } : { ok: r });
    });
  });
}

const policy = (name: string, kind: string, section: string | undefined, traffic: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: ${kind}, name: svc${section !== undefined ? `, sectionName: ${section}` : ""} }]
  traffic:
    ${traffic}
`;

describe("GwPolicy on a GRPCRoute through Envoy", () => {
  let gw: TestGateway;
  let server: { port: number; close(): void };
  let up: Upstream;

  before(async () => {
    server = await startGrpcServer();
    up = await startEchoUpstream("http");
    gw = await startTestGateway(
      () => `${localService("grpc", server.port, "kubernetes.io/h2c")}${localService("http", up.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: svc, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: hello
      matches: [{ method: { service: demo.Greeter, method: SayHello } }]
      backendRefs: [{ name: grpc, port: 80 }]
    - name: bye
      matches: [{ method: { service: demo.Greeter, method: SayBye } }]
      backendRefs: [{ name: grpc, port: 80 }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: svc, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: hello
      matches: [{ path: { type: PathPrefix, value: /plain } }]
      backendRefs: [{ name: http, port: 80 }]
${policy("grpc-rule", "GRPCRoute", "hello", "headerModifiers: { request: { set: [{ name: x-via, value: grpc-rule-policy }] } }")}${policy(
  "grpc-route",
  "GRPCRoute",
  undefined,
  `authorization: { action: Deny, policy: { matchExpressions: ["request.headers['x-block'] == '1'"] } }`,
)}${policy("http-rule", "HTTPRoute", "hello", "headerModifiers: { request: { set: [{ name: x-via, value: http-rule-policy }] } }")}`,
      "/plain",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    server?.close();
    await up?.close();
  });

  test("a rule's policy applies to that rule's calls only", async () => {
    assert.deepEqual(await call(gw.port, "/demo.Greeter/SayHello"), {
      ok: { method: "/demo.Greeter/SayHello", via: "grpc-rule-policy" },
    });
    assert.deepEqual(await call(gw.port, "/demo.Greeter/SayBye"), {
      ok: { method: "/demo.Greeter/SayBye", via: null },
    });
  });

  test("a route-wide authorization denies every rule's calls with PERMISSION_DENIED", async () => {
    for (const m of METHODS) {
      assert.deepEqual(await call(gw.port, m, { "x-block": "1" }), { code: grpc.status.PERMISSION_DENIED }, m);
    }
  });

  test("an HTTPRoute of the same name keeps its own policy, and the GRPCRoute's do not reach it", async () => {
    const r = await request(gw.port, "/plain", { headers: { "x-block": "1" } });
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.body) as EchoBody).headers["x-via"], "http-rule-policy");
  });
});
