// The ADS stream logic, driven through a real grpc-js client on loopback: nonces, stale nonces, ACK, NACK, pushes.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";
import { create, fromBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { Cluster_LbPolicy } from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import { VirtualHostSchema } from "../../src/gen/envoy/config/route/v3/route_components_pb.js";
import { RouteConfigurationSchema } from "../../src/gen/envoy/config/route/v3/route_pb.js";
import type {
  DeltaDiscoveryResponse,
  DiscoveryResponse,
} from "../../src/gen/envoy/service/discovery/v3/discovery_pb.js";
import { buildSnapshot, type SnapshotInput } from "../../src/xds-server/snapshot.js";
import type { TypeStatus } from "../../src/xds-server/tracker.js";
import {
  CLUSTER_TYPE,
  ENDPOINT_TYPE,
  LISTENER_TYPE,
  ROUTE_TYPE,
  VIRTUAL_HOST_TYPE,
} from "../../src/xds-server/type-urls.js";
import { deltaRequest, sotwRequest } from "../support/ads-probe.js";
import { apiListener, edsCluster, endpoints, routeTo } from "../support/xds-fixtures.js";
import { startXds, type XdsHarness } from "../support/xds-harness.js";

// Writes raw bytes on the ADS SotW method, to send what no well-behaved client would.
const identity = (b: Buffer) => b;
const RawAdsClient = grpc.makeGenericClientConstructor(
  {
    sotw: {
      path: "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources",
      requestStream: true,
      responseStream: true,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  },
  "RawAds",
) as unknown as new (
  address: string,
  credentials: grpc.ChannelCredentials,
) => grpc.Client & { sotw(): grpc.ClientDuplexStream<Buffer, Buffer> };

const GROUP = "gw-1";
const NODE = { id: "envoy-1", cluster: GROUP };

/** A full, consistent snapshot: clusters a and b (EDS), listener l → route r → cluster `routeTarget`. */
function input(
  opts: { aPort?: number; routeTarget?: string; extraCluster?: boolean } = {},
): Required<Omit<SnapshotInput, "secrets" | "encodedRoutes">> {
  const clusters = ["a", "b", ...(opts.extraCluster ? ["c"] : [])];
  return {
    clusters: clusters.map((name) => edsCluster(name)),
    endpoints: clusters.map((name) => endpoints(name, [name === "a" ? (opts.aPort ?? 1001) : 2002])),
    listeners: [apiListener("l", "r")],
    routes: [routeTo("r", opts.routeTarget ?? "a")],
  };
}

function anyTypes(response: DiscoveryResponse): string[] {
  return response.resources.map((any) => any.typeUrl);
}

function deltaNames(response: DeltaDiscoveryResponse): string[] {
  return response.resources.map((r) => r.name);
}

function typeStatus(h: XdsHarness, typeUrl: string, nodeId = NODE.id): TypeStatus | undefined {
  const stream = h.server.status().streams.find((s) => s.nodeId === nodeId);
  return stream?.types.find((t) => t.typeUrl === typeUrl);
}

describe("state-of-the-world ADS", () => {
  let h: XdsHarness;
  beforeEach(async () => {
    h = await startXds();
  });
  afterEach(async () => {
    await h.close();
  });

  it("serves the node group's snapshot with increasing nonces and records ACKs", async () => {
    const snapshot = buildSnapshot(input());
    assert.equal(h.server.cache.setSnapshot(GROUP, snapshot).ok, true);
    const s = h.client.sotw();

    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const cds = await s.next();
    assert.equal(cds.typeUrl, CLUSTER_TYPE);
    assert.equal(cds.versionInfo, snapshot.typeVersions.get(CLUSTER_TYPE));
    assert.deepEqual(anyTypes(cds), [CLUSTER_TYPE, CLUSTER_TYPE]);

    s.write(sotwRequest({ typeUrl: ENDPOINT_TYPE, resourceNames: ["a", "b"] }));
    const eds = await s.next();
    assert.equal(eds.resources.length, 2);
    assert.ok(Number(eds.nonce) > Number(cds.nonce), `nonce ${eds.nonce} after ${cds.nonce}`);

    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: cds.versionInfo, responseNonce: cds.nonce }));
    await s.expectNothing();
    const status = h.server.status();
    assert.equal(status.streams.length, 1);
    assert.equal(status.streams[0]?.group, GROUP);
    assert.equal(status.streams[0]?.kind, "sotw");
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, cds.versionInfo);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.sentNonce, cds.nonce);
    assert.equal(typeStatus(h, ENDPOINT_TYPE)?.ackedVersion, undefined);
    assert.equal(status.counters.acks, 1);
    assert.equal(status.counters.pushes, 2);
    assert.equal(status.counters.connectedStreams, 1);
    s.close();
  });

  it("sends EDS only for subscribed names and resends when the subscription grows", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: ENDPOINT_TYPE, node: NODE, resourceNames: ["a"] }));
    const first = await s.next();
    assert.equal(first.resources.length, 1);

    // Same nonce, same version, one more name: the new resource must be sent.
    s.write(
      sotwRequest({
        typeUrl: ENDPOINT_TYPE,
        resourceNames: ["a", "b"],
        versionInfo: first.versionInfo,
        responseNonce: first.nonce,
      }),
    );
    const second = await s.next();
    assert.equal(second.resources.length, 2);
    assert.notEqual(second.versionInfo, first.versionInfo);

    // A name that does not exist yet gets no (empty) EDS response.
    s.write(sotwRequest({ typeUrl: ROUTE_TYPE, resourceNames: ["nope"] }));
    await s.expectNothing();
    s.close();
  });

  it("ignores requests carrying a stale nonce", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const first = await s.next();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: first.versionInfo, responseNonce: first.nonce }));
    await s.expectNothing(50);

    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ extraCluster: true })));
    const second = await s.next();
    assert.equal(second.resources.length, 3);

    // A NACK and a version-less request, both answering the superseded response: neither counts nor triggers a push.
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: "", responseNonce: first.nonce, error: "late" }));
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: "", responseNonce: first.nonce }));
    await s.expectNothing();
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.lastNack, undefined);
    assert.equal(h.server.status().counters.nacks, 0);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, first.versionInfo);

    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: second.versionInfo, responseNonce: second.nonce }));
    await s.expectNothing(50);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, second.versionInfo);
    s.close();
  });

  it("pushes nothing when a snapshot with identical content is set, and only changed types otherwise", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const cds = await s.next();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: cds.versionInfo, responseNonce: cds.nonce }));
    s.write(sotwRequest({ typeUrl: ENDPOINT_TYPE, resourceNames: ["a", "b"] }));
    const eds = await s.next();
    s.write(
      sotwRequest({
        typeUrl: ENDPOINT_TYPE,
        resourceNames: ["a", "b"],
        versionInfo: eds.versionInfo,
        responseNonce: eds.nonce,
      }),
    );
    await s.expectNothing(50);

    const again = h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    assert.deepEqual(again, { ok: true, changed: false });
    await s.expectNothing();

    // Only endpoints of a change: no CDS response, one EDS response.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ aPort: 1999 })));
    const update = await s.next();
    assert.equal(update.typeUrl, ENDPOINT_TYPE);
    await s.expectNothing();
    s.close();
  });

  it("pushes a new snapshot in the order clusters, endpoints, listeners, routes", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.sotw();
    const subscriptions: [string, string[]][] = [
      [ROUTE_TYPE, ["r"]],
      [LISTENER_TYPE, []],
      [ENDPOINT_TYPE, ["a", "b"]],
      [CLUSTER_TYPE, []],
    ];
    for (const [typeUrl, resourceNames] of subscriptions) {
      s.write(sotwRequest({ typeUrl, resourceNames, node: NODE }));
      const r = await s.next();
      s.write(sotwRequest({ typeUrl, resourceNames, versionInfo: r.versionInfo, responseNonce: r.nonce }));
    }
    await s.expectNothing(50);

    // Change every type at once: a new port for a, the route to b, a listener renamed.
    const next = input({ aPort: 1500, routeTarget: "b" });
    h.server.cache.setSnapshot(
      GROUP,
      buildSnapshot({
        ...next,
        clusters: next.clusters.map((c) => ({ ...c, lbPolicy: Cluster_LbPolicy.RANDOM })),
        listeners: [apiListener("l2", "r")],
      }),
    );
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await s.next()).typeUrl);
    assert.deepEqual(order, [CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE]);
    s.close();
  });

  it("records a NACK with the client's message and does not push that version again until the snapshot changes", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const good = await s.next();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: good.versionInfo, responseNonce: good.nonce }));
    await s.expectNothing(50);

    const badInput = input();
    const bad = { ...badInput, clusters: badInput.clusters.map((c) => ({ ...c, lbPolicy: Cluster_LbPolicy.MAGLEV })) };
    h.server.cache.setSnapshot(GROUP, buildSnapshot(bad));
    const rejected = await s.next();
    s.write(
      sotwRequest({
        typeUrl: CLUSTER_TYPE,
        versionInfo: good.versionInfo,
        responseNonce: rejected.nonce,
        error: "cluster a: MAGLEV is not supported here",
      }),
    );
    await s.expectNothing();

    const nack = typeStatus(h, CLUSTER_TYPE)?.lastNack;
    assert.equal(nack?.version, rejected.versionInfo);
    assert.equal(nack?.message, "cluster a: MAGLEV is not supported here");
    assert.ok(nack?.at instanceof Date);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, good.versionInfo);
    assert.equal(h.server.status().counters.nacks, 1);
    const logged = h.logger.entries.find((e) => e.level === "warn" && e.message.includes("NACK"));
    assert.equal(logged?.fields["error"], "cluster a: MAGLEV is not supported here");
    assert.equal(logged?.fields["node"], NODE.id);

    // The client repeats its request (same nonce, same error): not a second NACK, no push.
    s.write(
      sotwRequest({
        typeUrl: CLUSTER_TYPE,
        versionInfo: good.versionInfo,
        responseNonce: rejected.nonce,
        error: "cluster a: MAGLEV is not supported here",
      }),
    );
    // Setting the same content again changes nothing.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(bad));
    await s.expectNothing();
    assert.equal(h.server.status().counters.nacks, 1);

    // Not even to the same node on a new stream.
    s.close();
    const s2 = h.client.sotw();
    s2.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE, versionInfo: good.versionInfo }));
    await s2.expectNothing();

    // A changed snapshot is pushed.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ extraCluster: true })));
    const fixed = await s2.next();
    assert.equal(fixed.resources.length, 3);
    s2.close();
  });

  it("resumes a reconnecting client from the version it holds", async () => {
    const snapshot = buildSnapshot(input());
    h.server.cache.setSnapshot(GROUP, snapshot);
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const first = await s.next();
    s.close();

    // Holds the current version: nothing to send.
    const s2 = h.client.sotw();
    s2.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE, versionInfo: first.versionInfo }));
    await s2.expectNothing();
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, first.versionInfo);
    // ...until the snapshot changes, on the new stream.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ extraCluster: true })));
    assert.equal((await s2.next()).resources.length, 3);
    s2.close();

    // Holds an old version: gets the current one at once.
    const s3 = h.client.sotw();
    s3.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE, versionInfo: first.versionInfo }));
    assert.equal((await s3.next()).resources.length, 3);
    s3.close();
  });

  it("fails only the stream whose bytes do not decode", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const raw = new RawAdsClient(`127.0.0.1:${h.port}`, grpc.credentials.createInsecure());
    const call = raw.sotw();
    const failed = new Promise<grpc.ServiceError>((resolve) => call.on("error", resolve));
    call.write(Buffer.from([0xff, 0xff, 0xff, 0x01]));
    assert.equal((await failed).code, grpc.status.INTERNAL);
    raw.close();

    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    assert.equal((await s.next()).resources.length, 2);
    assert.equal(h.server.status().counters.connectedStreams, 1);
    s.close();
  });

  it("serves each node its group's snapshot and ignores a first request without a node", async () => {
    h.server.cache.setSnapshot("g-a", buildSnapshot(input()));
    h.server.cache.setSnapshot("g-b", buildSnapshot(input({ extraCluster: true })));
    const s = h.client.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE }));
    await s.expectNothing(100);
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "x", cluster: "g-b" } }));
    assert.equal((await s.next()).resources.length, 3);
    const s2 = h.client.sotw();
    s2.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "y", cluster: "g-a" } }));
    assert.equal((await s2.next()).resources.length, 2);
    s.close();
    s2.close();
  });
});

describe("incremental (delta) ADS", () => {
  let h: XdsHarness;
  beforeEach(async () => {
    h = await startXds();
  });
  afterEach(async () => {
    await h.close();
  });

  it("sends adds and changes as resources and deletions as removed_resources", async () => {
    const snapshot = buildSnapshot(input());
    h.server.cache.setSnapshot(GROUP, snapshot);
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const first = await s.next();
    assert.deepEqual(deltaNames(first), ["a", "b"]);
    assert.deepEqual(first.removedResources, []);
    const clusters = snapshot.resources.get(CLUSTER_TYPE);
    assert.equal(first.resources[0]?.version, clusters?.get("a")?.version);
    s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, responseNonce: first.nonce }));
    await s.expectNothing(50);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, first.systemVersionInfo);

    // a changes, b goes away, c arrives.
    const next = input({ extraCluster: true });
    h.server.cache.setSnapshot(
      GROUP,
      buildSnapshot({
        ...next,
        clusters: next.clusters
          ?.filter((c) => c.name !== "b")
          .map((c) => (c.name === "a" ? { ...c, lbPolicy: Cluster_LbPolicy.RANDOM } : c)),
      }),
    );
    const second = await s.next();
    assert.deepEqual(deltaNames(second), ["a", "c"]);
    assert.deepEqual(second.removedResources, ["b"]);
    assert.ok(Number(second.nonce) > Number(first.nonce));
    s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, responseNonce: second.nonce }));
    await s.expectNothing(50);

    // Same content again: nothing.
    const sameAgain = buildSnapshot({
      ...next,
      clusters: next.clusters
        ?.filter((c) => c.name !== "b")
        .map((c) => (c.name === "a" ? { ...c, lbPolicy: Cluster_LbPolicy.RANDOM } : c)),
    });
    assert.deepEqual(h.server.cache.setSnapshot(GROUP, sameAgain), { ok: true, changed: false });
    await s.expectNothing();
    s.close();
  });

  it("follows explicit subscriptions and says when a subscribed resource does not exist", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, node: NODE, resourceNamesSubscribe: ["a"] }));
    const first = await s.next();
    assert.deepEqual(deltaNames(first), ["a"]);
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, responseNonce: first.nonce }));

    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, resourceNamesSubscribe: ["b"] }));
    const second = await s.next();
    assert.deepEqual(deltaNames(second), ["b"]);
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, responseNonce: second.nonce }));

    // Unsubscribed: a change to a is not sent; b did not change.
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, resourceNamesUnsubscribe: ["a"] }));
    await s.expectNothing(50); // lets the server read the unsubscribe first
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ aPort: 1234 })));
    await s.expectNothing();

    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, resourceNamesSubscribe: ["ghost"] }));
    const third = await s.next();
    assert.deepEqual(deltaNames(third), []);
    assert.deepEqual(third.removedResources, ["ghost"]);
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, responseNonce: third.nonce }));
    await s.expectNothing();
    s.close();
  });

  it("on reconnect sends only what differs from initial_resource_versions", async () => {
    const snapshot = buildSnapshot(input({ extraCluster: true }));
    h.server.cache.setSnapshot(GROUP, snapshot);
    const clusters = snapshot.resources.get(CLUSTER_TYPE);
    const version = (name: string) => clusters?.get(name)?.version ?? "";

    const s = h.client.delta();
    s.write(
      deltaRequest({
        typeUrl: CLUSTER_TYPE,
        node: NODE,
        initialResourceVersions: { a: version("a"), b: "old", c: version("c"), gone: "x" },
      }),
    );
    const response = await s.next();
    assert.deepEqual(deltaNames(response), ["b"]);
    assert.deepEqual(response.removedResources, ["gone"]);
    s.close();

    const s2 = h.client.delta();
    s2.write(
      deltaRequest({
        typeUrl: CLUSTER_TYPE,
        node: NODE,
        initialResourceVersions: { a: version("a"), b: version("b"), c: version("c") },
      }),
    );
    await s2.expectNothing();
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, snapshot.typeVersions.get(CLUSTER_TYPE));
    s2.close();
  });

  it("records a NACK, holds that version back, and resends rejected resources with the next change", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, node: NODE }));
    const first = await s.next();
    s.write(deltaRequest({ typeUrl: CLUSTER_TYPE, responseNonce: first.nonce }));
    await s.expectNothing(50);

    const bad = input();
    h.server.cache.setSnapshot(
      GROUP,
      buildSnapshot({
        ...bad,
        clusters: bad.clusters.map((c) => (c.name === "a" ? { ...c, lbPolicy: Cluster_LbPolicy.LEAST_REQUEST } : c)),
      }),
    );
    const rejected = await s.next();
    assert.deepEqual(deltaNames(rejected), ["a"]);
    s.write(
      deltaRequest({
        typeUrl: CLUSTER_TYPE,
        responseNonce: rejected.nonce,
        error: "unsupported lb_policy LEAST_REQUEST",
      }),
    );
    await s.expectNothing();
    const nack = typeStatus(h, CLUSTER_TYPE)?.lastNack;
    assert.equal(nack?.message, "unsupported lb_policy LEAST_REQUEST");
    assert.equal(nack?.version, rejected.systemVersionInfo);
    assert.equal(typeStatus(h, CLUSTER_TYPE)?.ackedVersion, first.systemVersionInfo);

    // A change elsewhere (cluster b) is pushed together with a, which the client still lacks.
    h.server.cache.setSnapshot(
      GROUP,
      buildSnapshot({
        ...bad,
        clusters: bad.clusters.map((c) => ({
          ...c,
          lbPolicy: c.name === "a" ? Cluster_LbPolicy.RANDOM : Cluster_LbPolicy.MAGLEV,
        })),
      }),
    );
    const next = await s.next();
    assert.deepEqual(deltaNames(next), ["a", "b"]);
    s.close();
  });

  it("ignores a stale nonce's ACK/NACK but honours its subscription change", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(input()));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, node: NODE, resourceNamesSubscribe: ["a"] }));
    const first = await s.next();
    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, responseNonce: first.nonce }));
    await s.expectNothing(50);

    h.server.cache.setSnapshot(GROUP, buildSnapshot(input({ aPort: 4321 })));
    const second = await s.next();
    assert.deepEqual(deltaNames(second), ["a"]);

    s.write(
      deltaRequest({
        typeUrl: ENDPOINT_TYPE,
        responseNonce: first.nonce,
        error: "stale",
        resourceNamesSubscribe: ["b"],
      }),
    );
    // Still waiting for the answer to `second`: nothing yet, and no NACK recorded.
    await s.expectNothing();
    assert.equal(typeStatus(h, ENDPOINT_TYPE)?.lastNack, undefined);

    s.write(deltaRequest({ typeUrl: ENDPOINT_TYPE, responseNonce: second.nonce }));
    const third = await s.next();
    assert.deepEqual(deltaNames(third), ["b"]);
    assert.equal(h.server.status().counters.nacks, 0);
    s.close();
  });
});

describe("VHDS on delta ADS", () => {
  let h: XdsHarness;
  beforeEach(async () => {
    h = await startXds();
  });
  afterEach(async () => {
    await h.close();
  });

  const ENVOY = { ...NODE, userAgentName: "envoy" };

  /** Route configuration r with one virtual host per entry of `hosts` (hostname → cluster). */
  function vhdsInput(hosts: Readonly<Record<string, string>>): SnapshotInput {
    const base = input();
    return {
      ...base,
      routes: [
        create(RouteConfigurationSchema, {
          name: "r",
          virtualHosts: Object.entries(hosts).flatMap(([host, cluster]) =>
            routeTo("r", cluster, [host]).virtualHosts.map((vh) => Object.assign(vh, { name: `r/${host}` })),
          ),
        }),
      ],
    };
  }

  function decodeRoute(response: DeltaDiscoveryResponse) {
    const value = response.resources[0]?.resource?.value;
    assert.ok(value);
    return fromBinary(RouteConfigurationSchema, value);
  }

  it("serves Envoy the route configuration without virtual hosts and the virtual hosts by namespace", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "a", "b.example": "b" })));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, node: ENVOY, resourceNamesSubscribe: ["r"] }));
    const rds = await s.next();
    const rc = decodeRoute(rds);
    assert.equal(rc.virtualHosts.length, 0);
    assert.equal(rc.vhds?.configSource?.configSourceSpecifier.case, "ads");
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, responseNonce: rds.nonce }));

    // Envoy's VHDS request names nothing: it matches namespaces itself (use_namespace_matching).
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE }));
    const first = await s.next();
    assert.deepEqual(deltaNames(first), ["r/a.example", "r/b.example"]);
    for (const r of first.resources) {
      const vh = fromBinary(VirtualHostSchema, r.resource?.value ?? new Uint8Array());
      assert.equal(vh.name, r.name, "Envoy removes a virtual host by matching removed_resources against its name");
    }
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: first.nonce }));
    await s.expectNothing(50);
    assert.equal(typeStatus(h, VIRTUAL_HOST_TYPE)?.ackedVersion, first.systemVersionInfo);

    // One virtual host changes: only it is sent; the route configuration is not.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "b", "b.example": "b" })));
    const second = await s.next();
    assert.equal(second.typeUrl, VIRTUAL_HOST_TYPE);
    assert.deepEqual(deltaNames(second), ["r/a.example"]);
    assert.deepEqual(second.removedResources, []);
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: second.nonce }));
    await s.expectNothing(50);

    // A hostname goes away and another appears.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "b", "c.example": "a" })));
    const third = await s.next();
    assert.deepEqual(deltaNames(third), ["r/c.example"]);
    assert.deepEqual(third.removedResources, ["r/b.example"]);
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: third.nonce }));
    await s.expectNothing(50);

    // The route configuration dropped and asked for again (a new VHDS watch in Envoy): its virtual hosts follow it.
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, resourceNamesUnsubscribe: ["r"] }));
    await s.expectNothing(50);
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, resourceNamesSubscribe: ["r"] }));
    const rdsAgain = await s.next();
    assert.equal(rdsAgain.typeUrl, ROUTE_TYPE);
    const again = await s.next();
    assert.equal(again.typeUrl, VIRTUAL_HOST_TYPE);
    assert.deepEqual(deltaNames(again), ["r/a.example", "r/c.example"]);
    s.close();
  });

  it("tells Envoy a route configuration without virtual hosts is absent, so its VHDS stops waiting", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({})));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, node: ENVOY, resourceNamesSubscribe: ["r"] }));
    const rds = await s.next();
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, responseNonce: rds.nonce }));
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE }));
    const empty = await s.next();
    assert.deepEqual(deltaNames(empty), []);
    assert.deepEqual(empty.removedResources, ["r"]);
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: empty.nonce }));
    await s.expectNothing(50);

    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "a" })));
    const added = await s.next();
    assert.deepEqual(deltaNames(added), ["r/a.example"]);
    assert.deepEqual(added.removedResources, []);
    s.close();
  });

  it("records a NACK of virtual hosts and resends them with the next change", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "a", "b.example": "b" })));
    const s = h.client.delta();
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, node: ENVOY, resourceNamesSubscribe: ["r"] }));
    const rds = await s.next();
    s.write(deltaRequest({ typeUrl: ROUTE_TYPE, responseNonce: rds.nonce }));
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE }));
    const first = await s.next();
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: first.nonce }));
    await s.expectNothing(50);

    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "nowhere", "b.example": "b" })));
    const rejected = await s.next();
    assert.deepEqual(deltaNames(rejected), ["r/a.example"]);
    s.write(deltaRequest({ typeUrl: VIRTUAL_HOST_TYPE, responseNonce: rejected.nonce, error: "unknown cluster" }));
    await s.expectNothing();
    assert.equal(typeStatus(h, VIRTUAL_HOST_TYPE)?.lastNack?.message, "unknown cluster");
    assert.equal(typeStatus(h, VIRTUAL_HOST_TYPE)?.ackedVersion, first.systemVersionInfo);

    // The client kept its previous a.example: a new version of it goes out with the change to b.example.
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "b", "b.example": "a" })));
    const next = await s.next();
    assert.deepEqual(deltaNames(next), ["r/a.example", "r/b.example"]);
    s.close();
  });

  it("serves whole route configurations to other delta clients and to Envoy over SotW", async () => {
    h.server.cache.setSnapshot(GROUP, buildSnapshot(vhdsInput({ "a.example": "a" })));
    const grpc = h.client.delta();
    grpc.write(
      deltaRequest({ typeUrl: ROUTE_TYPE, node: { id: "grpc-1", cluster: GROUP }, resourceNamesSubscribe: ["r"] }),
    );
    const rc = decodeRoute(await grpc.next());
    assert.equal(rc.vhds, undefined);
    assert.deepEqual(
      rc.virtualHosts.map((vh) => vh.name),
      ["r/a.example"],
    );
    grpc.close();

    const sotw = h.client.sotw();
    sotw.write(
      sotwRequest({
        typeUrl: ROUTE_TYPE,
        node: { id: "envoy-2", cluster: GROUP, userAgentName: "envoy" },
        resourceNames: ["r"],
      }),
    );
    const response = await sotw.next();
    const whole = fromBinary(RouteConfigurationSchema, response.resources[0]?.value ?? new Uint8Array());
    assert.equal(whole.vhds, undefined);
    assert.equal(whole.virtualHosts.length, 1);
    sotw.close();
  });
});
