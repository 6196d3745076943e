// Leader election on a Lease of a real kube-apiserver: two electors with different identities, each with its own
// ServiceAccount holding only get/create/update on leases (the verbs deploy/kubernetes grants the controller). A short
// lease (3 s, renew deadline 2 s, retry 0.5 s) so failovers are measured in seconds. Each test has its own namespace.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeClient, resourcePath } from "../../src/sources/kube/client.js";
import { LeaderElector } from "../../src/sources/kube/leader.js";
import { type KubeCluster, startKubeCluster } from "../helpers/kube.js";
import { waitFor } from "../helpers/net.js";

const LEASE_S = 3;
const RENEW_S = 2;
const RETRY_S = 0.5;
/** The elector's jitter: a candidate retries within retry × [1, 1.5). */
const MAX_RETRY_S = RETRY_S * 1.5;
const LEASES = { group: "coordination.k8s.io", version: "v1", plural: "leases" };
/** Log lines are stamped with seconds since the file started. */
const t0 = performance.now();

interface Candidate {
  readonly elector: LeaderElector;
  readonly client: KubeClient;
  readonly log: string[];
  /** onStartedLeading / onStoppedLeading calls, in order. */
  readonly calls: ("started" | "stopped")[];
  /** performance.now() of the last onStoppedLeading. */
  stoppedAt: number;
}

describe("leader election on a real API server", { timeout: 180_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  const open: Candidate[] = [];

  before(async () => {
    cluster = await startKubeCluster();
    admin = await KubeClient.load(cluster.adminKubeconfig);
  });
  after(async () => {
    for (const c of open) {
      await c.elector.stop();
      await c.client.close();
    }
    await admin?.close();
    await cluster?.stop();
  });

  /** Namespace `ns` gets a Role with the controller's lease verbs, bound to ServiceAccount `sa`. */
  async function grantLeases(ns: string, sa: string): Promise<void> {
    await cluster.apply([
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "sluice-leader-election", namespace: ns },
        rules: [{ apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["get", "create", "update"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: `sluice-leader-election-${sa}`, namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "sluice-leader-election" },
        subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
      },
    ]);
  }

  async function candidate(ns: string, identity: string): Promise<Candidate> {
    await grantLeases(ns, identity);
    const client = await KubeClient.load(await cluster.kubeconfigForServiceAccount(ns, identity));
    const log: string[] = [];
    const calls: Candidate["calls"] = [];
    const elector = new LeaderElector(client, {
      namespace: ns,
      name: "sluice-leader",
      identity,
      leaseDurationSeconds: LEASE_S,
      renewDeadlineSeconds: RENEW_S,
      retryPeriodSeconds: RETRY_S,
      onStartedLeading: () => void calls.push("started"),
      onStoppedLeading: () => {
        calls.push("stopped");
        c.stoppedAt = performance.now();
      },
      log: (line) => log.push(`${((performance.now() - t0) / 1000).toFixed(2)}s ${line}`),
    });
    const c: Candidate = { elector, client, log, calls, stoppedAt: 0 };
    open.push(c);
    return c;
  }

  async function pair(prefix: string): Promise<[Candidate, Candidate, string]> {
    const ns = await cluster.namespace(prefix);
    const a = await candidate(ns, "replica-a");
    const b = await candidate(ns, "replica-b");
    a.elector.start();
    b.elector.start();
    await waitFor("a leader", async () => (a.elector.isLeader || b.elector.isLeader ? true : undefined), 10_000);
    return [a, b, ns];
  }

  /** Samples both every 5 ms until `until` settles, failing on any instant with two leaders; the samples taken. */
  async function neverTwoLeaders(a: Candidate, b: Candidate, until: Promise<unknown>): Promise<number> {
    let done = false;
    let samples = 0;
    const watching = (async () => {
      while (!done) {
        samples++;
        assert.ok(!(a.elector.isLeader && b.elector.isLeader), "two leaders at once");
        await sleep(5);
      }
    })();
    try {
      await until;
    } finally {
      done = true;
      await watching;
    }
    return samples;
  }

  const leaderOf = (a: Candidate, b: Candidate) => (a.elector.isLeader ? a : b);
  const otherOf = (a: Candidate, b: Candidate) => (a.elector.isLeader ? b : a);
  const holder = async (ns: string) =>
    ((await admin.get(resourcePath(LEASES, ns, "sluice-leader"))) as { spec?: { holderIdentity?: string } }).spec
      ?.holderIdentity;
  const report = (...cs: Candidate[]) => cs.map((c) => `--- ${c.elector.identity}\n${c.log.join("\n")}`).join("\n");

  test("of two electors exactly one leads, and it is the Lease's holder; no conflict is logged", async () => {
    const [a, b, ns] = await pair("leader-one");
    // Several renewals (every 0.5 s) and many tries of the follower.
    const samples = await neverTwoLeaders(a, b, sleep(4000));
    assert.ok(samples > 100);
    const leader = leaderOf(a, b);
    assert.ok(leader.elector.isLeader, "the leader kept its lease");
    assert.equal(await holder(ns), leader.elector.identity);
    assert.equal(otherOf(a, b).elector.leader, leader.elector.identity);
    assert.deepEqual(leader.calls, ["started"]);
    assert.deepEqual(otherOf(a, b).calls, []);
    const all = [...a.log, ...b.log].join("\n");
    assert.doesNotMatch(all, /409|conflict|forbidden|failed/i, report(a, b));
  });

  test("the leader stops without releasing: the other leads once the lease has expired, not before", async () => {
    const [a, b] = await pair("leader-crash");
    const leader = leaderOf(a, b);
    const other = otherOf(a, b);
    await sleep(1000);
    const stoppedAt = performance.now();
    await leader.elector.stop(); // as a crash: the Lease still names it
    assert.equal(leader.elector.isLeader, false);
    assert.deepEqual(leader.calls, ["started", "stopped"]);
    await waitFor("the other to lead", async () => (other.elector.isLeader ? true : undefined), 10_000, 5);
    const took = (performance.now() - stoppedAt) / 1000;
    console.log(`failover without release: ${took.toFixed(2)} s (lease ${LEASE_S} s)`);
    // The last renewal was sent at most one retry period before stop; the follower waits a whole lease from seeing it.
    assert.ok(took >= LEASE_S - RETRY_S - 0.2, `took over after ${took} s: before the lease expired\n${report(a, b)}`);
    // It sees that renewal on its next try and takes over on the first try after the lease: two tries late at most.
    assert.ok(took <= LEASE_S + 2 * MAX_RETRY_S + 0.3, `took over after ${took} s\n${report(a, b)}`);
  });

  test("the leader stops and releases: the other leads within about one retry period", async () => {
    const [a, b, ns] = await pair("leader-release");
    const leader = leaderOf(a, b);
    const other = otherOf(a, b);
    await sleep(1000);
    const stoppedAt = performance.now();
    await leader.elector.stop({ release: true });
    const released = (performance.now() - stoppedAt) / 1000;
    await waitFor("the other to lead", async () => (other.elector.isLeader ? true : undefined), 10_000, 5);
    const took = (performance.now() - stoppedAt) / 1000;
    console.log(`failover with release: ${took.toFixed(2)} s (release itself ${released.toFixed(2)} s)`);
    assert.ok(took <= MAX_RETRY_S + 0.3, `took over after ${took} s\n${report(a, b)}`);
    assert.equal(await holder(ns), other.elector.identity);
  });

  test("an API server restart never makes two leaders at once, and one leads again after it", async () => {
    const [a, b] = await pair("leader-restart");
    await sleep(1000);
    const before = leaderOf(a, b).elector.identity;
    const logLines = a.log.length + b.log.length;
    const startedAt = performance.now();
    let down = 0;
    const samples = await neverTwoLeaders(
      a,
      b,
      (async () => {
        await cluster.restartApiServer();
        down = (performance.now() - startedAt) / 1000;
        await waitFor(
          "a leader after the restart",
          async () => (a.elector.isLeader || b.elector.isLeader ? true : undefined),
          20_000,
        );
        const back = (performance.now() - startedAt) / 1000;
        console.log(`restart: API server back after ${down.toFixed(2)} s, a leader after ${back.toFixed(2)} s`);
        // Keep sampling over a whole lease after it, while both try again.
        await sleep(LEASE_S * 1000 + 500);
      })(),
    );
    assert.ok(samples > 500);
    const after = leaderOf(a, b);
    assert.ok(after.elector.isLeader);
    console.log(`restart: leader ${before} before, ${after.elector.identity} after`);
    // An outage longer than the renew deadline: the leader stepped down during it.
    if (down > RENEW_S + RETRY_S) {
      const lead = a.elector.identity === before ? a : b;
      assert.ok(lead.calls.includes("stopped"), `the leader did not step down during the outage\n${report(a, b)}`);
    }
    // One line per distinct error, not one per try (≈ 10 tries each during the outage).
    const lines = a.log.length + b.log.length - logLines;
    assert.ok(lines <= 16, `${lines} log lines during the restart\n${report(a, b)}`);
  });

  test("a leader that can no longer renew (its RBAC removed) steps down within the renew deadline", async () => {
    const [a, b, ns] = await pair("leader-rbac");
    const leader = leaderOf(a, b);
    const other = otherOf(a, b);
    await sleep(1000);
    const revokedAt = performance.now();
    await admin.request(
      "DELETE",
      resourcePath(
        { group: "rbac.authorization.k8s.io", version: "v1", plural: "rolebindings" },
        ns,
        `sluice-leader-election-${leader.elector.identity}`,
      ),
    );
    const samples = await neverTwoLeaders(
      leader,
      other,
      waitFor("the other to lead", async () => (other.elector.isLeader ? true : undefined), 15_000, 5),
    );
    assert.ok(samples > 100);
    const tookOver = (performance.now() - revokedAt) / 1000;
    assert.equal(leader.elector.isLeader, false);
    assert.deepEqual(leader.calls, ["started", "stopped"]);
    const stepped = (leader.stoppedAt - revokedAt) / 1000;
    console.log(
      `RBAC removed: stepped down after ${stepped.toFixed(2)} s, the other led after ${tookOver.toFixed(2)} s`,
    );
    // The last successful renewal was sent at most a retry period before the revocation.
    assert.ok(stepped <= RENEW_S + 0.25, `stepped down ${stepped} s after the revocation\n${report(leader)}`);
    assert.ok(
      tookOver <= LEASE_S + 2 * MAX_RETRY_S + 0.3,
      `the other led ${tookOver} s after\n${report(leader, other)}`,
    );
    // Forbidden is logged once, not on every try.
    assert.equal(leader.log.filter((l) => /forbidden/i.test(l)).length, 1, report(leader));
  });
});
