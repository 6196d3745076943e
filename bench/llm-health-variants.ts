// Translation cost of route-level health scoring on AI GwBackends (xds/llm-health.ts): N HTTPRoutes to one AI GwBackend
// of two priority groups, each route with a GwPolicy of its own, in five cases measured in the same run:
//   none         no route-level policy (one cluster: the baseline)
//   tcp          a distinct connect timeout per route (N unscored variants: the variant mechanism as it was)
//   health       a distinct health per route (N scored variants, each with its own EDS resource and scoring)
//   health+tcp   both per route (N variants, each carrying both)
//   same-health  the same route-level health on every route (they agree: the cluster itself is scored, no variant)
// Prints, per case and size, the median CPU time of a full translation (cold, as `sluice translate`; and again with the
// memo `sluice serve` keeps, after one route's policy changed), and the counts of clusters and EDS resources. CPU time
// (process.cpuUsage), not wall time: the machine this runs on is shared, and a busy neighbour stretches the wall clock.
//
//   node dist/bench/llm-health-variants.js [--sizes 100,500] [--runs 5]

import { parseArgs } from "node:util";
import { FileSource } from "../src/sources/file-source.js";
import { makeInput } from "../src/translate/input.js";
import { TranslationMemo } from "../src/translate/memo.js";
import { translate } from "../src/translate/translate.js";
import { gatewayYaml, gwBackendRoute, routeBackendPolicy } from "../test/helpers/gateway.js";
import { tempConfigDir } from "../test/helpers/processes.js";

const { values } = parseArgs({
  options: { sizes: { type: "string", default: "100,500" }, runs: { type: "string", default: "5" } },
});
const sizes = values.sizes.split(",").map(Number);
const runs = Number(values.runs);

const BACKEND = `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: primary, providerA: {}, host: 10.0.0.1, port: 8443 }
          - { name: second, providerA: {}, host: 10.0.0.2, port: 8443 }
      - providers: [{ name: backup, providerA: {}, host: 10.0.0.3, port: 8443 }]
`;

type Case = "none" | "tcp" | "health" | "health+tcp" | "same-health";
const CASES: readonly Case[] = ["none", "tcp", "health", "health+tcp", "same-health"];

/** The route-level `backend` section of route `i` in case `c` (undefined: none); `v` varies it (the change). */
function policy(c: Case, i: number, v = 0): string | undefined {
  const health = (s: number) => `    health:
      unhealthyCondition: "response.code == 429"
      eviction: { duration: ${s}s }
`;
  const tcp = `    tcp: { connectTimeout: ${i + 1 + v}s }
`;
  switch (c) {
    case "none":
      return undefined;
    case "tcp":
      return tcp;
    case "health":
      return health(i + 1 + v);
    case "health+tcp":
      return health(i + 1 + v) + tcp;
    case "same-health":
      return health(10 + v);
  }
}

function routeYaml(c: Case, i: number, v = 0): string {
  const p = policy(c, i, v);
  return gwBackendRoute(`r${i}`, "llm") + (p === undefined ? "" : routeBackendPolicy(`p${i}`, `r${i}`, p));
}

/** CPU milliseconds `f` takes (user + system). */
function cpuMs(f: () => unknown): number {
  const t = process.cpuUsage();
  f();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function measure(c: Case, n: number) {
  const cfg = tempConfigDir();
  try {
    cfg.write("gateway.yaml", gatewayYaml(8080) + BACKEND);
    for (let i = 0; i < n; i++) cfg.write(`route-${i}.yaml`, routeYaml(c, i));
    const source = new FileSource([cfg.dir]);
    const load = await source.load();
    const input = () => makeInput(load.resources, load.sources, load.invalid);
    const cold: number[] = [];
    let result = translate(input(), { impliedGatewayClass: true });
    for (let k = 0; k < runs; k++) {
      cold.push(
        cpuMs(() => {
          result = translate(input(), { impliedGatewayClass: true });
        }),
      );
    }
    // With the memo, after one route's policy changed (reloaded as `sluice serve` does).
    const memo = new TranslationMemo();
    translate(input(), { impliedGatewayClass: true, memo });
    const warm: number[] = [];
    for (let k = 0; k < runs; k++) {
      const i = (k * 37) % n;
      cfg.write(`route-${i}.yaml`, routeYaml(c, i, k + 1));
      const l2 = await source.load();
      warm.push(
        cpuMs(() => translate(makeInput(l2.resources, l2.sources, l2.invalid), { impliedGatewayClass: true, memo })),
      );
    }
    source.close();
    const xds = result.gateways[0]?.xds;
    const clusters = xds?.clusters.filter((x) => x.name.startsWith("backend/default/llm")) ?? [];
    return {
      case: c,
      routes: n,
      "translate, CPU ms": median(cold).toFixed(1),
      "after 1 change with memo, CPU ms": median(warm).toFixed(1),
      "AI clusters": clusters.length,
      "EDS resources": xds?.endpoints.filter((e) => e.clusterName.startsWith("backend/default/llm")).length ?? 0,
    };
  } finally {
    cfg.cleanup();
  }
}

const rows = [];
for (const n of sizes) for (const c of CASES) rows.push(await measure(c, n));
console.table(rows);
