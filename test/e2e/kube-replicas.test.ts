// Two `sluice controller` replicas on one cluster: both serve xDS, one holds the Lease and writes status. They build
// identical snapshots (same versions) from the same cluster state. The leader is killed: the other holds the Lease
// within its duration and writes status; an Envoy connected to the killed replica reconnects to the other with zero
// failed requests and no configuration change.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { parseDocument } from "yaml";
import { type EnvoyProcess, renderBootstrap, startEnvoy } from "../../src/cli/envoy.js";
import type { KubeClient, KubeObject } from "../../src/sources/kube/client.js";
import {
  clusterForController,
  conditionOf,
  gatewayCertificateFiles,
  hostAddress,
  kubeGatewayYaml,
  kubeRouteYaml,
  kubeServiceYaml,
  SLUICE_GATEWAY_CLASS,
  startController,
  waitForObject,
} from "../helpers/controller.js";
import type { KubeCluster } from "../helpers/kube.js";
import { freePort, request, sleep, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import type { SluiceProcess } from "../helpers/processes.js";

const GW = "/apis/gateway.networking.k8s.io/v1";
const LEASE_S = 6;

interface KubeStatus {
  identity: string;
  leading: boolean;
  statusWrites: { writes: number };
}

async function kubeStatus(p: SluiceProcess): Promise<KubeStatus> {
  return (await p.status())["kube"] as KubeStatus;
}

/** Envoy's bootstrap with both replicas as endpoints of every cluster that reaches Sluice. */
function bothReplicas(
  bootstrap: string,
  replicas: readonly { readonly xdsPort: number; readonly authzPort: number }[],
): string {
  const doc = parseDocument(bootstrap);
  const clusters = doc.getIn(["static_resources", "clusters"]) as { toJSON(): unknown } | undefined;
  const list = (clusters?.toJSON() ?? []) as {
    name: string;
    load_assignment: { endpoints: { lb_endpoints: unknown[] }[] };
  }[];
  for (const c of list) {
    const port = (p: { xdsPort: number; authzPort: number }) =>
      c.name.startsWith("sluice_authz") ? p.authzPort : p.xdsPort;
    c.load_assignment.endpoints = [
      {
        lb_endpoints: replicas.map((p) => ({
          endpoint: { address: { socket_address: { address: "127.0.0.1", port_value: port(p) } } },
        })),
      },
    ];
  }
  doc.setIn(["static_resources", "clusters"], list);
  return doc.toString({ lineWidth: 0 });
}

async function envoyStat(adminPort: number, name: string): Promise<number> {
  const body = (await request(adminPort, `/stats?filter=^${name.replaceAll(".", "\\.")}$`)).body;
  const m = /: (\d+)/.exec(body);
  return m?.[1] !== undefined ? Number(m[1]) : Number.NaN;
}

describe("two controller replicas", { timeout: 240_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  const replicas: SluiceProcess[] = [];
  let envoy: EnvoyProcess;
  let envoyAdmin: number;
  let app: Upstream;
  let ns: string;
  let system: string;
  let port: number;
  let kubeconfig: string;

  before(async () => {
    ({ cluster, admin, system, kubeconfig, ns } = await clusterForController());
    port = await freePort();
    app = await startEchoUpstream("app", 0, hostAddress());
    await cluster.apply(
      `${SLUICE_GATEWAY_CLASS}${kubeGatewayYaml(ns, port)}${kubeServiceYaml(ns, "app", app.port)}${kubeRouteYaml(ns, "r", "app")}`,
    );
    const args = ["--lease-duration", String(LEASE_S)];
    const a = await startController(kubeconfig, system, { identity: "replica-a", extraArgs: args });
    replicas.push(a);
    await waitFor("replica-a to lead", async () => ((await kubeStatus(a)).leading ? true : undefined), 20_000);
    // The Envoy knows both replicas (as it would a Service's endpoints) but only replica-a listens yet, so it is
    // surely connected to the replica that leads and is about to be killed.
    const b = { xds: await freePort(), authz: await freePort() };
    envoyAdmin = await freePort();
    const bootstrap = renderBootstrap({
      nodeId: "envoy-replicas",
      gateway: `${ns}/gw`,
      adminPort: envoyAdmin,
      xdsHost: "127.0.0.1",
      xdsPort: a.xdsPort,
      authzPort: a.authzPort,
      delta: true,
      // Issued by replica-a from the CA in the controller's Secret; replica-b serves with the same CA.
      tls: await gatewayCertificateFiles(admin, ns, "gw"),
    });
    envoy = startEnvoy(
      bothReplicas(bootstrap, [
        { xdsPort: a.xdsPort, authzPort: a.authzPort },
        { xdsPort: b.xds, authzPort: b.authz },
      ]),
      { logLevel: "warn" },
    );
    await waitFor("the route to serve", async () => ((await request(port, "/app")).status === 200 ? true : undefined));
    replicas.push(
      await startController(kubeconfig, system, {
        identity: "replica-b",
        extraArgs: args,
        xdsPort: b.xds,
        authzPort: b.authz,
      }),
    );
  });

  after(async () => {
    await envoy?.stop();
    for (const r of replicas) await r.stop();
    await app?.close();
    await admin?.close();
    await cluster?.stop();
  });

  test("both replicas build identical snapshots; exactly one leads", async () => {
    const [a, b] = replicas as [SluiceProcess, SluiceProcess];
    const snapshots = async (p: SluiceProcess) => (await p.status())["snapshots"] as Record<string, string>;
    assert.equal((await kubeStatus(a)).leading, true);
    assert.equal((await kubeStatus(b)).leading, false);
    const va = await snapshots(a);
    assert.ok(va[`${ns}/gw`], JSON.stringify(va));
    // Content-addressed: the same cluster state gives the same snapshot version on every replica.
    await waitFor("identical snapshots", async () =>
      JSON.stringify(await snapshots(b)) === JSON.stringify(await snapshots(a)) ? true : undefined,
    );
  });

  test("the leader is killed: the other takes the Lease within its duration, Envoy keeps serving, nothing changes", async (t) => {
    const [leader, follower] = replicas as [SluiceProcess, SluiceProcess];
    const connected = (await leader.status())["xds"] as { streams: { nodeId: string }[] };
    assert.ok(
      connected.streams.some((s) => s.nodeId === "envoy-replicas"),
      "the Envoy is connected to the leader",
    );
    const statsBefore = {
      lds: await envoyStat(envoyAdmin, "listener_manager.lds.update_success"),
      cds: await envoyStat(envoyAdmin, "cluster_manager.cds.update_success"),
      modified: await envoyStat(envoyAdmin, "listener_manager.listener_modified"),
      clusterModified: await envoyStat(envoyAdmin, "cluster_manager.cluster_modified"),
    };
    const failures: number[] = [];
    let sent = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const r = await request(port, "/app").catch(() => ({ status: 0 }));
        sent++;
        if (r.status !== 200) failures.push(r.status);
        await sleep(10);
      }
    })();
    await sleep(300);
    const killedAt = performance.now();
    await leader.stop("SIGKILL");
    const tookOver = await waitFor(
      "the follower to take the Lease",
      async () => ((await kubeStatus(follower)).leading ? performance.now() - killedAt : undefined),
      (LEASE_S + 10) * 1000,
      50,
    );
    t.diagnostic(`replica-b took the Lease ${tookOver.toFixed(0)} ms after replica-a was killed (lease ${LEASE_S} s)`);
    assert.ok(tookOver <= LEASE_S * 1000 + 2_000, `took ${tookOver.toFixed(0)} ms (lease ${LEASE_S} s)`);
    await waitFor("the Envoy to reconnect to the follower", async () => {
      const s = (await follower.status())["xds"] as { streams: { nodeId: string }[] };
      return s.streams.some((x) => x.nodeId === "envoy-replicas") ? true : undefined;
    });
    await sleep(500);
    stop = true;
    await load;
    assert.ok(sent > 20, `sent ${sent}`);
    t.diagnostic(`${sent} requests while the replica died, ${failures.length} failed`);
    assert.deepEqual(failures, [], "no request failed while the replica died");
    const statsAfter = {
      lds: await envoyStat(envoyAdmin, "listener_manager.lds.update_success"),
      cds: await envoyStat(envoyAdmin, "cluster_manager.cds.update_success"),
      modified: await envoyStat(envoyAdmin, "listener_manager.listener_modified"),
      clusterModified: await envoyStat(envoyAdmin, "cluster_manager.cluster_modified"),
    };
    assert.equal(statsAfter.modified, statsBefore.modified, "no listener was modified");
    assert.equal(statsAfter.clusterModified, statsBefore.clusterModified, "no cluster was modified");
    assert.ok(Number.isFinite(statsAfter.lds) && Number.isFinite(statsAfter.cds));
  });

  test("the new leader writes status", async () => {
    const follower = replicas[1] as SluiceProcess;
    const before = (await kubeStatus(follower)).statusWrites.writes;
    await cluster.apply(kubeRouteYaml(ns, "later"));
    const route: KubeObject = await waitForObject(admin, `${GW}/namespaces/${ns}/httproutes/later`, "status", (o) =>
      ((o["status"] as { parents?: { conditions: unknown }[] } | undefined)?.parents ?? []).some(
        (p) => conditionOf(p.conditions, "Accepted")?.status === "True",
      ),
    );
    assert.ok(route);
    assert.ok((await kubeStatus(follower)).statusWrites.writes > before);
  });
});
