// route.ts buildConnectRoute (frontend.connect mode Route): which rules take CONNECT, and the tunnel route they get.

import assert from "node:assert/strict";
import { test } from "node:test";
import type { ClusterIR, RouteIR } from "../../src/translate/ir.js";
import type { BuildContext } from "../../src/translate/xds/filters/types.js";
import { buildConnectRoute } from "../../src/translate/xds/route.js";

const clusters = new Map<string, ClusterIR>([
  ["svc", { kind: "eds", name: "svc", endpoints: [], http2: false }],
  ["other", { kind: "eds", name: "other", endpoints: [], http2: false }],
  [
    "ai",
    {
      kind: "llm",
      name: "ai",
      http2: false,
      backend: "ns/ai",
      groups: [],
      eviction: { consecutiveFailures: 1, durationMs: 1 },
    },
  ],
]);
const ctx = { note: () => undefined, cluster: (name: string) => clusters.get(name) } as unknown as BuildContext;

function route(over: Partial<RouteIR> = {}, match: Partial<RouteIR["match"]> = {}): RouteIR {
  return {
    name: "httproute/ns/r/rule/0/match/0",
    match: { path: { type: "PathPrefix", value: "/" }, headers: [], queryParams: [], ...match },
    action: { kind: "forward", backends: [{ cluster: "svc", weight: 1 }], mirrors: [] },
    ...over,
  };
}

test("a rule for every path takes CONNECT: connect_matcher with its header matches, a CONNECT upgrade, no timeout", () => {
  const r = buildConnectRoute(
    route({}, { headers: [{ name: "x-tunnel", type: "Exact", value: "yes" }], method: "CONNECT" }),
    new Map(),
    ctx,
  );
  assert.ok(r !== undefined);
  assert.equal(r.name, "httproute/ns/r/rule/0/match/0/connect");
  assert.equal(r.match?.pathSpecifier?.case, "connectMatcher");
  assert.deepEqual(
    r.match?.headers?.map((h) => h.name),
    ["x-tunnel", ":method"],
  );
  assert.equal(r.action?.case, "route");
  const action = r.action?.case === "route" ? r.action.value : undefined;
  assert.deepEqual(action?.clusterSpecifier, { case: "cluster", value: "svc" });
  assert.deepEqual(action?.upgradeConfigs, [{ upgradeType: "CONNECT", connectConfig: {} }]);
  assert.equal(Number(action?.timeout?.seconds ?? -1), 0);
  // Several backends keep their weights.
  const split = buildConnectRoute(
    route({
      action: {
        kind: "forward",
        backends: [
          { cluster: "svc", weight: 3 },
          { cluster: "other", weight: 1 },
        ],
        mirrors: [],
      },
    }),
    new Map(),
    ctx,
  );
  const splitAction = split?.action?.case === "route" ? split.action.value : undefined;
  assert.equal(splitAction?.clusterSpecifier?.case, "weightedClusters");
});

test("rules that cannot take CONNECT get no tunnel", () => {
  const none = (r: RouteIR) => assert.equal(buildConnectRoute(r, new Map(), ctx), undefined, JSON.stringify(r));
  none(route({}, { path: { type: "PathPrefix", value: "/api" } }));
  none(route({}, { path: { type: "Exact", value: "/" } }));
  none(route({}, { queryParams: [{ name: "q", type: "Exact", value: "1" }] }));
  none(route({}, { method: "GET" }));
  none(route({ action: { kind: "direct", status: 200 } }));
  none(route({ action: { kind: "forward", backends: [{ cluster: "ai", weight: 1 }], mirrors: [] } }));
  none(
    route({
      backendProblems: [
        {
          from: { kind: "GwPolicy", name: "ns/p", level: "route", target: "t" } as never,
          field: "backend.tls",
          message: "x",
          fatal: true,
        },
      ],
    }),
  );
});
