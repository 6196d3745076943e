// The controller under a failing API server: restarted under traffic, Envoy keeps serving (Sluice keeps the last
// view and the snapshot built from it), Sluice resumes its watches and applies a change made after it; a forced 410
// Gone (etcd compacted past Sluice's resourceVersions, then the API server restarted with an empty watch cache)
// relists every such kind without an empty or partial view and without losing an update.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { KubeClient } from "../../src/sources/kube/client.js";
import {
  clusterForController,
  gatewayEnvoy,
  hostAddress,
  kubeGatewayYaml,
  kubeRouteYaml,
  kubeServiceYaml,
  SLUICE_GATEWAY_CLASS,
  startController,
} from "../helpers/controller.js";
import type { KubeCluster } from "../helpers/kube.js";
import { freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import type { SluiceProcess, TestEnvoy } from "../helpers/processes.js";

interface KindStatus {
  state: string;
  objects: number;
  lists: number;
  gone: number;
  watches: number;
}

async function kinds(p: SluiceProcess): Promise<Record<string, KindStatus>> {
  return ((await p.status())["kube"] as { kinds: Record<string, KindStatus> }).kinds;
}

/** Compacts etcd up to its current revision: every older resourceVersion is gone. */
async function compactEtcd(etcd: string): Promise<number> {
  const range = await fetch(`${etcd}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key: "AA==" }) });
  const revision = Number(((await range.json()) as { header: { revision: string } }).header.revision);
  const r = await fetch(`${etcd}/v3/kv/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  assert.equal(r.status, 200, await r.text());
  return revision;
}

describe("the controller when the API server fails", { timeout: 240_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  let controller: SluiceProcess;
  let envoy: TestEnvoy;
  let app: Upstream;
  let ns: string;
  let port: number;
  const failures: string[] = [];
  let sent = 0;
  let stopLoad = false;
  let load: Promise<void> | undefined;

  before(async () => {
    const c = await clusterForController();
    ({ cluster, admin, ns } = c);
    const { system, kubeconfig } = c;
    port = await freePort();
    app = await startEchoUpstream("app", 0, hostAddress());
    await cluster.apply(
      `${SLUICE_GATEWAY_CLASS}${kubeGatewayYaml(ns, port)}${kubeServiceYaml(ns, "app", app.port)}${kubeRouteYaml(ns, "app")}`,
    );
    controller = await startController(kubeconfig, system);
    envoy = await gatewayEnvoy(admin, controller, ns, "gw");
    await waitFor("the route to serve", async () => ((await request(port, "/app")).status === 200 ? true : undefined));
    // Traffic for the whole file: every request must succeed, whatever the API server does.
    load = (async () => {
      while (!stopLoad) {
        const r = await request(port, "/app").catch((e: Error) => ({ status: 0, body: e.message }));
        sent++;
        if (r.status !== 200) failures.push(`${r.status} ${r.body.slice(0, 100)}`);
        await sleep(10);
      }
    })();
  });

  after(async () => {
    stopLoad = true;
    await load;
    await envoy?.stop();
    await controller?.stop();
    await app?.close();
    await admin?.close();
    await cluster?.stop();
  });

  test("API server restarted under traffic: Envoy keeps serving, watches resume, a later change is applied", async () => {
    const before = await kinds(controller);
    await cluster.restartApiServer();
    // Written as soon as the API server is back: Sluice's watches may not be yet.
    await cluster.apply(kubeRouteYaml(ns, "after-restart"));
    await waitFor(
      "the change made after the restart",
      async () => ((await request(port, "/after-restart")).status === 200 ? true : undefined),
      30_000,
    );
    const now = await kinds(controller);
    assert.ok((now["HTTPRoute"]?.watches ?? 0) > (before["HTTPRoute"]?.watches ?? 0), "the HTTPRoute watch resumed");
    assert.equal(now["HTTPRoute"]?.objects, 2);
    assert.deepEqual(failures, [], `${failures.length} of ${sent} requests failed`);
  });

  test("a forced 410 Gone relists: no lost update, no empty view", async () => {
    const before = await kinds(controller);
    // Move the store's revision past every resourceVersion Sluice holds, compact it away, and restart the API
    // server so its watch cache starts from now: every watch resumed from an older version is answered 410 Gone.
    await cluster.apply(`
apiVersion: v1
kind: ConfigMap
metadata: { name: bump, namespace: ${ns} }
data: { at: "${Date.now()}" }
`);
    await compactEtcd(cluster.etcd);
    await cluster.restartApiServer();
    await cluster.apply(kubeRouteYaml(ns, "after-gone"));
    await waitFor(
      "the change made after the compaction",
      async () => ((await request(port, "/after-gone")).status === 200 ? true : undefined),
      30_000,
    );
    // Every kind answered 410 lists again (a kind may still be backing off from the restart's 429s).
    const now = await waitFor(
      "every kind answered 410 Gone to relist",
      async () => {
        const k = await kinds(controller);
        const gone = Object.entries(k).filter(([name, x]) => x.gone > (before[name]?.gone ?? 0));
        return gone.length > 0 && gone.every(([name, x]) => x.lists > (before[name]?.lists ?? 0)) ? k : undefined;
      },
      40_000,
      200,
    );
    assert.equal(now["HTTPRoute"]?.objects, 3, "every route is still there");
    for (const path of ["/app", "/after-restart", "/after-gone"]) assert.equal((await request(port, path)).status, 200);
    assert.deepEqual(failures, [], `${failures.length} of ${sent} requests failed`);
  });
});
