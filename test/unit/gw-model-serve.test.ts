// Serving GwModels: where their routes and clusters go in a Gateway's IR (translate/model/serve.ts) and what the LLM
// ext_proc decides per request (extproc/llm/models/serve.ts). Envoy itself is in test/e2e/gw-model.test.ts.

import assert from "node:assert/strict";
import { test } from "node:test";
import { ModelHealth } from "../../src/extproc/llm/models/health.js";
import {
  authorizeModel,
  chooseModel,
  discoveryAnswer,
  type HeaderChanges,
  ModelAttempts,
  modelHeaders,
  thenHeaders,
  virtualChain,
  withVirtualPolicies,
} from "../../src/extproc/llm/models/serve.js";
import { modelsRequestOf } from "../../src/extproc/llm/provider.js";
import { makeInput } from "../../src/translate/input.js";
import type { LlmClusterIR, RouteIR } from "../../src/translate/ir.js";
import type { ConcreteModelIR, ModelRouteEntry } from "../../src/translate/model/ir.js";
import { MODEL_CLUSTER_HEADER } from "../../src/translate/names.js";
import { translate } from "../../src/translate/translate.js";

type Doc = Record<string, unknown>;

const gateway = (listeners: Doc[]): Doc => ({
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "Gateway",
  metadata: { name: "gw", namespace: "default" },
  spec: { gatewayClassName: "sluice", listeners },
});

const model = (name: string, spec: Doc, parentRefs: Doc[] = [{ name: "gw" }]): Doc => ({
  apiVersion: "sluice.dev/v1alpha1",
  kind: "GwModel",
  metadata: { name, namespace: "default" },
  spec: { parentRefs, ...spec },
});

const openai = (port: number): Doc => ({ provider: "Provider01", baseURL: `http://127.0.0.1:${port}/v1` });

const route: Doc = {
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "HTTPRoute",
  metadata: { name: "site", namespace: "default" },
  spec: {
    parentRefs: [{ name: "gw" }],
    hostnames: ["a.example.com"],
    rules: [{ backendRefs: [{ name: "svc", port: 80 }] }],
  },
};

function served(docs: Doc[]) {
  const r = translate(makeInput(docs as never), { impliedGatewayClass: true });
  const gw = r.gateways[0];
  assert.ok(gw);
  return { r, gw: gw.ir };
}

const names = (routes: readonly RouteIR[]) => routes.map((x) => x.name);

test("path first: model routes follow a virtual host's HTTPRoute routes, only on the listener the host belongs to", () => {
  const docs = [
    gateway([
      { name: "site", port: 8080, protocol: "HTTP", hostname: "a.example.com" },
      { name: "api", port: 8080, protocol: "HTTP" },
    ]),
    route,
    model("gpt-4o", openai(9001), [{ name: "gw", sectionName: "api" }]),
  ];
  const { gw } = served(docs);
  const hosts = gw.routeConfigs[0]?.virtualHosts ?? [];
  // a.example.com belongs to listener `site` (its hostname is more specific), which has no models.
  const site = hosts.find((h) => h.domains[0] === "a.example.com");
  assert.ok(site);
  assert.ok(
    names(site.routes).every((n) => !n.startsWith("gwmodel/")),
    names(site.routes).join(),
  );
  // `api` has no virtual host of its own: it gets `*`, with discovery, one route per cluster and the fallback.
  const any = hosts.find((h) => h.domains[0] === "*");
  assert.ok(any);
  const post = "/v1/(chat/completions|responses|embeddings|messages|messages/count_tokens)";
  const google = "/v1(beta)?/models/[^/:]+:[a-zA-Z]+";
  assert.deepEqual(
    any.routes.map((x) => [x.match.method, x.match.path.value, x.match.headers[0]?.value ?? "", x.action.kind]),
    [
      ["GET", "/v1(beta)?/models(/[^/:]+)?", "", "direct"],
      ["POST", post, "gwmodel/default/gpt-4o", "forward"],
      ["POST", google, "gwmodel/default/gpt-4o", "forward"],
      ["POST", post, "", "direct"],
      ["POST", google, "", "direct"],
    ],
  );
  assert.equal(any.routes[1]?.match.headers[0]?.name, MODEL_CLUSTER_HEADER);
});

test("a listener whose routes claim a path keeps it; model routes come after the HTTPRoute's", () => {
  const docs = [
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    { ...route, spec: { ...(route.spec as Doc), hostnames: undefined } },
    model("gpt-4o", openai(9001)),
  ];
  const { gw } = served(docs);
  const host = gw.routeConfigs[0]?.virtualHosts.find((h) => h.domains[0] === "*");
  assert.ok(host);
  const n = names(host.routes);
  assert.ok(n[0]?.startsWith("httproute/default/site/"), n.join());
  assert.ok(n.slice(1).every((x) => x.startsWith("gwmodel/")));
});

test("failover: a cluster with a priority group per priority and retries across them; a virtual target is noted", () => {
  const docs = [
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("a", { ...openai(9001), visibility: "Internal" }),
    model("b", { ...openai(9002), visibility: "Internal", match: { model: "b-*" } }),
    model("c", { ...openai(9003), visibility: "Internal" }),
    model("smart", {
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "a" }, priority: 0 },
            { modelRef: { name: "b" }, priority: 0, model: "b-large" },
            { modelRef: { name: "c" }, priority: 5 },
          ],
        },
      },
    }),
    model("nested", {
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "smart" }, priority: 0 },
            { modelRef: { name: "c" }, priority: 1 },
          ],
        },
      },
    }),
  ];
  const { r, gw } = served(docs);
  const cluster = gw.clusters.find((c) => c.name === "gwmodel/default/smart/failover") as LlmClusterIR | undefined;
  assert.ok(cluster);
  assert.deepEqual(
    cluster.groups.map((g) => g.map((p) => [p.name, p.port])),
    [
      [
        ["0.default/a", 9001],
        ["1.default/b", 9002],
      ],
      [["2.default/c", 9003]],
    ],
  );
  const routeTo = (c: string) =>
    gw.routeConfigs[0]?.virtualHosts[0]?.routes.find((x) => x.match.headers[0]?.value === c)?.action;
  assert.deepEqual((routeTo(cluster.name) as { failover?: unknown }).failover, { retries: 2 });
  assert.deepEqual((routeTo("gwmodel/default/a") as { failover?: unknown }).failover, { retries: 0 });
  // No cluster for a failover with a virtual target: the ext_proc picks its first candidate, and the status says so.
  assert.equal(
    gw.clusters.some((c) => c.name === "gwmodel/default/nested/failover"),
    false,
  );
  const status = r.statuses.find((s) => s.kind === "GwModel" && s.name === "nested");
  assert.ok(status);
  const parents = (status.status as { parents: { conditions: { type: string; message: string }[] }[] }).parents;
  const warning = parents[0]?.conditions.find((c) => c.type === "Warning");
  assert.match(warning?.message ?? "", /a target is a virtual model/);
  // The entry: what each endpoint of the failover cluster is asked for.
  const failoverRoute = gw.routeConfigs[0]?.virtualHosts[0]?.routes.find(
    (x) => x.match.headers[0]?.value === cluster.name,
  );
  const entryId = r.llm.routes.get(`default/gw|${failoverRoute?.name}`);
  const entry = entryId === undefined ? undefined : r.llm.entries.get(entryId);
  assert.deepEqual(entry?.models?.targets[cluster.name], {
    "0.default/a": { id: "default/a", model: "a" },
    "1.default/b": { id: "default/b", model: "b-large" },
    "2.default/c": { id: "default/c", model: "c" },
  });
});

function entryOf(docs: Doc[]): ModelRouteEntry {
  const { r } = served(docs);
  const e = [...r.llm.entries.values()].find((x) => x.models !== undefined);
  assert.ok(e?.models);
  return e.models;
}

test("chooseModel: the concrete model's cluster, or the failover model's on the way; Internal names refused", () => {
  const entry = entryOf([
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("a", { ...openai(9001), visibility: "Internal" }),
    model("b", { ...openai(9002), visibility: "Internal" }),
    model("pair", {
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "a" }, priority: 0 },
            { modelRef: { name: "b" }, priority: 1 },
          ],
        },
      },
    }),
    model("gate", {
      virtualModel: {
        conditional: {
          targets: [
            { modelRef: { name: "pair" }, when: "request.headers['x-tier'] == 'gold'" },
            { modelRef: { name: "b" } },
          ],
        },
      },
    }),
  ]);
  const vars = (tier?: string) => ({
    request: { headers: new Map(tier === undefined ? [] : [["x-tier", tier]]), path: "/", method: "POST" },
  });
  const gold = chooseModel(entry, "gate", { vars: vars("gold") });
  assert.ok(gold.ok);
  assert.equal(gold.choice.cluster, "gwmodel/default/pair/failover");
  const plain = chooseModel(entry, "gate", { vars: vars() });
  assert.ok(plain.ok);
  assert.deepEqual(plain.choice, {
    cluster: "gwmodel/default/b",
    providerModel: "b",
    matched: "default/gate",
    via: ["default/gate"],
  });
  assert.deepEqual(gold.choice.via, ["default/gate", "default/pair"]);
  const hidden = chooseModel(entry, "a", {});
  assert.ok(!hidden.ok);
  assert.equal(hidden.error.status, 404);
  assert.equal(hidden.error.code, "model_not_found");
});

const concrete = (authorization: unknown): ConcreteModelIR =>
  ({
    type: "concrete",
    id: "default/m",
    match: { kind: "exact", literal: "m" },
    visibility: "Public",
    providerName: "Provider01",
    policies: { ai: {}, authorization },
    health: { consecutiveFailures: 1, ejectionMs: 1000, healthThreshold: 0, restoreHealth: 100 },
  }) as ConcreteModelIR;

test("authorizeModel: Allow (any true), Deny (any true refuses), Require (all true); errors are not true", () => {
  const vars = { request: { headers: new Map([["x-team", "blue"]]) } };
  const rule = (action: string, ...matchExpressions: string[]) => concrete({ action, policy: { matchExpressions } });
  assert.equal(authorizeModel(concrete(undefined), vars), undefined);
  assert.equal(authorizeModel(rule("Allow", "false", "request.headers['x-team'] == 'blue'"), vars), undefined);
  assert.equal(authorizeModel(rule("Allow", "jwt.sub == 'x'"), vars)?.status, 403);
  assert.equal(authorizeModel(rule("Deny", "request.headers['x-team'] == 'blue'"), vars)?.status, 403);
  assert.equal(authorizeModel(rule("Deny", "jwt.sub == 'x'"), vars), undefined);
  assert.equal(authorizeModel(rule("Require", "true", "request.headers['x-team'] == 'red'"), vars)?.kind, "permission");
  assert.equal(authorizeModel(rule("Require", "true", "request.headers['x-team'] == 'blue'"), vars), undefined);
});

test("discovery: Anthropic's shape with anthropic-version (paging from the query), OpenAI's otherwise", () => {
  const entry = entryOf([
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("m1", openai(9001)),
    model("m2", openai(9002)),
    model("m3", { ...openai(9003), visibility: "Internal" }),
  ]);
  const list = (headers: Record<string, string>) => {
    const req = modelsRequestOf("Models", headers);
    assert.ok(req !== undefined);
    const r = discoveryAnswer(entry, req);
    assert.ok(r.ok);
    return r.body as unknown;
  };
  const o = list({ ":path": "/v1/models" }) as { object: string; data: { id: string }[] };
  assert.equal(o.object, "list");
  assert.deepEqual(
    o.data.map((m) => m.id),
    ["m1", "m2"],
  );
  const a = list({ ":path": "/v1/models?limit=1", "anthropic-version": "2023-06-01" }) as {
    data: { type: string }[];
    has_more: boolean;
  };
  assert.equal(a.data.length, 1);
  assert.equal(a.data[0]?.type, "model");
  assert.equal(a.has_more, true);
  // Google's shape (x-goog-api-key, or the /v1beta/models form), paged with Sluice's page token.
  type GooglePage = { models: { name: string; supportedGenerationMethods: string[] }[]; nextPageToken?: string };
  const g1 = list({ ":path": "/v1beta/models?pageSize=1", "x-goog-api-key": "k" }) as GooglePage;
  assert.deepEqual(
    g1.models.map((m) => m.name),
    ["models/m1"],
  );
  assert.deepEqual(g1.models[0]?.supportedGenerationMethods, ["generateContent"]);
  const g2 = list({ ":path": `/v1beta/models?pageSize=1&pageToken=${g1.nextPageToken}` }) as GooglePage;
  assert.deepEqual(
    g2.models.map((m) => m.name),
    ["models/m2"],
  );
  assert.equal(g2.nextPageToken, undefined);
  // One model, on a Completions route too (Google's SDKs get models under their generate base); an Internal one is not
  // listed, so not found.
  const get = (path: string) => {
    const req = modelsRequestOf("Completions", { ":path": path, ":method": "GET" });
    assert.ok(req !== undefined && req.call.op === "get");
    return discoveryAnswer(entry, req);
  };
  const m2 = get("/v1beta/models/m2");
  assert.ok(m2.ok);
  assert.equal(m2.body.name, "models/m2");
  const m3 = get("/v1/models/m3");
  assert.ok(!m3.ok && m3.error.status === 404);
  assert.equal(
    modelsRequestOf("Completions", { ":path": "/v1beta/models/m2:generateContent", ":method": "POST" }),
    undefined,
  );
});

test("attempts: one Envoy retried failed, the last is judged by the response status", () => {
  let now = 0;
  const health = new ModelHealth(() => now);
  const m1 = { ...concrete(undefined), id: "default/one" };
  const m2 = { ...concrete(undefined), id: "default/two" };
  const attempts = new ModelAttempts(health, () => now);
  attempts.start(m1);
  now = 10;
  attempts.start(m2); // a retry: m1 failed
  now = 30;
  attempts.finish(200);
  assert.equal(health.isDegraded("default/one", m1.health), true);
  assert.equal(health.isDegraded("default/two", m2.health), false);
  assert.equal(health.state("default/two", m2.health).latencyMs, 20);
  const again = new ModelAttempts(health, () => now);
  again.start(m2);
  again.finish(503);
  assert.equal(health.isDegraded("default/two", m2.health), true);
});

test("unhealthyCondition: judges the final response in place of the 5xx rule; model clusters scored by Sluice", () => {
  const health = new ModelHealth(() => 0);
  const base = concrete(undefined);
  const m = {
    ...base,
    id: "default/c",
    health: { ...base.health, unhealthyCondition: "response.code == 429 || response.headers['x-overloaded'] == 'yes'" },
  };
  const judged = (status: number, headers: Record<string, string> = {}) => {
    const h = new ModelHealth(() => 0);
    const a = new ModelAttempts(h, () => 0);
    a.start(m);
    a.finish(status, new Map(Object.entries(headers)));
    return h.isDegraded(m.id, m.health);
  };
  assert.equal(judged(429), true);
  assert.equal(judged(200, { "x-overloaded": "yes" }), true);
  assert.equal(judged(503), false, "the condition replaces the 5xx rule");
  assert.equal(judged(200), false);
  assert.equal(judged(0), true, "no answer at all is a failure");
  assert.equal(health.isDegraded(m.id, m.health), false);
  // The translation: a failover over a model with a condition is an EDS cluster Sluice scores, per target.
  const { gw, r } = served([
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("a", {
      ...openai(9001),
      visibility: "Internal",
      policies: { health: { unhealthyCondition: "response.code == 429", eviction: { duration: "2s" } } },
    }),
    model("b", { ...openai(9002), visibility: "Internal" }),
    model("plain", { ...openai(9003), policies: { health: { eviction: { consecutiveFailures: 2 } } } }),
    model("bad", {
      ...openai(9004),
      policies: { health: { unhealthyCondition: "request.headers['x'] == 'y'" } },
    }),
    model("pair", {
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "a" }, priority: 0 },
            { modelRef: { name: "b" }, priority: 1 },
          ],
        },
      },
    }),
  ]);
  const cluster = (name: string) => gw.clusters.find((c) => c.name === name) as LlmClusterIR | undefined;
  assert.deepEqual(cluster("gwmodel/default/pair/failover")?.health?.providers, {
    "0.default/a": {
      condition: "response.code == 429",
      responseBody: false,
      consecutiveFailures: 1,
      restoreHealth: 100,
      durationMs: 2000,
    },
    "1.default/b": { responseBody: false, consecutiveFailures: 1, restoreHealth: 100, durationMs: 3000 },
  });
  assert.equal(cluster("gwmodel/default/a")?.health?.condition, "response.code == 429");
  // Nothing Envoy's outlier detection cannot judge: no scoring.
  assert.equal(cluster("gwmodel/default/plain")?.health, undefined);
  const st = r.statuses.find((x) => x.kind === "GwModel" && x.name === "bad");
  assert.match(
    JSON.stringify(st),
    /spec.policies.health.unhealthyCondition: reads request: a response is judged on response alone/,
  );
  assert.equal(cluster("gwmodel/default/bad")?.health, undefined);
});

test("passthrough is served (no Warning, the provider entry carries it); credentials that do not resolve are named", () => {
  const { r } = served([
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("m", { ...openai(9001), policies: { auth: { passthrough: {} } } }),
    model("n", { ...openai(9002), policies: { auth: { secretRef: { name: "missing" } } } }),
  ]);
  const warningOf = (name: string) => {
    const st = r.statuses.find((s) => s.kind === "GwModel" && s.name === name);
    const ps = (st?.status as { parents?: { conditions: { type: string; message: string }[] }[] } | undefined)?.parents;
    return ps?.[0]?.conditions.find((c) => c.type === "Warning")?.message ?? "";
  };
  assert.match(
    warningOf("n"),
    /spec\.policies\.auth: Secret default\/missing key Authorization not found; requests to this model fail/,
  );
  assert.doesNotMatch(warningOf("m"), /passthrough/);
  // The client's credential goes in the provider's own header form (openai: Authorization: Bearer).
  const providers = [...r.llm.entries.values()].flatMap((e) =>
    Object.values(e.backends).flatMap((b) => Object.values(b.providers)),
  );
  assert.ok(
    providers.some(
      (p) =>
        JSON.stringify(p.auth.passthrough) ===
        JSON.stringify({ kind: "header", name: "authorization", prefix: "Bearer" }),
    ),
    JSON.stringify(providers.map((p) => p.auth)),
  );
});

test("a virtual model's policies: authorization when chosen, headers, transformations and guards around the target's", () => {
  const docs = [
    gateway([{ name: "http", port: 8080, protocol: "HTTP" }]),
    model("a", {
      ...openai(9001),
      visibility: "Internal",
      policies: {
        transformations: [{ field: "user", expression: "'from-a'" }],
        headers: {
          request: { set: [{ name: "x-own", value: "a" }] },
          response: { set: [{ name: "x-r", value: "a" }] },
        },
        promptGuard: { request: [{ regex: { builtins: ["CreditCard"] } }] },
      },
    }),
    model("b", { ...openai(9002), visibility: "Internal" }),
    model("inner", {
      visibility: "Internal",
      virtualModel: { weighted: { targets: [{ modelRef: { name: "a" } }] } },
      policies: {
        authorization: { action: "Deny", policy: { matchExpressions: ["request.headers['x-inner'] == 'no'"] } },
        headers: { request: { add: [{ name: "x-own", value: "inner" }] } },
      },
    }),
    model("vip", {
      virtualModel: {
        weighted: {
          targets: [
            { modelRef: { name: "inner" }, weight: 1_000_000 },
            { modelRef: { name: "b" }, weight: 1 },
          ],
        },
      },
      policies: {
        authorization: { action: "Require", policy: { matchExpressions: ["request.headers['x-vip'] == 'yes'"] } },
        transformations: [
          { field: "user", expression: "'from-vip'" },
          { field: "metadata", expression: "{'via': 'vip'}" },
        ],
        headers: {
          request: {
            set: [
              { name: "x-own", value: "vip" },
              { name: "x-vip-seen", value: "1" },
            ],
          },
          response: { set: [{ name: "x-r", value: "vip" }] },
        },
        promptGuard: { request: [{ regex: { builtins: ["Email"] } }] },
        tls: { sni: "x.example.com" },
        health: { eviction: { duration: "2s" } },
      },
    }),
  ];
  const { r } = served(docs);
  const entry = entryOf(docs);
  const vars = (h: Record<string, string>) => ({
    request: { headers: new Map(Object.entries(h)), path: "/", method: "POST" },
  });
  // The matched model refuses: 403, whatever its targets.
  const refused = chooseModel(entry, "vip", { vars: vars({}), random: () => 0 });
  assert.ok(!refused.ok);
  assert.equal(refused.error.status, 403);
  assert.match(refused.error.message, /not allowed to use model vip/);
  // A nested virtual model that refuses: its branch is passed over, the next candidate chosen.
  const around = chooseModel(entry, "vip", { vars: vars({ "x-vip": "yes", "x-inner": "no" }), random: () => 0 });
  assert.ok(around.ok);
  assert.equal(around.choice.cluster, "gwmodel/default/b");
  const ok = chooseModel(entry, "vip", { vars: vars({ "x-vip": "yes" }), random: () => 0 });
  assert.ok(ok.ok);
  // `inner` is weighted over concrete models only: a cluster of its own, where Envoy picks and retries.
  assert.equal(ok.choice.cluster, "gwmodel/default/inner/weighted");
  assert.deepEqual(ok.choice.via, ["default/vip", "default/inner"]);
  // Request headers: outermost first, the concrete model's last (it wins where they meet).
  const chain = virtualChain(entry, ok.choice);
  assert.deepEqual(
    chain.map((m) => m.id),
    ["default/vip", "default/inner"],
  );
  let h: HeaderChanges | undefined;
  for (const m of chain) h = thenHeaders(h, modelHeaders(m, "request"));
  assert.deepEqual(h, { set: { "x-own": "vip,inner", "x-vip-seen": "1" }, add: [], remove: [] });
  const concreteA = entry.table.byId["default/a"] as ConcreteModelIR;
  h = thenHeaders(h, modelHeaders(concreteA, "request"));
  assert.deepEqual(h?.set, { "x-vip-seen": "1", "x-own": "a" });
  // Transformations and guards: the virtual models' before the target's own.
  const provider = Object.values(
    Object.values([...r.llm.entries.values()].find((e) => e.models !== undefined)?.backends ?? {}).find(
      (b) => b.backend === "GwModel default/a",
    )?.providers ?? {},
  )[0];
  assert.ok(provider);
  const p = withVirtualPolicies(entry, provider, chain);
  assert.deepEqual(
    p.ai.transformations?.map((t) => t.expression),
    ["'from-vip'", "{'via': 'vip'}", "'from-a'"],
  );
  assert.deepEqual(
    p.ai.promptGuard?.request.map((g) => JSON.stringify(g).match(/Email|CreditCard/)?.[0]),
    ["Email", "CreditCard"],
  );
  assert.equal(withVirtualPolicies(entry, provider, chain), p, "the same object for the same chain");
  assert.equal(withVirtualPolicies(entry, provider, []), provider);
  // The provider-connection fields are named Ignored; the request fields are not named at all.
  const st = r.statuses.find((s) => s.kind === "GwModel" && s.name === "vip");
  assert.ok(st);
  const warning = (
    st.status as { parents: { conditions: { type: string; reason: string; message: string }[] }[] }
  ).parents[0]?.conditions.find((c) => c.type === "Warning");
  assert.equal(warning?.reason, "Ignored");
  assert.match(
    warning?.message ?? "",
    /spec\.policies\.tls: is not applied on a virtual model, which reaches no provider/,
  );
  assert.match(warning?.message ?? "", /spec\.policies\.health: is not applied on a virtual model/);
  assert.doesNotMatch(warning?.message ?? "", /authorization|headers|transformations|promptGuard/);
});
