// The Grafana dashboards in deploy/grafana name only metrics that exist: after traffic of every kind through a real
// `sluice run` (API-key authorization, LLM requests streamed and not with a prompt guard and a provider error, MCP calls,
// an Envoy NACK), Sluice's /metrics and its Envoy's /stats/prometheus are read with a Prometheus text parser, and every
// metric each panel's PromQL names must be among the series scraped (sluice.json from Sluice, envoy.json from Envoy).

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import OpenAI from "openai";
import { projectRoot } from "../../src/cli/paths.js";
import { parsePrometheusText as readSluiceMetrics } from "../../src/console/prom-text.js";
import { startFakeProvider } from "../helpers/fake-providers.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { startSdkTarget } from "../helpers/mcp-targets.js";
import { freePort, request, startEchoUpstream, waitFor } from "../helpers/net.js";
import { startSluice, tempConfigDir } from "../helpers/processes.js";
import { parsePrometheusText } from "../helpers/prom-text.js";

const GRAFANA = join(projectRoot(), "deploy", "grafana");

const PROMQL_WORDS = new Set([
  "sum",
  "min",
  "max",
  "avg",
  "count",
  "rate",
  "irate",
  "increase",
  "histogram_quantile",
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "and",
  "or",
  "unless",
  "offset",
  "topk",
  "bottomk",
  "label_values",
  "le",
]);

/** The metric names a PromQL expression selects: label matchers, grouping labels, ranges and variables left out. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\$\w+/g, " ");
  const names = new Set<string>();
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const name = m[0];
    // A word followed by "(" is a function.
    const after = bare.slice((m.index ?? 0) + name.length).trimStart();
    if (after.startsWith("(") || PROMQL_WORDS.has(name)) continue;
    names.add(name);
  }
  return [...names].sort();
}

interface Dashboard {
  readonly title: string;
  readonly panels: readonly { readonly title: string; readonly type: string; readonly targets?: { expr: string }[] }[];
}

function queriesOf(file: string): { panel: string; expr: string }[] {
  const d = JSON.parse(readFileSync(join(GRAFANA, file), "utf8")) as Dashboard;
  return d.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })));
}

test("the PromQL reader finds the metrics and only them", () => {
  assert.deepEqual(
    metricNames(
      'histogram_quantile(0.99, sum by (le, x) (rate(a_bucket{job=~"$job",y="sum(b)"}[$__rate_interval]))) / sum(c_total)',
    ),
    ["a_bucket", "c_total"],
  );
  assert.deepEqual(metricNames("sum by (outcome) (rate(sluice_authz_decisions_total[5m])) or vector(0)"), [
    "sluice_authz_decisions_total",
  ]);
});

test("every dashboard is valid JSON with queries in each graph panel", () => {
  const files = readdirSync(GRAFANA).filter((f) => f.endsWith(".json"));
  assert.deepEqual(files.sort(), ["envoy.json", "sluice.json"]);
  for (const f of files) {
    const d = JSON.parse(readFileSync(join(GRAFANA, f), "utf8")) as Dashboard & { uid: string };
    assert.ok(d.uid && d.title, f);
    for (const p of d.panels.filter((x) => x.type !== "row"))
      assert.ok((p.targets ?? []).length > 0 && p.targets?.every((t) => t.expr !== ""), `${f}: ${p.title}`);
  }
});

function resources(port: number, echo: number, provider: number, mcpTarget: number, secondMatch: string): string {
  return `${gatewayYaml(port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: keys
      matches: [{ path: { type: PathPrefix, value: /keys } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]
    - matches: [${secondMatch}]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]
    - matches: [{ path: { type: PathPrefix, value: /tools } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: tools }]
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${echo} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    provider: { providerA: { model: gpt-4o }, host: 127.0.0.1, port: ${provider} }
  policies:
    health: { eviction: { duration: 1s } }
    ai:
      promptGuard:
        request: [{ regex: { builtins: [Email] } }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: tools, namespace: default }
spec:
  mcp:
    targets: [{ name: alpha, static: { host: 127.0.0.1, port: ${mcpTarget} } }]
---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { one: sk-dashboards-0123456789 }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keys, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: keys }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: keys } }
    authorization:
      action: Allow
      policy: { matchExpressions: ["request.method == 'GET'"] }
`;
}

test("every query of the dashboards names a metric Sluice or its Envoy exports after traffic", async (t) => {
  const cfg = tempConfigDir();
  t.after(() => cfg.cleanup());
  const echo = await startEchoUpstream("echo");
  const provider = await startFakeProvider({ name: "provider" });
  const target = await startSdkTarget("alpha");
  t.after(async () => {
    await echo.close();
    await provider.close();
    await target.kill();
  });
  const port = await freePort();
  const good = "{ path: { type: PathPrefix, value: /second } }";
  cfg.write("all.yaml", resources(port, echo.port, provider.port, target.port, good));
  const sluice = await startSluice("run", cfg.dir);
  t.after(() => sluice.stop());
  await waitFor(
    "the route through Envoy",
    async () => ((await request(port, "/second")).status === 200 ? true : undefined),
    45_000,
  );

  // Authorization: allowed, refused by the rule, and unauthenticated.
  const key = { authorization: "Bearer sk-dashboards-0123456789" };
  assert.equal((await request(port, "/keys", { headers: key })).status, 200);
  assert.equal((await request(port, "/keys", { method: "POST", headers: key })).status, 403);
  assert.equal((await request(port, "/keys")).status, 401);
  // LLM: a guarded request, a stream, and a provider error.
  const llm = new OpenAI({ apiKey: "k", baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  await llm.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "mail a@b.example" }] });
  const stream = await llm.chat.completions.create({
    model: "gpt-4o",
    messages: [{ role: "user", content: "stream" }],
    stream: true,
  });
  for await (const _ of stream);
  provider.failWith = 500;
  await assert.rejects(llm.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] }));
  provider.failWith = undefined;
  // MCP: a session, its tools, a call.
  const mcp = new Client({ name: "dashboards", version: "1.0.0" });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/tools/mcp`)));
  await mcp.listTools();
  await mcp.callTool({ name: "echo", arguments: { text: "hi" } });
  await mcp.close();
  // An Envoy NACK: a regex RE2 refuses.
  cfg.write(
    "all.yaml",
    resources(port, echo.port, provider.port, target.port, '{ path: { type: RegularExpression, value: "^/(?=x)y" } }'),
  );
  const sluiceUrl = `http://127.0.0.1:${sluice.adminPort}/metrics`;
  // Generous: on a loaded machine (the suite runs files in parallel) Envoy takes its time to refuse the update.
  await waitFor(
    "the NACK counted",
    async () => (/sluice_xds_envoy_nacks_total\{/.test(await (await fetch(sluiceUrl)).text()) ? true : undefined),
    60_000,
  );

  const sluiceNames = new Set<string>();
  // Sluice's scrape with the console's reader, which takes values as Prometheus does: prom-client writes NaN as
  // "Nan" (nodejs_eventloop_lag_* before the first sample), which the strict test parser refuses.
  for (const s of readSluiceMetrics(await (await fetch(sluiceUrl)).text())) sluiceNames.add(s.name);
  const envoyAdmin = await waitFor("the Envoy admin address in sluice run's output", async () => {
    for (const line of sluice.output) {
      const m = /Envoy admin for \S+ at (http:\/\/[0-9.:]+)/.exec(line);
      if (m?.[1] !== undefined) return m[1];
    }
    return undefined;
  });
  const envoyNames = new Set<string>();
  for (const f of parsePrometheusText(await (await fetch(`${envoyAdmin}/stats/prometheus`)).text()).values())
    for (const s of f.samples) envoyNames.add(s.name);
  assert.ok(envoyNames.has("envoy_cluster_upstream_rq_total"), "Envoy's scrape looks empty");

  const missing: string[] = [];
  let checked = 0;
  for (const [file, names] of [
    ["sluice.json", sluiceNames],
    ["envoy.json", envoyNames],
  ] as const) {
    for (const q of queriesOf(file)) {
      const used = metricNames(q.expr);
      assert.ok(used.length > 0, `${file} "${q.panel}": no metric in ${q.expr}`);
      for (const n of used) {
        checked++;
        if (!names.has(n)) missing.push(`${file} "${q.panel}": ${n}`);
      }
    }
  }
  assert.deepEqual(missing, [], "dashboard queries naming metrics that were not exported");
  assert.ok(checked >= 40, `only ${checked} metric references checked`);
});
