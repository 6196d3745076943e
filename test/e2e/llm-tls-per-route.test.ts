// A route-level GwPolicy's `backend.tls` for one AI GwBackend (backend/ai-policy-tls.ts, served by a variant of its
// cluster, xds/llm-passes.ts withLlmVariants), through a real Envoy with the official `openai` client. The provider
// answers plain HTTP and TLS on one port (a private CA, the example.com fixture), recording which each connection was:
// - HTTPRoute `secure`'s GwPolicy asks TLS with the CA from a ConfigMap and SNI example.com: its requests reach the
//   provider over TLS; HTTPRoute `plain`, to the same GwBackend without a GwPolicy, reaches it in cleartext;
// - HTTPRoute `tuned` asks the same TLS and a connect timeout: one variant carrying both;
// - HTTPRoute `bad` asks TLS with a ConfigMap that does not exist: it alone answers 503, its policy names the field;
// - nothing else is reported.

import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, describe, test } from "node:test";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { gwBackendRoute, routeBackendPolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { firstBytesServer } from "../helpers/net.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

/** Each accepted connection: TLS (with the SNI asked) or cleartext. */
type Seen = { readonly tls: true; readonly sni: string | false } | { readonly tls: false };

/** In front of `target`: TLS when the client's first byte opens a TLS handshake (0x16), else cleartext. */
async function dualFront(target: number): Promise<{ port: number; seen: Seen[]; close(): void }> {
  const seen: Seen[] = [];
  const toTarget = (from: NodeJS.ReadWriteStream & { destroy(): void; on(e: "error", f: () => void): unknown }) => {
    const up = connect(target, "127.0.0.1");
    from.pipe(up).pipe(from);
    const end = () => {
      from.destroy();
      up.destroy();
    };
    from.on("error", end);
    up.on("error", end);
  };
  const tls = createTlsServer({ cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") }, (s) => {
    seen.push({ tls: true, sni: (s as TLSSocket).servername ?? false });
    toTarget(s);
  });
  const server = firstBytesServer((first, stream) => {
    if (first[0] === 0x16) tls.emit("connection", stream);
    else {
      seen.push({ tls: false });
      toTarget(stream);
    }
  });
  const port = await server.listen();
  return { port, seen, close: () => server.close() };
}

const route = (name: string) => gwBackendRoute(name, "shared");
const policy = routeBackendPolicy;

const TLS = "    tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com }\n";

describe("a route-level GwPolicy's backend.tls on one AI GwBackend: a variant of its cluster", {
  timeout: 90_000,
}, () => {
  let provider: FakeProvider;
  let front: Awaited<ReturnType<typeof dualFront>>;
  let env: LlmEnv;

  before(async () => {
    provider = await startFakeProvider({ name: "p", apiKey: "sk-test" });
    front = await dualFront(provider.port);
    env = await startLlmEnv(
      [
        caConfigMapYaml(),
        `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: shared, namespace: default }
spec:
  ai:
    provider: { providerA: { model: gpt-test }, host: 127.0.0.1, port: ${front.port} }
  policies:
    auth: { key: sk-test }
`,
        route("secure"),
        route("plain"),
        route("tuned"),
        route("bad"),
        policy("tls-secure", "secure", TLS),
        policy("tls-tuned", "tuned", `${TLS}    tcp: { connectTimeout: 3s }\n`),
        policy("tls-bad", "bad", "    tls: { caCertificateRefs: [{ name: no-such-ca }], sni: example.com }\n"),
      ].join(""),
      "/plain/v1/chat/completions",
    );
  });

  after(async () => {
    await env?.stop();
    front?.close();
    await provider?.close();
  });

  const ask = (prefix: string) =>
    new OpenAI({ apiKey: "client-key", baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 }).chat.completions.create(
      { model: "gpt-test", messages: [{ role: "user", content: "hi" }] },
    );

  test("the route with the GwPolicy reaches the provider over TLS; the other, to the same GwBackend, in cleartext", async () => {
    const n = front.seen.length;
    const a = await ask("secure");
    assert.match(a.choices[0]?.message.content ?? "", /Hello from p/);
    assert.equal(provider.requests.at(-1)?.headers.authorization, "Bearer sk-test");
    assert.ok(
      front.seen.slice(n).some((s) => s.tls && s.sni === "example.com"),
      JSON.stringify(front.seen.slice(n)),
    );
    const m = front.seen.length;
    const b = await ask("plain");
    assert.match(b.choices[0]?.message.content ?? "", /Hello from p/);
    // Envoy's connections are per cluster: the plain route's (if it opened one now) is cleartext.
    assert.ok(
      front.seen.slice(m).every((s) => !s.tls),
      JSON.stringify(front.seen.slice(m)),
    );
    assert.ok(front.seen.some((s) => !s.tls));
  });

  test("TLS and a connect timeout from one route's GwPolicy: one variant carrying both", async () => {
    const r = await ask("tuned");
    assert.match(r.choices[0]?.message.content ?? "", /Hello from p/);
    const dump = JSON.stringify(await env.envoy.configDump());
    const clusters = [
      ...dump.matchAll(/"name":"(backend\/default\/shared[^"]*)","type":"STRICT_DNS","connect_timeout":"([^"]+)"/g),
    ]
      .map((m) => `${m[1]} ${m[2]}`)
      .sort();
    // The cluster (plain), the TLS variant (secure), the TLS and timeout variant (tuned); none for `bad`.
    assert.equal(clusters.length, 3, clusters.join(", "));
    assert.ok(clusters.includes("backend/default/shared 5s"), clusters.join(", "));
    assert.equal(clusters.filter((c) => / 3s$/.test(c)).length, 1, clusters.join(", "));
    assert.equal(clusters.filter((c) => /~[0-9a-f]{10} 5s$/.test(c)).length, 1, clusters.join(", "));
  });

  test("a route asking TLS with a missing CA answers 503 and its policy names the field; the others are told nothing", async () => {
    const n = provider.requests.length;
    await assert.rejects(ask("bad"), (e: { status?: number }) => e.status === 503);
    assert.equal(provider.requests.length, n, "nothing reached the provider");
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = (name: string) =>
      JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === name)?.status);
    assert.match(status("tls-bad"), /backend\.tls\.caCertificateRefs/);
    for (const name of ["tls-secure", "tls-tuned"]) {
      assert.match(status(name), /Attached/, name);
      assert.doesNotMatch(status(name), /Warning|not applied/, name);
    }
    // And the others still answer.
    assert.match((await ask("secure")).choices[0]?.message.content ?? "", /Hello from p/);
  });
});
