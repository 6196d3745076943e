// GwModel through a real Envoy and `sluice serve`, with the official `openai` and `@anthropic-ai/sdk` clients and fake
// providers speaking the real wire formats: each `match` form, Internal models (refused to clients, reachable through a
// virtual model), conditional routing on a header, a weighted split over 1,000 requests and its retry on the other
// target, failover within the request
// when the preferred priority answers 5xx, model discovery in the three clients' shapes, authorization, headers and
// prompt guards per model, and a virtual model's own request policies around its target's.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { ApiError, GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { gwModelYaml, PROBE_ROUTE } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { waitFor } from "../helpers/net.js";

const NAMES = [
  "exact",
  "family",
  "latest",
  "named",
  "secret",
  "w1",
  "w2",
  "f1",
  "f2",
  "any",
  "blue",
  "guarded",
  "vipA",
  "h1",
  "h2",
] as const;
const AWS = { accessKeyId: "AKIDMODELS", secretAccessKey: "model-secret", region: "eu-west-1" };
const GEMINI_KEY = "gemini-key-1";
type Name = (typeof NAMES)[number];

/**
 * A GwPolicy on the Gateway: API keys (one with metadata `team: blue`) on every route of it, model routes included, and
 * (`tokens`) a token limit.
 */
const gatewayKeys = (tokens: boolean) => `---
apiVersion: v1
kind: Secret
metadata: { name: client-keys, namespace: default }
stringData:
  blue: ${JSON.stringify(JSON.stringify({ key: "sk-blue-team", metadata: { team: "blue" } }))}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keys, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: client-keys } }
${tokens ? "    rateLimit: { local: [{ tokens: 40, unit: Minutes }] }\n" : ""}`;

let bedrock: FakeProvider;
let gemini: FakeProvider;

function resources(p: Record<Name, FakeProvider>, withAny: boolean, withKeys = false, withTokens = false): string {
  const openai = (n: Name) => `provider: Provider01\nbaseURL: http://127.0.0.1:${p[n].port}/v1`;
  // Anthropic's base URL as its SDK takes it: without /v1 (the provider's own path follows).
  const anthropic = (n: Name) => `provider: Provider03\nbaseURL: http://127.0.0.1:${p[n].port}`;
  return [
    PROBE_ROUTE,
    gwModelYaml("gpt-4o", openai("exact")),
    gwModelYaml("gpt-family", `match: { model: "gpt-*" }\n${openai("family")}`),
    // Written as an OpenAI base URL is (ending in /v1): the same place as without it.
    gwModelYaml("latest", `match: { model: "*-latest" }\n${anthropic("latest")}/v1`),
    gwModelYaml("claude-named", anthropic("named")),
    gwModelYaml("secret-model", `visibility: Internal\n${openai("secret")}`),
    gwModelYaml("w1", `visibility: Internal\n${openai("w1")}`),
    gwModelYaml("w2", `visibility: Internal\n${openai("w2")}`),
    gwModelYaml("f1", `visibility: Internal\n${openai("f1")}\npolicies: { health: { eviction: { duration: 1s } } }`),
    gwModelYaml("f2", `visibility: Internal\n${openai("f2")}`),
    gwModelYaml(
      "router",
      `virtualModel:
  conditional:
    targets:
      - { modelRef: { name: secret-model }, when: "request.headers['x-tier'] == 'gold'" }
      - { modelRef: { name: gpt-4o } }`,
    ),
    gwModelYaml(
      "split",
      `virtualModel:
  weighted:
    targets:
      - { modelRef: { name: w1 }, weight: 3 }
      - { modelRef: { name: w2 }, weight: 1 }`,
    ),
    gwModelYaml(
      "resilient",
      `virtualModel:
  failover:
    targets:
      - { modelRef: { name: f1 }, priority: 0 }
      - { modelRef: { name: f2 }, priority: 1 }`,
    ),
    gwModelYaml(
      "h1",
      `visibility: Internal\n${openai("h1")}
policies: { health: { unhealthyCondition: "response.code == 429", eviction: { duration: 2s } } }`,
    ),
    gwModelYaml("h2", `visibility: Internal\n${openai("h2")}`),
    gwModelYaml(
      "careful",
      `virtualModel:
  failover:
    targets:
      - { modelRef: { name: h1 }, priority: 0 }
      - { modelRef: { name: h2 }, priority: 1 }`,
    ),
    gwModelYaml(
      "blue-only",
      `${openai("blue")}
policies:
  authorization:
    action: Allow
    policy: { matchExpressions: ["request.headers['x-team'] == 'blue' || apiKey.team == 'blue'"] }
  headers:
    request: { set: [{ name: x-model-policy, value: blue }] }
    response: { set: [{ name: x-served-by, value: blue-only }] }`,
    ),
    gwModelYaml(
      "vip-a",
      `visibility: Internal\n${openai("vipA")}
policies:
  headers:
    request: { set: [{ name: x-layer, value: concrete }] }`,
    ),
    gwModelYaml(
      "vip",
      `virtualModel:
  weighted:
    targets: [{ modelRef: { name: vip-a } }]
policies:
  authorization:
    action: Require
    policy: { matchExpressions: ["request.headers['x-vip'] == 'yes'"] }
  transformations: [{ field: user, expression: "'vip-' + request.headers['x-vip']" }]
  headers:
    request: { set: [{ name: x-layer, value: virtual }, { name: x-virtual, value: vip }] }
    response: { set: [{ name: x-virtual-served, value: vip }] }
  promptGuard:
    request:
      - regex: { builtins: [Email] }
  tls: { sni: ignored.example.com }`,
    ),
    gwModelYaml(
      "guarded",
      `${openai("guarded")}
policies:
  promptGuard:
    request:
      - regex: { builtins: [Email] }
      - regex: { builtins: [CreditCard], action: Reject }
        response: { message: "no card numbers", statusCode: 422 }`,
    ),
    `---
apiVersion: v1
kind: Secret
metadata: { name: model-creds, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey}, gemini: ${GEMINI_KEY} }
`,
    gwModelYaml(
      "bedrock-model",
      `provider: Provider06
providerG: { region: ${AWS.region} }
baseURL: http://127.0.0.1:${bedrock.port}
policies: { auth: { cloudA: { secretRef: { name: model-creds } } } }`,
    ),
    gwModelYaml(
      "gemini-model",
      `provider: Provider04
baseURL: http://127.0.0.1:${gemini.port}
policies: { auth: { secretRef: { name: model-creds, key: gemini } } }`,
    ),
    ...(withKeys ? [gatewayKeys(withTokens)] : []),
    ...(withAny ? [gwModelYaml("anything", `match: { model: "*" }\n${openai("any")}`)] : []),
  ].join("");
}

describe("GwModel end to end", { timeout: 90_000 }, () => {
  const p = {} as Record<Name, FakeProvider>;
  let env: LlmEnv;
  let openai: OpenAI;
  let anthropic: Anthropic;
  const chat = (modelName: string, text = "hi", headers?: Record<string, string>) =>
    openai.chat.completions.create(
      { model: modelName, messages: [{ role: "user", content: text }], max_tokens: 16 },
      headers !== undefined ? { headers } : {},
    );

  before(async () => {
    for (const n of NAMES) p[n] = await startFakeProvider({ name: n });
    bedrock = await startFakeProvider({ name: "bedrock", aws: AWS });
    gemini = await startFakeProvider({ name: "gemini", apiKey: GEMINI_KEY });
    env = await startLlmEnv(resources(p, false), "/probe");
    openai = new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: "k", baseURL: env.baseUrl, maxRetries: 0 });
  });
  after(async () => {
    await env?.stop();
    for (const n of NAMES) await p[n]?.close();
    await bedrock?.close();
    await gemini?.close();
  });

  test("each match form selects its model, and the provider is asked for the name the client sent", async () => {
    const exact = await chat("gpt-4o", "one");
    assert.equal(exact.choices[0]?.message.content, "Hello from exact: one");
    assert.equal(p.exact.requests.at(-1)?.json?.model, "gpt-4o");
    assert.equal(p.exact.requests.at(-1)?.headers["x-sluice-model-cluster"], undefined, "Envoy's routing header stays");
    // gpt-* (the exact gpt-4o wins over it, so another name)
    const family = await chat("gpt-4.1-mini", "two");
    assert.equal(family.choices[0]?.message.content, "Hello from family: two");
    assert.equal(p.family.requests.at(-1)?.json?.model, "gpt-4.1-mini");
    // *-latest, served by a messages provider for a chat-completions client
    const latest = await chat("claude-sonnet-latest", "three");
    assert.equal(latest.choices[0]?.message.content, "Hello from latest: three");
    assert.equal(p.latest.requests.at(-1)?.path, "/v1/messages");
    assert.equal(p.latest.requests.at(-1)?.json?.model, "claude-sonnet-latest");
    // No match.model: metadata.name, with the Anthropic client
    const named = await anthropic.messages.create({
      model: "claude-named",
      max_tokens: 16,
      messages: [{ role: "user", content: "four" }],
    });
    assert.deepEqual(named.content[0], { type: "text", text: "Hello from named: four" });
  });

  test("other providers of the enumeration: Bedrock (Converse, SigV4) and Gemini (generateContent, its key)", async () => {
    const b = await chat("bedrock-model", "converse");
    assert.equal(b.choices[0]?.message.content, "Hello from bedrock: converse");
    assert.equal(bedrock.requests.at(-1)?.path, "/model/bedrock-model/converse");
    const g = await chat("gemini-model", "generate");
    assert.equal(g.choices[0]?.message.content, "Hello from gemini: generate");
    assert.match(gemini.requests.at(-1)?.path ?? "", /\/models\/gemini-model:generateContent$/);
  });

  test("Google's SDK: generateContent, countTokens and embedContent name the model in the URL, selected as any", async () => {
    const google = new GoogleGenAI({ apiKey: "client", httpOptions: { baseUrl: env.baseUrl } });
    const toOpenai = await google.models.generateContent({ model: "gpt-4o", contents: "google" });
    assert.equal(toOpenai.text, "Hello from exact: google");
    assert.equal(p.exact.requests.at(-1)?.json?.model, "gpt-4o");
    const toGemini = await google.models.generateContent({ model: "gemini-model", contents: "as written" });
    assert.equal(toGemini.text, "Hello from gemini: as written");
    const counted = await google.models.countTokens({ model: "claude-named", contents: "count" });
    assert.ok((counted.totalTokens ?? 0) > 0);
    const embedded = await google.models.embedContent({ model: "gpt-4o", contents: ["a", "b"] });
    assert.equal(embedded.embeddings?.length, 2);
    assert.match(p.exact.requests.at(-1)?.path ?? "", /\/embeddings$/);
    await assert.rejects(
      google.models.generateContent({ model: "no-such-model", contents: "x" }),
      (e: unknown) => e instanceof ApiError && e.status === 404,
    );
  });

  test("an unknown model and an Internal model are 404 model_not_found, in each client's format", async () => {
    for (const name of ["no-such-model", "secret-model"]) {
      await assert.rejects(chat(name), (e: unknown) => {
        assert.ok(e instanceof OpenAI.NotFoundError, String(e));
        assert.equal(e.code, "model_not_found");
        return true;
      });
      await assert.rejects(
        anthropic.messages.create({ model: name, max_tokens: 8, messages: [{ role: "user", content: "x" }] }),
        (e: unknown) => {
          assert.ok(e instanceof Anthropic.NotFoundError, String(e));
          assert.equal((e.error as { error?: { type?: string } }).error?.type, "not_found_error");
          return true;
        },
      );
    }
    assert.equal(p.secret.requests.length, 0);
  });

  test("conditional on a header: the Internal model through the virtual model, else the fallback", async () => {
    const gold = await chat("router", "gold", { "x-tier": "gold" });
    assert.equal(gold.choices[0]?.message.content, "Hello from secret: gold");
    assert.equal(p.secret.requests.at(-1)?.json?.model, "secret-model");
    const plain = await chat("router", "plain");
    assert.equal(plain.choices[0]?.message.content, "Hello from exact: plain");
    assert.equal(p.exact.requests.at(-1)?.json?.model, "gpt-4o");
  });

  test("weighted 3:1 over 1,000 requests: within ±5 %", async () => {
    const before = { w1: p.w1.requests.length, w2: p.w2.requests.length };
    const started = Date.now();
    let next = 0;
    const worker = async () => {
      while (next < 1000) {
        next++;
        const r = await chat("split", "w");
        assert.match(r.choices[0]?.message.content ?? "", /^Hello from w[12]: w$/);
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    const w1 = p.w1.requests.length - before.w1;
    const w2 = p.w2.requests.length - before.w2;
    assert.equal(w1 + w2, 1000);
    const share = w1 / 1000;
    console.log(`weighted: w1 ${w1}, w2 ${w2} (share ${share.toFixed(3)}) in ${Date.now() - started} ms`);
    assert.ok(Math.abs(share - 0.75) <= 0.05, `w1 share ${share}`);
  });

  test("weighted: a target answering 5xx is retried on the other within the request, no error", async () => {
    p.w1.failWith = 503;
    try {
      const before = { w1: p.w1.requests.length, w2: p.w2.requests.length };
      for (let i = 0; i < 8; i++) {
        const r = await chat("split", `r${i}`);
        assert.equal(r.choices[0]?.message.content, `Hello from w2: r${i}`);
      }
      assert.equal(p.w2.requests.length - before.w2, 8);
      // Tried first at its share, then ejected by outlier detection: at least once, never more than once per request.
      const tried = p.w1.requests.length - before.w1;
      assert.ok(tried >= 1 && tried <= 8, `w1 tried ${tried} times`);
    } finally {
      p.w1.failWith = undefined;
    }
  });

  test("failover: the preferred priority answers 5xx, the request is served by the next, no error", async () => {
    const healthy = await chat("resilient", "a");
    assert.equal(healthy.choices[0]?.message.content, "Hello from f1: a");
    p.f1.failWith = 503;
    try {
      const f1Before = p.f1.requests.length;
      const r = await chat("resilient", "b");
      assert.equal(r.choices[0]?.message.content, "Hello from f2: b");
      assert.equal(p.f1.requests.length, f1Before + 1, "the preferred target was tried first");
      assert.equal(p.f2.requests.at(-1)?.json?.model, "f2");
    } finally {
      p.f1.failWith = undefined;
    }
    // Ejected for 1 s, then back.
    const back = await waitFor(
      "f1 to serve again",
      async () => {
        const r = await chat("resilient", "c");
        return r.choices[0]?.message.content === "Hello from f1: c" ? r : undefined;
      },
      8000,
      250,
    );
    assert.ok(back);
  });

  test("a target's unhealthyCondition: a 429 evicts it (Sluice's scoring), the next requests skip it until it returns", async () => {
    assert.equal((await chat("careful", "a")).choices[0]?.message.content, "Hello from h1: a");
    p.h1.failWith = 429;
    const before = p.h1.requests.length;
    try {
      // Retried on the next priority within the request (Envoy retries 429 on a failover), and h1 is evicted.
      assert.equal((await chat("careful", "b")).choices[0]?.message.content, "Hello from h2: b");
      for (const x of ["c", "d", "e"]) {
        assert.equal((await chat("careful", x)).choices[0]?.message.content, `Hello from h2: ${x}`);
      }
      // Envoy's outlier detection counts 5xx only: without Sluice's scoring h1 would be asked every time.
      assert.equal(p.h1.requests.length - before, 1, "h1 asked once, then skipped");
    } finally {
      p.h1.failWith = undefined;
    }
    const back = await waitFor(
      "h1 to serve again after its eviction",
      async () => {
        const r = await chat("careful", "f");
        return r.choices[0]?.message.content === "Hello from h1: f" ? r : undefined;
      },
      10_000,
      250,
    );
    assert.ok(back);
  });

  test("authorization per model: 403 in the client's format; allowed requests carry the model's headers", async () => {
    await assert.rejects(chat("blue-only", "x"), (e: unknown) => e instanceof OpenAI.PermissionDeniedError);
    await assert.rejects(
      anthropic.messages.create({ model: "blue-only", max_tokens: 8, messages: [{ role: "user", content: "x" }] }),
      (e: unknown) => e instanceof Anthropic.PermissionDeniedError,
    );
    assert.equal(p.blue.requests.length, 0);
    const r = await openai.chat.completions
      .create(
        { model: "blue-only", messages: [{ role: "user", content: "ok" }], max_tokens: 8 },
        { headers: { "x-team": "blue" } },
      )
      .withResponse();
    assert.equal(r.data.choices[0]?.message.content, "Hello from blue: ok");
    assert.equal(r.response.headers.get("x-served-by"), "blue-only");
    assert.equal(p.blue.requests.at(-1)?.headers["x-model-policy"], "blue");
  });

  test("a virtual model's policies: its authorization, headers, transformations and prompt guards on the way", async () => {
    await assert.rejects(chat("vip", "x"), (e: unknown) => e instanceof OpenAI.PermissionDeniedError);
    assert.equal(p.vipA.requests.length, 0, "refused before any target");
    const r = await openai.chat.completions
      .create(
        { model: "vip", messages: [{ role: "user", content: "mail ann@example.com" }], max_tokens: 8 },
        { headers: { "x-vip": "yes" } },
      )
      .withResponse();
    assert.equal(r.data.choices[0]?.message.content, "Hello from vipA: mail <EMAIL>");
    assert.equal(r.response.headers.get("x-virtual-served"), "vip");
    const sent = p.vipA.requests.at(-1);
    assert.equal(sent?.json?.user, "vip-yes", "the virtual model's transformation");
    assert.equal(sent?.json?.model, "vip-a");
    assert.equal(sent?.headers["x-virtual"], "vip");
    assert.equal(sent?.headers["x-layer"], "concrete", "the target's own header wins");
    assert.ok(!JSON.stringify(sent?.json).includes("ann@example.com"));
    const st = JSON.stringify(await env.sluice.status());
    assert.match(st, /spec\.policies\.tls: is not applied on a virtual model, which reaches no provider/);
  });

  test("a model's prompt guards: masked before the provider sees it, rejected in the client's format", async () => {
    const r = await chat("guarded", "mail me at ann@example.com");
    assert.equal(r.choices[0]?.message.content, "Hello from guarded: mail me at <EMAIL>");
    const sent = JSON.stringify(p.guarded.requests.at(-1)?.json);
    assert.ok(!sent.includes("ann@example.com"), sent);
    const before = p.guarded.requests.length;
    await assert.rejects(
      anthropic.messages.create({
        model: "guarded",
        max_tokens: 8,
        messages: [{ role: "user", content: "card 4111 1111 1111 1111" }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.APIError && e.status === 422, String(e));
        assert.match(e.message, /no card numbers/);
        return true;
      },
    );
    assert.equal(p.guarded.requests.length, before);
  });

  test("discovery: Public exact models, in the OpenAI and the Anthropic shapes", async () => {
    const listed: string[] = [];
    for await (const m of openai.models.list()) {
      listed.push(m.id);
      assert.equal(m.object, "model");
    }
    assert.deepEqual(listed, [
      "bedrock-model",
      "blue-only",
      "careful",
      "claude-named",
      "gemini-model",
      "gpt-4o",
      "guarded",
      "resilient",
      "router",
      "split",
      "vip",
    ]);
    const page = await anthropic.models.list({ limit: 4 });
    assert.equal(page.data.length, 4);
    assert.equal(page.has_more, true);
    assert.ok(page.data.every((m) => m.type === "model"));
    const all: string[] = [];
    for await (const m of anthropic.models.list({ limit: 4 })) all.push(m.id);
    assert.deepEqual([...all].sort(), listed);
    // Google's shape (its SDK's models.list, paged, and models.get), what Sluice serves each model's provider.
    const google = new GoogleGenAI({ apiKey: "client", httpOptions: { baseUrl: env.baseUrl } });
    const named: string[] = [];
    const methods: Record<string, string | undefined> = {};
    for await (const m of await google.models.list({ config: { pageSize: 4 } })) {
      named.push(m.name ?? "");
      methods[m.name ?? ""] = m.supportedActions?.join(",");
    }
    assert.deepEqual(
      named,
      listed.map((id) => `models/${id}`),
    );
    assert.equal(methods["models/claude-named"], "generateContent,countTokens");
    assert.equal(methods["models/gpt-4o"], "generateContent");
    assert.equal((await google.models.get({ model: "split" })).name, "models/split");
    await assert.rejects(
      google.models.get({ model: "no-such-model" }),
      (e: unknown) => e instanceof ApiError && e.status === 404,
    );
  });

  test("`*` takes every name nothing more specific matches (Internal names included)", async () => {
    env.write(resources(p, true));
    const r = await waitFor(
      "the * model",
      async () => {
        const a = await chat("no-such-model", "any").catch(() => undefined);
        return a?.choices[0]?.message.content === "Hello from any: any" ? a : undefined;
      },
      15_000,
      200,
    );
    assert.equal(p.any.requests.at(-1)?.json?.model, "no-such-model");
    assert.ok(r);
    const exact = await chat("gpt-4o", "still");
    assert.equal(exact.choices[0]?.message.content, "Hello from exact: still");
  });

  test("Gateway-level policies apply to model routes: API keys, their metadata in authorization, token limits", async () => {
    env.write(resources(p, true, true));
    await waitFor(
      "API keys on the model routes",
      async () => {
        const r = await chat("gpt-4o").then(
          () => 200,
          (e: unknown) => (e instanceof OpenAI.APIError ? e.status : 0),
        );
        return r === 401 ? true : undefined;
      },
      15_000,
      200,
    );
    const keyed = new OpenAI({ apiKey: "sk-blue-team", baseURL: `${env.baseUrl}/v1`, maxRetries: 0 });
    // Envoy takes the listener and its routes in separate updates: the key's identity reaches the route with the latter.
    const r = await waitFor(
      "the key's metadata on the model route",
      () =>
        keyed.chat.completions
          .create({ model: "blue-only", messages: [{ role: "user", content: "by key" }], max_tokens: 8 })
          .catch(() => undefined),
      10_000,
      200,
    );
    assert.equal(r.choices[0]?.message.content, "Hello from blue: by key");
    assert.equal(p.blue.requests.at(-1)?.headers.authorization, undefined, "the client's key stays at the gateway");
    const ids: string[] = [];
    for await (const m of keyed.models.list()) ids.push(m.id);
    assert.ok(ids.includes("gpt-4o"));
    // 40 tokens a minute, 18 per answer: once the limit is served, the LLM ext_proc refuses when they are spent.
    env.write(resources(p, true, true, true));
    const outcomes: string[] = [];
    for (let i = 0; i < 60 && !outcomes.includes("429"); i++) {
      outcomes.push(
        await keyed.chat.completions
          .create({ model: "gpt-4o", messages: [{ role: "user", content: "t" }], max_tokens: 8 })
          .then(
            () => "200",
            (e: unknown) => (e instanceof OpenAI.RateLimitError ? "429" : String(e)),
          ),
      );
    }
    assert.equal(outcomes.at(-1), "429", outcomes.join());
    assert.ok(
      outcomes.slice(0, -1).every((o) => o === "200"),
      outcomes.join(),
    );
  });
});
