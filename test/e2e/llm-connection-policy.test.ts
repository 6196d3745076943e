// A GwPolicy's backend.tcp and backend.http reaching an AI GwBackend (xds/llm-connection.ts): the AI cluster's HTTP
// version and connect timeout, as the GwBackend's own spec.policies give them, and the route's timeout from
// http.requestTimeout. Through a real Envoy with the official `openai` client: the provider behind the GwPolicy with
// `http.version: HTTP2` is an h2c-only server and sees HTTP/2; the same provider kind without it sees HTTP/1.1; a
// provider slower than the GwPolicy's requestTimeout answers 504.

import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { createServer as createH2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

interface Req {
  readonly httpVersion: string;
  resume(): unknown;
  on(event: "end", f: () => void): unknown;
}
interface Res {
  writeHead(status: number, headers: Record<string, string | number>): unknown;
  end(body: string): unknown;
}

/** A chat completions answer (after `delayMs`), and the HTTP version each request came with. */
function answer(versions: string[], delayMs = 0) {
  return (req: Req, res: Res): void => {
    versions.push(req.httpVersion);
    req.resume();
    req.on("end", () => {
      setTimeout(() => {
        const body = JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          created: 1,
          model: "gpt-4o",
          choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      }, delayMs);
    });
  };
}

const backend = (name: string, port: number) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { providerA: { model: gpt-4o }, host: 127.0.0.1, port: ${port} }
`;

const policy = (name: string, backendName: string, spec: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: ${name}, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: ${backendName} }]
  backend:
${spec}`;

describe("a GwPolicy's backend.tcp and backend.http on an AI GwBackend", { timeout: 90_000 }, () => {
  const h2Versions: string[] = [];
  const h1Versions: string[] = [];
  const slowVersions: string[] = [];
  const h2 = createH2Server(answer(h2Versions));
  const h1 = createHttpServer(answer(h1Versions));
  const slow = createHttpServer(answer(slowVersions, 3000));
  let env: LlmEnv;

  before(async () => {
    for (const s of [h2, h1, slow]) {
      s.listen(0, "127.0.0.1");
      await once(s, "listening");
    }
    const port = (s: { address(): AddressInfo | string | null }) => (s.address() as AddressInfo).port;
    const names = ["h2", "h1", "slow"];
    env = await startLlmEnv(
      [
        backend("h2", port(h2)),
        policy("h2-conn", "h2", "    http: { version: HTTP2 }\n    tcp: { connectTimeout: 2s }\n"),
        backend("h1", port(h1)),
        backend("slow", port(slow)),
        policy("slow-timeout", "slow", "    http: { requestTimeout: 1s }\n"),
        `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${names.map((n) => `    - matches: [{ path: { type: PathPrefix, value: /${n} } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${n} }]`).join("\n")}
`,
      ].join(""),
      "/h2/v1/chat/completions",
    );
  });

  after(async () => {
    await env?.stop();
    for (const s of [h2, h1, slow]) s.close();
  });

  const ask = (path: string) =>
    new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/${path}/v1`, maxRetries: 0 }).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hello" }],
    });

  test("http.version HTTP2 from the GwPolicy: the provider is spoken to over HTTP/2; without it, HTTP/1.1", async () => {
    const a = await ask("h2");
    assert.equal(a.choices[0]?.message.content, "hi");
    assert.deepEqual([...new Set(h2Versions)], ["2.0"]);
    const b = await ask("h1");
    assert.equal(b.choices[0]?.message.content, "hi");
    assert.deepEqual([...new Set(h1Versions)], ["1.1"]);
  });

  test("tcp.connectTimeout and http.version reach the AI cluster in Envoy, and the policy reports nothing", async () => {
    const dump = JSON.stringify(await env.envoy.configDump());
    const cluster = /"name":"backend\/default\/h2".*?"connect_timeout":"([^"]+)"/.exec(dump);
    assert.equal(cluster?.[1], "2s");
    const status = await (await fetch(`http://127.0.0.1:${env.sluice.adminPort}/status`)).text();
    assert.match(status, /h2-conn/, "the policies' status is on /status");
    assert.doesNotMatch(status, /backend\.(tcp|http)[^"\n]*not applied/);
  });

  test("http.requestTimeout from the GwPolicy bounds the route: a provider slower than 1 s answers 504", async () => {
    const started = Date.now();
    await assert.rejects(ask("slow"), (e: unknown) => (e as { status?: number }).status === 504);
    assert.ok(Date.now() - started < 2800, `answered after ${Date.now() - started} ms`);
  });
});
