// What the watch of provisioned objects counts as a change by another hand: what an apply sets or could set, not the
// status or the API server's bookkeeping (a Deployment's rollout would otherwise wake the provisioner all day).

import assert from "node:assert/strict";
import { test } from "node:test";
import { fingerprint } from "../../src/provision/owned-watch.js";
import type { KubeObject } from "../../src/sources/kube/client.js";

const deployment = (over: Record<string, unknown> = {}, meta: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: {
    name: "sluice-gw",
    namespace: "app",
    resourceVersion: "10",
    generation: 2,
    labels: { "app.kubernetes.io/managed-by": "sluice" },
    ...meta,
  },
  spec: { replicas: 1, template: { spec: { containers: [{ name: "envoy", image: "envoy:1" }] } } },
  status: { replicas: 1, readyReplicas: 0 },
  ...over,
});

test("provision drift: status, resourceVersion, generation and managedFields are not a change", () => {
  const a = deployment();
  assert.equal(fingerprint(a), fingerprint(deployment({ status: { replicas: 1, readyReplicas: 1 } })));
  assert.equal(
    fingerprint(a),
    fingerprint(deployment({}, { resourceVersion: "11", generation: 3, managedFields: [{ manager: "x" }] })),
  );
});

test("provision drift: the spec, labels and annotations are", () => {
  const a = fingerprint(deployment());
  assert.notEqual(
    a,
    fingerprint(
      deployment({ spec: { replicas: 1, template: { spec: { containers: [{ name: "envoy", image: "x" }] } } } }),
    ),
  );
  assert.notEqual(a, fingerprint(deployment({}, { annotations: { "example.com/owner": "me" } })));
  assert.notEqual(a, fingerprint(deployment({}, { labels: {} })));
  // A ConfigMap has no spec: its data is what an apply sets.
  const cm = (data: Record<string, string>): KubeObject => ({ kind: "ConfigMap", metadata: { name: "c" }, data });
  assert.notEqual(fingerprint(cm({ "bootstrap.yaml": "a" })), fingerprint(cm({ "bootstrap.yaml": "b" })));
});
