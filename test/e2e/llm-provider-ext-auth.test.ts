// A GwPolicy's `backend.extAuth` targeting one provider of an AI GwBackend (`sectionName`), through a real Envoy: the
// LLM ext_proc calls the user's authorization service (gRPC and HTTP, real wire formats) once per attempt to that
// provider, on the client's request (its headers, never the provider's key), and only for attempts to it. Allowed: the
// service's headers reach the provider (and not the next provider of a failover). Denied: the client gets the denial in
// its own error format (OpenAI, Anthropic; one stage and two), and no provider is called, not even the next group's
// (a denial is final: docs/llm.md). A service that is down: failureMode (FailClosed by default). An extAuth backendRef
// that does not resolve: named in the policy's status, and attempts fail closed.

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { toJsonString } from "@bufbuild/protobuf";
import OpenAI from "openai";
import { type CheckRequest, CheckRequestSchema } from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService } from "../helpers/gateway.js";
import { startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, listenLoopback } from "../helpers/net.js";

/** An HTTP authorization service: 200 with `x-authz-user: ada` when `x-allow: yes`, else 403 with a text body. */
async function startHttpAuthz(): Promise<{ port: number; checks: IncomingHttpHeaders[]; close(): Promise<void> }> {
  const checks: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    checks.push(req.headers);
    if (req.headers["x-allow"] === "yes") {
      res.writeHead(200, { "x-authz-user": "ada" });
      res.end();
    } else {
      res.writeHead(403, { "content-type": "text/plain", "www-authenticate": 'Bearer realm="llm"' });
      res.end("only premium users may use this model");
    }
  });
  return { ...(await listenLoopback(server)), checks };
}

const policy = (name: string, backend: string, provider: string, extAuth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backend}, sectionName: ${provider} }]
  backend:
    extAuth:
${extAuth}
`;

const oneProvider = (backend: string, port: number) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${backend}, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: only, providerA: {}, host: 127.0.0.1, port: ${port}, policies: { auth: { key: sk-only } } }
  policies:
    ai: { routes: { /v1/chat/completions: Completions, /v1/messages: Messages } }
`;

function resources(p: { guarded: number; open: number; only: number; grpc: number; http: number; gone: number }) {
  return `${localService("grpc-authz", p.grpc)}${localService("http-authz", p.http)}${localService("gone", p.gone)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: pair, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: guarded, providerA: {}, host: 127.0.0.1, port: ${p.guarded}, policies: { auth: { key: sk-guarded } } }
      - providers:
          - { name: open, providerD: { model: claude-open }, host: 127.0.0.1, port: ${p.open}, policies: { auth: { key: sk-open } } }
${oneProvider("solo", p.only)}${oneProvider("closed", p.only)}${oneProvider("failopen", p.only)}${oneProvider("unresolved", p.only)}---
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
    - matches: [{ path: { type: PathPrefix, value: /closed } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: closed }]
    - matches: [{ path: { type: PathPrefix, value: /failopen } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: failopen }]
    - matches: [{ path: { type: PathPrefix, value: /unresolved } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: unresolved }]
    - backendRefs: [{ group: sluice.dev, kind: GwBackend, name: pair }]
${policy(
  "guarded-grpc",
  "pair",
  "guarded",
  `      backendRef: { name: grpc-authz, port: 80 }
      grpc:
        contextExtensions: { tenant: acme }
        requestMetadata: { x-target: "llm.provider + '/' + llm.requestModel" }`,
)}${policy(
  "solo-http",
  "solo",
  "only",
  `      backendRef: { name: http-authz, port: 80 }
      http:
        allowedRequestHeaders: [x-allow, authorization, x-api-key]
        allowedResponseHeaders: [x-authz-user]`,
)}${policy("closed", "closed", "only", "      backendRef: { name: gone, port: 80 }")}${policy(
  "failopen",
  "failopen",
  "only",
  `      backendRef: { name: gone, port: 80 }
      failureMode: FailOpen`,
)}${policy("unresolved", "unresolved", "only", "      backendRef: { name: nowhere, port: 80 }")}`;
}

describe("a GwPolicy's extAuth for one AI provider, checked per attempt by Sluice", { timeout: 120_000 }, () => {
  let guarded: FakeProvider;
  let open: FakeProvider;
  let only: FakeProvider;
  let grpcAuthz: Awaited<ReturnType<typeof startGrpcExtAuthz>>;
  let httpAuthz: Awaited<ReturnType<typeof startHttpAuthz>>;
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
    env = await startLlmEnv(
      resources({
        guarded: guarded.port,
        open: open.port,
        only: only.port,
        grpc: grpcAuthz.port,
        http: httpAuthz.port,
        gone: await freePort(),
      }),
    );
  });
  after(async () => {
    await env?.stop();
    for (const p of [guarded, open, only]) await p?.close();
    await grpcAuthz?.close();
    await httpAuthz?.close();
  });

  test("allowed: the guarded provider serves; the service saw the client's headers, never the provider's key", async () => {
    grpcAuthz.checks.length = 0;
    const n = guarded.requests.length;
    const r = await ask(client("", { "x-allow": "yes" }), "hello");
    assert.equal(r.choices[0]?.message.content, "Hello from guarded: hello");
    assert.equal(grpcAuthz.checks.length, 1, "one check for the one attempt to the guarded provider");
    const http = grpcAuthz.checks[0]?.attributes?.request?.http;
    assert.equal(http?.headers["authorization"], "Bearer client-key");
    assert.equal(http?.headers["x-allow"], "yes");
    assert.equal(http?.method, "POST");
    assert.equal(http?.path, "/v1/chat/completions");
    assert.doesNotMatch(toJsonString(CheckRequestSchema, grpcAuthz.checks[0] as CheckRequest), /sk-guarded|sk-open/);
    assert.deepEqual(grpcAuthz.checks[0]?.attributes?.contextExtensions, { tenant: "acme" });
    // CEL over the attempt: its provider and the client's model, as gRPC metadata of the call.
    assert.equal(grpcAuthz.metadata.at(-1)?.["x-target"], "guarded/gpt-4o");
    // The service's headers reach the provider, beside the provider's own key (never the client's).
    const seen = guarded.requests.at(-1)?.headers;
    assert.equal(guarded.requests.length, n + 1);
    assert.equal(seen?.["x-authz"], "grpc");
    assert.equal(seen?.["x-tenant"], "acme");
    assert.equal(seen?.["authorization"], "Bearer sk-guarded");
  });

  test("denied for the guarded provider (two stages): the client gets the denial in its format, no provider is called", async () => {
    grpcAuthz.checks.length = 0;
    const g = guarded.requests.length;
    const o = open.requests.length;
    const e = await ask(client(""), "no pass").then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof OpenAI.PermissionDeniedError, String(e));
    assert.equal(e.status, 403);
    assert.equal(e.message, "403 denied by grpc");
    assert.equal((e.error as { type?: string } | undefined)?.type, "permission_error");
    assert.equal(guarded.requests.length, g, "a denied attempt never reaches the provider");
    // A denial is final (an upstream filter's local reply is not retried by Envoy's router): not the next group either.
    assert.equal(open.requests.length, o);
    assert.equal(grpcAuthz.checks.length, 1);
  });

  test("only attempts to the guarded provider are checked: while it fails, the open one serves, checks unchanged", async () => {
    guarded.failWith = 503;
    try {
      grpcAuthz.checks.length = 0;
      const r = await ask(client("", { "x-allow": "yes" }), "fails over");
      assert.equal(r.choices[0]?.message.content, "Hello from open: fails over");
      assert.equal(grpcAuthz.checks.length, 1, "the guarded attempt was checked (and allowed), the open one not");
      // The allowed attempt's headers do not follow the request to the next provider.
      assert.equal(open.requests.at(-1)?.headers["x-authz"], undefined);
      assert.equal(open.requests.at(-1)?.headers["x-tenant"], undefined);
    } finally {
      guarded.failWith = undefined;
    }
  });

  test("one stage (the route's one provider), HTTP service: the denial reaches the client in its format", async () => {
    httpAuthz.checks.length = 0;
    const n = only.requests.length;
    const e = await ask(client("/solo"), "denied").then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof OpenAI.PermissionDeniedError, String(e));
    assert.equal(e.status, 403);
    assert.equal(e.message, "403 only premium users may use this model");
    assert.equal(e.headers?.get("www-authenticate"), 'Bearer realm="llm"');
    assert.equal(only.requests.length, n);
    assert.equal(httpAuthz.checks.length, 1);
    assert.equal(httpAuthz.checks[0]?.authorization, "Bearer client-key");
    assert.doesNotMatch(JSON.stringify(httpAuthz.checks[0]), /sk-only/);
    // Allowed: the service's allowed response header reaches the provider.
    const r = await ask(client("/solo", { "x-allow": "yes" }), "allowed");
    assert.equal(r.choices[0]?.message.content, "Hello from only: allowed");
    assert.equal(only.requests.at(-1)?.headers["x-authz-user"], "ada");
    assert.equal(only.requests.at(-1)?.headers["authorization"], "Bearer sk-only");
  });

  test("two stages with no other provider: the denial's own status and the client's format (Anthropic)", async () => {
    const a = new Anthropic({ apiKey: "client-key", baseURL: `${env.baseUrl}/two-stage`, maxRetries: 0 });
    const n = only.requests.length;
    const e = await a.messages
      .create({ model: "claude-x", max_tokens: 20, messages: [{ role: "user", content: "no" }] })
      .then(
        () => undefined,
        (x: unknown) => x,
      );
    assert.ok(e instanceof Anthropic.PermissionDeniedError, String(e));
    assert.equal(e.status, 403);
    assert.match(e.message, /only premium users may use this model/);
    assert.equal((e.error as { type?: string } | undefined)?.type, "error");
    assert.equal((e.error as { error?: { type?: string } } | undefined)?.error?.type, "permission_error");
    assert.equal(only.requests.length, n);
    const ok = await a.messages.create(
      { model: "claude-x", max_tokens: 20, messages: [{ role: "user", content: "yes" }] },
      { headers: { "x-allow": "yes" } },
    );
    assert.equal(ok.content[0]?.type === "text" ? ok.content[0].text : "", "Hello from only: yes");
  });

  test("the service down: FailClosed (the default) denies, FailOpen lets the attempt through", async () => {
    const n = only.requests.length;
    const e = await ask(client("/closed"), "closed").then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof OpenAI.PermissionDeniedError, String(e));
    assert.match(
      e.message,
      /access to provider only denied by its authorization service \(authorization service failed\)/,
    );
    assert.equal(only.requests.length, n);
    const r = await ask(client("/failopen"), "open");
    assert.equal(r.choices[0]?.message.content, "Hello from only: open");
  });

  test("an extAuth backendRef that does not resolve: the policy's status names the field; attempts fail closed", async () => {
    const { resources: all } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(all.find((x) => x.kind === "GwPolicy" && x.name === "unresolved")?.status);
    assert.match(status, /backend\.extAuth\.backendRef: [^;"]*nowhere[^;"]*; checks of attempts to provider only fail/);
    // The served ones are not reported any more (they were NotYetSupported before Sluice called the service).
    const served = JSON.stringify(all.find((x) => x.kind === "GwPolicy" && x.name === "guarded-grpc")?.status);
    assert.doesNotMatch(served, /NotYetSupported|Warning/);
    const e = await ask(client("/unresolved"), "x").then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof OpenAI.PermissionDeniedError, String(e));
  });
});
