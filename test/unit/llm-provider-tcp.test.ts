// A provider's tcp on the Realtime relay's own connections (extproc/llm/realtime/provider-tcp.ts): the provider's
// own, else its cluster's (translate/backend/ai-provider-connection.ts providerTcp); a connection not made within the
// connect timeout fails (toward a port whose handshakes never complete), one made in time is kept.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { type AddressInfo, connect, createServer } from "node:net";
import { test } from "node:test";
import { dialling } from "../../src/extproc/llm/realtime/provider-tcp.js";
import { providerTcp } from "../../src/translate/backend/ai-provider-connection.js";
import type { LlmClusterIR, LlmProviderIR } from "../../src/translate/ir.js";

const provider = (connection?: LlmProviderIR["connection"]): LlmProviderIR => ({
  name: "p",
  kind: "openai",
  address: "127.0.0.1",
  port: 9,
  authority: "127.0.0.1:9",
  settings: {},
  ...(connection !== undefined ? { connection } : {}),
});

const cluster = (connection?: LlmClusterIR["connection"]): LlmClusterIR => ({
  kind: "llm",
  name: "backend/default/llm",
  http2: false,
  backend: "default/llm",
  groups: [[provider()]],
  eviction: { consecutiveFailures: 1, durationMs: 3000 },
  ...(connection !== undefined ? { connection } : {}),
});

test("providerTcp: the provider's own tcp, else the cluster's, else Envoy's 5 s connect timeout", () => {
  const keepalive = { timeMs: 20_000, intervalMs: 5000, probes: 3 };
  assert.deepEqual(providerTcp(cluster(), provider()), { connectTimeoutMs: 5000 });
  assert.deepEqual(providerTcp(cluster({ connectTimeoutMs: 2000, keepalive }), provider()), {
    connectTimeoutMs: 2000,
    keepalive,
  });
  // The provider's tcp replaces the cluster's whole: no keepalive, the default connect timeout.
  assert.deepEqual(providerTcp(cluster({ connectTimeoutMs: 2000, keepalive }), provider({ tcp: {} })), {
    connectTimeoutMs: 5000,
  });
  assert.deepEqual(providerTcp(cluster(), provider({ tcp: { connectTimeoutMs: 700 } })), { connectTimeoutMs: 700 });
});

test("dialling: a connection whose handshake never completes fails at the connect timeout", async (t) => {
  // A socket listening with a backlog of 0 that never accepts; its one queued connection is ours, so the kernel drops
  // every further SYN (Node's own servers always accept).
  const py = spawn(
    "python3",
    [
      "-c",
      "import socket,sys\ns=socket.socket()\ns.bind(('127.0.0.1',0))\ns.listen(0)\nprint(s.getsockname()[1],flush=True)\nsys.stdin.read()",
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  t.after(() => {
    py.stdin.end();
    py.kill();
  });
  const [line] = (await once(py.stdout, "data")) as [Buffer];
  const port = Number(line.toString().trim());
  const filler = connect(port, "127.0.0.1");
  t.after(() => filler.destroy());
  await once(filler, "connect");

  const started = Date.now();
  const s = dialling(connect(port, "127.0.0.1"), { connectTimeoutMs: 300 });
  const [err] = (await once(s, "error").catch((e: unknown) => [e])) as [Error];
  const ms = Date.now() - started;
  assert.match(err.message, /connect timeout: no connection within 300 ms/);
  assert.ok(ms >= 280 && ms < 2000, `failed after ${ms} ms`);
});

test("dialling: a connection made in time stays open past the timeout, with keepalive asked", async (t) => {
  const server = createServer((c) => c.on("error", () => {}));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.after(() => server.close());
  const s = dialling(connect((server.address() as AddressInfo).port, "127.0.0.1"), {
    connectTimeoutMs: 100,
    keepalive: { timeMs: 30_000, intervalMs: 1000, probes: 10 },
  });
  await once(s, "connect");
  await new Promise((r) => setTimeout(r, 250));
  assert.equal(s.destroyed, false);
  s.destroy();
});
