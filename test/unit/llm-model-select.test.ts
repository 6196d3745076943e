// Model selection at request time (src/extproc/llm/models/): direct matches and Internal models, conditional on a
// header, weighted within ±5 % over 1,000 seeded picks, failover by priority with health ejection and recovery on a
// fake clock, and the discovery answers in the OpenAI and Anthropic shapes.

import assert from "node:assert/strict";
import { test } from "node:test";
import { requestVariable } from "../../src/extproc/llm/cel.js";
import { listModels as listOf } from "../../src/extproc/llm/models/discovery.js";
import { ModelHealth } from "../../src/extproc/llm/models/health.js";
import { type Selection, selectModel } from "../../src/extproc/llm/models/select.js";
import type { ListPage, ModelListFamily } from "../../src/llm/translate/model-list.js";
import { makeInput } from "../../src/translate/input.js";
import { type ListenerModelTable, listenerTable, type ModelHealthIR } from "../../src/translate/model/ir.js";
import { translateModels } from "../../src/translate/model/models.js";

/** A listener's models list in a family's shape (the body; a refusal fails the test). */
function listModels(table: Parameters<typeof listOf>[0], family: ModelListFamily, page: ListPage = {}): unknown {
  const r = listOf(table, family, { op: "list", page });
  assert.ok(r.ok);
  return r.body;
}

type Doc = Record<string, unknown>;

const gateway: Doc = {
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "Gateway",
  metadata: { name: "gw", namespace: "default" },
  spec: { gatewayClassName: "sluice", listeners: [{ name: "http", port: 8080, protocol: "HTTP" }] },
};

const model = (name: string, spec: Doc, meta: Doc = {}): Doc => ({
  apiVersion: "sluice.dev/v1alpha1",
  kind: "GwModel",
  metadata: { name, namespace: "default", ...meta },
  spec: { parentRefs: [{ name: "gw" }], ...spec },
});

function tableOf(docs: Doc[]): ListenerModelTable {
  const t = translateModels(makeInput([gateway, ...docs] as never), { impliedGatewayClass: true });
  const l = t.tables[0] && listenerTable(t.tables[0], "http");
  assert.ok(l);
  return l;
}

/** Mulberry32: a small seeded PRNG, so the weighted test is the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const first = (s: Selection) => (s.ok ? s.candidates[0].model.id : `error ${s.error.status}`);
const order = (s: Selection) =>
  s.ok ? s.candidates.map((c) => `${c.model.id}:${c.providerModel}`) : [`error ${s.error.status}`];

test("direct requests: each match form and its precedence; no match is a 404 in the not_found kind", () => {
  const table = tableOf([
    model("gpt-4o", { provider: "Provider01" }),
    model("gpt", { provider: "Provider01", match: { model: "gpt-*" } }),
    model("latest", { provider: "Provider03", match: { model: "*-latest" } }),
    model("gpt-latest", { provider: "Provider01", match: { model: "gpt-*-latest" } }),
  ]);
  assert.equal(first(selectModel(table, "gpt-4o")), "default/gpt-4o");
  assert.equal(first(selectModel(table, "gpt-4.1")), "default/gpt");
  assert.equal(first(selectModel(table, "claude-latest")), "default/latest");
  // `gpt-*-latest` has a star inside: it is an exact name, not a pattern.
  assert.equal(first(selectModel(table, "gpt-x-latest")), "default/latest");
  assert.equal(first(selectModel(table, "gpt-*-latest")), "default/gpt-latest");
  // The wildcard's provider is asked for the name the client sent.
  const s = selectModel(table, "gpt-4.1");
  assert.ok(s.ok && s.candidates[0].providerModel === "gpt-4.1");
  const none = selectModel(table, "mistral-large");
  assert.ok(!none.ok && none.error.status === 404 && none.error.kind === "not_found");
  // `*` matches what nothing more specific does.
  const withAny = tableOf([
    model("gpt-4o", { provider: "Provider01" }),
    model("any", { provider: "Provider03", match: { model: "*" } }),
  ]);
  assert.equal(first(selectModel(withAny, "gpt-4o")), "default/gpt-4o");
  assert.equal(first(selectModel(withAny, "anything")), "default/any");
});

test("Internal models: refused to direct requests, reachable through a virtual model", () => {
  const table = tableOf([
    model("secret-model", { provider: "Provider01", visibility: "Internal" }),
    model("front", { virtualModel: { weighted: { targets: [{ modelRef: { name: "secret-model" } }] } } }),
  ]);
  const direct = selectModel(table, "secret-model");
  assert.ok(!direct.ok && direct.error.status === 404);
  const via = selectModel(table, "front");
  assert.ok(via.ok);
  assert.equal(via.candidates[0].model.id, "default/secret-model");
  assert.equal(via.candidates[0].providerModel, "secret-model");
  assert.deepEqual(via.candidates[0].via, ["default/front"]);
});

test("conditional: the first true when on a request header wins, the last target is the fallback", () => {
  const table = tableOf([
    model("fast", { provider: "Provider01", visibility: "Internal" }),
    model("smart", { provider: "Provider03", visibility: "Internal" }),
    model("auto", {
      virtualModel: {
        conditional: {
          targets: [
            { modelRef: { name: "smart" }, when: "request.headers['x-tier'] == 'premium'" },
            { modelRef: { name: "fast" } },
          ],
        },
      },
    }),
    model("strict", {
      virtualModel: {
        conditional: { targets: [{ modelRef: { name: "smart" }, when: "request.headers['x-tier'] == 'premium'" }] },
      },
    }),
  ]);
  const vars = (headers: Record<string, string>) => ({
    request: requestVariable({ ":path": "/v1/chat/completions", ...headers }),
  });
  assert.equal(first(selectModel(table, "auto", { vars: vars({ "x-tier": "premium" }) })), "default/smart");
  assert.equal(first(selectModel(table, "auto", { vars: vars({ "x-tier": "basic" }) })), "default/fast");
  assert.equal(first(selectModel(table, "auto", { vars: vars({}) })), "default/fast");
  // No match and no fallback: an error naming why.
  const s = selectModel(table, "strict", { vars: vars({}) });
  assert.ok(!s.ok);
  assert.match(s.error.message, /no target of virtual model default\/strict matches the request/);
});

test("weighted: 1,000 seeded picks land within ±5 % of the weights; weight 0 is never picked", () => {
  const table = tableOf([
    model("a", { provider: "Provider01", visibility: "Internal" }),
    model("b", { provider: "Provider01", visibility: "Internal" }),
    model("c", { provider: "Provider01", visibility: "Internal" }),
    model("never", { provider: "Provider01", visibility: "Internal" }),
    model("split", {
      virtualModel: {
        weighted: {
          targets: [
            { modelRef: { name: "a" }, weight: 70 },
            { modelRef: { name: "b" }, weight: 20 },
            { modelRef: { name: "c" } }, // default weight 1 of 91 ≈ 1.1 %
            { modelRef: { name: "never" }, weight: 0 },
          ],
        },
      },
    }),
  ]);
  const random = seeded(42);
  const counts = new Map<string, number>();
  for (let i = 0; i < 1000; i++) {
    const s = selectModel(table, "split", { random });
    assert.ok(s.ok);
    counts.set(s.candidates[0].model.id, (counts.get(s.candidates[0].model.id) ?? 0) + 1);
    // The rest follow as retry candidates; the weight-0 target is never among them.
    assert.equal(s.candidates.length, 3);
    assert.ok(!s.candidates.some((c) => c.model.id === "default/never"));
  }
  const share = (id: string) => (counts.get(`default/${id}`) ?? 0) / 1000;
  assert.ok(Math.abs(share("a") - 70 / 91) <= 0.05, `a: ${share("a")}`);
  assert.ok(Math.abs(share("b") - 20 / 91) <= 0.05, `b: ${share("b")}`);
  assert.ok(Math.abs(share("c") - 1 / 91) <= 0.05, `c: ${share("c")}`);
  assert.equal(counts.get("default/never"), undefined);
});

test("failover: lower priority first, best score within a priority, the next priority only when all are degraded", () => {
  let now = 1_000_000;
  const health = new ModelHealth(() => now);
  const eviction = { eviction: { consecutiveFailures: 2, duration: "10s" } };
  const table = tableOf([
    model("p0a", { provider: "Provider01", visibility: "Internal", policies: { health: eviction } }),
    model("p0b", { provider: "Provider01", visibility: "Internal", policies: { health: eviction } }),
    model("p1", { provider: "Provider03", visibility: "Internal", policies: { health: eviction } }),
    model("ha", {
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "p1" }, priority: 10 },
            { modelRef: { name: "p0a" }, priority: 0 },
            { modelRef: { name: "p0b" }, priority: 0 },
          ],
        },
      },
    }),
  ]);
  const cfg = (id: string) => {
    const m = table.byId[`default/${id}`];
    assert.ok(m?.type === "concrete");
    return m.health;
  };
  const pick = () => order(selectModel(table, "ha", { health }));
  // Nothing known: the order written within priority 0, then priority 10.
  assert.deepEqual(pick(), ["default/p0a:p0a", "default/p0b:p0b", "default/p1:p1"]);
  // Latency decides within a priority.
  health.recordSuccess("default/p0a", cfg("p0a"), 900);
  health.recordSuccess("default/p0b", cfg("p0b"), 100);
  assert.deepEqual(pick(), ["default/p0b:p0b", "default/p0a:p0a", "default/p1:p1"]);
  // One failure neither ejects (consecutiveFailures 2) nor outweighs 9× the latency (health 70: 100/70 < 900/100).
  health.recordFailure("default/p0b", cfg("p0b"));
  assert.deepEqual(pick()[0], "default/p0b:p0b");
  // Two do eject: p0a alone at priority 0 still wins over p1.
  health.recordFailure("default/p0b", cfg("p0b"));
  assert.deepEqual(pick(), ["default/p0a:p0a", "default/p1:p1", "default/p0b:p0b"]);
  // Every priority-0 target degraded: priority 10 serves, the degraded ones are last resorts.
  health.recordFailure("default/p0a", cfg("p0a"));
  health.recordFailure("default/p0a", cfg("p0a"));
  const all = selectModel(table, "ha", { health });
  assert.ok(all.ok);
  assert.deepEqual(
    all.candidates.map((c) => [c.model.id, c.degraded]),
    [
      ["default/p1", false],
      // Degraded last resorts: by priority, then the order written.
      ["default/p0a", true],
      ["default/p0b", true],
    ],
  );
  // After the ejection time p0b returns and serves again.
  now += 10_000;
  assert.equal(pick()[0], "default/p0b:p0b");
});

test("health: ejections grow with each one in a row, a success after a return resets them; the threshold ejects too", () => {
  let now = 0;
  const h = new ModelHealth(() => now);
  const cfg: ModelHealthIR = { consecutiveFailures: 1, ejectionMs: 1000, healthThreshold: 0, restoreHealth: 50 };
  h.recordFailure("m", cfg);
  assert.equal(h.state("m", cfg).ejectedUntil, 1000);
  // Failures reported while ejected change nothing.
  h.recordFailure("m", cfg);
  assert.equal(h.state("m", cfg).ejections, 1);
  now = 1000;
  assert.equal(h.isDegraded("m", cfg), false);
  assert.equal(h.state("m", cfg).health, 50);
  h.recordFailure("m", cfg);
  assert.equal(h.state("m", cfg).ejectedUntil, 1000 + 2000);
  now = 3000;
  h.recordSuccess("m", cfg, 20);
  assert.equal(h.state("m", cfg).ejections, 0);
  h.recordFailure("m", cfg);
  assert.equal(h.state("m", cfg).ejectedUntil, 3000 + 1000);

  const byHealth: ModelHealthIR = { consecutiveFailures: 0, ejectionMs: 1000, healthThreshold: 60, restoreHealth: 100 };
  h.recordFailure("n", byHealth); // 100 → 70
  assert.equal(h.isDegraded("n", byHealth), false);
  h.recordFailure("n", byHealth); // 70 → 49: below 60
  assert.equal(h.isDegraded("n", byHealth), true);
  // Capped at 300 s.
  const long: ModelHealthIR = { consecutiveFailures: 1, ejectionMs: 200_000, healthThreshold: 0, restoreHealth: 100 };
  h.recordFailure("o", long);
  now = h.state("o", long).ejectedUntil;
  h.recordFailure("o", long);
  assert.equal(h.state("o", long).ejectedUntil - now, 300_000);
});

test("nested virtual models expand to concrete candidates; a model without a provider is a 503 naming why", () => {
  const table = tableOf([
    model("x", { provider: "Provider01", visibility: "Internal" }),
    model("y", { provider: "Provider03", visibility: "Internal" }),
    model("broken", {
      provider: "Custom",
      custom: { backendRef: { name: "vllm", port: 8000 }, formats: [{ type: "Completions" }] },
      visibility: "Internal",
    }),
    model("inner", {
      visibility: "Internal",
      virtualModel: {
        failover: {
          targets: [
            { modelRef: { name: "x" }, priority: 0 },
            { modelRef: { name: "y" }, priority: 1 },
          ],
        },
      },
    }),
    model("outer", { virtualModel: { weighted: { targets: [{ modelRef: { name: "inner" } }] } } }),
    model("dead", { virtualModel: { weighted: { targets: [{ modelRef: { name: "broken" } }] } } }),
  ]);
  const s = selectModel(table, "outer", { random: seeded(1) });
  assert.ok(s.ok);
  assert.deepEqual(
    s.candidates.map((c) => [c.model.id, c.via]),
    [
      ["default/x", ["default/outer", "default/inner"]],
      ["default/y", ["default/outer", "default/inner"]],
    ],
  );
  const d = selectModel(table, "dead");
  assert.ok(!d.ok && d.error.status === 503);
  assert.match(d.error.message, /GwModel default\/broken: spec\.custom\.backendRef: .*not found/);
});

test("discovery: Public exact models in OpenAI's list object and Anthropic's paged list", () => {
  const table = tableOf([
    model("gpt-4o", { provider: "Provider01" }, { creationTimestamp: "2025-01-02T00:00:00Z" }),
    model("claude-sonnet", { provider: "Provider03" }, { creationTimestamp: "2025-03-01T00:00:00Z" }),
    model("auto", { virtualModel: { weighted: { targets: [{ modelRef: { name: "gpt-4o" } }] } } }),
    model("hidden", { provider: "Provider01", visibility: "Internal" }),
    model("star", { provider: "Provider01", match: { model: "gpt-*" } }),
  ]);
  assert.deepEqual(listModels(table, "openai"), {
    object: "list",
    data: [
      { id: "auto", object: "model", created: 0, owned_by: "sluice" },
      { id: "claude-sonnet", object: "model", created: 1740787200, owned_by: "Anthropic" },
      { id: "gpt-4o", object: "model", created: 1735776000, owned_by: "OpenAI" },
    ],
  });
  // Anthropic: most recent first, with paging.
  const page1 = listModels(table, "anthropic", { limit: 2 }) as { data: { id: string }[]; has_more: boolean };
  assert.deepEqual(page1, {
    data: [
      { type: "model", id: "claude-sonnet", display_name: "claude-sonnet", created_at: "2025-03-01T00:00:00Z" },
      { type: "model", id: "gpt-4o", display_name: "gpt-4o", created_at: "2025-01-02T00:00:00Z" },
    ],
    has_more: true,
    first_id: "claude-sonnet",
    last_id: "gpt-4o",
  });
  const page2 = listModels(table, "anthropic", { limit: 2, afterId: "gpt-4o" });
  assert.deepEqual(page2, {
    data: [{ type: "model", id: "auto", display_name: "auto", created_at: "1970-01-01T00:00:00Z" }],
    has_more: false,
    first_id: "auto",
    last_id: "auto",
  });
  const back = listModels(table, "anthropic", { limit: 1, beforeId: "auto" }) as { data: { id: string }[] };
  assert.deepEqual(
    back.data.map((m) => m.id),
    ["gpt-4o"],
  );
  assert.deepEqual(listModels(tableOf([model("h", { provider: "Provider01", visibility: "Internal" })]), "anthropic"), {
    data: [],
    has_more: false,
    first_id: null,
    last_id: null,
  });
});
