// A GwPolicy's backend.tcp / backend.http on an AI GwBackend (xds/llm-connection.ts): applied to the AI cluster when
// every route reaching the GwBackend asks for the same, a variant of the cluster for routes that ask otherwise (one
// variant carrying a route's other transformation too, scored with the cluster); a GwPolicy targeting one provider
// leaves the cluster alone (that provider's hop has it: llm-provider-hop.test.ts).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { fromBinary } from "@bufbuild/protobuf";
import { loadAndTranslate } from "../../src/cli/load.js";
import { HttpProtocolOptionsSchema } from "../../src/gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb.js";
import { gatewayYaml } from "../helpers/gateway.js";

const BASE = `${gatewayYaml(8080)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: one, providerA: {}, host: 127.0.0.1, port: 9001 }]
      - providers: [{ name: two, providerD: {}, host: 127.0.0.1, port: 9002 }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: a
      matches: [{ path: { type: PathPrefix, value: /a } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
    - name: b
      matches: [{ path: { type: PathPrefix, value: /b } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
`;

const policy = (target: string, backend: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: p, namespace: default }
spec:
  targetRefs: [${target}]
  backend:
${backend}`;

async function translated(yaml: string): Promise<{ connectTimeout: string; http2: boolean; notes: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-connection-"));
  try {
    writeFileSync(join(dir, "in.yaml"), yaml);
    const { load, result } = await loadAndTranslate([join(dir, "in.yaml")]);
    assert.deepEqual(load.problems, []);
    const c = result.gateways[0]?.xds.clusters.find((x) => x.name === "backend/default/llm");
    assert.ok(c !== undefined, "the AI cluster");
    const seconds = Number(c.connectTimeout?.seconds ?? 0n);
    const any = c.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    const options = any !== undefined ? fromBinary(HttpProtocolOptionsSchema, any.value) : undefined;
    const http2 =
      options?.upstreamProtocolOptions.case === "explicitHttpConfig" &&
      options.upstreamProtocolOptions.value.protocolConfig.case === "http2ProtocolOptions";
    const status = result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "p");
    // The Warning conditions' messages, each naming its field.
    const warnings: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === "object" && v !== null) {
        const o = v as Record<string, unknown>;
        if (o.type === "Warning" && typeof o.message === "string") warnings.push(o.message);
        else Object.values(o).forEach(walk);
      }
    };
    walk(status?.status);
    const notes = warnings.flatMap((m) => m.split("; ")).filter((m) => /^backend\.(tcp|http)/.test(m));
    return { connectTimeout: `${seconds}s`, http2, notes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const GWB = "{ group: sluice.dev, kind: GwBackend, name: llm }";

test("a GwPolicy targeting the GwBackend sets its cluster's connect timeout and HTTP version", async () => {
  const none = await translated(BASE);
  assert.deepEqual([none.connectTimeout, none.http2], ["5s", false]);
  const set = await translated(BASE + policy(GWB, "    tcp: { connectTimeout: 2s }\n    http: { version: HTTP2 }\n"));
  assert.deepEqual(set, { connectTimeout: "2s", http2: true, notes: [] });
});

interface Cluster {
  readonly connectTimeout: string;
  readonly http2: boolean;
  /** The EDS resource it reads ("" for none), and its upstream HTTP filters but the LLM stage and codec. */
  readonly eds: string;
  readonly filters: string[];
}

/** The AI clusters of a translation, the cluster each route goes to, its EDS resources, and the policies' warnings. */
async function variants(yaml: string): Promise<{
  clusters: Map<string, Cluster>;
  routes: Map<string, string>;
  endpoints: string[];
  warnings: string[];
}> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-llm-connection-"));
  try {
    writeFileSync(join(dir, "in.yaml"), yaml);
    const { load, result } = await loadAndTranslate([join(dir, "in.yaml")]);
    assert.deepEqual(load.problems, []);
    const gw = result.gateways[0];
    assert.ok(gw !== undefined);
    const clusters = new Map<string, Cluster>();
    for (const c of gw.xds.clusters) {
      if (!c.name.startsWith("backend/default/llm")) continue;
      const any = c.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
      const options = any !== undefined ? fromBinary(HttpProtocolOptionsSchema, any.value) : undefined;
      clusters.set(c.name, {
        connectTimeout: `${Number(c.connectTimeout?.seconds ?? 0n) + (c.connectTimeout?.nanos ?? 0) / 1e9}s`,
        http2:
          options?.upstreamProtocolOptions.case === "explicitHttpConfig" &&
          options.upstreamProtocolOptions.value.protocolConfig.case === "http2ProtocolOptions",
        eds: c.edsClusterConfig?.serviceName ?? "",
        // Besides the LLM stage and the codec, which every cluster of a two-group GwBackend has.
        filters: (options?.httpFilters ?? [])
          .map((f) => f.name)
          .filter((n) => n !== "sluice.llm_upstream_ext_proc" && n !== "envoy.filters.http.upstream_codec"),
      });
    }
    const routes = new Map<string, string>();
    for (const rc of gw.xds.routes) {
      for (const vh of rc.virtualHosts) {
        for (const r of vh.routes) {
          if (r.action.case === "route" && r.action.value.clusterSpecifier.case === "cluster") {
            routes.set(r.name, r.action.value.clusterSpecifier.value);
          }
        }
      }
    }
    const warnings = result.statuses
      .filter((s) => s.kind === "GwPolicy")
      .flatMap((s) => JSON.stringify(s.status).match(/"type":"Warning"[^}]*"message":"[^"]*"/g) ?? []);
    return { clusters, routes, endpoints: gw.xds.endpoints.map((e) => e.clusterName), warnings };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const RULE_A = "httproute/default/r/rule/0/match/0";
const RULE_B = "httproute/default/r/rule/1/match/0";
const RULE = (n: string) => `{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: ${n} }`;
const named = (name: string, yaml: string) => yaml.replace("name: p,", `name: ${name},`);

test("a route asking other settings gets a variant of the cluster with them; the others keep the cluster's", async () => {
  const r = await variants(
    BASE +
      policy(GWB, "    http: { version: HTTP2 }\n") +
      named("pa", policy(RULE("a"), "    tcp: { connectTimeout: 2s }\n")),
  );
  assert.deepEqual(r.warnings, []);
  assert.equal(r.routes.get(RULE_B), "backend/default/llm");
  const a = r.routes.get(RULE_A) ?? "";
  assert.match(a, /^backend\/default\/llm~[0-9a-f]{10}$/);
  // The cluster: the GwBackend-level policy's HTTP/2; the variant: that, and route a's own connect timeout.
  assert.deepEqual(r.clusters.get("backend/default/llm"), { connectTimeout: "5s", http2: true, eds: "", filters: [] });
  assert.deepEqual(r.clusters.get(a), { connectTimeout: "2s", http2: true, eds: "", filters: [] });
  assert.equal(r.clusters.size, 2);

  // Another connect timeout asked by route b: its own variant (a GwPolicy targeting the GwBackend wins over a route's
  // for the same field, so HTTP/2 stays).
  const both = await variants(
    BASE +
      policy(GWB, "    http: { version: HTTP2 }\n") +
      named("pa", policy(RULE("a"), "    tcp: { connectTimeout: 2s }\n")) +
      named("pb", policy(RULE("b"), "    tcp: { connectTimeout: 3s }\n")),
  );
  assert.deepEqual(both.warnings, []);
  const b = both.routes.get(RULE_B) ?? "";
  assert.equal(both.routes.get(RULE_A), a, "route a's variant keeps its name: it is named by its content");
  assert.notEqual(b, "backend/default/llm");
  assert.deepEqual(both.clusters.get(b), { connectTimeout: "3s", http2: true, eds: "", filters: [] });
  assert.equal(both.clusters.size, 3);
});

test("routes asking the same other settings share one variant; all routes agreeing need none", async () => {
  const yaml = (rules: string) =>
    BASE.replace(
      "    - name: b\n",
      "    - name: c\n      matches: [{ path: { type: PathPrefix, value: /c } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]\n    - name: b\n",
    ) + policy(`${rules}`, "    tcp: { connectTimeout: 2s }\n");
  const r = await variants(yaml(`${RULE("a")}, ${RULE("c")}`));
  assert.equal(r.clusters.size, 2);
  assert.equal(r.routes.get(RULE_A), r.routes.get("httproute/default/r/rule/1/match/0"));
  assert.equal(r.routes.get("httproute/default/r/rule/2/match/0"), "backend/default/llm");
  const all = await variants(yaml(`${RULE("a")}, ${RULE("b")}, ${RULE("c")}`));
  assert.deepEqual([...all.clusters.keys()], ["backend/default/llm"]);
  assert.equal(all.clusters.get("backend/default/llm")?.connectTimeout, "2s");
});

test("a route with another transformation and other tcp settings gets one variant carrying both", async () => {
  const transformation = "    transformation: { request: { set: [{ name: x-team, value: \"'a'\" }] } }\n";
  const r = await variants(
    BASE +
      named("pa", policy(RULE("a"), `    tcp: { connectTimeout: 2s }\n${transformation}`)) +
      named("pb", policy(RULE("b"), transformation)),
  );
  assert.deepEqual(r.warnings, []);
  const a = r.routes.get(RULE_A) ?? "";
  const b = r.routes.get(RULE_B) ?? "";
  assert.notEqual(a, b);
  assert.equal(r.clusters.size, 3);
  assert.deepEqual(r.clusters.get(a), {
    connectTimeout: "2s",
    http2: false,
    eds: "",
    filters: ["sluice.backend_transformation"],
  });
  assert.deepEqual(r.clusters.get(b), {
    connectTimeout: "5s",
    http2: false,
    eds: "",
    filters: ["sluice.backend_transformation"],
  });
  assert.deepEqual(r.clusters.get("backend/default/llm")?.filters, []);
});

test("a variant of a scored cluster reads the cluster's EDS resource and reports to its scoring", async () => {
  const scored = BASE.replace(
    "spec:\n  ai:\n",
    'spec:\n  policies:\n    health: { unhealthyCondition: "response.code >= 500", eviction: { duration: 1s } }\n  ai:\n',
  );
  const r = await variants(scored + named("pa", policy(RULE("a"), "    http: { version: HTTP2 }\n")));
  assert.deepEqual(r.warnings, []);
  const a = r.routes.get(RULE_A) ?? "";
  assert.notEqual(a, "backend/default/llm");
  assert.equal(r.clusters.get(a)?.http2, true);
  assert.equal(r.clusters.get(a)?.eds, "backend/default/llm");
  assert.equal(r.clusters.get("backend/default/llm")?.eds, "backend/default/llm");
  assert.ok(r.clusters.get(a)?.filters.includes("sluice.backend_health"));
  // One EDS resource: the cluster's, which Sluice marks when it evicts a provider, for every variant.
  assert.deepEqual(
    r.endpoints.filter((e) => e.startsWith("backend/default/llm")),
    ["backend/default/llm"],
  );
});

test("a GwPolicy for one provider (sectionName) leaves the cluster's settings, and is not reported", async () => {
  const r = await translated(
    BASE +
      policy(
        "{ group: sluice.dev, kind: GwBackend, name: llm, sectionName: two }",
        "    tcp: { connectTimeout: 2s }\n",
      ),
  );
  assert.equal(r.connectTimeout, "5s");
  assert.deepEqual(r.notes, []);
});
