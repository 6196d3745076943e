// What a route-level health scoring (xds/llm-health.ts: a variant of the AI cluster with an EDS resource and a scoring
// of its own) costs per request against the same scoring at the GwBackend's level: the same two fake providers behind
// GwBackend `backend` (its own `policies.health`: the cluster itself is scored) and GwBackend `route` (no health of its
// own; a GwPolicy on HTTPRoute rule `other` asks the same scoring, while HTTPRoute `route-plain`, never measured, reaches
// the GwBackend without it, so the measured route goes to a scored variant). Both run one health ext_proc stream per
// attempt; only the scoring name it reports under differs. CPU from /proc (10 ms ticks).
//
//   node dist/bench/llm-health-route.js [requests]

import { gwBackendRoute } from "../test/helpers/gateway.js";
import { startLlmPair } from "./llm-pair.js";

const N = Number(process.argv[2] ?? 1500);
const HEALTH = `health: { unhealthyCondition: "response.code == 429 || response.code >= 500", eviction: { restoreHealth: 100 } }`;
const pair = await startLlmPair({
  base: "backend",
  other: "route",
  primaryHost: "localhost",
  baseLines: `  policies:
    ${HEALTH}`,
  resources: `apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: route-health, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: other }]
  backend:
    ${HEALTH}
${gwBackendRoute("route-plain", "route")}`,
});
try {
  const dump = (await fetch(`http://127.0.0.1:${pair.env.envoy.adminPort}/clusters`).then((r) => r.text())).split("\n");
  const variants = new Set(dump.map((l) => /^(backend\/default\/route~[0-9a-f]+)::/.exec(l)?.[1]).filter((x) => x));
  console.log(
    `scored variants of backend/default/route in Envoy: ${[...variants].join(", ") || "none (not measured)"}`,
  );
  await pair.measure(N);
} finally {
  await pair.stop();
}
