// frontend.tls through a real Envoy on an HTTPS listener: the minimum TLS version (a TLS 1.2 client is refused, a
// TLS 1.3 one served), ALPN (only http/1.1 offered back although the client asks for h2 first) and the key exchange
// group (P-256 only: a client preferring X25519 gets P-256, one offering only X25519 is refused).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { connect, type TLSSocket } from "node:tls";
import { freePort, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";
import { indentLines, tlsFixture } from "../helpers/tls.js";

const fixture = tlsFixture;
const indent = (t: string) => indentLines(t);

function resources(port: number, upstream: number): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners:
    - name: https
      protocol: HTTPS
      port: ${port}
      hostname: example.com
      tls: { certificateRefs: [{ name: example-com }] }
---
apiVersion: v1
kind: Secret
metadata: { name: example-com, namespace: default }
type: kubernetes.io/tls
stringData:
  tls.crt: |
${indent(fixture("example.com.crt"))}
  tls.key: |
${indent(fixture("example.com.key"))}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${upstream} } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: tls, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  frontend:
    tls:
      minProtocolVersion: "1.3"
      alpnProtocols: [http/1.1]
      keyExchangeGroups: [P-256]
      handshakeTimeout: 5s
`;
}

interface Handshake {
  readonly protocol: string | null;
  readonly alpn: string | false | null;
  readonly group: string | undefined;
}

function handshake(port: number, opts: { maxVersion?: "TLSv1.2" | "TLSv1.3"; ecdhCurve?: string }): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const s: TLSSocket = connect({
      host: "127.0.0.1",
      port,
      servername: "example.com",
      ca: [fixture("example.com.crt")],
      ALPNProtocols: ["h2", "http/1.1"],
      ...(opts.maxVersion !== undefined ? { maxVersion: opts.maxVersion } : {}),
      ...(opts.ecdhCurve !== undefined ? { ecdhCurve: opts.ecdhCurve } : {}),
    });
    s.once("secureConnect", () => {
      const result = {
        protocol: s.getProtocol(),
        alpn: s.alpnProtocol,
        group: (s.getEphemeralKeyInfo() as { name?: string } | null)?.name,
      };
      s.end();
      resolve(result);
    });
    s.once("error", reject);
  });
}

describe("frontend.tls through Envoy", { timeout: 60_000 }, () => {
  let upstream: Upstream;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;
  let port: number;
  const cfg = tempConfigDir();

  before(async () => {
    upstream = await startEchoUpstream("echo");
    port = await freePort();
    cfg.write("all.yaml", resources(port, upstream.port));
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice);
    await waitFor("the HTTPS listener", async () => (await handshake(port, {}).catch(() => undefined)) ?? undefined);
  });
  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    await upstream?.close();
    cfg.cleanup();
  });

  test("TLS 1.3 only: a TLS 1.2 client is refused, a TLS 1.3 client served", async () => {
    assert.equal((await handshake(port, {})).protocol, "TLSv1.3");
    await assert.rejects(handshake(port, { maxVersion: "TLSv1.2" }));
  });

  test("ALPN: http/1.1 only, although the client offers h2 first", async () => {
    assert.equal((await handshake(port, {})).alpn, "http/1.1");
  });

  test("key exchange group: P-256 only, although the client (and Envoy's default) prefer X25519", async () => {
    assert.equal((await handshake(port, { ecdhCurve: "X25519:P-256" })).group, "prime256v1");
    await assert.rejects(handshake(port, { ecdhCurve: "X25519" }));
  });
});
