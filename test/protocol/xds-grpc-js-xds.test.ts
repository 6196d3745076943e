// @grpc/grpc-js-xds as a real xDS client of the ADS server: RPCs follow the served routes, an update moves traffic,
// and a resource the client rejects is NACKed while RPCs keep flowing by the last good configuration.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import type { RouteConfiguration } from "../../src/gen/envoy/config/route/v3/route_pb.js";
import { XdsServer } from "../../src/xds-server/server.js";
import { buildSnapshot } from "../../src/xds-server/snapshot.js";
import { ROUTE_TYPE } from "../../src/xds-server/type-urls.js";
import { apiListener, edsCluster, endpoints, routeTo } from "../support/xds-fixtures.js";
import { MemoryLogger } from "../support/xds-harness.js";

const GATEWAY = "ns/grpc-gateway";
const LISTENER = "echo.test";

// A tiny service with a string codec: each backend answers with its own name.
const echoService = {
  whoAmI: {
    path: "/sluice.test.Echo/WhoAmI",
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: string) => Buffer.from(value),
    requestDeserialize: (bytes: Buffer) => bytes.toString(),
    responseSerialize: (value: string) => Buffer.from(value),
    responseDeserialize: (bytes: Buffer) => bytes.toString(),
  },
} satisfies grpc.ServiceDefinition;

type EchoClient = grpc.Client & {
  whoAmI(
    request: string,
    options: Partial<grpc.CallOptions>,
    callback: grpc.requestCallback<string>,
  ): grpc.ClientUnaryCall;
};
const EchoClient = grpc.makeGenericClientConstructor(echoService, "Echo") as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
) => EchoClient;

async function startBackend(name: string): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server();
  server.addService(echoService, {
    whoAmI: (_call: grpc.ServerUnaryCall<string, string>, callback: grpc.sendUnaryData<string>) => callback(null, name),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { server, port };
}

function whoAmI(client: EchoClient): Promise<string> {
  return new Promise((resolve, reject) =>
    client.whoAmI("?", { deadline: Date.now() + 2_000 }, (error, answer) =>
      error || answer === undefined ? reject(error ?? new Error("no answer")) : resolve(answer),
    ),
  );
}

/** Retries until `check` holds, for config that reaches the client asynchronously. */
async function eventually<T>(what: string, probe: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 5_000;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (check(value)) return value;
      last = value;
    } catch (e) {
      last = e;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}; last: ${last instanceof Error ? last.message : String(last)}`);
}

describe("ADS server with @grpc/grpc-js-xds as the client", () => {
  const logger = new MemoryLogger();
  const xds = new XdsServer({ logger });
  let backendA: { server: grpc.Server; port: number };
  let backendB: { server: grpc.Server; port: number };
  let client: EchoClient;

  /**
   * The route sending the Echo service to `target`. Another route keeps the other backend's cluster referenced, so
   * moving traffic does not make grpc-js-xds drop a cluster: it leaves a 10 s failover timer behind when it destroys
   * one that is reconnecting, which would hold the test process open.
   */
  function echoRoute(target: string, domains: readonly string[] = ["*"]): RouteConfiguration {
    const other = target === "backend-a" ? "backend-b" : "backend-a";
    return routeTo("echo-route", other, domains, [{ prefix: "/sluice.test.Echo/", cluster: target }]);
  }

  function publish(route: RouteConfiguration) {
    return xds.cache.setSnapshot(
      GATEWAY,
      buildSnapshot({
        listeners: [apiListener(LISTENER, "echo-route")],
        routes: [route],
        clusters: [edsCluster("backend-a"), edsCluster("backend-b")],
        endpoints: [endpoints("backend-a", [backendA.port]), endpoints("backend-b", [backendB.port])],
      }),
    );
  }

  before(async () => {
    backendA = await startBackend("a");
    backendB = await startBackend("b");
    const { port } = await xds.start({ host: "127.0.0.1", port: 0 });
    process.env["GRPC_XDS_BOOTSTRAP_CONFIG"] = JSON.stringify({
      xds_servers: [
        { server_uri: `127.0.0.1:${port}`, channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] },
      ],
      // The node's group comes from the metadata Sluice's generated bootstraps set, not from its cluster.
      node: { id: "grpc-client-1", cluster: "unrelated", locality: {}, metadata: { "sluice.dev/gateway": GATEWAY } },
    });
    // Loaded after the bootstrap is in the environment: grpc-js-xds reads it once.
    const xdsClient = await import("@grpc/grpc-js-xds");
    xdsClient.register();
    client = new EchoClient(`xds:///${LISTENER}`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    await xds.stop();
    backendA?.server.forceShutdown();
    backendB?.server.forceShutdown();
  });

  it("routes RPCs by the served configuration", async () => {
    assert.deepEqual(publish(echoRoute("backend-a")), { ok: true, changed: true });
    assert.equal(
      await eventually(
        "an answer from backend a",
        () => whoAmI(client),
        (who) => who === "a",
      ),
      "a",
    );
    for (let i = 0; i < 5; i++) assert.equal(await whoAmI(client), "a");

    const [stream] = xds.status().streams;
    assert.equal(stream?.nodeId, "grpc-client-1");
    assert.equal(stream?.group, GATEWAY);
    assert.equal(stream?.kind, "sotw");
    // grpc-js-xds ACKs all four types.
    assert.equal(stream?.types.length, 4);
    for (const t of stream?.types ?? []) assert.equal(t.ackedVersion, t.sentVersion, t.typeUrl);
  });

  it("moves traffic when the snapshot changes", async () => {
    publish(echoRoute("backend-b"));
    await eventually(
      "traffic to move to backend b",
      () => whoAmI(client),
      (who) => who === "b",
    );
    for (let i = 0; i < 5; i++) assert.equal(await whoAmI(client), "b");
  });

  it("gets a NACK for a route the client rejects, and the client keeps its last good routes", async () => {
    const nacksBefore = xds.status().counters.nacks;
    // Valid for the consistency check, invalid for gRPC: a wildcard in the middle of a domain. It would send to a.
    assert.equal(publish(echoRoute("backend-a", ["*", "x*y"])).ok, true);

    const nack = await eventually(
      "the NACK to be recorded",
      async () => xds.status().streams[0]?.types.find((t) => t.typeUrl === ROUTE_TYPE)?.lastNack,
      (n) => n !== undefined,
    );
    assert.match(nack?.message ?? "", /wildcard in the middle: x\*y/);
    assert.equal(xds.status().counters.nacks, nacksBefore + 1);
    const rds = xds.status().streams[0]?.types.find((t) => t.typeUrl === ROUTE_TYPE);
    assert.equal(nack?.version, rds?.sentVersion);
    assert.notEqual(rds?.ackedVersion, rds?.sentVersion);
    assert.ok(logger.entries.some((e) => e.level === "warn" && String(e.fields["error"]).includes("x*y")));

    for (let i = 0; i < 10; i++) assert.equal(await whoAmI(client), "b");

    // Fixing the route recovers.
    publish(echoRoute("backend-a"));
    await eventually(
      "traffic to follow the fixed route",
      () => whoAmI(client),
      (who) => who === "a",
    );
  });
});
