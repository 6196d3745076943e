// Kinds that come and go: the controller starts on a cluster with only the Gateway API's standard CRDs — the
// experimental kinds, InferencePool and Sluice's own CRDs absent. Each absent kind is logged once, the rest is served;
// Sluice's CRDs installed afterwards are picked up without a restart, and their resources get status.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { KubeClient } from "../../src/sources/kube/client.js";
import {
  clusterForController,
  conditionOf,
  gatewayEnvoy,
  hostAddress,
  kubeGatewayYaml,
  kubeServiceYaml,
  SLUICE_GATEWAY_CLASS,
  startController,
  waitForObject,
} from "../helpers/controller.js";
import { crdFiles, type KubeCluster } from "../helpers/kube.js";
import { freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import type { SluiceProcess, TestEnvoy } from "../helpers/processes.js";

describe("CRDs absent at start, installed later", { timeout: 240_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  let controller: SluiceProcess;
  let envoy: TestEnvoy;
  let app: Upstream;
  let ns: string;
  let port: number;

  before(async () => {
    const c = await clusterForController({ crds: false });
    ({ cluster, admin, ns } = c);
    const { system, kubeconfig } = c;
    // Gateway API's standard kinds only: Sluice's CRDs and the experimental kinds come later.
    const standard = crdFiles("standard").filter((f) => f.includes("/gateway-api-v") && f.includes("/standard/"));
    assert.ok(standard.length > 0);
    for (const f of standard) await cluster.apply(readFileSync(f, "utf8"));
    port = await freePort();
    app = await startEchoUpstream("app", 0, hostAddress());
    await waitFor("the standard CRDs to be served", async () =>
      (await admin.get(`/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/httproutes`).catch(() => undefined))
        ? true
        : undefined,
    );
    await cluster.apply(`${SLUICE_GATEWAY_CLASS}${kubeGatewayYaml(ns, port)}${kubeServiceYaml(ns, "app", app.port)}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: ${ns} }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /app } }]
      backendRefs: [{ name: app, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /static } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: static }]
`);
    controller = await startController(kubeconfig, system);
    envoy = await gatewayEnvoy(admin, controller, ns, "gw");
  });

  after(async () => {
    await envoy?.stop();
    await controller?.stop();
    await app?.close();
    await admin?.close();
    await cluster?.stop();
  });

  test("absent kinds are logged once each; the rest is served", async () => {
    assert.equal((await request(port, "/app")).status, 200);
    // The GwBackend kind is not served yet: the rule that needs one answers 500 (backend not found), nothing else.
    assert.notEqual((await request(port, "/static")).status, 200);
    // Long enough for a few rediscovery rounds (every 10 s): still one line per kind.
    await sleep(11_000);
    for (const kind of ["GwPolicy", "GwBackend", "InferencePool", "XListenerSet"]) {
      const lines = controller.output.filter((l) => l.startsWith(`kube: ${kind} (`) && l.includes("not served"));
      assert.equal(lines.length, 1, `${kind}: ${lines.join(" | ")}`);
    }
  });

  test("Sluice's CRDs installed after start are picked up, and their resources served", async () => {
    await cluster.installCrds({ gatewayApiChannel: "standard" });
    await cluster.apply(`
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: static, namespace: ${ns} }
spec: { static: { host: 127.0.0.1, port: ${await staticPort()} } }
`);
    await waitFor(
      "the GwBackend to serve",
      async () => ((await request(port, "/static")).status === 200 ? true : undefined),
      30_000,
      200,
    );
    const backend = await waitForObject(
      admin,
      `/apis/sluice.dev/v1alpha1/namespaces/${ns}/gwbackends/static`,
      "status",
      (o) =>
        conditionOf((o["status"] as { conditions?: unknown } | undefined)?.conditions, "Accepted")?.status === "True",
    );
    assert.ok(backend);
    assert.ok(
      controller.output.some((l) => l === "kube: GwBackend is served now"),
      controller.output.slice(-20).join("\n"),
    );
  });

  /** A loopback upstream for the static GwBackend (a static backend may name 127.0.0.1, unlike an EndpointSlice). */
  let loopback: Upstream | undefined;
  async function staticPort(): Promise<number> {
    loopback ??= await startEchoUpstream("static");
    return loopback.port;
  }
  after(async () => {
    await loopback?.close();
  });
});
