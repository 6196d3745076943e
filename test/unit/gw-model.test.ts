// GwModel translation (src/translate/model/): match forms and precedence, attachment by parentRefs with a status
// entry per parentRef, virtual targets (cycles and depth refused, wildcard targets naming their model), the provider
// enumeration mapped onto the LLM provider description, and policies carried or named in status.

import assert from "node:assert/strict";
import { test } from "node:test";
import { makeInput } from "../../src/translate/input.js";
import type { ConcreteModelIR, ModelTableIR, VirtualModelIR } from "../../src/translate/model/ir.js";
import { compareModelPrecedence, parseModelMatch } from "../../src/translate/model/match.js";
import { MAX_VIRTUAL_DEPTH, translateModels } from "../../src/translate/model/models.js";
import { modelStatuses } from "../../src/translate/model/status.js";
import { sluiceKindStatuses } from "../../src/translate/status/sluice-kinds.js";

type Doc = Record<string, unknown>;

const gateway = (name = "gw", listeners: Doc[] = [{ name: "http", port: 8080, protocol: "HTTP" }]): Doc => ({
  apiVersion: "gateway.networking.k8s.io/v1",
  kind: "Gateway",
  metadata: { name, namespace: "default" },
  spec: { gatewayClassName: "sluice", listeners },
});

const model = (name: string, spec: Doc, meta: Doc = {}): Doc => ({
  apiVersion: "sluice.dev/v1alpha1",
  kind: "GwModel",
  metadata: { name, namespace: "default", ...meta },
  spec: { parentRefs: [{ name: "gw" }], ...spec },
});

function translate(docs: Doc[]) {
  const input = makeInput(docs as never);
  return { input, t: translateModels(input, { impliedGatewayClass: true }) };
}

function only(tables: readonly ModelTableIR[]): ModelTableIR {
  assert.equal(tables.length, 1);
  return tables[0] as ModelTableIR;
}

type Parent = {
  parentRef: Doc;
  controllerName: string;
  conditions: { type: string; status: string; reason: string; message: string }[];
};
function parentsOf(docs: Doc[], name: string): Parent[] {
  const { t } = translate(docs);
  const s = modelStatuses(t).find((x) => x.name === name);
  assert.ok(s, `no status for ${name}`);
  return (s.status as { parents: Parent[] }).parents;
}
const cond = (p: Parent | undefined, type: string) => p?.conditions.find((c) => c.type === type);

test("match forms: exact, gpt-* (suffix wildcard), *-latest (prefix wildcard), *, and metadata.name when omitted", () => {
  assert.deepEqual(parseModelMatch("gpt-4o"), { kind: "exact", literal: "gpt-4o" });
  assert.deepEqual(parseModelMatch("gpt-*"), { kind: "suffixWildcard", literal: "gpt-" });
  assert.deepEqual(parseModelMatch("*-latest"), { kind: "prefixWildcard", literal: "-latest" });
  assert.deepEqual(parseModelMatch("*"), { kind: "any", literal: "" });
  // A star inside the name, or at both ends, is a literal name.
  assert.deepEqual(parseModelMatch("a*b"), { kind: "exact", literal: "a*b" });
  assert.deepEqual(parseModelMatch("*x*"), { kind: "exact", literal: "*x*" });
  const { t } = translate([gateway(), model("claude-sonnet", { provider: "Provider03" })]);
  assert.deepEqual(only(t.tables).models["default/claude-sonnet"]?.match, { kind: "exact", literal: "claude-sonnet" });
});

test("precedence on a listener: exact > longest wildcard literal > *; ties by creation time, then namespace/name", () => {
  const { t } = translate([
    gateway(),
    model("any", { provider: "Provider01", match: { model: "*" } }),
    model("gpt", { provider: "Provider01", match: { model: "gpt-*" } }),
    model("gpt4", { provider: "Provider01", match: { model: "gpt-4*" } }),
    model("latest", { provider: "Provider01", match: { model: "*-latest" } }),
    model("exact", { provider: "Provider01", match: { model: "gpt-4o" } }),
    model(
      "b-newer",
      { provider: "Provider01", match: { model: "x-*" } },
      { creationTimestamp: "2025-02-01T00:00:00Z" },
    ),
    model(
      "c-older",
      { provider: "Provider01", match: { model: "x-*" } },
      { creationTimestamp: "2025-01-01T00:00:00Z" },
    ),
    model("a-nodate", { provider: "Provider01", match: { model: "x-*" } }),
  ]);
  const l = only(t.tables).listeners[0];
  assert.deepEqual(l?.models, [
    "default/exact",
    "default/latest", // "-latest": 7 characters
    "default/gpt4", // "gpt-4": 5
    "default/gpt", // "gpt-": 4
    "default/c-older", // "x-" ×3: older first, then without a date
    "default/b-newer",
    "default/a-nodate",
    "default/any",
  ]);
  assert.ok(
    compareModelPrecedence({ match: parseModelMatch("m"), id: "b/m" }, { match: parseModelMatch("m"), id: "a/m" }) > 0,
  );
});

test("status parents: one per parentRef — accepted, unknown Gateway, wrong listener, namespace not allowed", () => {
  const docs = [
    gateway("gw", [
      { name: "http", port: 8080, protocol: "HTTP" },
      { name: "other", port: 8081, protocol: "HTTP", hostname: "other.example" },
    ]),
    model("m", {
      provider: "Provider01",
      parentRefs: [
        { name: "gw", sectionName: "http" },
        { name: "nope" },
        { name: "gw", sectionName: "missing" },
        { name: "gw", port: 9999 },
      ],
    }),
    {
      ...model("elsewhere", { provider: "Provider01", parentRefs: [{ name: "gw", namespace: "default" }] }),
      metadata: { name: "elsewhere", namespace: "team" },
    },
  ];
  const parents = parentsOf(docs, "m");
  assert.equal(parents.length, 4);
  for (const p of parents) assert.equal(p.controllerName, "sluice.dev/gateway-controller");
  assert.deepEqual(parents[0]?.parentRef, { name: "gw", sectionName: "http" });
  assert.equal(cond(parents[0], "Accepted")?.status, "True");
  assert.match(cond(parents[0], "Accepted")?.message ?? "", /listener http/);
  assert.equal(cond(parents[0], "ResolvedRefs")?.status, "True");
  assert.equal(cond(parents[1], "Accepted")?.reason, "NoMatchingParent");
  assert.match(cond(parents[1], "Accepted")?.message ?? "", /default\/nope is not a Gateway served by Sluice/);
  assert.equal(cond(parents[2], "Accepted")?.reason, "NoMatchingParent");
  assert.match(cond(parents[2], "Accepted")?.message ?? "", /sectionName missing/);
  assert.match(cond(parents[3], "Accepted")?.message ?? "", /port 9999/);
  // Served: no Warning when nothing is left unapplied.
  for (const p of parents) assert.equal(cond(p, "Warning"), undefined);
  const other = parentsOf(docs, "elsewhere");
  assert.equal(cond(other[0], "Accepted")?.reason, "NotAllowedByListeners");
  // Only the accepted parent's listener has the model.
  const { t } = translate(docs);
  assert.deepEqual(
    only(t.tables).listeners.map((l) => [l.sectionName, l.models]),
    [["http", ["default/m"]]],
  );
});

test("a parentRef without sectionName attaches to every valid listener; a Gateway of another class is not ours", () => {
  const docs = [
    gateway("gw", [
      { name: "a", port: 8080, protocol: "HTTP" },
      { name: "b", port: 8081, protocol: "HTTP" },
      { name: "tcp", port: 9000, protocol: "TCP" },
    ]),
    {
      ...gateway("theirs"),
      spec: { gatewayClassName: "other", listeners: [{ name: "x", port: 1, protocol: "HTTP" }] },
    },
    model("m", { provider: "Provider01", parentRefs: [{ name: "gw" }, { name: "theirs" }] }),
  ];
  const { t } = translate(docs);
  assert.deepEqual(
    only(t.tables).listeners.map((l) => l.sectionName),
    ["a", "b"],
  );
  const parents = parentsOf(docs, "m");
  assert.match(cond(parents[0], "Accepted")?.message ?? "", /listener a, b/);
  assert.equal(cond(parents[1], "Accepted")?.reason, "NoMatchingParent");
});

test("virtual targets: same-namespace GwModels, the exact match as the model, a wildcard target must name its model", () => {
  const docs = [
    gateway(),
    model("gpt-4o", { provider: "Provider01", visibility: "Internal" }),
    model("claude", { provider: "Provider03", match: { model: "claude-*" }, visibility: "Internal" }),
    model("smart", {
      virtualModel: {
        weighted: {
          targets: [
            { modelRef: { name: "gpt-4o" }, weight: 3 },
            { modelRef: { name: "claude" }, model: "claude-sonnet-4" },
          ],
        },
      },
    }),
    model("bad-wild", { virtualModel: { failover: { targets: [{ modelRef: { name: "claude" }, priority: 0 }] } } }),
    model("bad-name", {
      virtualModel: { failover: { targets: [{ modelRef: { name: "claude" }, model: "gpt-x", priority: 0 }] } },
    }),
    model("missing", {
      virtualModel: {
        conditional: { targets: [{ modelRef: { name: "ghost" }, when: "true" }, { modelRef: { name: "gpt-4o" } }] },
      },
    }),
  ];
  const { t } = translate(docs);
  const smart = only(t.tables).models["default/smart"] as VirtualModelIR;
  assert.equal(smart.strategy, "weighted");
  assert.deepEqual(smart.targets, [
    { ref: "default/gpt-4o", model: "gpt-4o", weight: 3 },
    { ref: "default/claude", model: "claude-sonnet-4", weight: 1 },
  ]);
  // Internal targets are in the table (reachable), though not attached by their own listing order.
  assert.equal(only(t.tables).models["default/claude"]?.visibility, "Internal");

  const wild = parentsOf(docs, "bad-wild");
  assert.equal(cond(wild[0], "Accepted")?.reason, "UnsupportedValue");
  assert.match(
    cond(wild[0], "Accepted")?.message ?? "",
    /targets\[0\]\.model is required: GwModel default\/claude matches claude-\*/,
  );
  assert.match(cond(parentsOf(docs, "bad-name")[0], "Accepted")?.message ?? "", /matches claude-\*, not gpt-x/);
  assert.equal(only(t.tables).models["default/bad-wild"], undefined);

  const missing = parentsOf(docs, "missing");
  assert.equal(cond(missing[0], "Accepted")?.status, "True");
  assert.equal(cond(missing[0], "ResolvedRefs")?.reason, "BackendNotFound");
  assert.match(
    cond(missing[0], "ResolvedRefs")?.message ?? "",
    /targets\[0\]\.modelRef: GwModel default\/ghost not found/,
  );
  const kept = only(t.tables).models["default/missing"] as VirtualModelIR;
  assert.deepEqual(
    kept.targets.map((x) => x.ref),
    ["default/gpt-4o"],
  );
});

test("cycles are refused with the path; models pointing into a cycle lose that target", () => {
  const vm = (to: string) => ({ virtualModel: { failover: { targets: [{ modelRef: { name: to }, priority: 0 }] } } });
  const docs = [
    gateway(),
    model("a", vm("b")),
    model("b", vm("c")),
    model("c", vm("a")),
    model("d", vm("a")),
    model("self", vm("self")),
  ];
  for (const name of ["a", "b", "c"]) {
    const p = parentsOf(docs, name);
    assert.equal(cond(p[0], "Accepted")?.status, "False");
    assert.equal(cond(p[0], "Accepted")?.reason, "UnsupportedValue");
    assert.match(cond(p[0], "Accepted")?.message ?? "", /cycle \(default\/a → default\/b → default\/c → default\/a\)/);
  }
  assert.match(cond(parentsOf(docs, "self")[0], "Accepted")?.message ?? "", /cycle \(default\/self → default\/self\)/);
  const d = parentsOf(docs, "d");
  assert.equal(cond(d[0], "Accepted")?.status, "True");
  assert.match(cond(d[0], "ResolvedRefs")?.message ?? "", /target GwModel default\/a is not accepted \(.*cycle/);
  const { t } = translate(docs);
  assert.deepEqual(Object.keys(only(t.tables).models), ["default/d"]);
});

test(`virtual models nest at most ${MAX_VIRTUAL_DEPTH} deep`, () => {
  const vm = (to: string) => ({ virtualModel: { weighted: { targets: [{ modelRef: { name: to } }] } } });
  const docs = [
    gateway(),
    model("leaf", { provider: "Provider01" }),
    model("v1", vm("leaf")),
    model("v2", vm("v1")),
    model("v3", vm("v2")),
    model("v4", vm("v3")),
  ];
  assert.equal(cond(parentsOf(docs, "v3")[0], "Accepted")?.status, "True");
  const v4 = parentsOf(docs, "v4");
  assert.equal(cond(v4[0], "Accepted")?.status, "False");
  assert.match(cond(v4[0], "Accepted")?.message ?? "", /nest 4 deep here; at most 3/);
});

test("providers: the enumeration becomes the LLM provider description; what cannot be served is said, not dropped", () => {
  const docs = [
    gateway(),
    model("openai", { provider: "Provider01" }),
    model("azure", { provider: "Provider02", cloudC: { resourceName: "acme", resourceType: "OpenAI" } }),
    model("anthropic", { provider: "Provider03" }),
    model("vertex", { provider: "Provider05", providerF: { projectId: "p1", region: "us-central1" } }),
    model("vertex-no-project", { provider: "Provider05" }),
    model("bedrock", { provider: "Provider06", providerG: { region: "eu-west-1" } }),
    model("groq", { provider: "Provider13" }),
    model("ollama", { provider: "Provider08" }),
    model("ollama-here", { provider: "Provider08", baseURL: "http://ollama.tools:11434/v1" }),
    model("openai-proxy", { provider: "Provider01", baseURL: "https://proxy.example.com:8443/openai" }),
    model("bedrock-path", { provider: "Provider06", baseURL: "https://bedrock.example.com/x" }),
    model("custom-svc", {
      provider: "Custom",
      custom: { backendRef: { name: "vllm", port: 8000 }, formats: [{ type: "Completions" }] },
    }),
  ];
  const { t } = translate(docs);
  const models = only(t.tables).models;
  const p = (id: string) => (models[`default/${id}`] as ConcreteModelIR | undefined)?.provider;
  assert.deepEqual(
    [p("openai")?.kind, p("openai")?.address, p("openai")?.tls],
    ["openai", "api.openai.com", { sni: "api.openai.com" }],
  );
  assert.deepEqual([p("azure")?.kind, p("azure")?.address], ["azure-openai", "acme.openai.azure.com"]);
  assert.equal(p("anthropic")?.kind, "anthropic");
  assert.deepEqual([p("vertex")?.kind, p("vertex")?.address], ["vertex", "us-central1-aiplatform.googleapis.com"]);
  assert.deepEqual([p("bedrock")?.kind, p("bedrock")?.address], ["bedrock", "bedrock-runtime.eu-west-1.amazonaws.com"]);
  assert.deepEqual(
    [p("groq")?.kind, p("groq")?.address, p("groq")?.pathPrefix],
    ["openai", "api.groq.com", "/openai/v1"],
  );
  assert.deepEqual(
    [p("ollama-here")?.address, p("ollama-here")?.port, p("ollama-here")?.pathPrefix, p("ollama-here")?.tls],
    ["ollama.tools", 11434, "/v1", undefined],
  );
  assert.deepEqual(
    [p("openai-proxy")?.authority, p("openai-proxy")?.pathPrefix, p("openai-proxy")?.tls],
    ["proxy.example.com:8443", "/openai", { sni: "proxy.example.com" }],
  );
  // Refused (configuration that cannot work): out of the table, Accepted False naming the field.
  assert.equal(models["default/ollama"], undefined);
  assert.match(
    cond(parentsOf(docs, "ollama")[0], "Accepted")?.message ?? "",
    /spec\.baseURL: is required with Provider08/,
  );
  assert.match(
    cond(parentsOf(docs, "vertex-no-project")[0], "Accepted")?.message ?? "",
    /providerF\.projectId is required/,
  );
  // A baseURL path of a provider whose API version is in its own path goes before that path (llm-base-path.test.ts).
  assert.deepEqual(
    [p("bedrock-path")?.authority, p("bedrock-path")?.basePath, p("bedrock-path")?.pathPrefix],
    ["bedrock.example.com", "/x", undefined],
  );
  assert.equal(cond(parentsOf(docs, "bedrock-path")[0], "Warning"), undefined);
  // A custom provider's Service that is not there: ResolvedRefs False, model unavailable.
  const cs = parentsOf(docs, "custom-svc");
  assert.equal(cond(cs[0], "ResolvedRefs")?.reason, "BackendNotFound");
  assert.match(cond(cs[0], "ResolvedRefs")?.message ?? "", /Service default\/vllm not found/);
});

test("policies: transformations carried as the AI policy, health as eviction tuning, what is not applied named", () => {
  const docs = [
    gateway(),
    model("m", {
      provider: "Provider01",
      policies: {
        transformations: [
          { field: "user", expression: "request.headers['x-user']" },
          { field: "x", expression: "source.address" },
        ],
        health: { eviction: { duration: "10s", consecutiveFailures: 3, healthThreshold: 40, restoreHealth: 60 } },
        auth: { key: "sk-1" },
        authorization: { action: "Allow", policy: { matchExpressions: ["true"] } },
        headers: { request: { set: [{ name: "x-a", value: "1" }] } },
        promptGuard: { request: [{ regex: { builtins: ["Email"] } }] },
      },
    }),
  ];
  const { t } = translate(docs);
  const m = only(t.tables).models["default/m"] as ConcreteModelIR;
  assert.equal(m.policies.ai.transformations?.length, 2);
  assert.deepEqual(m.policies.auth, { key: "sk-1" });
  assert.deepEqual(m.health, { consecutiveFailures: 3, ejectionMs: 10000, healthThreshold: 40, restoreHealth: 60 });
  assert.ok(m.policies.promptGuard && m.policies.headers && m.policies.authorization);
  const w = cond(parentsOf(docs, "m")[0], "Warning")?.message ?? "";
  // Served by the LLM ext_proc per model: not in the Warning.
  for (const f of ["spec.policies.authorization", "spec.policies.headers", "spec.policies.promptGuard"]) {
    assert.ok(!w.includes(f), w);
  }
  assert.match(w, /transformations\[1\]\.expression: reads source/);
});

test("sluice-kinds reports GwModels through the model status, invalid ones as before", () => {
  const input = makeInput([gateway(), model("m", { provider: "Provider01" })] as never);
  const models = translateModels(input, { impliedGatewayClass: true });
  const s = sluiceKindStatuses(input, undefined, new Map(), models).find((x) => x.kind === "GwModel");
  assert.ok(s);
  const parents = (s.status as { parents: Parent[] }).parents;
  assert.equal(cond(parents[0], "Accepted")?.status, "True");
  assert.equal(cond(parents[0], "Warning"), undefined);
});
