// ext_authz metrics and logs end to end (issue 23): a real Envoy calls Sluice's ext_authz (the gRPC check for API
// keys with a CEL rule, the HTTP check for a rule Envoy cannot evaluate), and /metrics, read with a Prometheus text
// parser, counts each decision under its policy and outcome; each check is a span under Envoy's call at a local OTLP
// receiver. Sluice logs in text at `info,authz=debug`: the authz
// module's per-decision lines carry a request id, the xds module stays at info, and no line holds a key or password.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver, tracingYaml } from "../helpers/otlp.js";
import { type Family, sampleSum, scrape } from "../helpers/prom-text.js";

const GOLD = "k-obs-gold-secret-5a7c1e";
const SILVER = "k-obs-silver-secret-9d2f4b";
const WRONG = "k-obs-wrong-secret-31aa70";

function resources(upstream: number, collector: number): string {
  const route = (name: string) => `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /${name} } }], backendRefs: [{ name: echo, port: 80 }] }]
`;
  const policy = (name: string, traffic: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: ${name} }]
  traffic:
${traffic}
`;
  return `${localService("echo", upstream)}${tracingYaml(collector)}---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData:
  gold: ${JSON.stringify(JSON.stringify({ key: GOLD, metadata: { group: "gold" } }))}
  silver: ${JSON.stringify(JSON.stringify({ key: SILVER, metadata: { group: "silver" } }))}
${route("keyed")}${policy(
  "keyed",
  `    apiKeyAuthentication: { secretRef: { name: keys } }
    authorization: { action: Require, policy: { matchExpressions: ["apiKey.group == 'gold'"] } }`,
)}${route("query")}${policy(
  "query",
  `    authorization: { action: Require, policy: { matchExpressions: ["request.query['internal'] == 'true'"] } }`,
)}`;
}

const delta = (a: Map<string, Family>, b: Map<string, Family>, match: Record<string, string>) =>
  sampleSum(b, "sluice_authz_decisions_total", match) - sampleSum(a, "sluice_authz_decisions_total", match);

describe("ext_authz decisions on /metrics through Envoy", { timeout: 90_000 }, () => {
  let upstream: Upstream;
  let otlp: OtlpReceiver;
  let gw: TestGateway;

  before(async () => {
    upstream = await startEchoUpstream("echo");
    otlp = await startOtlpReceiver();
    gw = await startTestGateway(
      () => resources(upstream.port, otlp.port),
      "/query?internal=true",
      (s) => s === 200,
      ["--log-level", "info,authz=debug", "--log-format", "text", "--otlp-endpoint", otlp.tracesUrl],
    );
  });
  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await otlp?.close();
  });

  test("allow, deny and unauthenticated are counted per policy, on the gRPC and the HTTP check", async () => {
    const before = await scrape(gw.sluice.adminPort);
    const bearer = (k: string) => ({ headers: { authorization: `Bearer ${k}` } });
    assert.equal((await request(gw.port, "/keyed", bearer(GOLD))).status, 200);
    assert.equal((await request(gw.port, "/keyed", bearer(GOLD))).status, 200);
    assert.equal((await request(gw.port, "/keyed", bearer(SILVER))).status, 403);
    assert.equal((await request(gw.port, "/keyed", bearer(WRONG))).status, 401);
    assert.equal((await request(gw.port, "/query?internal=true")).status, 200);
    assert.equal((await request(gw.port, "/query?internal=false")).status, 403);
    assert.equal((await request(gw.port, "/query?internal=no")).status, 403);
    const after = await scrape(gw.sluice.adminPort);
    assert.equal(after.get("sluice_authz_decisions_total")?.type, "counter");
    // The policies are the two in the table, each under its own id.
    const policies = new Set(after.get("sluice_authz_decisions_total")?.samples.map((s) => s.labels["policy"]));
    assert.equal(policies.size, 2, JSON.stringify([...policies]));
    assert.ok(!policies.has("unknown"));
    const keyed = [...policies].find(
      (p) =>
        p !== undefined &&
        sampleSum(after, "sluice_authz_decisions_total", { policy: p, outcome: "unauthenticated" }) > 0,
    );
    assert.ok(keyed !== undefined, "the API key policy has an unauthenticated decision");
    const query = [...policies].find((p) => p !== keyed) as string;
    assert.equal(delta(before, after, { policy: keyed, outcome: "allow" }), 2);
    assert.equal(delta(before, after, { policy: keyed, outcome: "deny" }), 1);
    assert.equal(delta(before, after, { policy: keyed, outcome: "unauthenticated" }), 1);
    assert.equal(delta(before, after, { policy: query, outcome: "allow" }), 1);
    assert.equal(delta(before, after, { policy: query, outcome: "deny" }), 2);
    assert.equal(delta(before, after, { outcome: "error" }), 0);
    // The Envoy's own xDS series: pushes and ACKs under its node id and Gateway, no NACK.
    const envoy = after.get("sluice_xds_envoy_pushes_total")?.samples ?? [];
    assert.equal(envoy.length, 1, JSON.stringify(envoy));
    const node = { node: envoy[0]?.labels["node"] ?? "", gateway: "default/gw" };
    assert.ok(sampleSum(after, "sluice_xds_envoy_pushes_total", node) >= 4, "LDS, RDS, CDS, EDS at least");
    assert.equal(
      sampleSum(after, "sluice_xds_envoy_acks_total", node),
      sampleSum(after, "sluice_xds_envoy_pushes_total", node),
    );
    assert.equal(sampleSum(after, "sluice_xds_envoy_nacks_total"), 0);
    // Timed too: one observation per decision.
    const count = (m: Map<string, Family>) => sampleSum(m, "sluice_authz_check_duration_seconds_count");
    assert.equal(count(after) - count(before), 7);
  });

  test("a check is a span under Envoy's ext_authz call, with its policy and outcome", async () => {
    assert.equal((await request(gw.port, "/keyed", { headers: { authorization: `Bearer ${SILVER}` } })).status, 403);
    const found = await waitFor(
      "Sluice's ext_authz check span whose parent is one of Envoy's spans",
      async () => {
        for (const s of otlp.spans) {
          if (s.service !== "sluice" || s.attributes["sluice.authz.outcome"] !== "deny") continue;
          const parent = otlp.spans.find((e) => e.service !== "sluice" && e.spanId === s.parentSpanId);
          if (parent !== undefined) return { s, parent };
        }
        return undefined;
      },
      30_000,
    );
    assert.equal(found.s.name, "ext_authz check");
    assert.equal(found.s.traceId, found.parent.traceId);
    assert.match(String(found.s.attributes["sluice.authz.policy"]), /^p-/);
  });

  test("logs: per-module levels, a request id on each decision line, no key anywhere", async () => {
    const lines = gw.sluice.output;
    const decisions = lines.filter((l) => l.startsWith("ext_authz: decided"));
    assert.ok(decisions.length >= 7, `${decisions.length} decision lines`);
    // Traced requests carry Envoy's trace id, the others an id of Sluice's.
    for (const l of decisions) assert.match(l, / (request_id="[0-9a-z]+-[0-9a-z]+"|trace_id="[0-9a-f]{32}")/);
    assert.ok(decisions.some((l) => / trace_id="[0-9a-f]{32}"/.test(l)));
    // xds stays at info: its debug lines (every push and ACK) are not written.
    assert.ok(!lines.some((l) => l.startsWith("xds: push") || l.startsWith("xds: ACK")));
    for (const l of lines) for (const secret of [GOLD, SILVER, WRONG]) assert.ok(!l.includes(secret), l);
  });
});
