// Snapshots, content versions, the consistency check, node groups and the cache, the last also through a live stream.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { Cluster_DiscoveryType, ClusterSchema } from "../../src/gen/envoy/config/cluster/v3/cluster_pb.js";
import { ListenerSchema } from "../../src/gen/envoy/config/listener/v3/listener_pb.js";
import { HttpConnectionManagerSchema } from "../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb.js";
import { checkConsistency } from "../../src/xds-server/consistency.js";
import { nodeGroup } from "../../src/xds-server/node-group.js";
import { xdsResource } from "../../src/xds-server/resource.js";
import { buildSnapshot, type SnapshotInput, snapshotFromResources } from "../../src/xds-server/snapshot.js";
import { SnapshotCache } from "../../src/xds-server/snapshot-cache.js";
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from "../../src/xds-server/type-urls.js";
import { sotwRequest } from "../support/ads-probe.js";
import { adsSource, apiListener, edsCluster, endpoints, routeTo } from "../support/xds-fixtures.js";
import { startXds } from "../support/xds-harness.js";

function consistent(): SnapshotInput {
  return {
    clusters: [edsCluster("a"), edsCluster("b")],
    endpoints: [endpoints("a", [1001]), endpoints("b", [2002])],
    listeners: [apiListener("l", "r")],
    routes: [routeTo("r", "a")],
  };
}

describe("snapshot versions", () => {
  it("derive from content: equal content, equal versions; one change, one changed resource", () => {
    const one = buildSnapshot(consistent());
    const two = buildSnapshot(consistent());
    assert.equal(one.version, two.version);
    assert.deepEqual([...one.typeVersions], [...two.typeVersions]);

    const changed = buildSnapshot({ ...consistent(), endpoints: [endpoints("a", [1001]), endpoints("b", [2003])] });
    assert.notEqual(changed.version, one.version);
    assert.equal(changed.typeVersions.get(CLUSTER_TYPE), one.typeVersions.get(CLUSTER_TYPE));
    assert.notEqual(changed.typeVersions.get(ENDPOINT_TYPE), one.typeVersions.get(ENDPOINT_TYPE));
    const before = one.resources.get(ENDPOINT_TYPE);
    const after = changed.resources.get(ENDPOINT_TYPE);
    assert.equal(after?.get("a")?.version, before?.get("a")?.version);
    assert.notEqual(after?.get("b")?.version, before?.get("b")?.version);
  });

  it("do not depend on the order resources are given in", () => {
    const input = consistent();
    const reversed = buildSnapshot({ ...input, clusters: [...(input.clusters ?? [])].reverse() });
    assert.equal(reversed.version, buildSnapshot(input).version);
  });
});

describe("checkConsistency", () => {
  it("accepts a complete snapshot", () => {
    assert.deepEqual(checkConsistency(buildSnapshot(consistent())), []);
  });

  it("reports an EDS cluster without its ClusterLoadAssignment (by service_name when set)", () => {
    const named = create(ClusterSchema, {
      name: "c",
      clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.EDS },
      edsClusterConfig: { edsConfig: adsSource(), serviceName: "c-endpoints" },
    });
    const errors = checkConsistency(
      buildSnapshot({ ...consistent(), clusters: [edsCluster("a"), edsCluster("b"), edsCluster("x"), named] }),
    );
    assert.deepEqual(
      errors.map((e) => [e.code, e.name]),
      [
        ["MissingClusterLoadAssignment", "x"],
        ["MissingClusterLoadAssignment", "c"],
      ],
    );
    assert.match(errors[1]?.message ?? "", /c-endpoints/);
  });

  it("does not ask for endpoints of a STATIC cluster", () => {
    const staticCluster = create(ClusterSchema, {
      name: "s",
      clusterDiscoveryType: { case: "type", value: Cluster_DiscoveryType.STATIC },
    });
    const input = consistent();
    assert.deepEqual(
      checkConsistency(buildSnapshot({ ...input, clusters: [...(input.clusters ?? []), staticCluster] })),
      [],
    );
  });

  it("reports a listener whose RDS route configuration is missing, in an API listener or a filter chain", () => {
    const hcm = create(HttpConnectionManagerSchema, {
      statPrefix: "http",
      routeSpecifier: { case: "rds", value: { routeConfigName: "missing-2", configSource: adsSource() } },
    });
    const tcpListener = create(ListenerSchema, {
      name: "tcp",
      filterChains: [
        {
          filters: [
            { name: "hcm", configType: { case: "typedConfig", value: anyPack(HttpConnectionManagerSchema, hcm) } },
          ],
        },
      ],
    });
    const errors = checkConsistency(
      buildSnapshot({
        ...consistent(),
        listeners: [apiListener("l", "r"), apiListener("api", "missing-1"), tcpListener],
      }),
    );
    assert.deepEqual(
      errors.map((e) => [e.code, e.typeUrl, e.name]),
      [
        ["MissingRouteConfiguration", LISTENER_TYPE, "api"],
        ["MissingRouteConfiguration", LISTENER_TYPE, "tcp"],
      ],
    );
  });

  it("reports duplicates and undecodable resources instead of throwing", () => {
    const garbage = new Uint8Array([0xff, 0xff, 0xff]);
    const snapshot = snapshotFromResources([
      xdsResource(ROUTE_TYPE, "r", new Uint8Array()),
      xdsResource(ROUTE_TYPE, "r", new Uint8Array()),
      xdsResource(CLUSTER_TYPE, "broken", garbage),
    ]);
    assert.deepEqual(
      checkConsistency(snapshot).map((e) => [e.code, e.name]),
      [
        ["DuplicateResource", "r"],
        ["UndecodableResource", "broken"],
      ],
    );
  });
});

describe("nodeGroup", () => {
  it("prefers the sluice.dev/gateway metadata, then the cluster, then the id", () => {
    assert.equal(nodeGroup({ id: "i", cluster: "c", metadata: { "sluice.dev/gateway": "ns/gw" } }), "ns/gw");
    assert.equal(nodeGroup({ id: "i", cluster: "c", metadata: { "sluice.dev/gateway": 3 } }), "c");
    assert.equal(nodeGroup({ id: "i", cluster: "c", metadata: {} }), "c");
    assert.equal(nodeGroup({ id: "i", cluster: "", metadata: undefined }), "i");
  });
});

describe("SnapshotCache", () => {
  it("rejects an inconsistent snapshot and keeps the previous one", () => {
    const cache = new SnapshotCache();
    const good = buildSnapshot(consistent());
    const seen: string[] = [];
    const stop = cache.watch("g", (s) => seen.push(s.version));
    assert.deepEqual(cache.setSnapshot("g", good), { ok: true, changed: true });

    const result = cache.setSnapshot("g", buildSnapshot({ ...consistent(), endpoints: [endpoints("a", [1])] }));
    assert.equal(result.ok, false);
    assert.deepEqual(result.ok ? [] : result.errors.map((e) => e.name), ["b"]);
    assert.equal(cache.getSnapshot("g"), good);

    assert.deepEqual(cache.setSnapshot("g", buildSnapshot(consistent())), { ok: true, changed: false });
    assert.deepEqual(seen, [good.version]);
    stop();
    cache.setSnapshot("g", buildSnapshot({ ...consistent(), routes: [routeTo("r", "b")] }));
    assert.equal(seen.length, 1);
    assert.deepEqual(cache.groups(), ["g"]);
  });

  it("pushes nothing to a connected node when a snapshot is rejected", async () => {
    const h = await startXds();
    try {
      h.server.cache.setSnapshot("g", buildSnapshot(consistent()));
      const s = h.client.sotw();
      s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "n", cluster: "g" } }));
      const first = await s.next();
      s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, versionInfo: first.versionInfo, responseNonce: first.nonce }));
      await s.expectNothing(50);

      const missingRoute = buildSnapshot({ ...consistent(), clusters: [edsCluster("a")], routes: [] });
      const result = h.server.cache.setSnapshot("g", missingRoute);
      assert.deepEqual(result.ok ? [] : result.errors.map((e) => e.code), ["MissingRouteConfiguration"]);
      await s.expectNothing();
      s.close();
    } finally {
      await h.close();
    }
  });
});
