// Services on the request path that hang (accept the connection, read the request, never answer), through a real
// Envoy and Sluice: a user's extAuth (HTTP), called by Envoy's ext_authz directly and fronted by Sluice (a CEL
// `redirect` needs Sluice), each FailClosed and FailOpen; an LLM prompt guard webhook, request and response direction,
// FailClosed and FailOpen; and a remote guard (moderationA, found at OPENAI_BASE_URL) with and without its own
// requestTimeout; with the official `openai` and `@anthropic-ai/sdk` clients. Each is bounded by
// its timeout (docs/faults.md: extAuth 10 s, a guard 2 s or its requestTimeout) and then follows its failure mode; the
// client's error is in its own format. The cases run at once, so the file takes about one extAuth timeout.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { gatewayYaml, localService, rulePolicy } from "../helpers/gateway.js";
import { freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

/** extAuth's check timeout (src/translate/xds/filters/ext-authz.ts) and a guard call's default bound (docs/llm.md). */
const EXT_AUTH_TIMEOUT_MS = 10_000;
const GUARD_TIMEOUT_MS = 2000;
/** What a loaded machine adds on top (process scheduling, the SDKs). */
const SLACK_MS = 5000;

function resources(port: number, up: Upstream, hangPort: number, provider: FakeProvider): string {
  const rule = (name: string) => `
    - name: ${name}
      matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ name: app, port: 80 }]`;
  const extAuth = (mode: string, fields = "") =>
    `extAuth: { backendRef: { name: hang, port: 80 }, failureMode: ${mode}, http: { allowedRequestHeaders: [x-user]${fields} } }`;
  const guard = (name: string, guards: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${provider.port} }
  policies:
    auth: { key: sk-test }
    ai:
      routes: { /v1/messages: Messages, /v1/chat/completions: Completions }
      promptGuard:
${guards}
`;
  const llmRule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `${gatewayYaml(port)}${localService("app", up.port)}${localService("hang", hangPort)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("open")}${rule("native-closed")}${rule("native-open")}${rule("sluice-closed")}${rule("sluice-open")}
${rulePolicy("native-closed", extAuth("FailClosed"))}${rulePolicy("native-open", extAuth("FailOpen"))}${rulePolicy(
  "sluice-closed",
  extAuth("FailClosed", `, redirect: "'/login?next=' + request.path"`),
)}${rulePolicy("sluice-open", extAuth("FailOpen", `, redirect: "'/login?next=' + request.path"`))}${guard(
  "guard-closed",
  `        request: [{ webhook: { backendRef: { name: hang, port: 80 } }, response: { message: "guard unavailable", statusCode: 503 } }]`,
)}${guard("guard-open", `        request: [{ webhook: { backendRef: { name: hang, port: 80 }, failureMode: FailOpen } }]`)}${guard(
  "remote-quick",
  `        request: [{ moderationA: { policies: { auth: { key: sk-moderation }, http: { requestTimeout: 500ms } } } }]`,
)}${guard("remote", `        request: [{ moderationA: { policies: { auth: { key: sk-moderation } } } }]`)}${guard("guard-response", `        response: [{ webhook: { backendRef: { name: hang, port: 80 } } }]`)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${llmRule("guard-closed")}${llmRule("guard-open")}${llmRule("remote-quick")}${llmRule("remote")}${llmRule("guard-response")}
`;
}

describe("services that hang: bounded by their timeout, then their failure mode", { timeout: 90_000 }, () => {
  const cfg = tempConfigDir();
  let port = 0;
  let up: Upstream;
  let provider: FakeProvider;
  let hang: Server;
  const held = new Set<Socket>();
  let hangRequests = 0;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;
  const openai = (p: string) =>
    new OpenAI({ apiKey: "c", baseURL: `http://127.0.0.1:${port}/${p}/v1`, maxRetries: 0, timeout: 30_000 });
  const anthropic = (p: string) =>
    new Anthropic({ apiKey: "c", baseURL: `http://127.0.0.1:${port}/${p}`, maxRetries: 0, timeout: 30_000 });

  before(async () => {
    up = await startEchoUpstream("app");
    provider = await startFakeProvider({ name: "openai", apiKey: "sk-test" });
    // Reads every request and never answers; the connections stay open until the test ends.
    hang = createServer((req) => {
      hangRequests++;
      req.resume();
    });
    hang.on("connection", (s: Socket) => {
      held.add(s);
      s.on("close", () => held.delete(s));
    });
    await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
    port = await freePort();
    cfg.write("gw.yaml", resources(port, up, (hang.address() as AddressInfo).port, provider));
    // moderationA (a remote guard) finds its service where the OpenAI SDKs would: OPENAI_BASE_URL.
    sluice = await startSluice("serve", cfg.dir, {
      env: { OPENAI_BASE_URL: `http://127.0.0.1:${(hang.address() as AddressInfo).port}/v1` },
    });
    envoy = await startTestEnvoy(sluice);
    await waitFor("the routes", async () => ((await request(port, "/open")).status === 200 ? true : undefined), 20_000);
  });
  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    for (const s of held) s.destroy();
    await new Promise<void>((r) => hang.close(() => r()));
    await up?.close();
    await provider?.close();
    cfg.cleanup();
  });

  /** The result of `f` (or its error) and how long it took. */
  const timed = async <T>(f: () => Promise<T>): Promise<{ value?: T; error?: unknown; ms: number }> => {
    const t0 = performance.now();
    try {
      const value = await f();
      return { value, ms: performance.now() - t0 };
    } catch (error) {
      return { error, ms: performance.now() - t0 };
    }
  };

  test("every case at once: extAuth and guard webhooks that never answer", async () => {
    const before = hangRequests;
    const get = (p: string) => timed(() => request(port, p, { timeoutMs: 30_000 }));
    const chat = (p: string) =>
      timed(() => openai(p).chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }));
    const message = (p: string) =>
      timed(() =>
        anthropic(p).messages.create({
          model: "claude-x",
          max_tokens: 16,
          messages: [{ role: "user", content: "hi" }],
        }),
      );
    const [
      nativeClosed,
      nativeOpen,
      sluiceClosed,
      sluiceOpen,
      guardClosed,
      guardClosedAn,
      guardOpen,
      guardResponse,
      remoteQuick,
      remote,
    ] = await Promise.all([
      get("/native-closed"),
      get("/native-open"),
      get("/sluice-closed"),
      get("/sluice-open"),
      chat("guard-closed"),
      message("guard-closed"),
      chat("guard-open"),
      chat("guard-response"),
      chat("remote-quick"),
      chat("remote"),
    ]);
    const all = {
      nativeClosed,
      nativeOpen,
      sluiceClosed,
      sluiceOpen,
      guardClosed,
      guardClosedAn,
      guardOpen,
      guardResponse,
      remoteQuick,
      remote,
    };
    const report = JSON.stringify(
      Object.fromEntries(
        Object.entries(all).map(([k, v]) => [
          k,
          {
            ms: Math.round(v.ms),
            status: (v.value as { status?: number } | undefined)?.status,
            error: String(v.error),
          },
        ]),
      ),
    );
    console.log(report);
    // Every hanging service was called (a bound met without calling it would prove nothing).
    assert.ok(hangRequests - before >= 10, `${hangRequests - before} calls reached the hanging service`);

    // extAuth: Envoy's (or Sluice's) 10 s deadline, then FailClosed 403 / FailOpen to the upstream.
    for (const [r, status] of [
      [nativeClosed, 403],
      [nativeOpen, 200],
      [sluiceClosed, 403],
      [sluiceOpen, 200],
    ] as const) {
      assert.equal((r.value as { status: number } | undefined)?.status, status, report);
      assert.ok(r.ms >= EXT_AUTH_TIMEOUT_MS - 100 && r.ms < EXT_AUTH_TIMEOUT_MS + SLACK_MS, report);
    }

    // Guard webhooks: 2 s (or the guard's requestTimeout), then FailClosed answers the CustomResponse in the client's
    // format, FailOpen lets the request through.
    assert.ok(guardClosed.error instanceof OpenAI.APIError && guardClosed.error.status === 503, report);
    assert.match(JSON.stringify(guardClosed.error.error), /guard unavailable/, report);
    assert.ok(guardClosedAn.error instanceof Anthropic.APIError && guardClosedAn.error.status === 503, report);
    assert.equal((guardClosedAn.error.error as { type?: string }).type, "error", report);
    assert.match(JSON.stringify(guardClosedAn.error.error), /guard unavailable/, report);
    for (const r of [guardClosed, guardClosedAn, guardOpen]) {
      assert.ok(r.ms >= GUARD_TIMEOUT_MS - 100 && r.ms < GUARD_TIMEOUT_MS + SLACK_MS, report);
    }
    assert.match(
      (guardOpen.value as OpenAI.ChatCompletion | undefined)?.choices[0]?.message.content ?? "",
      /hi/,
      report,
    );
    // A remote guard (moderationA) always fails closed: the default CustomResponse (403), after its requestTimeout or
    // the 2 s default.
    for (const [r, bound] of [
      [remoteQuick, 500],
      [remote, GUARD_TIMEOUT_MS],
    ] as const) {
      assert.ok(r.error instanceof OpenAI.APIError && r.error.status === 403, report);
      assert.ok(r.ms >= bound - 100 && r.ms < bound + SLACK_MS, report);
    }
    assert.ok(remoteQuick.ms < remote.ms, report);
    // The response direction: the provider answered; the hanging guard withholds it (FailClosed), in 2 s.
    assert.ok(guardResponse.error instanceof OpenAI.APIError, report);
    assert.ok(guardResponse.ms >= GUARD_TIMEOUT_MS - 100 && guardResponse.ms < GUARD_TIMEOUT_MS + SLACK_MS, report);
  });

  test("Sluice and Envoy serve on after the hung calls", async () => {
    assert.equal((await request(port, "/open")).status, 200);
    const r = await openai("guard-open").chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "again" }],
    });
    assert.match(r.choices[0]?.message.content ?? "", /again/);
  });
});
