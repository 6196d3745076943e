// A backend credential's key is not part of its cluster's name (names show in Envoy's stats and admin output): a new
// key keeps the cluster and its name, and reaches Envoy through the SDS secret alone.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";

const yaml = (key: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 8080 }]
---
apiVersion: v1
kind: Service
metadata: { name: app, namespace: default }
spec: { ports: [{ name: p, port: 80 }] }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ name: app, port: 80 }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: p, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: app }]
  backend: { auth: { key: ${key} } }
`;

async function translateWith(key: string) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-rotation-"));
  try {
    writeFileSync(join(dir, "all.yaml"), yaml(key));
    const { result } = await loadAndTranslate([join(dir, "all.yaml")]);
    const xds = result.gateways[0]?.xds;
    assert.ok(xds !== undefined);
    const cluster = xds.clusters.map((c) => c.name).find((n) => n.includes("~"));
    const secret = xds.secrets.find((s) => s.name.startsWith("sluice-credential/"));
    const value = secret?.type.case === "genericSecret" ? secret.type.value.secret?.specifier : undefined;
    return { cluster, secret: secret?.name, value: value?.case === "inlineString" ? value.value : undefined };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("rotating the key: same cluster and secret names, new secret value", async () => {
  const a = await translateWith("key-one");
  const b = await translateWith("key-two");
  assert.ok(a.cluster !== undefined && a.secret !== undefined);
  assert.equal(b.cluster, a.cluster);
  assert.equal(b.secret, a.secret);
  assert.equal(a.value, "key-one");
  assert.equal(b.value, "key-two");
});
