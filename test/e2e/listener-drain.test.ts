// A new authentication policy reaches a keep-alive client promptly. The first API-key policy on a Gateway adds a
// filter to its listener, so Envoy replaces the listener and the old one's connections keep the old filters until
// they close. Envoy started by Sluice drains immediately: the kept connection serves at most the request in progress
// under the old filters (told to close with it), and the client's next request, on a new connection, needs a key.

import assert from "node:assert/strict";
import { Agent, request as httpRequest } from "node:http";
import type { Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";

const KEY = "k-drain-0123456789";

function config(port: number, up: Upstream): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: open, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }
`;
}

const KEYS_POLICY = `apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { one: ${KEY} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: keys, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    apiKeyAuthentication: { secretRef: { name: keys } }
`;

interface KeptResult {
  readonly status: number;
  readonly connection: string | undefined;
  readonly socket: Socket;
}

describe("listener replaced under keep-alive clients", () => {
  const cfg = tempConfigDir();
  let port = 0;
  let up: Upstream;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });

  /** A request on the kept connection (one socket, reused while the server keeps it open). */
  const kept = (): Promise<KeptResult> =>
    new Promise((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, path: "/", agent, timeout: 5000 }, (res) => {
        res.resume();
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            connection: res.headers.connection,
            socket: res.socket as Socket,
          }),
        );
      });
      req.on("timeout", () => req.destroy(new Error("kept request timed out")));
      req.on("error", reject);
      req.end();
    });

  before(async () => {
    up = await startEchoUpstream("echo");
    port = await freePort();
    cfg.write("config.yaml", config(port, up));
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice);
    await waitFor("the open route", async () => ((await request(port, "/")).status === 200 ? true : undefined));
  });

  after(async () => {
    agent.destroy();
    await envoy?.stop();
    await sluice?.stop();
    await up?.close();
    cfg.cleanup();
  });

  test("the first API-key policy on a Gateway holds a kept connection to at most one more unauthenticated request", async () => {
    const first = await kept();
    assert.equal(first.status, 200);
    const again = await kept();
    assert.equal(again.status, 200);
    assert.equal(again.socket, first.socket, "the agent keeps one connection open");

    cfg.write("keys.yaml", KEYS_POLICY);
    // New connections see the new listener once Envoy has it.
    await waitFor("API keys on new connections", async () =>
      (await request(port, "/")).status === 401 ? true : undefined,
    );
    assert.equal((await request(port, "/", { headers: { authorization: `Bearer ${KEY}` } })).status, 200);

    // The kept connection belongs to the old listener. Draining immediately, Envoy closes it after the request it
    // serves; a gradual drain would serve this client unauthenticated for minutes.
    const statuses: number[] = [];
    let closedAfter: number | undefined;
    for (let i = 0; i < 3 && !statuses.includes(401); i++) {
      const r = await kept();
      statuses.push(r.status);
      if (r.status === 200 && r.connection === "close") closedAfter ??= i;
    }
    assert.ok(statuses.filter((s) => s === 200).length <= 1, `kept connection statuses: ${statuses.join(", ")}`);
    assert.equal(statuses.at(-1), 401, `kept connection statuses: ${statuses.join(", ")}`);
    if (statuses[0] === 200) assert.equal(closedAfter, 0, "the one old-listener answer tells the client to close");
  });
});
