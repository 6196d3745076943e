// A provider's own tcp / http (its policies, or a GwPolicy for it by sectionName) served through a hop of its own
// (xds/llm-provider-hop.ts), through a real Envoy with the official `openai` client:
// - a provider's own HTTP/2 to an h2c-only server while the other provider of its group stays HTTP/1.1, both taking
//   requests, and the provider's request carries the same headers either way (the hop adds none);
// - a provider's own connect timeout toward a server that never completes the handshake: the route fails over to the
//   next group well before the cluster's 5 s;
// - a provider's own requestTimeout: the next group answers once it passes; a provider alone answers 504;
// - a streamed answer and a Realtime websocket through a hop; Sluice's Realtime relay at a provider's connect timeout;
// - GwPolicies for one provider each (sectionName) doing the connect timeout and HTTP/2;
// - and nothing of these is reported in the GwBackend's or the GwPolicy's status.

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer as createHttpServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import { createServer as createH2Server } from "node:http2";
import { type AddressInfo, connect, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime, refusedUpgrade } from "../helpers/realtime-client.js";

interface Seen {
  readonly version: string;
  readonly headers: IncomingHttpHeaders;
}

/** A chat completions answer naming the server (after `delayMs`); each request's HTTP version and headers are kept. */
function answer(name: string, seen: Seen[], delayMs = 0) {
  return (
    req: { httpVersion: string; headers: IncomingHttpHeaders; resume(): unknown; on(e: "end", f: () => void): unknown },
    res: { writeHead(s: number, h: Record<string, string | number>): unknown; end(b: string): unknown },
  ): void => {
    seen.push({ version: req.httpVersion, headers: req.headers });
    req.resume();
    req.on("end", () => {
      setTimeout(() => {
        const body = JSON.stringify({
          id: "chatcmpl-1",
          object: "chat.completion",
          created: 1,
          model: "gpt-4o",
          choices: [{ index: 0, message: { role: "assistant", content: name }, finish_reason: "stop" }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      }, delayMs);
    });
  };
}

/**
 * A port whose handshakes never complete: a socket listening with a backlog of 0 that never accepts, its one queued
 * connection taken by the test, so the kernel drops every further SYN (Node's servers always accept, hence Python).
 */
async function blackHole(): Promise<{ port: number; stop(): void }> {
  const py = spawn(
    "python3",
    [
      "-c",
      "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()",
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const [line] = (await once(py.stdout, "data")) as [Buffer];
  const port = Number(line.toString().trim());
  const filler: Socket = connect(port, "127.0.0.1");
  await once(filler, "connect");
  return {
    port,
    stop() {
      filler.destroy();
      stopChild(py);
    },
  };
}

function stopChild(p: ChildProcess): void {
  p.stdin?.end();
  p.kill();
}

const providers = (groups: string[][]) =>
  groups.map((g) => `      - providers:\n${g.map((p) => `          - ${p}\n`).join("")}`).join("");

const gwBackend = (name: string, groups: string[][]) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    groups:
${providers(groups)}`;

const provider = (name: string, port: number, policies = "") =>
  `{ name: ${name}, providerA: { model: gpt-4o }, host: 127.0.0.1, port: ${port}${policies === "" ? "" : `, policies: ${policies}`} }`;

const BACKENDS = ["mixed", "connect", "slow", "alone", "section", "stream", "scored"];

/** A streamed chat completion: one chunk at once, the rest (and its end) `gapMs` later. */
function sse(gapMs: number) {
  return (req: { resume(): unknown; on(e: "end", f: () => void): unknown }, res: ServerResponse): void => {
    req.resume();
    req.on("end", () => {
      const chunk = (delta: Record<string, unknown>, finish: string | null) =>
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "gpt-4o", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "first" }, null));
      setTimeout(() => {
        res.write(chunk({ content: " last" }, null));
        res.write(chunk({}, "stop"));
        res.end("data: [DONE]\n\n");
      }, gapMs);
    });
  };
}

describe("a provider's own tcp and http, through its hop in Envoy", { timeout: 120_000 }, () => {
  const seen: Record<string, Seen[]> = { h2: [], h1: [], backup: [], lag: [], spare: [], lonely: [], sec2: [] };
  const servers = [
    createH2Server(answer("h2", seen.h2 ?? [])),
    createHttpServer(answer("h1", seen.h1 ?? [])),
    createHttpServer(answer("backup", seen.backup ?? [])),
    createHttpServer(answer("lag", seen.lag ?? [], 3000)),
    createHttpServer(answer("spare", seen.spare ?? [])),
    createHttpServer(answer("lonely", seen.lonely ?? [], 3000)),
    createH2Server(answer("sec2", seen.sec2 ?? [])),
  ] as const;
  const streamer = createHttpServer(sse(1500));
  let hole: Awaited<ReturnType<typeof blackHole>> | undefined;
  let rt: FakeRealtime | undefined;
  let env: LlmEnv;

  before(async () => {
    for (const s of servers) {
      s.listen(0, "127.0.0.1");
      await once(s, "listening");
    }
    const [h2, h1, backup, lag, spare, lonely, sec2] = servers.map((s) => (s.address() as AddressInfo).port) as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    hole = await blackHole();
    streamer.listen(0, "127.0.0.1");
    await once(streamer, "listening");
    rt = await startFakeRealtime({ name: "realtime", apiKey: "sk-provider" });
    env = await startLlmEnv(
      [
        gwBackend("mixed", [[provider("h2", h2, "{ http: { version: HTTP2 } }"), provider("h1", h1)]]),
        gwBackend("connect", [
          [provider("hole", hole.port, "{ tcp: { connectTimeout: 500ms } }")],
          [provider("backup", backup)],
        ]),
        gwBackend("slow", [[provider("lag", lag, "{ http: { requestTimeout: 1s } }")], [provider("spare", spare)]]),
        gwBackend("alone", [[provider("lonely", lonely, "{ http: { requestTimeout: 1s } }")]]),
        gwBackend("section", [[provider("sec1", hole.port)], [provider("sec2", sec2)]]),
        `${gwBackend("scored", [
          [provider("hole2", hole.port, "{ tcp: { connectTimeout: 500ms } }")],
          [provider("spare3", spare)],
        ])}  policies:
    health: { unhealthyCondition: "response.code >= 500", eviction: { duration: 30s } }
`,
        `${gwBackend("guarded", [[provider("unreachable", hole.port, "{ tcp: { connectTimeout: 500ms } }")]])}  policies:
    auth: { key: sk-provider }
    ai:
      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`,
        gwBackend("stream", [
          [provider("streamer", (streamer.address() as AddressInfo).port, "{ tcp: { connectTimeout: 2s } }")],
          [provider("spare2", spare)],
        ]),
        `${gwBackend("rt", [
          [provider("realtime", rt.port, "{ tcp: { connectTimeout: 2s, keepalive: { time: 30s } } }")],
          [provider("chat", spare)],
        ])}  policies:
    auth: { key: sk-provider }
    ai: { routes: { /v1/realtime: Realtime, /v1/chat/completions: Completions } }
`,
        `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: per-provider, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: section, sectionName: sec1 }]
  backend:
    tcp: { connectTimeout: 500ms }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: per-provider-h2, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: section, sectionName: sec2 }]
  backend:
    http: { version: HTTP2 }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${BACKENDS.map((n) => `    - matches: [{ path: { type: PathPrefix, value: /${n} } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${n} }]`).join("\n")}
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: rt }]
    - matches: [{ path: { type: PathPrefix, value: /guarded/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: guarded }]
`,
      ].join(""),
      "/mixed/v1/chat/completions",
    );
  });

  after(async () => {
    await env?.stop();
    hole?.stop();
    await rt?.close();
    streamer.close();
    for (const s of servers) s.close();
  });

  const ask = (path: string) =>
    new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/${path}/v1`, maxRetries: 0 }).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hello" }],
    });

  test("one provider of a group over its own HTTP/2 (h2c only), the other over HTTP/1.1, both taking requests", async () => {
    const answers: string[] = [];
    for (let i = 0; i < 8; i++) answers.push((await ask("mixed")).choices[0]?.message.content ?? "");
    assert.ok(answers.includes("h2") && answers.includes("h1"), `both providers answer: ${answers.join(",")}`);
    assert.deepEqual([...new Set(seen.h2?.map((s) => s.version))], ["2.0"]);
    assert.deepEqual([...new Set(seen.h1?.map((s) => s.version))], ["1.1"]);
    // Transparent: the provider behind the hop gets the same headers as the other (no x-envoy-* or second
    // x-forwarded-for added), and the request id Envoy gave the request.
    const names = (s: Seen | undefined) =>
      Object.keys(s?.headers ?? {})
        .filter((h) => !h.startsWith(":") && !["connection", "host", "transfer-encoding", "te"].includes(h))
        .sort();
    assert.deepEqual(names(seen.h2?.at(-1)), names(seen.h1?.at(-1)));
    const h2 = seen.h2?.at(-1)?.headers ?? {};
    const h1 = seen.h1?.at(-1)?.headers ?? {};
    assert.equal(String(h2["x-forwarded-for"]).split(",").length, String(h1["x-forwarded-for"]).split(",").length);
    assert.match(String(h2["x-request-id"]), /^[0-9a-f-]{36}$/);
  });

  test("a provider's own connect timeout (500 ms) fails over to the next group well before the cluster's 5 s", async () => {
    const started = Date.now();
    const a = await ask("connect");
    const ms = Date.now() - started;
    assert.equal(a.choices[0]?.message.content, "backup");
    assert.ok(ms >= 450 && ms < 3000, `answered after ${ms} ms`);
    // The hop's 503 counted as the provider's failure by outlier detection: ejected, the next request goes straight
    // to the backup instead of waiting for the connect timeout again.
    const again = Date.now();
    assert.equal((await ask("connect")).choices[0]?.message.content, "backup");
    assert.ok(Date.now() - again < 400, `answered after ${Date.now() - again} ms`);
  });

  test("a provider's own requestTimeout (1 s): the next group answers once it passes; a provider alone answers 504", async () => {
    let started = Date.now();
    const a = await ask("slow");
    let ms = Date.now() - started;
    assert.equal(a.choices[0]?.message.content, "spare");
    assert.ok(ms >= 950 && ms < 2800, `answered after ${ms} ms`);
    assert.equal(seen.lag?.length, 1, "the slow provider was tried first");
    started = Date.now();
    await assert.rejects(ask("alone"), (e: unknown) => (e as { status?: number }).status === 504);
    ms = Date.now() - started;
    assert.ok(ms >= 950 && ms < 2800, `answered after ${ms} ms`);
  });

  test("GwPolicies for one provider each (sectionName): one's connect timeout fails over, the other speaks HTTP/2", async () => {
    const started = Date.now();
    const a = await ask("section");
    const ms = Date.now() - started;
    assert.equal(a.choices[0]?.message.content, "sec2");
    assert.ok(ms < 3000, `answered after ${ms} ms`);
    assert.deepEqual([...new Set(seen.sec2?.map((s) => s.version))], ["2.0"]);
  });

  test("with Sluice's health scoring, the hop's 503 on a connect timeout evicts the provider", async () => {
    const started = Date.now();
    assert.equal((await ask("scored")).choices[0]?.message.content, "spare");
    assert.ok(Date.now() - started >= 450, "the first request waited for the connect timeout");
    // Evicted in Sluice's EDS (marked UNHEALTHY, republished): requests then go straight to the next group.
    const deadline = Date.now() + 5000;
    let fast = false;
    while (!fast && Date.now() < deadline) {
      const t = Date.now();
      assert.equal((await ask("scored")).choices[0]?.message.content, "spare");
      fast = Date.now() - t < 300;
    }
    assert.ok(fast, "the provider behind the hop was evicted");
    // By Sluice (its EDS marks the hop's endpoint), not by Envoy's outlier detection, which counts local-origin
    // failures alone on a scored cluster.
    const clusters = await (await fetch(`http://127.0.0.1:${env.envoy.adminPort}/clusters`)).text();
    const flags = clusters
      .split("\n")
      .find(
        (l) => l.startsWith("backend/default/scored::") && l.includes("llm-provider/") && l.includes("health_flags"),
      );
    assert.match(flags ?? "", /failed_eds_health/, flags);
  });

  test("a streamed answer through a hop reaches the client as it comes (no buffering in the hop)", async () => {
    const started = Date.now();
    const stream = await new OpenAI({
      apiKey: "k",
      baseURL: `${env.baseUrl}/stream/v1`,
      maxRetries: 0,
    }).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hello" }],
      stream: true,
    });
    const arrivals: { text: string; ms: number }[] = [];
    for await (const c of stream) {
      const text = c.choices[0]?.delta?.content;
      if (text !== undefined && text !== null) arrivals.push({ text, ms: Date.now() - started });
    }
    assert.deepEqual(
      arrivals.map((a) => a.text),
      ["first", " last"],
    );
    assert.ok((arrivals[0]?.ms ?? 9999) < 1200, `the first chunk came after ${arrivals[0]?.ms} ms`);
    assert.ok((arrivals[1]?.ms ?? 0) >= 1400, `the last chunk came after ${arrivals[1]?.ms} ms`);
  });

  test("a Realtime websocket through a hop: upgraded to the provider with its key, events both ways", async () => {
    assert.ok(rt !== undefined);
    const c = await openRealtime(env.port, "/v1/realtime", "client-key");
    assert.equal((await c.next()).type, "session.created");
    c.ws.send(
      JSON.stringify({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
      }),
    );
    c.ws.send(JSON.stringify({ type: "response.create" }));
    let ev = await c.next();
    while (ev.type !== "response.done") ev = await c.next();
    c.ws.close(1000, "bye");
    assert.equal(rt.handshakes.at(-1)?.headers.authorization, "Bearer sk-provider");
    assert.deepEqual(
      rt.events.map((e) => e.type),
      ["conversation.item.create", "response.create"],
    );
  });

  test("Sluice's Realtime relay (a guarded session) gives up on the provider at its own connect timeout", async () => {
    // Without it the relay would wait for its 10 s handshake deadline.
    const started = Date.now();
    const r = await refusedUpgrade(env.port, "/guarded/v1/realtime?model=gpt-realtime");
    const ms = Date.now() - started;
    assert.equal(r.status, 502);
    assert.match(r.body, /provider unreachable unreachable/);
    assert.ok(ms >= 450 && ms < 3000, `answered after ${ms} ms`);
  });

  test("Envoy has the hops; the GwBackends' and the GwPolicy's status report none of these fields", async () => {
    const dump = JSON.stringify(await env.envoy.configDump());
    for (const p of [
      "mixed/h2",
      "connect/hole",
      "slow/lag",
      "alone/lonely",
      "section/sec1",
      "section/sec2",
      "stream/streamer",
      "scored/hole2",
      "rt/realtime",
    ]) {
      assert.ok(dump.includes(`"llm-provider/backend/default/${p}"`), `the hop of ${p}`);
    }
    assert.ok(!dump.includes('"llm-provider/backend/default/mixed/h1"'), "no hop for a provider with the cluster's");
    const status = await (await fetch(`http://127.0.0.1:${env.sluice.adminPort}/status`)).text();
    assert.match(status, /per-provider/, "the policy's status is on /status");
    assert.match(status, /GwBackend/);
    assert.doesNotMatch(status, /(tcp|http)[^"\n]*not applied/);
    assert.doesNotMatch(status, /not applied (per provider|to one provider)/);
  });
});
