// src/health/provider-dns.ts and the per-provider scoring of AI clusters (src/health/endpoint-health.ts): host names
// in a scored AI cluster's EDS are replaced by their addresses (IPv4 preferred, IP literals kept), re-resolved on an
// interval with a change republished, a failed lookup keeping the last addresses, names gone forgotten; a provider's
// endpoints are scored and marked together, with its own scoring when it has one.

import assert from "node:assert/strict";
import { afterEach, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { HealthStatus } from "../../src/gen/envoy/config/core/v3/health_check_pb.js";
import {
  type ClusterLoadAssignment,
  ClusterLoadAssignmentSchema,
} from "../../src/gen/envoy/config/endpoint/v3/endpoint_pb.js";
import { EndpointHealth, lbEndpointKey, providerKey } from "../../src/health/endpoint-health.js";
import { ProviderDns, type Resolve } from "../../src/health/provider-dns.js";

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

/** An AI cluster's assignment: one provider per `[name, host]`, in priority order. */
function assignment(providers: readonly (readonly [string, string])[]): ClusterLoadAssignment {
  return create(ClusterLoadAssignmentSchema, {
    clusterName: "backend/default/llm",
    endpoints: providers.map(([name, host], priority) => ({
      priority,
      lbEndpoints: [
        {
          hostIdentifier: {
            case: "endpoint" as const,
            value: {
              hostname: name,
              address: {
                address: {
                  case: "socketAddress" as const,
                  value: { address: host, portSpecifier: { case: "portValue" as const, value: 8443 } },
                },
              },
            },
          },
          metadata: { filterMetadata: { "sluice.dev/llm": { provider: name } } },
        },
      ],
    })),
  });
}

/** `[provider, address, health status]` of each endpoint. */
function rows(a: ClusterLoadAssignment): [string | undefined, string, HealthStatus][] {
  return a.endpoints.flatMap((l) =>
    l.lbEndpoints.map((lb) => {
      const sa = lb.hostIdentifier.case === "endpoint" ? lb.hostIdentifier.value.address?.address : undefined;
      const row: [string | undefined, string, HealthStatus] = [
        lbEndpointKey(lb),
        sa?.case === "socketAddress" ? sa.value.address : "",
        lb.healthStatus,
      ];
      return row;
    }),
  );
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("host names become their IPv4 addresses, IP literals stay, and a change is republished", async () => {
  const table = new Map<string, { address: string; family: number }[]>([
    [
      "api.example",
      [
        { address: "2001:db8::1", family: 6 },
        { address: "192.0.2.2", family: 4 },
        { address: "192.0.2.1", family: 4 },
      ],
    ],
  ]);
  const lookups: string[] = [];
  const resolve: Resolve = async (host) => {
    lookups.push(host);
    const r = table.get(host);
    if (r === undefined) throw new Error(`ENOTFOUND ${host}`);
    return r;
  };
  let changes = 0;
  const dns = new ProviderDns({ resolve, refreshMs: 20, onChange: () => changes++ });
  open.push(dns);
  const a = assignment([
    ["primary", "api.example"],
    ["backup", "10.0.0.7"],
  ]);
  await dns.track([a]);
  assert.deepEqual(lookups, ["api.example"], "an IP literal is not looked up");
  assert.deepEqual(rows(dns.overlay([a])[0] as ClusterLoadAssignment), [
    ["provider:primary", "192.0.2.1", HealthStatus.UNKNOWN],
    ["provider:primary", "192.0.2.2", HealthStatus.UNKNOWN],
    ["provider:backup", "10.0.0.7", HealthStatus.UNKNOWN],
  ]);
  assert.equal(changes, 0, "the first lookup is awaited, not republished");
  // The name now resolves elsewhere (IPv6 only): picked up on the next refresh, and republished.
  table.set("api.example", [{ address: "2001:db8::9", family: 6 }]);
  await wait(80);
  assert.ok(changes >= 1);
  assert.deepEqual(
    rows(dns.overlay([a])[0] as ClusterLoadAssignment).map((r) => r[1]),
    ["2001:db8::9", "10.0.0.7"],
  );
  // A failing lookup keeps the last addresses, and is no change.
  const before = changes;
  table.delete("api.example");
  await wait(80);
  assert.equal(changes, before);
  assert.equal(dns.addresses("api.example")?.[0], "2001:db8::9");
  // The translation no longer names it: forgotten, no more lookups.
  await dns.track([assignment([["backup", "10.0.0.7"]])]);
  assert.equal(dns.addresses("api.example"), undefined);
  const n = lookups.length;
  await wait(60);
  assert.equal(lookups.length, n);
});

test("a name never resolved has no endpoint (Envoy never gets a host name); assignments without names are the same objects", async () => {
  const dns = new ProviderDns({ resolve: async () => Promise.reject(new Error("SERVFAIL")), refreshMs: 1000 });
  open.push(dns);
  const named = assignment([
    ["primary", "down.example"],
    ["backup", "10.0.0.7"],
  ]);
  const plain = assignment([["only", "10.0.0.8"]]);
  await dns.track([named, plain]);
  const [n, p] = dns.overlay([named, plain]);
  assert.deepEqual(rows(n as ClusterLoadAssignment), [["provider:backup", "10.0.0.7", HealthStatus.UNKNOWN]]);
  assert.equal(p, plain);
});

test("the system resolver: `localhost` resolves on loopback", async () => {
  const dns = new ProviderDns();
  open.push(dns);
  const a = assignment([["local", "localhost"]]);
  await dns.track([a]);
  const addresses = rows(dns.overlay([a])[0] as ClusterLoadAssignment).map((r) => r[1]);
  assert.ok(addresses.length > 0 && addresses.every((x) => x === "127.0.0.1" || x === "::1"), String(addresses));
});

test("an AI cluster is scored per provider: its own scoring wins, all its addresses are marked together", () => {
  const h = new EndpointHealth();
  open.push(h);
  const cluster = "backend/default/llm";
  h.configure(
    new Map([
      [
        cluster,
        {
          cfg: {
            responseBody: false,
            durationMs: 60_000,
            providers: { primary: { responseBody: false, durationMs: 60_000, consecutiveFailures: 2 } },
          },
          endpoints: [providerKey("primary"), providerKey("backup")],
        },
      ],
    ]),
  );
  // The backup has the cluster's scoring: a single unhealthy response evicts it.
  h.record(cluster, providerKey("backup"), true);
  assert.deepEqual(h.evicted(cluster), [providerKey("backup")]);
  // The primary has its own: the first failure does not evict, the second does.
  h.record(cluster, providerKey("primary"), true);
  assert.equal(h.evicted(cluster).includes(providerKey("primary")), false);
  h.record(cluster, providerKey("primary"), true);
  assert.ok(h.evicted(cluster).includes(providerKey("primary")));
  const a = create(ClusterLoadAssignmentSchema, assignment([["primary", "192.0.2.1"]]));
  a.endpoints[0]?.lbEndpoints.push(...(assignment([["primary", "192.0.2.2"]]).endpoints[0]?.lbEndpoints ?? []));
  assert.deepEqual(
    rows(h.overlay([a])[0] as ClusterLoadAssignment).map((r) => r[2]),
    [HealthStatus.UNHEALTHY, HealthStatus.UNHEALTHY],
  );
});

test("a first lookup slower than the publication waits is republished when it lands", async () => {
  let answer: ((v: { address: string; family: number }[]) => void) | undefined;
  let changes = 0;
  const dns = new ProviderDns({
    resolve: () => new Promise((r) => (answer = r)),
    firstWaitMs: 20,
    refreshMs: 60_000,
    onChange: () => changes++,
  });
  open.push(dns);
  const a = assignment([["slow", "slow.example"]]);
  await dns.track([a]);
  assert.deepEqual(rows(dns.overlay([a])[0] as ClusterLoadAssignment), [], "published without it meanwhile");
  assert.equal(changes, 0);
  answer?.([{ address: "192.0.2.7", family: 4 }]);
  await wait(10);
  assert.equal(changes, 1);
  assert.deepEqual(
    rows(dns.overlay([a])[0] as ClusterLoadAssignment).map((r) => r[1]),
    ["192.0.2.7"],
  );
});
