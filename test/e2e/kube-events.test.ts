// The EventRecorder against a real kube-apiserver: events.k8s.io/v1 Events with the fields `kubectl describe` shows,
// written by a ServiceAccount holding only create/patch on events (the verbs deploy/kubernetes grants the
// controller); an identical warning counted in the first Event's series instead of a second Event; the rate limit under
// a burst; nothing thrown when writes fail. Each test has its own namespace.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeClient, type KubeList, type KubeObject, resourcePath } from "../../src/sources/kube/client.js";
import { EventRecorder, type EventRecorderOptions, type EventRegarding } from "../../src/sources/kube/events.js";
import { type KubeCluster, startKubeCluster } from "../helpers/kube.js";
import { waitFor } from "../helpers/net.js";

const EVENTS = { group: "events.k8s.io", version: "v1", plural: "events" };
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

interface Event extends KubeObject {
  readonly eventTime?: string;
  readonly type?: string;
  readonly reason?: string;
  readonly note?: string;
  readonly action?: string;
  readonly reportingController?: string;
  readonly reportingInstance?: string;
  readonly regarding?: Record<string, string>;
  readonly series?: { count: number; lastObservedTime: string };
}

describe("Kubernetes Events on a real API server", { timeout: 120_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  const clients: KubeClient[] = [];
  const recorders: EventRecorder[] = [];

  before(async () => {
    cluster = await startKubeCluster();
    admin = await KubeClient.load(cluster.adminKubeconfig);
  });
  after(async () => {
    for (const r of recorders) await r.close();
    for (const c of clients) await c.close();
    await admin?.close();
    await cluster?.stop();
  });

  /** A namespace whose ServiceAccount `sluice` may create and patch Events, and a ConfigMap to be regarding. */
  async function setup(prefix: string): Promise<{ ns: string; client: KubeClient; cm: EventRegarding }> {
    const ns = await cluster.namespace(prefix);
    await cluster.apply([
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "sluice-events", namespace: ns },
        rules: [{ apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "sluice-events", namespace: ns },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "sluice-events" },
        subjects: [{ kind: "ServiceAccount", name: "sluice", namespace: ns }],
      },
      { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "refused", namespace: ns }, data: { a: "b" } },
    ]);
    const client = await KubeClient.load(await cluster.kubeconfigForServiceAccount(ns, "sluice"));
    clients.push(client);
    const got = await admin.get(resourcePath({ group: "", version: "v1", plural: "configmaps" }, ns, "refused"));
    const cm = { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "refused", uid: got.metadata.uid ?? "" };
    return { ns, client, cm };
  }

  function recorder(client: KubeClient, log: string[], opts: Partial<EventRecorderOptions> = {}): EventRecorder {
    const r = new EventRecorder(client, { identity: "sluice-0", enabled: true, log: (l) => log.push(l), ...opts });
    recorders.push(r);
    return r;
  }

  const events = async (ns: string) => (await admin.get<KubeList>(resourcePath(EVENTS, ns))).items as Event[];

  test("a warning and a normal event appear with their fields, also in the core/v1 view kubectl describe reads", async () => {
    const { ns, client, cm } = await setup("events-fields");
    const log: string[] = [];
    const r = recorder(client, log);
    r.warning(cm, "InvalidReference", "spec.rules[0].backendRefs[0]: Service app/missing not found", "Translate");
    r.normal(cm, "Programmed", "the configuration is served", "Translate");
    await r.flush();
    assert.deepEqual(log, []);
    const list = await events(ns);
    assert.equal(list.length, 2);
    const w = list.find((e) => e.type === "Warning");
    assert.ok(w);
    assert.equal(w.reason, "InvalidReference");
    assert.equal(w.note, "spec.rules[0].backendRefs[0]: Service app/missing not found");
    assert.equal(w.action, "Translate");
    assert.equal(w.reportingController, "sluice.dev/gateway-controller");
    assert.equal(w.reportingInstance, "sluice-0");
    assert.deepEqual(w.regarding, { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "refused", uid: cm.uid });
    assert.match(w.eventTime ?? "", MICRO_TIME);
    assert.ok(Math.abs(Date.parse(w.eventTime ?? "") - Date.now()) < 60_000);
    assert.equal(w.series, undefined);
    assert.match(w.metadata.name, /^refused\.[0-9a-f]+$/);
    // `kubectl describe configmap refused` lists the core/v1 Events whose involvedObject is the ConfigMap.
    const core = await admin.get<KubeList>(resourcePath({ group: "", version: "v1", plural: "events" }, ns), {
      query: { fieldSelector: `involvedObject.uid=${cm.uid}` },
    });
    const seen = core.items.map((e) => [e["type"], e["reason"], e["message"], e["reportingComponent"]]).sort();
    assert.deepEqual(seen, [
      ["Normal", "Programmed", "the configuration is served", "sluice.dev/gateway-controller"],
      [
        "Warning",
        "InvalidReference",
        "spec.rules[0].backendRefs[0]: Service app/missing not found",
        "sluice.dev/gateway-controller",
      ],
    ]);
    assert.deepEqual(r.counts, { created: 2, seriesUpdates: 0, counted: 0, dropped: 0, failed: 0 });
  });

  test("the same warning again within the window is counted in the first Event's series, not written twice", async () => {
    const { ns, client, cm } = await setup("events-series");
    const log: string[] = [];
    const r = recorder(client, log);
    r.warning(cm, "Refused", "spec.x: must be set", "Validate");
    r.warning(cm, "Refused", "spec.x: must be set", "Validate");
    await r.flush();
    let list = await events(ns);
    assert.equal(list.length, 1);
    assert.equal(list[0]?.series?.count, 2);
    assert.match(list[0]?.series?.lastObservedTime ?? "", MICRO_TIME);
    r.warning(cm, "Refused", "spec.x: must be set", "Validate");
    await r.flush();
    list = await events(ns);
    assert.equal(list.length, 1);
    assert.equal(list[0]?.series?.count, 3);
    // Without flush(), series updates wait (at most one per event every 30 s): still one Event.
    for (let i = 0; i < 10; i++) r.warning(cm, "Refused", "spec.x: must be set", "Validate");
    await sleep(300);
    assert.equal((await events(ns)).length, 1);
    // Another note is another Event.
    r.warning(cm, "Refused", "spec.y: must be set", "Validate");
    await r.flush();
    list = await events(ns);
    assert.equal(list.length, 2);
    assert.equal(list.find((e) => e.note === "spec.x: must be set")?.series?.count, 13);
    assert.deepEqual(r.counts, { created: 2, seriesUpdates: 3, counted: 12, dropped: 0, failed: 0 });
    assert.deepEqual(log, []);
  });

  test("a note over 1 KiB is cut on a character boundary; a disabled recorder writes nothing", async () => {
    const { ns, client, cm } = await setup("events-note");
    const r = recorder(client, []);
    const note = `spec.prompt: ${"é".repeat(2000)}`;
    r.warning(cm, "TooLong", note, "Validate");
    r.enabled = false;
    r.warning(cm, "Other", "not written", "Validate");
    await r.flush();
    const list = await events(ns);
    assert.equal(list.length, 1);
    const stored = list[0]?.note ?? "";
    assert.ok(Buffer.byteLength(stored) <= 1024, `${Buffer.byteLength(stored)} bytes`);
    assert.ok(Buffer.byteLength(stored) >= 1020);
    assert.ok(stored.startsWith("spec.prompt: éé") && stored.endsWith("é…"));
  });

  test("a burst of 100 distinct warnings: the bucket's 25 are written, the rest dropped and logged once", async () => {
    const { ns, client, cm } = await setup("events-burst");
    const log: string[] = [];
    const r = recorder(client, log);
    const t = performance.now();
    for (let i = 0; i < 100; i++) r.warning(cm, "Refused", `problem ${i}`, "Validate");
    await r.flush();
    assert.equal(r.counts.created, 25);
    assert.equal(r.counts.dropped, 75);
    assert.equal((await events(ns)).length, 25);
    assert.equal(log.length, 1, log.join("\n"));
    assert.match(log[0] ?? "", /rate limit \(burst 25, 5\/s\) reached, dropping events/);
    // Refilled at 5 per second: two seconds after the burst, about 10 more.
    await sleep(2000 - (performance.now() - t));
    const elapsed = (performance.now() - t) / 1000;
    for (let i = 100; i < 150; i++) r.warning(cm, "Refused", `problem ${i}`, "Validate");
    await r.flush();
    const more = r.counts.created - 25;
    console.log(`rate limit: 25 of 100 written at once, ${more} of 50 after ${elapsed.toFixed(2)} s`);
    assert.ok(Math.abs(more - 5 * elapsed) <= 1.5, `${more} written after ${elapsed} s`);
    assert.equal((await events(ns)).length, r.counts.created);
    // The later drops are summed in the once-a-minute line, not logged one by one.
    assert.equal(log.length, 1, log.join("\n"));
  });

  test("failed writes do not throw into the caller and are logged once, not once per event", async () => {
    const { client, cm } = await setup("events-forbidden");
    // The ServiceAccount may write Events in its own namespace only.
    const elsewhere = { ...cm, namespace: await cluster.namespace("events-elsewhere") };
    const log: string[] = [];
    const r = recorder(client, log);
    for (let i = 0; i < 10; i++) r.warning(elsewhere, "Refused", `problem ${i}`, "Validate");
    await r.flush();
    assert.equal(r.counts.failed, 10);
    assert.equal(r.counts.created, 0);
    assert.equal(log.length, 1, log.join("\n"));
    assert.match(log[0] ?? "", /forbidden/i);
    // A failed write is not remembered: once the ServiceAccount may write there, the same warning is written.
    await cluster.apply([
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "sluice-events", namespace: elsewhere.namespace },
        rules: [{ apiGroups: ["events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "sluice-events", namespace: elsewhere.namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "sluice-events" },
        subjects: [{ kind: "ServiceAccount", name: "sluice", namespace: cm.namespace }],
      },
    ]);
    await waitFor("the warning written", async () => {
      r.warning(elsewhere, "Refused", "problem 0", "Validate");
      await r.flush();
      return r.counts.created === 1 ? true : undefined;
    });
    assert.equal(r.counts.counted, 0);
  });
});
