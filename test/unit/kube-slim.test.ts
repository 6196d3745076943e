// What the Kubernetes sources keep of the objects they hold most of (src/sources/kube/kinds.ts): an EndpointSlice's
// addresses, conditions and zones, a Pod's labels, IP and Ready condition, and of both the metadata the translator
// and the reflector read. Everything else is dropped: with thousands of them it is most of the memory.

import assert from "node:assert/strict";
import { test } from "node:test";
import { slimEndpointSlice, slimPod } from "../../src/sources/kube/kinds.js";

const metadata = {
  name: "a",
  namespace: "n",
  labels: { app: "m" },
  uid: "u-1",
  resourceVersion: "7",
  generation: 3,
  deletionTimestamp: "2026-11-27T00:00:00Z",
  annotations: { "endpoints.kubernetes.io/last-change-trigger-time": "x" },
  ownerReferences: [{ kind: "Service", name: "s" }],
  managedFields: [{ manager: "kcm" }],
};

test("an EndpointSlice keeps its addresses, conditions, zones and ports; pod references and annotations go", () => {
  const slim = slimEndpointSlice({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata,
    addressType: "IPv4",
    ports: [{ port: 80 }],
    endpoints: [
      {
        addresses: ["10.0.0.1"],
        conditions: { ready: true },
        zone: "z1",
        nodeName: "node-1",
        targetRef: { kind: "Pod", name: "p" },
      },
    ],
  });
  assert.deepEqual(slim, {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "a",
      namespace: "n",
      labels: { app: "m" },
      uid: "u-1",
      resourceVersion: "7",
      generation: 3,
      deletionTimestamp: "2026-11-27T00:00:00Z",
    },
    addressType: "IPv4",
    ports: [{ port: 80 }],
    endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true }, zone: "z1" }],
  });
});

test("a Pod keeps its labels, IP and Ready condition; its spec, other conditions and generation go", () => {
  const slim = slimPod({
    apiVersion: "v1",
    kind: "Pod",
    metadata,
    spec: { containers: [{ name: "c", image: "i" }] },
    status: {
      phase: "Running",
      podIP: "10.0.0.2",
      conditions: [
        { type: "PodScheduled", status: "True" },
        { type: "Ready", status: "False", reason: "ContainersNotReady" },
      ],
      containerStatuses: [{ name: "c" }],
    },
  });
  assert.deepEqual(slim, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "a",
      namespace: "n",
      labels: { app: "m" },
      uid: "u-1",
      resourceVersion: "7",
      deletionTimestamp: "2026-11-27T00:00:00Z",
    },
    status: { podIP: "10.0.0.2", conditions: [{ type: "Ready", status: "False" }] },
  });
  assert.deepEqual(slimPod({ apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "n" } }).status, {});
});
