// One ext_proc stage or two, through a real Envoy (src/translate/llm/stages.ts). A route to a backend with a single
// provider is served by the router-level stage alone: its cluster has no upstream ext_proc (config dump), Envoy opens
// one stream to Sluice per request (Envoy's own count of streams on `sluice_authz`), and the provider still gets the
// translated body at its own path and authority with its credentials, which the router-level stage set on a buffered
// request body (so Envoy's router used the new path and authority without selecting the route again). Priority groups
// keep both stages (two streams per request). A single provider refusing connections is retried, and the retry carries
// the translated request too. A single-provider route sharing its cluster with a route that needs two stages passes
// the upstream stage untouched.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, request } from "../helpers/net.js";

const ROUTES = `
    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages: Messages`;

/** A GwBackend `name` with these `ai` (YAML at its indentation) and `policies`. */
function backend(name: string, ai: string, policies = ""): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
${ai}
  policies:${policies === "" ? " {}" : policies}
`;
}

/** An EndpointSlice of Service `pods` with one endpoint at 127.0.0.1:`port`. */
function podSlice(name: string, port: number): string {
  return `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}, namespace: default, labels: { kubernetes.io/service-name: pods } }
addressType: IPv4
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1] }]
`;
}

function resources(f: Record<string, FakeProvider>, closed: number): string {
  const rule = (prefix: string, name: string, filters = "") => `
    - matches: [{ path: { type: PathPrefix, value: /${prefix} } }]${filters}
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  const at = (p: FakeProvider | undefined) => `host: 127.0.0.1, port: ${p?.port}`;
  return `${backend("solo", `    provider: { providerD: {}, ${at(f.solo)} }`, `\n    auth: { key: sk-solo }${ROUTES}`)}${backend(
    "fleet",
    `    groups:
      - providers: [{ name: primary, providerA: {}, ${at(f.primary)} }]
      - providers: [{ name: backup, providerD: {}, ${at(f.backup)} }]`,
  )}${backend("shared", `    provider: { providerA: {}, ${at(f.shared)} }`, "\n    auth: { key: sk-shared }")}---
apiVersion: v1
kind: Service
metadata: { name: pods, namespace: default }
spec:
  ports: [{ name: http, port: 80 }]
${podSlice("pods-gone", closed)}${podSlice("pods-up", f.pod?.port ?? 0)}${backend(
  "pods",
  `    provider:
      custom:
        backendRef: { name: pods, port: 80 }
        formats: [{ type: Completions }]`,
  `\n    auth: { key: sk-pod }${ROUTES}`,
)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("solo", "solo")}${rule("fleet", "fleet")}${rule("shared", "shared")}${rule(
    "rewritten",
    "shared",
    `
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]`,
  )}${rule("pods", "pods")}
`;
}

describe("one ext_proc stage for a single provider", { timeout: 60_000 }, () => {
  const fakes: Record<string, FakeProvider> = {};
  let env: LlmEnv;
  const ask = (prefix: string, text: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 }).chat.completions.create(
      { model: "some-model", messages: [{ role: "user", content: text }], max_tokens: 20 },
    );

  /** A counter of Envoy's (0 when Envoy has not created it yet). */
  async function stat(name: string): Promise<number> {
    const r = await request(env.envoy.adminPort, `/stats?format=json&filter=${encodeURIComponent(`^${name}$`)}`);
    const stats = (JSON.parse(r.body) as { stats: { name?: string; value?: number }[] }).stats;
    return stats.find((s) => s.name === name)?.value ?? 0;
  }
  /** How many streams Envoy opens to Sluice's ext_proc for each of `n` requests made by `run`. */
  async function streamsPerRequest(n: number, run: (i: number) => Promise<unknown>): Promise<number> {
    const before = await stat("cluster.sluice_authz.upstream_rq_total");
    for (let i = 0; i < n; i++) await run(i);
    return ((await stat("cluster.sluice_authz.upstream_rq_total")) - before) / n;
  }
  /** The names of the upstream HTTP filters of an AI cluster, from Envoy's config dump. */
  async function upstreamFilters(cluster: string): Promise<string[]> {
    const dump = (await env.envoy.configDump()) as {
      configs: {
        dynamic_active_clusters?: { cluster: { name: string; typed_extension_protocol_options?: unknown } }[];
      }[];
    };
    const c = dump.configs
      .flatMap((x) => x.dynamic_active_clusters ?? [])
      .find((x) => x.cluster.name === cluster)?.cluster;
    assert.ok(c !== undefined, `cluster ${cluster} in Envoy`);
    const options = Object.values((c.typed_extension_protocol_options ?? {}) as Record<string, unknown>)[0] as
      | { http_filters?: { name: string }[] }
      | undefined;
    return (options?.http_filters ?? []).map((f) => f.name);
  }

  before(async () => {
    fakes.solo = await startFakeProvider({ name: "solo", apiKey: "sk-solo" });
    fakes.primary = await startFakeProvider({ name: "primary" });
    fakes.backup = await startFakeProvider({ name: "backup" });
    fakes.shared = await startFakeProvider({ name: "shared", apiKey: "sk-shared" });
    fakes.pod = await startFakeProvider({ name: "pod", apiKey: "sk-pod" });
    env = await startLlmEnv(resources(fakes, await freePort()), "/solo/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f.close();
  });

  test("a single-provider cluster has no upstream ext_proc; priority groups keep it", async () => {
    assert.deepEqual(await upstreamFilters("backend/default/solo"), []);
    assert.deepEqual(await upstreamFilters("backend/default/pods"), []);
    assert.deepEqual(await upstreamFilters("backend/default/fleet"), [
      "sluice.llm_upstream_ext_proc",
      "envoy.filters.http.upstream_codec",
    ]);
  });

  test("one stream per request: the router-level stage translates, and sets the provider's path, host and key", async () => {
    const per = await streamsPerRequest(3, async (i) => {
      const r = await ask("solo", `hi ${i}`);
      assert.equal(r.choices[0]?.message.content, `Hello from solo: hi ${i}`);
      assert.equal(r.object, "chat.completion");
    });
    assert.equal(per, 1);
    // No route of the Gateway matches /v1/messages: had Envoy selected the route again after the router-level stage
    // set the provider's path, these requests would have been answered 404.
    const seen = fakes.solo?.requests.at(-1);
    assert.equal(seen?.path, "/v1/messages");
    assert.equal(seen?.headers.host, `127.0.0.1:${fakes.solo?.port}`);
    assert.equal(seen?.headers["x-api-key"], "sk-solo");
    assert.equal(seen?.headers.authorization, undefined, "the client's key does not reach the provider");
    assert.equal(seen?.headers["accept-encoding"], undefined);
    assert.equal(seen?.json?.max_tokens, 20);
    assert.equal(Number(seen?.headers["content-length"]), Buffer.byteLength(seen?.body ?? ""));

    // Streamed too, and in the other client format.
    const m = await new Anthropic({ apiKey: "client-key", baseURL: `${env.baseUrl}/solo`, maxRetries: 0 }).messages
      .stream({ model: "claude-x", max_tokens: 20, messages: [{ role: "user", content: "stream" }] })
      .finalMessage();
    assert.deepEqual(m.content[0], { type: "text", text: "Hello from solo: stream" });
  });

  test("priority groups: two streams per request (the upstream stage translates for the provider picked)", async () => {
    const per = await streamsPerRequest(3, async (i) => {
      const r = await ask("fleet", `hey ${i}`);
      assert.equal(r.choices[0]?.message.content, `Hello from primary: hey ${i}`);
    });
    assert.equal(per, 2);
  });

  test("a single provider refusing connections is retried, and the retry carries the translated request", async () => {
    const retriesBefore = await stat("cluster.backend/default/pods.upstream_rq_retry");
    const pod = fakes.pod as FakeProvider;
    const seenBefore = pod.requests.length;
    const per = await streamsPerRequest(4, async (i) => {
      const m = await new Anthropic({
        apiKey: "client-key",
        baseURL: `${env.baseUrl}/pods`,
        maxRetries: 0,
      }).messages.create({ model: "llama", max_tokens: 20, messages: [{ role: "user", content: `retry ${i}` }] });
      assert.deepEqual(m.content[0], { type: "text", text: `Hello from pod: retry ${i}` });
    });
    assert.equal(per, 1);
    assert.ok(
      (await stat("cluster.backend/default/pods.upstream_rq_retry")) > retriesBefore,
      "some request was retried",
    );
    const seen = pod.requests.slice(seenBefore);
    assert.equal(seen.length, 4);
    for (const r of seen) {
      assert.equal(r.path, "/v1/chat/completions");
      assert.equal(r.headers.authorization, "Bearer sk-pod");
      assert.equal(r.headers["x-api-key"], undefined);
      assert.equal(r.headers.host, "pods.default.svc.cluster.local");
      assert.ok(Array.isArray(r.json?.messages), "a chat-completions body");
      assert.equal(r.json?.max_completion_tokens ?? r.json?.max_tokens, 20);
    }
  });

  test("a single-provider route through a cluster that keeps the upstream stage for another route", async () => {
    assert.deepEqual(await upstreamFilters("backend/default/shared"), [
      "sluice.llm_upstream_ext_proc",
      "envoy.filters.http.upstream_codec",
    ]);
    const per = await streamsPerRequest(2, async (i) => {
      const plain = await ask("shared", `plain ${i}`);
      assert.equal(plain.choices[0]?.message.content, `Hello from shared: plain ${i}`);
    });
    assert.equal(per, 2, "the upstream stage is there, and lets the request through");
    assert.equal(fakes.shared?.requests.at(-1)?.headers.authorization, "Bearer sk-shared");
    const rewritten = await ask("rewritten", "rewritten");
    assert.equal(rewritten.choices[0]?.message.content, "Hello from shared: rewritten");
    assert.equal(fakes.shared?.requests.at(-1)?.path, "/v1/chat/completions");
  });
});
