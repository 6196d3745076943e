// Authenticated xDS and services end to end (docs/xds-security.md): `sluice serve --xds-ca <dir>` serving two
// Gateways, A and B (B with an HTTPS listener and its Secret), and real Envoys:
// - with Gateway A's client certificate (from `sluice certificate`): A's routes serve, and Sluice's ext_authz answers
//   over mutual TLS (an HTTP check and a gRPC check); nothing of B reaches it;
// - without a certificate (the plaintext bootstrap), or with one of another CA: no configuration at all;
// - with A's certificate and a node that names B: PERMISSION_DENIED, and none of B's listeners or secrets.
// And grpc-js clients without a certificate are refused by the ext_authz and ADS ports.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import type { BootstrapTls } from "../../src/cli/envoy.js";
import { projectRoot } from "../../src/cli/paths.js";
import { Authorization, CheckRequestSchema } from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import { createGrpcClient } from "../../src/grpc/service.js";
import { createCa, issueGatewayCertificate } from "../../src/security/certificates.js";
import { CLUSTER_TYPE } from "../../src/xds-server/type-urls.js";
import { freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";
import { indentLines, tlsFixture } from "../helpers/tls.js";
import { AdsProbeClient, sotwRequest } from "../support/ads-probe.js";

const KEY = "k-gateway-a-0123456789";

function config(portA: number, portB: number, httpsB: number, up: Upstream): string {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: a, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners: [{ name: http, protocol: HTTP, port: ${portA} }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: b, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners:
    - { name: http, protocol: HTTP, port: ${portB} }
    - name: https
      protocol: HTTPS
      port: ${httpsB}
      tls: { certificateRefs: [{ name: b-only-secret }] }
---
apiVersion: v1
kind: Secret
metadata: { name: b-only-secret, namespace: default }
type: kubernetes.io/tls
stringData:
  tls.crt: |
${indentLines(tlsFixture("example.com.crt"))}
  tls.key: |
${indentLines(tlsFixture("example.com.key"))}
---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { one: ${JSON.stringify(KEY)} }
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: echo, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${up.port} } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: a-route, namespace: default }
spec:
  parentRefs: [{ name: a }]
  rules:
    - name: query
      matches: [{ path: { type: PathPrefix, value: /a-query } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]
    - name: key
      matches: [{ path: { type: PathPrefix, value: /a-key } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: a-query, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: a-route, sectionName: query }]
  traffic:
    # Envoy cannot evaluate this (request.query is a map only in the spec's CEL): Sluice's HTTP check.
    authorization: { action: Require, policy: { matchExpressions: ["request.query['internal'] == 'true'"] } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: a-key, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: a-route, sectionName: key }]
  traffic:
    # API keys are checked by Sluice's ext_authz over gRPC.
    apiKeyAuthentication: { secretRef: { name: keys } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: b-route, namespace: default }
spec:
  parentRefs: [{ name: b }]
  rules: [{ matches: [{ path: { type: PathPrefix, value: /b-only-path } }], backendRefs: [{ group: sluice.dev, kind: GwBackend, name: echo }] }]
`;
}

/** `sluice certificate`: Gateway `gateway`'s client certificate from the CA in `caDir`, as a bootstrap reads it. */
function certificate(caDir: string, gateway: string, out: string): BootstrapTls {
  const r = spawnSync(
    process.execPath,
    [join(projectRoot(), "bin", "sluice.js"), "certificate", "--xds-ca", caDir, "--gateway", gateway, "--out", out],
    { encoding: "utf8" },
  );
  assert.equal(r.status, 0, r.stderr);
  return {
    certFile: join(out, "tls.crt"),
    keyFile: join(out, "tls.key"),
    caFile: join(out, "ca.crt"),
    serverName: "127.0.0.1",
  };
}

interface Dump {
  readonly configs?: readonly { readonly "@type": string; readonly [k: string]: unknown }[];
}

/** What an Envoy got over xDS: its dynamic listeners' names, and every dynamic secret's name. */
async function dynamic(envoy: TestEnvoy): Promise<{ listeners: string[]; secrets: string[]; text: string }> {
  const dump = (await envoy.configDump()) as Dump;
  const text = JSON.stringify(dump);
  const of = (suffix: string) =>
    dump.configs?.find((c) => c["@type"].endsWith(suffix)) as Record<string, unknown> | undefined;
  const listeners = ((of("ListenersConfigDump")?.["dynamic_listeners"] ?? []) as { name: string }[]).map((l) => l.name);
  const secrets = [
    ...((of("SecretsConfigDump")?.["dynamic_active_secrets"] ?? []) as { name: string }[]),
    ...((of("SecretsConfigDump")?.["dynamic_warming_secrets"] ?? []) as { name: string }[]),
  ].map((s) => s.name);
  return { listeners, secrets, text };
}

describe("authenticated xDS and services", () => {
  const cfg = tempConfigDir();
  const certs = mkdtempSync(join(tmpdir(), "sluice-xds-auth-"));
  const caDir = join(certs, "ca");
  let up: Upstream;
  let sluice: SluiceProcess;
  let portA = 0;
  let portB = 0;
  let httpsB = 0;
  let tlsA: BootstrapTls;
  const envoys: TestEnvoy[] = [];
  const envoy = async (...args: Parameters<typeof startTestEnvoy>) => {
    const e = await startTestEnvoy(...args);
    envoys.push(e);
    return e;
  };

  before(async () => {
    up = await startEchoUpstream("echo");
    [portA, portB, httpsB] = [await freePort(), await freePort(), await freePort()];
    cfg.write("gateways.yaml", config(portA, portB, httpsB, up));
    sluice = await startSluice("serve", cfg.dir, { extraArgs: ["--xds-ca", caDir] });
    assert.ok(
      sluice.output.some((l) => l.includes(`created a CA in ${caDir}`)),
      sluice.output.join("\n"),
    );
    tlsA = certificate(caDir, "default/a", join(certs, "a"));
  });
  after(async () => {
    for (const e of envoys) await e.stop();
    await sluice?.stop();
    await up?.close();
    cfg.cleanup();
    rmSync(certs, { recursive: true, force: true });
  });

  test("an Envoy with Gateway A's certificate serves A's routes, and Sluice's ext_authz answers it over mTLS", async () => {
    const a = await envoy(sluice, { gateway: "default/a", tls: tlsA });
    await waitFor("A's routes", async () =>
      (await request(portA, "/a-query?internal=true")).status === 200 ? true : undefined,
    );
    // The HTTP check (sluice_authz_http) decides both ways.
    assert.equal((await request(portA, "/a-query?internal=no")).status, 403);
    // The gRPC check (sluice_authz).
    assert.equal((await request(portA, "/a-key", { headers: { authorization: `Bearer ${KEY}` } })).status, 200);
    assert.equal((await request(portA, "/a-key", { headers: { authorization: "Bearer wrong" } })).status, 401);
    const got = await dynamic(a);
    assert.ok(got.listeners.length > 0);
    assert.ok(
      got.listeners.every((l) => l.startsWith("gateway/default/a/")),
      got.listeners.join(", "),
    );
    assert.deepEqual(got.secrets, []);
    assert.doesNotMatch(got.text, /b-only|gateway\/default\/b\//);
    assert.ok(got.text.includes("envoy.transport_sockets.tls"));
    assert.match((await request(a.adminPort, "/stats?filter=^control_plane.connected_state$")).body, /: 1/);
    const streams = ((await sluice.status())["xds"] as { streams: { nodeId: string; identity?: string }[] }).streams;
    assert.ok(
      streams.some((s) => s.identity === "default/a"),
      JSON.stringify(streams),
    );
    assert.ok(
      streams.every((s) => s.identity === "default/a"),
      JSON.stringify(streams),
    );
  });

  test("an Envoy without a client certificate, or with another CA's, gets no configuration", async () => {
    // A certificate for Gateway A, but of another CA.
    const foreign = await issueGatewayCertificate(await createCa({ name: "CN=Not Sluice's CA" }), "default/a");
    const foreignDir = join(certs, "foreign");
    mkdirSync(foreignDir);
    writeFileSync(join(foreignDir, "tls.crt"), foreign.cert);
    writeFileSync(join(foreignDir, "tls.key"), foreign.key);
    const plain = await envoy(sluice, { gateway: "default/b", ready: false });
    const other = await envoy(sluice, {
      gateway: "default/b",
      ready: false,
      tls: { ...tlsA, certFile: join(foreignDir, "tls.crt"), keyFile: join(foreignDir, "tls.key") },
    });
    // Long enough for several connection attempts each (Envoy retries the ADS stream after 0.5-1 s at first).
    await sleep(4_000);
    for (const e of [plain, other]) {
      const got = await dynamic(e);
      assert.deepEqual(got.listeners, []);
      assert.deepEqual(got.secrets, []);
      assert.doesNotMatch(got.text, /b-only|gateway\/default\/b\//);
    }
    await assert.rejects(request(portB, "/b-only-path"), /ECONNREFUSED/);
    const status = await sluice.status();
    const streams = (status["xds"] as { streams: { group: string }[] }).streams;
    assert.ok(!streams.some((s) => s.group === "default/b"), JSON.stringify(streams));
  });

  test("an Envoy with A's certificate whose node names B is refused with PERMISSION_DENIED and gets none of B", async () => {
    const m = await envoy(sluice, { gateway: "default/b", tls: tlsA, ready: false });
    const node = `test-${process.pid}-${m.adminPort}`;
    const refusals = async () => {
      const xds = (await sluice.status())["xds"] as {
        refusals: { identity?: string; group?: string; nodeId?: string; message: string }[];
      };
      return xds.refusals.filter((r) => r.nodeId === node);
    };
    // Envoy retries the stream; every attempt is refused.
    const refused = await waitFor("Sluice to refuse this Envoy twice", async () => {
      const r = await refusals();
      return r.length >= 2 ? r : undefined;
    });
    for (const r of refused) {
      assert.equal(r.identity, "default/a");
      assert.equal(r.group, "default/b");
      assert.equal(
        r.message,
        `the client certificate is Gateway default/a's; node "${node}" asks for the configuration of default/b`,
      );
    }
    // Not control_plane.connected_state: Envoy counts itself connected from the stream's start until Sluice refuses its
    // first request, and it retries, so a sample can catch 1 (a clean-clone run did). What it never gets is a resource.
    const got = await dynamic(m);
    assert.deepEqual(got.listeners, []);
    assert.deepEqual(got.secrets, []);
    assert.doesNotMatch(got.text, /b-only|gateway\/default\/b\//);
    await assert.rejects(request(portB, "/b-only-path"), /ECONNREFUSED/);
    await assert.rejects(request(httpsB, "/"), /ECONNREFUSED/);
    const metrics = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/metrics`)).text();
    const counted = Number(/^sluice_xds_refused_streams_total (\d+)$/m.exec(metrics)?.[1]);
    assert.ok(counted >= refused.length, metrics);
  });

  test("grpc-js clients without a client certificate are refused by the ext_authz and ADS ports", async () => {
    const ca = readFileSync(tlsA.caFile);
    const anonymous = grpc.credentials.createSsl(ca);
    const asA = grpc.credentials.createSsl(ca, readFileSync(tlsA.keyFile), readFileSync(tlsA.certFile));
    const check = (c: grpc.ChannelCredentials) => {
      const client = createGrpcClient(Authorization, `127.0.0.1:${sluice.authzPort}`, c);
      return new Promise<void>((resolve, reject) =>
        client.check(create(CheckRequestSchema, {}), new grpc.Metadata(), { deadline: Date.now() + 5_000 }, (e) => {
          client.close();
          if (e) reject(e);
          else resolve();
        }),
      );
    };
    for (const c of [anonymous, grpc.credentials.createInsecure()]) {
      await assert.rejects(check(c), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
    }
    // The same call with A's certificate is answered (a check without a policy id: a decision, not a transport error).
    await check(asA);
    const ads = new AdsProbeClient(sluice.xdsPort, anonymous);
    const s = ads.sotw();
    s.write(sotwRequest({ typeUrl: CLUSTER_TYPE, node: { id: "anonymous", cluster: "default/a" } }));
    const { error, responses } = await s.failure();
    ads.close();
    assert.equal(error.code, grpc.status.UNAVAILABLE);
    assert.deepEqual(responses, []);
    const metrics = await (await fetch(`http://127.0.0.1:${sluice.adminPort}/metrics`)).text();
    assert.ok(Number(/^sluice_tls_refused_connections_total (\d+)$/m.exec(metrics)?.[1]) >= 2, metrics);
  });
});
