// GRPCRoute through Envoy: real gRPC calls (grpc-js client → Envoy → grpc-js servers), routed by service and method,
// with a header match and a request header modifier.

import assert from "node:assert/strict";
import { after, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { freePort, waitFor } from "../helpers/net.js";
import { startSluice, startTestEnvoy, tempConfigDir } from "../helpers/processes.js";

const cfg = tempConfigDir();
after(() => cfg.cleanup());

const json = {
  serialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
  deserialize: (b: Buffer) => JSON.parse(b.toString()) as Record<string, unknown>,
};

/** A gRPC server answering every method of `methods` with its own name and the metadata it saw. */
async function startGrpcServer(name: string, methods: string[]): Promise<{ port: number; close(): void }> {
  const server = new grpc.Server();
  const service: grpc.ServiceDefinition = Object.fromEntries(
    methods.map((path) => [
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
  for (const path of methods) {
    impl[path] = (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) =>
      cb(null, { server: name, method: path, via: call.metadata.get("x-via")[0] ?? null });
  }
  server.addService(service, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, close: () => server.forceShutdown() };
}

function call(port: number, path: string, metadata: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(path, json.serialize, json.deserialize, {}, md, { deadline: Date.now() + 5000 }, (e, r) => {
      client.close();
      if (e || r === undefined) reject(e ?? new Error("no response"));
      else resolve(r);
    });
  });
}

test("GRPCRoute routes gRPC calls by service, method and header", async () => {
  const methods = ["/helloworld.Greeter/SayHello", "/helloworld.Greeter/SayBye", "/grpc.health.v1.Health/Check"];
  const v1 = await startGrpcServer("v1", methods);
  const v2 = await startGrpcServer("v2", methods);
  const port = await freePort();
  const svc = (name: string, p: number) => `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: default }
spec: { ports: [{ name: grpc, port: 50051 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: default, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: grpc, port: ${p} }]
endpoints: [{ addresses: [127.0.0.1] }]
`;
  cfg.write(
    "all.yaml",
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: grpc, protocol: HTTP, port: ${port} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: { name: greeter, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches:
        - method: { service: helloworld.Greeter, method: SayHello }
          headers: [{ name: x-tenant, value: beta }]
      filters:
        - type: RequestHeaderModifier
          requestHeaderModifier: { set: [{ name: x-via, value: sluice }] }
      backendRefs: [{ name: v2, port: 50051 }]
    - matches: [{ method: { service: helloworld.Greeter } }, { method: { method: Check } }]
      backendRefs: [{ name: v1, port: 50051 }]
${svc("v1", v1.port)}${svc("v2", v2.port)}`,
  );
  // Everything started is stopped however the test ends: a server left open keeps the file from finishing.
  let sluice: Awaited<ReturnType<typeof startSluice>> | undefined;
  let envoy: Awaited<ReturnType<typeof startTestEnvoy>> | undefined;
  try {
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice, { delta: true });
    const first = await waitFor("a gRPC answer", async () => call(port, "/helloworld.Greeter/SayHello"));
    assert.deepEqual(first, { server: "v1", method: "/helloworld.Greeter/SayHello", via: null });
    assert.deepEqual(await call(port, "/helloworld.Greeter/SayHello", { "x-tenant": "beta" }), {
      server: "v2",
      method: "/helloworld.Greeter/SayHello",
      via: "sluice",
    });
    assert.equal((await call(port, "/helloworld.Greeter/SayBye", { "x-tenant": "beta" })).server, "v1");
    assert.equal((await call(port, "/grpc.health.v1.Health/Check")).server, "v1");
    await assert.rejects(
      call(port, "/other.Service/Method"),
      (e: grpc.ServiceError) => e.code === grpc.status.UNIMPLEMENTED,
    );
  } finally {
    await envoy?.stop();
    await sluice?.stop();
    v1.close();
    v2.close();
  }
});
