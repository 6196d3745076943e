// A provider's extAuth (a GwPolicy's `backend.extAuth` targeting the provider) on Realtime sessions through Sluice's
// Realtime relay (the provider has prompt guards), through a real Envoy: Node's WebSocket client (the key in OpenAI's
// browser subprotocol) → Envoy → the relay, which checks the provider's extAuth once per session, on the upgrade's
// headers and the client's address (headers the relay route sets from Envoy's own connection, never the client's),
// before it calls the provider:
// - allowed: the service's allowed headers go on the provider's upgrade, beside the provider's own key;
// - denied: the client's upgrade gets the service's status, headers and body; the provider is not called;
// - the service down: FailClosed, 403, the provider not called;
// - the route's identity (an API key's metadata) in the check's CEL, passed by the relay route from Envoy's dynamic
//   metadata; a client's own copy of that header never counts.

import assert from "node:assert/strict";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, listenLoopback } from "../helpers/net.js";
import { openRealtime, refusedUpgrade, upgradeAnswer } from "../helpers/realtime-client.js";

/**
 * An HTTP authorization service: 200 with `x-authz-user: ada` for the client key `good-key` (a browser client's key
 * rides in OpenAI's subprotocol, which the policy lets through), else 401.
 */
async function startHttpAuthz(): Promise<{
  port: number;
  checks: { path: string; headers: IncomingHttpHeaders }[];
  close(): Promise<void>;
}> {
  const checks: { path: string; headers: IncomingHttpHeaders }[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    checks.push({ path: req.url ?? "", headers: req.headers });
    if (/(^|[\s,])openai-insecure-api-key\.good-key($|[\s,])/.test(String(req.headers["sec-websocket-protocol"]))) {
      res.writeHead(200, { "x-authz-user": "ada" });
      res.end();
    } else {
      res.writeHead(401, { "content-type": "text/plain", "www-authenticate": 'Bearer realm="realtime"' });
      res.end("this session is not allowed");
    }
  });
  return { ...(await listenLoopback(server)), checks };
}

const KEYS = JSON.stringify(JSON.stringify({ key: "sk-client-1", metadata: { user: "u-42" } }));

function backend(name: string, rt: FakeRealtime): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - { name: rt, providerA: {}, host: 127.0.0.1, port: ${rt.port}, policies: { auth: { key: sk-rt } } }
  policies:
    ai:
      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`;
}

function rule(name: string): string {
  return `    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
}

const policy = (name: string, extAuth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name}, sectionName: rt }]
  backend:
    extAuth:
${extAuth}
`;

function resources(rt: FakeRealtime, authz: number, gone: number): string {
  return `${localService("authz", authz)}${localService("gone", gone)}${backend("checked", rt)}${backend("closed", rt)}${backend("keyed", rt)}${backend("forged", rt)}---
apiVersion: v1
kind: Secret
metadata: { name: client-keys, namespace: default }
stringData:
  one: ${KEYS}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rule("checked")}
${rule("closed")}
${rule("keyed")}
      name: keyed
${rule("forged")}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keyed-route, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: keyed }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: client-keys } }
${policy(
  "checked",
  `      backendRef: { name: authz, port: 80 }
      http:
        allowedRequestHeaders: [sec-websocket-protocol, x-sluice-realtime-source]
        allowedResponseHeaders: [x-authz-user]
        addRequestHeaders: { x-peer: "string(source.address) + ':' + string(source.port)" }`,
)}${policy("closed", "      backendRef: { name: gone, port: 80 }")}${policy(
  "keyed",
  `      backendRef: { name: authz, port: 80 }
      http:
        allowedRequestHeaders: [sec-websocket-protocol]
        addRequestHeaders: { x-user: "apiKey.user" }`,
)}${policy(
  "forged",
  `      backendRef: { name: authz, port: 80 }
      http:
        allowedRequestHeaders: [sec-websocket-protocol]
        addRequestHeaders: { x-user: "apiKey.user" }`,
)}`;
}

describe("a provider's extAuth on Realtime sessions through Sluice's relay", { timeout: 60_000 }, () => {
  let rt: FakeRealtime;
  let authz: Awaited<ReturnType<typeof startHttpAuthz>>;
  let env: LlmEnv;

  before(async () => {
    rt = await startFakeRealtime({ name: "rt", apiKey: "sk-rt" });
    authz = await startHttpAuthz();
    env = await startLlmEnv(resources(rt, authz.port, await freePort()), "/checked/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    await rt?.close();
    await authz?.close();
  });

  test("allowed: checked once, before the provider; the service's header reaches the provider's upgrade", async () => {
    authz.checks.length = 0;
    const handshakes = rt.handshakes.length;
    const { ws, next } = await openRealtime(env.port, "/checked/v1/realtime", "good-key");
    assert.equal((await next()).type, "session.created");
    ws.close();
    assert.equal(authz.checks.length, 1);
    const check = authz.checks[0];
    // The client's request: its path (as the route rewrote it), the client's connection in CEL `source`.
    assert.equal(check?.path, "/v1/realtime?model=gpt-realtime");
    assert.match(String(check?.headers["x-peer"]), /^127\.0\.0\.1:\d+$/);
    assert.notEqual(check?.headers["x-peer"], `127.0.0.1:${env.port}`);
    // Sluice's own routing headers are not the client's: never passed on, even when allowed by name.
    assert.equal(check?.headers["x-sluice-realtime-source"], undefined);
    assert.doesNotMatch(JSON.stringify(check?.headers), /sk-rt/);
    assert.equal(rt.handshakes.length, handshakes + 1);
    const h = rt.handshakes.at(-1)?.headers;
    assert.equal(h?.["x-authz-user"], "ada");
    assert.equal(h?.authorization, "Bearer sk-rt");
  });

  test("a client's own x-sluice-realtime-source is overwritten: the check sees the real peer", async () => {
    authz.checks.length = 0;
    const r = await refusedUpgrade(env.port, "/checked/v1/realtime?model=gpt-realtime", [
      "X-Sluice-Realtime-Source: 10.0.0.1:1",
    ]);
    assert.equal(r.status, 401);
    assert.match(String(authz.checks.at(-1)?.headers["x-peer"]), /^127\.0\.0\.1:\d+$/);
  });

  test("denied: the upgrade gets the service's status, headers and body; the provider is not called", async () => {
    const handshakes = rt.handshakes.length;
    const denied = await upgradeAnswer(env.port, "/checked/v1/realtime?model=gpt-realtime", []);
    assert.equal(denied.status, 401);
    assert.match(denied.head, /\r\nwww-authenticate: Bearer realm="realtime"\r\n/i);
    const r = await refusedUpgrade(env.port, "/checked/v1/realtime?model=gpt-realtime", [
      "Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.client-key-2",
    ]);
    assert.equal(r.status, 401);
    assert.equal(r.body, "this session is not allowed");
    assert.equal(rt.handshakes.length, handshakes);
  });

  test("the service down: FailClosed (403), the provider not called", async () => {
    const handshakes = rt.handshakes.length;
    const r = await refusedUpgrade(env.port, "/closed/v1/realtime?model=gpt-realtime");
    assert.equal(r.status, 403);
    assert.match(r.body, /access to provider rt denied by its authorization service \(authorization service failed\)/);
    assert.equal(rt.handshakes.length, handshakes);
  });

  test("the route's identity reaches the relay's check: an API key's metadata in CEL", async () => {
    authz.checks.length = 0;
    const handshakes = rt.handshakes.length;
    const { status } = await upgradeAnswer(env.port, "/keyed/v1/realtime?model=gpt-realtime", [
      "Authorization: Bearer sk-client-1",
      "Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.good-key",
      // A client's own copy of the relay's header is removed before Envoy sets the route's.
      `X-Sluice-Realtime-Authz: {"apiKey":{"user":"mallory"}}`,
    ]);
    assert.equal(status, 101);
    assert.equal(authz.checks.at(-1)?.headers["x-user"], "u-42");
    assert.equal(rt.handshakes.length, handshakes + 1);
  });

  test("a client's forged identity header counts for nothing: no API key authentication, the expression fails", async () => {
    authz.checks.length = 0;
    const handshakes = rt.handshakes.length;
    const { status } = await upgradeAnswer(env.port, "/forged/v1/realtime?model=gpt-realtime", [
      "Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.good-key",
      `X-Sluice-Realtime-Authz: {"apiKey":{"user":"mallory"}}`,
    ]);
    // An expression of the call that fails denies (403), the service not called.
    assert.equal(status, 403);
    assert.equal(authz.checks.length, 0);
    assert.equal(rt.handshakes.length, handshakes);
  });

  test("not reported on the policy any more (was: refused with 501)", async () => {
    const { resources: all } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(all.find((x) => x.kind === "GwPolicy" && x.name === "checked")?.status);
    assert.doesNotMatch(status, /501|Realtime relay|NotYetSupported|Warning/, status);
  });
});
