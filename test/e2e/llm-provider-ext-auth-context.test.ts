// A provider's extAuth (a GwPolicy's `backend.extAuth` targeting one provider of an AI GwBackend) through a real Envoy,
// for what a route's check has and the provider's first lacked: the client's connection (`source`, `destination` in
// the CheckRequest, `source` in its CEL, from the router-level LLM stage's request attributes, one stage and two);
// what the service tells later steps (`extauthz`: a gRPC service's dynamic metadata, an HTTP service's
// responseMetadata), read by the provider's AI policy transformation and its `backend.transformation`, and by the
// tracing stage after the LLM stage (a span attribute), and not after a failover to the next provider; and `forwardBody` on a Passthrough route type (the body read for the check, within its
// limit: a larger one 413, the provider not called).

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService } from "../helpers/gateway.js";
import { startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { listenLoopback, request, waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp.js";

/** An HTTP authorization service: 200 with `x-authz-user: ada` when `x-allow: yes`, else 403; records each check. */
async function startHttpAuthz(): Promise<{
  port: number;
  checks: { headers: IncomingHttpHeaders; body: string; path: string }[];
  close(): Promise<void>;
}> {
  const checks: { headers: IncomingHttpHeaders; body: string; path: string }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      checks.push({ headers: req.headers, body: Buffer.concat(chunks).toString(), path: req.url ?? "" });
      if (req.headers["x-allow"] === "yes") {
        res.writeHead(200, { "x-authz-user": "ada" });
        res.end();
      } else {
        res.writeHead(403, { "content-type": "text/plain" });
        res.end("not you");
      }
    });
  });
  return { ...(await listenLoopback(server)), checks };
}

function resources(p: {
  guarded: number;
  open: number;
  only: number;
  grpc: number;
  http: number;
  collector: number;
}): string {
  return `${localService("grpc-authz", p.grpc)}${localService("http-authz", p.http)}${localService("collector", p.collector)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tracing, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tracing:
      backendRef: { name: collector, port: 80 }
      protocol: HTTP
      randomSampling: "true"
      attributes:
        add:
          - { name: tag, expression: "request.headers['x-tag']" }
          - { name: role, expression: "extauthz.role" }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: pair, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: guarded
            providerA: {}
            host: 127.0.0.1
            port: ${p.guarded}
            policies:
              auth: { key: sk-guarded }
              ai: { transformations: [{ field: user, expression: "extauthz.role" }] }
      - providers:
          - name: open
            providerA: {}
            host: 127.0.0.1
            port: ${p.open}
            policies:
              auth: { key: sk-open }
              ai: { transformations: [{ field: user, expression: "extauthz.role" }] }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: solo, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: only
            providerA: {}
            host: 127.0.0.1
            port: ${p.only}
            policies:
              auth: { key: sk-only }
              ai: { transformations: [{ field: user, expression: "extauthz.user" }] }
  policies:
    ai: { routes: { /v1/chat/completions: Completions, /v1/files: Passthrough } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /solo } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: solo }]
    - matches: [{ path: { type: PathPrefix, value: /two-stage } }]
      filters: [{ type: RequestHeaderModifier, requestHeaderModifier: { set: [{ name: x-route, value: two } ] } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: solo }]
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: pair }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: guarded, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: pair, sectionName: guarded }]
  backend:
    extAuth:
      backendRef: { name: grpc-authz, port: 80 }
      grpc:
        requestMetadata: { x-peer: "string(source.address) + ':' + string(source.port)" }
    transformation:
      request:
        set: [{ name: x-tier, value: "extauthz.role" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: only, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: solo, sectionName: only }]
  backend:
    extAuth:
      backendRef: { name: http-authz, port: 80 }
      forwardBody: { maxSize: 256 }
      http:
        allowedRequestHeaders: [x-allow]
        addRequestHeaders: { x-peer: "string(source.address)" }
        responseMetadata: { user: "response.headers['x-authz-user'] + '@' + string(source.address)" }
`;
}

describe("a provider's extAuth: the client's connection, what it tells later steps, Passthrough bodies", {
  timeout: 120_000,
}, () => {
  let guarded: FakeProvider;
  let open: FakeProvider;
  let only: FakeProvider;
  let grpcAuthz: Awaited<ReturnType<typeof startGrpcExtAuthz>>;
  let httpAuthz: Awaited<ReturnType<typeof startHttpAuthz>>;
  let collector: OtlpReceiver;
  let env: LlmEnv;
  const client = (prefix: string, headers: Record<string, string> = {}) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}${prefix}/v1`, maxRetries: 0, defaultHeaders: headers });
  const ask = (c: OpenAI, text: string) =>
    c.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: text }], max_tokens: 20 });

  before(async () => {
    guarded = await startFakeProvider({ name: "guarded", apiKey: "sk-guarded" });
    open = await startFakeProvider({ name: "open", apiKey: "sk-open" });
    only = await startFakeProvider({ name: "only", apiKey: "sk-only" });
    grpcAuthz = await startGrpcExtAuthz();
    httpAuthz = await startHttpAuthz();
    collector = await startOtlpReceiver();
    env = await startLlmEnv(
      resources({
        guarded: guarded.port,
        open: open.port,
        only: only.port,
        grpc: grpcAuthz.port,
        http: httpAuthz.port,
        collector: collector.port,
      }),
    );
  });
  after(async () => {
    await env?.stop();
    for (const p of [guarded, open, only]) await p?.close();
    await grpcAuthz?.close();
    await httpAuthz?.close();
    await collector?.close();
  });

  test("two stages: the CheckRequest has the client's source and Envoy's destination, and CEL reads source", async () => {
    grpcAuthz.checks.length = 0;
    const r = await ask(client("", { "x-allow": "yes" }), "who");
    assert.equal(r.choices[0]?.message.content, "Hello from guarded: who");
    const attrs = grpcAuthz.checks[0]?.attributes;
    const src = attrs?.source?.address?.address;
    const dst = attrs?.destination?.address?.address;
    assert.equal(src?.case, "socketAddress");
    assert.equal(dst?.case, "socketAddress");
    if (src?.case !== "socketAddress" || dst?.case !== "socketAddress") return;
    assert.equal(src.value.address, "127.0.0.1");
    const port = src.value.portSpecifier.case === "portValue" ? src.value.portSpecifier.value : 0;
    assert.ok(port > 0 && port !== env.port, `the client's own port, not Envoy's: ${port}`);
    assert.equal(dst.value.address, "127.0.0.1");
    assert.deepEqual(dst.value.portSpecifier, { case: "portValue", value: env.port });
    // `source` in the call's CEL: the same address and port.
    assert.equal(grpcAuthz.metadata.at(-1)?.["x-peer"], `127.0.0.1:${port}`);
  });

  test("what the gRPC service tells is extauthz for the attempt's AI policy and transformation, not the next provider's", async () => {
    const r = await ask(client("", { "x-allow": "yes", "x-role": "gold", "x-tag": "tiered" }), "tiered");
    assert.equal(r.choices[0]?.message.content, "Hello from guarded: tiered");
    const seen = guarded.requests.at(-1);
    // The provider's AI policy transformation and its backend.transformation (the upstream filter after the LLM stage).
    assert.equal(seen?.json?.["user"], "gold");
    assert.equal(seen?.headers["x-tier"], "gold");
    // Failed over: the open provider's transformation reads extauthz too, which its attempt has not (no check of its
    // own, no route extAuth): it fails, and the field is left as it was.
    guarded.failWith = 503;
    try {
      const f = await ask(client("", { "x-allow": "yes", "x-role": "gold", "x-tag": "failed-over" }), "fails over");
      assert.equal(f.choices[0]?.message.content, "Hello from open: fails over");
      assert.equal(open.requests.at(-1)?.json?.["user"], undefined);
    } finally {
      guarded.failWith = undefined;
    }
    // After the LLM stage: the tracing stage (Sluice, at the response) reads it from the dynamic metadata the attempt
    // left, where the route's extAuth leaves its own; the failed-over request's last attempt put the route's back
    // (none here: the attribute fails and is left out).
    const spans = await waitFor(
      "the spans of both requests",
      async () => {
        const tagged = collector.spans.filter((x) => x.attributes["tag"] !== undefined);
        const tags = new Set(tagged.map((x) => x.attributes["tag"]));
        return tags.has("tiered") && tags.has("failed-over") ? tagged : undefined;
      },
      20_000,
    );
    assert.equal(spans.find((x) => x.attributes["tag"] === "tiered")?.attributes["role"], "gold");
    const failed = spans.find((x) => x.attributes["tag"] === "failed-over");
    assert.ok(failed !== undefined && !("role" in failed.attributes), JSON.stringify(failed?.attributes));
  });

  test("one stage, HTTP service: responseMetadata (over the answer and source) reaches the provider's AI policy", async () => {
    httpAuthz.checks.length = 0;
    const r = await ask(client("/solo", { "x-allow": "yes" }), "meta");
    assert.equal(r.choices[0]?.message.content, "Hello from only: meta");
    assert.equal(only.requests.at(-1)?.json?.["user"], "ada@127.0.0.1");
    assert.equal(httpAuthz.checks.at(-1)?.headers["x-peer"], "127.0.0.1");
    // Its body: the client's (forwardBody), as Envoy's with_request_body sends it.
    assert.match(httpAuthz.checks.at(-1)?.body ?? "", /"model":"gpt-4o"/);
  });

  for (const [name, prefix] of [
    ["one stage", "/solo"],
    ["two stages", "/two-stage"],
  ] as const) {
    test(`forwardBody on a Passthrough route type (${name}): the body is checked; a larger one 413, unforwarded`, async () => {
      httpAuthz.checks.length = 0;
      const n = only.requests.length;
      const body = JSON.stringify({ purpose: "batch" });
      const r = await request(env.port, `${prefix}/v1/files`, {
        method: "POST",
        headers: { "x-allow": "yes", "content-type": "application/json" },
        body,
      });
      assert.equal(r.status, 200, r.body);
      assert.equal(httpAuthz.checks.length, 1);
      assert.equal(httpAuthz.checks[0]?.body, body);
      assert.equal(httpAuthz.checks[0]?.path, `${prefix}/v1/files`);
      assert.equal(only.requests.length, n + 1);
      assert.equal(only.requests.at(-1)?.body, body, "the provider gets the body as sent");
      const big = await request(env.port, `${prefix}/v1/files`, {
        method: "POST",
        headers: { "x-allow": "yes", "content-type": "application/json" },
        body: JSON.stringify({ purpose: "x".repeat(300) }),
      });
      assert.equal(big.status, 413);
      assert.equal(httpAuthz.checks.length, 1, "the service is not called for a body over forwardBody.maxSize");
      assert.equal(only.requests.length, n + 1);
    });
  }

  test("nothing of it is reported on the policies any more", async () => {
    const { resources: all } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    for (const name of ["guarded", "only"]) {
      const status = JSON.stringify(all.find((x) => x.kind === "GwPolicy" && x.name === name)?.status);
      assert.doesNotMatch(status, /NotYetSupported|NeverMatches|Warning|responseMetadata|forwardBody/, status);
    }
  });
});
