// Route-level GwPolicies asking different connection settings of one AI GwBackend (xds/llm-connection.ts, served by
// variants of its cluster, llm-passes.ts withLlmVariants), through a real Envoy with the official `openai` client:
// - HTTPRoute `fast`'s GwPolicy asks HTTP/2 and a 2 s connect timeout: its requests reach the provider over HTTP/2,
//   while HTTPRoute `plain`, to the same GwBackend without a GwPolicy, reaches it over HTTP/1.1 (the provider speaks
//   both, and records which);
// - HTTPRoute `team`'s GwPolicy asks a transformation and a 3 s connect timeout: one variant carrying both;
// - Sluice's health scoring of the GwBackend is shared by the variants (they read the cluster's EDS resource): a
//   provider evicted through one route's variant is skipped by the others;
// - the status reports nothing not applied.

import assert from "node:assert/strict";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createH2Server, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { gwBackendRoute, routeBackendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { firstBytesServer, waitFor } from "../helpers/net.js";
import { resourceStatus } from "../helpers/processes.js";

interface Seen {
  readonly version: string;
  readonly path: string;
  readonly team: string | undefined;
}

/**
 * An OpenAI-style provider on one port speaking HTTP/1.1 and cleartext HTTP/2 (prior knowledge), told apart by the
 * HTTP/2 connection preface; each request's HTTP version, path and `x-team` header recorded.
 */
function dualProvider(name: string) {
  const seen: Seen[] = [];
  const state = { fail: false };
  const handle = (req: IncomingMessage | Http2ServerRequest, out: ServerResponse | Http2ServerResponse): void => {
    const res = out as ServerResponse;
    const team = req.headers["x-team"];
    seen.push({ version: req.httpVersion, path: req.url ?? "", team: typeof team === "string" ? team : undefined });
    req.resume();
    req.on("end", () => {
      const body = JSON.stringify(
        state.fail
          ? { error: { message: "overloaded", type: "server_error" } }
          : {
              id: "chatcmpl-1",
              object: "chat.completion",
              created: 1,
              model: "gpt-4o",
              choices: [
                { index: 0, message: { role: "assistant", content: `hi from ${name}` }, finish_reason: "stop" },
              ],
              usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
            },
      );
      res.writeHead(state.fail ? 500 : 200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      });
      res.end(body);
    });
  };
  const h1 = createHttpServer(handle);
  const h2 = createH2Server(handle);
  const server = firstBytesServer((first, stream) =>
    (first.subarray(0, 3).toString("latin1") === "PRI" ? h2 : h1).emit("connection", stream),
  );
  return { seen, state, listen: () => server.listen(), close: () => server.close() };
}

const route = (name: string) => gwBackendRoute(name, "shared");
const policy = routeBackendPolicy;

describe("route-level tcp and http.version on one AI GwBackend: a variant of its cluster each", {
  timeout: 120_000,
}, () => {
  const first = dualProvider("first");
  const second = dualProvider("second");
  let env: LlmEnv;

  before(async () => {
    const [p1, p2] = [await first.listen(), await second.listen()];
    env = await startLlmEnv(
      [
        `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: shared, namespace: default }
spec:
  ai:
    groups:
      - providers: [{ name: first, providerA: {}, host: 127.0.0.1, port: ${p1} }]
      - providers: [{ name: second, providerA: {}, host: 127.0.0.1, port: ${p2} }]
  policies:
    # Scored by Sluice (an EDS cluster whose evicted providers it marks): the variants read the cluster's marks.
    health: { unhealthyCondition: "response.code >= 500", eviction: { duration: 3s, consecutiveFailures: 1 } }
`,
        route("fast"),
        route("plain"),
        route("team"),
        policy("fast-conn", "fast", "    http: { version: HTTP2 }\n    tcp: { connectTimeout: 2s }\n"),
        policy(
          "team-conn",
          "team",
          "    tcp: { connectTimeout: 3s }\n    transformation:\n      request:\n        set: [{ name: x-team, value: \"'a'\" }]\n",
        ),
      ].join(""),
      "/fast/v1/chat/completions",
    );
  });

  after(async () => {
    await env?.stop();
    first.close();
    second.close();
  });

  const ask = (prefix: string) =>
    new OpenAI({ apiKey: "k", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 }).chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "hello" }],
    });

  /** Envoy's clusters of GwBackend `shared` (name → connect timeout) and the cluster each route prefix goes to. */
  async function envoyClusters(): Promise<{ timeouts: Map<string, string>; routes: Map<string, string> }> {
    const dump = (await env.envoy.configDump()) as { configs: Record<string, unknown>[] };
    const timeouts = new Map<string, string>();
    const routes = new Map<string, string>();
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === "object" && v !== null) {
        const o = v as Record<string, unknown>;
        if (typeof o.name === "string" && o.name.startsWith("backend/default/shared") && "connect_timeout" in o) {
          timeouts.set(o.name, String(o.connect_timeout));
        }
        const m = o.match as { prefix?: string; path_separated_prefix?: string } | undefined;
        const r = o.route as { cluster?: string } | undefined;
        const prefix = m?.path_separated_prefix ?? m?.prefix;
        if (prefix !== undefined && r?.cluster !== undefined) routes.set(prefix, r.cluster);
        Object.values(o).forEach(walk);
      }
    };
    walk(dump.configs);
    return { timeouts, routes };
  }

  test("each route gets the HTTP version it asked, from one provider of one GwBackend", async () => {
    const a = await ask("fast");
    assert.equal(a.choices[0]?.message.content, "hi from first");
    assert.equal(first.seen.at(-1)?.version, "2.0");
    const b = await ask("plain");
    assert.equal(b.choices[0]?.message.content, "hi from first");
    assert.equal(first.seen.at(-1)?.version, "1.1");
    // And again, in the other order: connections are the cluster's, each route keeps its own.
    await ask("fast");
    assert.equal(first.seen.at(-1)?.version, "2.0");
    assert.equal(first.seen.at(-1)?.team, undefined);
  });

  test("a route with a transformation and a connect timeout of its own: one variant carrying both", async () => {
    const t = await ask("team");
    assert.equal(t.choices[0]?.message.content, "hi from first");
    assert.equal(first.seen.at(-1)?.team, "a");
    assert.equal(first.seen.at(-1)?.version, "1.1");
    await ask("plain");
    assert.equal(first.seen.at(-1)?.team, undefined);

    const { timeouts, routes } = await envoyClusters();
    const [fast, plain, team] = ["/fast", "/plain", "/team"].map((p) => routes.get(p) ?? "");
    assert.equal(plain, "backend/default/shared");
    assert.match(fast ?? "", /^backend\/default\/shared~[0-9a-f]{10}$/);
    assert.match(team ?? "", /^backend\/default\/shared~[0-9a-f]{10}$/);
    assert.notEqual(fast, team);
    // The cluster and its two variants, no more.
    assert.deepEqual(
      [...timeouts].sort(),
      [
        ["backend/default/shared", "5s"],
        [fast, "2s"],
        [team, "3s"],
      ].sort(),
    );
  });

  test("a provider evicted through one route's variant is skipped by the other routes", async () => {
    first.state.fail = true;
    try {
      const a = await ask("fast");
      // The 500 is Sluice's to score: the attempt fails over to the next group.
      assert.equal(a.choices[0]?.message.content, "hi from second");
      assert.equal(second.seen.at(-1)?.version, "2.0");
      await waitFor(
        "first marked unhealthy in the cluster's EDS",
        async () => {
          const before = first.seen.length;
          const b = await ask("plain");
          return b.choices[0]?.message.content === "hi from second" && first.seen.length === before ? true : undefined;
        },
        5_000,
      );
      const before = first.seen.length;
      const t = await ask("team");
      assert.equal(t.choices[0]?.message.content, "hi from second");
      assert.equal(first.seen.length, before, "the team variant does not try the evicted provider");
      assert.equal(second.seen.at(-1)?.team, "a");
    } finally {
      first.state.fail = false;
    }
  });

  test("status: none of these is reported as not applied", async () => {
    for (const name of ["fast-conn", "team-conn"]) {
      const status = await resourceStatus(env.sluice, "GwPolicy", name);
      assert.match(status, /Attached/);
      assert.doesNotMatch(status, /Warning|not applied/, name);
    }
  });
});
