// `backend.extAuth` through a real Envoy (xds/backend-ext-auth.ts): the route's ext_authz, after every traffic
// filter, checks the requests of routes to the backend that has it. An HTTP authorization service (Envoy calls it),
// the same with a decision cache (Sluice fronts it), an AI GwBackend's own policies (the openai SDK as client), a route
// to another Service not checked at all, and a route split between the checked Service and another, where every
// request is checked and the policy's status says why.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { localService, prefixRoute, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, listenLoopback, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

/** An HTTP authorization service: 200 with `x-authz-user` when `x-allow: yes`, else 403; it records each check. */
interface Authz {
  readonly port: number;
  readonly checks: { path: string; allow: string | undefined }[];
  close(): Promise<void>;
}

async function startAuthz(): Promise<Authz> {
  const checks: Authz["checks"] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    const allow = req.headers["x-allow"] as string | undefined;
    checks.push({ path: req.url ?? "", allow });
    if (allow === "yes") {
      res.writeHead(200, { "x-authz-user": "ada" });
      res.end();
    } else {
      res.writeHead(403, { "content-type": "text/plain" });
      res.end("denied by the backend's authorization service");
    }
  });
  return { ...(await listenLoopback(server)), checks };
}

const EXT_AUTH = `
      backendRef: { name: authz, port: 80 }
      http:
        allowedRequestHeaders: [x-allow]
        allowedResponseHeaders: [x-authz-user]`;

function resources(guarded: number, cached: number, other: number, authz: number, llm: number): string {
  return `${localService("guarded", guarded)}${localService("cached", cached)}${localService("other", other)}${localService("authz", authz)}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    provider: { providerA: { model: gpt-test }, host: 127.0.0.1, port: ${llm} }
  policies:
    auth: { key: sk-test }
    extAuth:${EXT_AUTH}
${prefixRoute(["guarded", "cached", "other"])}    - matches: [{ path: { type: PathPrefix, value: /split } }]
      backendRefs: [{ name: guarded, port: 80 }, { name: other, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /v1/ } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
${servicePolicy("guarded", `    extAuth:${EXT_AUTH}`)}${servicePolicy(
  "cached",
  `    extAuth:${EXT_AUTH}
      cache: { key: ["request.headers['x-allow']"], ttl: 60s }`,
)}`;
}

describe("backend.extAuth through the route's ext_authz", { timeout: 90_000 }, () => {
  let guarded: Upstream;
  let cached: Upstream;
  let other: Upstream;
  let authz: Authz;
  let llm: FakeProvider;
  let gw: TestGateway;

  before(async () => {
    guarded = await startEchoUpstream("guarded");
    cached = await startEchoUpstream("cached");
    other = await startEchoUpstream("other");
    authz = await startAuthz();
    llm = await startFakeProvider({ name: "llm", apiKey: "sk-test" });
    gw = await startTestGateway(
      () => resources(guarded.port, cached.port, other.port, authz.port, llm.port),
      "/other",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const u of [guarded, cached, other]) await u?.close();
    await authz?.close();
    await llm?.close();
  });

  test("a request to the guarded Service is checked: denied without, allowed with the service's header", async () => {
    authz.checks.length = 0;
    const denied = await request(gw.port, "/guarded/a");
    assert.equal(denied.status, 403);
    assert.equal(denied.body, "denied by the backend's authorization service");
    const allowed = await request(gw.port, "/guarded/b", { headers: { "x-allow": "yes" } });
    assert.equal(allowed.status, 200);
    const seen = JSON.parse(allowed.body) as EchoBody;
    assert.equal(seen.upstream, "guarded");
    assert.equal(seen.headers["x-authz-user"], "ada");
    assert.deepEqual(
      authz.checks.map((c) => c.path),
      ["/guarded/a", "/guarded/b"],
    );
    assert.equal(guarded.requests.filter((r) => r.path === "/guarded/a").length, 0);
  });

  test("a route to another Service is not checked", async () => {
    authz.checks.length = 0;
    const r = await request(gw.port, "/other/x");
    assert.equal(r.status, 200);
    assert.deepEqual(authz.checks, []);
  });

  test("with a decision cache (Sluice fronts the service): the second request is answered from the cache", async () => {
    authz.checks.length = 0;
    for (let i = 0; i < 3; i++) {
      const r = await request(gw.port, `/cached/${i}`, { headers: { "x-allow": "yes" } });
      assert.equal(r.status, 200);
      assert.equal((JSON.parse(r.body) as EchoBody).headers["x-authz-user"], "ada");
    }
    assert.equal((await request(gw.port, "/cached/no")).status, 403);
    assert.deepEqual(
      authz.checks.map((c) => c.allow),
      ["yes", undefined],
    );
  });

  test("an AI GwBackend's own extAuth checks its requests (openai SDK)", async () => {
    authz.checks.length = 0;
    const client = (allow: string | undefined) =>
      new OpenAI({
        baseURL: `http://127.0.0.1:${gw.port}/v1`,
        apiKey: "unused",
        maxRetries: 0,
        ...(allow !== undefined ? { defaultHeaders: { "x-allow": allow } } : {}),
      });
    const messages = [{ role: "user" as const, content: "hi" }];
    await assert.rejects(client(undefined).chat.completions.create({ model: "gpt-test", messages }), (e: unknown) => {
      assert.equal((e as { status?: number }).status, 403);
      return true;
    });
    const before = llm.requests.length;
    const ok = await client("yes").chat.completions.create({ model: "gpt-test", messages });
    assert.match(ok.choices[0]?.message.content ?? "", /llm/);
    assert.equal(llm.requests.length, before + 1);
    assert.equal(llm.requests.at(-1)?.headers["x-authz-user"], "ada");
    assert.equal(authz.checks.length, 2);
  });

  test("a route split between the guarded Service and another: every request is checked, and the status says why", async () => {
    authz.checks.length = 0;
    for (let i = 0; i < 6; i++) assert.equal((await request(gw.port, `/split/${i}`)).status, 403);
    assert.equal(authz.checks.length, 6);
    const { resources } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (kind: string, name: string) =>
      JSON.stringify(resources.find((r) => r.kind === kind && r.name === name)?.status ?? {});
    assert.match(
      status("GwPolicy", "guarded"),
      /backend\.extAuth: the route's backendRefs do not all have this extAuth/,
    );
    assert.match(status("GwPolicy", "cached"), /applies backend\.extAuth/);
    assert.doesNotMatch(status("GwPolicy", "cached"), /Warning/);
    assert.doesNotMatch(status("GwBackend", "llm"), /Warning|extAuth/);
  });
});
