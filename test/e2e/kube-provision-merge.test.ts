// Sluice's strategic merge (src/provision/strategic-merge.ts) against the API server's own. For every provisioning
// golden with overlays and no errors: the objects are stored as rendered without overlays, the overlays are applied by
// the API server (PATCH application/strategic-merge-patch+json; the last one a dry run, earlier ones stored, in merge
// order), and the result must equal what the API server makes of Sluice's merged object (a dry-run server-side apply
// onto the same render stored in a namespace of its own: there every field is Sluice's, as in a cluster, where an
// earlier overlay's fields stored by another field manager would survive Sluice's apply), field by field with the
// server's defaults on both sides. The one deliberate difference is left out of the comparison: Sluice keeps its
// bootstrap hash on the pod template.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parseAllDocuments } from "yaml";
import type { Gateway, GatewayClass } from "../../src/api/gateway-api.js";
import type { GwParameters } from "../../src/api/sluice.js";
import { DEFAULT_ENVOY_IMAGE } from "../../src/provision/defaults.js";
import { effectiveParameters } from "../../src/provision/parameters.js";
import { PROVISIONED_KINDS } from "../../src/provision/provisioner.js";
import { type ObjectJson, type ProvisionSettings, renderProxy } from "../../src/provision/render.js";
import { resourcePath } from "../../src/sources/kube/client.js";
import { goldenCases, goldenDir } from "../helpers/golden.js";
import { type KubeCluster, startKubeCluster, statusMessage } from "../helpers/kube.js";

const dir = goldenDir("provision");
const SETTINGS: ProvisionSettings = {
  xdsHost: "sluice-xds.sluice-system.svc",
  xdsPort: 18000,
  authzPort: 18002,
  adminPort: 19000,
  readyPort: 19003,
  delta: true,
  tls: true,
  image: DEFAULT_ENVOY_IMAGE,
};

const OVERLAID: Readonly<Record<string, string>> = {
  deployment: "Deployment",
  daemonSet: "DaemonSet",
  service: "Service",
  serviceAccount: "ServiceAccount",
  podDisruptionBudget: "PodDisruptionBudget",
  horizontalPodAutoscaler: "HorizontalPodAutoscaler",
};

/** Empty objects dropped: `lifecycle: {}` and no lifecycle are the same pod (a stored update keeps it, an apply not). */
function withoutEmpty(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutEmpty);
  if (typeof v !== "object" || v === null) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    const y = withoutEmpty(x);
    if (typeof y === "object" && y !== null && !Array.isArray(y) && Object.keys(y).length === 0) continue;
    out[k] = y;
  }
  return out;
}

/** What is compared: everything but the metadata the server fills in. */
function comparable(o: Record<string, unknown>): Record<string, unknown> {
  const { metadata, status: _, ...rest } = o as { metadata: Record<string, unknown>; status?: unknown };
  const out = structuredClone({ ...rest, labels: metadata["labels"], annotations: metadata["annotations"] ?? {} });
  const template = (out as { spec?: { template?: { metadata?: { annotations?: Record<string, string> } } } }).spec
    ?.template;
  if (template?.metadata?.annotations !== undefined) {
    delete template.metadata.annotations["sluice.dev/bootstrap-hash"];
    if (Object.keys(template.metadata.annotations).length === 0) delete template.metadata.annotations;
  }
  // What the API server allocates differs between the two namespaces' Services.
  const typed = out as { kind?: string; spec?: Record<string, unknown> };
  const service = typed.kind === "Service" ? typed.spec : undefined;
  if (service !== undefined) {
    for (const k of ["clusterIP", "clusterIPs", "healthCheckNodePort"]) delete service[k];
    for (const p of (service["ports"] as Record<string, unknown>[] | undefined) ?? []) delete p["nodePort"];
  }
  return withoutEmpty(out) as Record<string, unknown>;
}

describe("overlays: Sluice's strategic merge agrees with the API server's", { timeout: 120_000 }, () => {
  let cluster: KubeCluster;

  before(async () => {
    cluster = await startKubeCluster();
  });
  after(async () => {
    await cluster?.stop();
  });

  // The goldens with overlays the renderer takes (refused overlays are the provisioning goldens' own subject).
  const cases = goldenCases(dir).flatMap((name) => {
    const docs = parseAllDocuments(readFileSync(join(dir, `${name}.in.yaml`), "utf8")).map(
      (d) => d.toJS() as { kind: string },
    );
    const params = docs.filter((d) => d.kind === "GwParameters") as GwParameters[];
    const gatewayDoc = docs.find((d) => d.kind === "Gateway") as Gateway;
    const gatewayClass = docs.find((d) => d.kind === "GatewayClass") as GatewayClass | undefined;
    const lookup = (ns: string, n: string) =>
      params.find((p) => (p.metadata.namespace ?? "default") === ns && p.metadata.name === n);
    const effective = effectiveParameters(gatewayDoc, gatewayClass, lookup);
    const steps = effective.overlays.filter((s) => s.overlay.spec !== undefined || s.overlay.metadata !== undefined);
    if (steps.length === 0) return [];
    const merged = renderProxy(gatewayDoc, effective, SETTINGS);
    if (merged.problems.some((p) => p.severity === "error")) return [];
    return [{ name, gatewayDoc, effective, steps }];
  });

  test("the goldens with overlays are compared", () => {
    assert.ok(cases.length >= 5, `only ${cases.length} goldens with overlays`);
  });

  for (const { name, gatewayDoc, effective, steps } of cases) {
    test(name, async () => {
      const ns = await cluster.namespace(name);
      const mineNs = await cluster.namespace(`${name}-sluice`);
      const inNs = (namespace: string) =>
        ({ ...gatewayDoc, metadata: { ...gatewayDoc.metadata, namespace } }) as Gateway;
      const base = renderProxy(inNs(ns), { ...effective, overlays: [] }, SETTINGS);
      const mine = renderProxy(inNs(mineNs), effective, SETTINGS);
      const pathOf = (o: ObjectJson, query: string) => {
        const r = PROVISIONED_KINDS[String(o["kind"])];
        assert.ok(r !== undefined);
        const meta = o["metadata"] as { name: string; namespace: string };
        return `${resourcePath(r, meta.namespace, meta.name)}?${query}`;
      };
      const mineBase = renderProxy(inNs(mineNs), { ...effective, overlays: [] }, SETTINGS);
      for (const o of [...base.objects, ...mineBase.objects]) {
        const r = await cluster.request(
          "PATCH",
          pathOf(o, "fieldManager=sluice&force=true"),
          o,
          "application/apply-patch+yaml",
        );
        assert.ok(r.status < 300, `store ${String(o["kind"])}: ${statusMessage(r)}`);
      }
      for (const [field, kind] of Object.entries(OVERLAID)) {
        const own = steps.filter((s) => s.field === field);
        if (own.length === 0) continue;
        const target = base.objects.find((o) => o["kind"] === kind);
        const expected = mine.objects.find((o) => o["kind"] === kind);
        assert.ok(target !== undefined && expected !== undefined, kind);
        let server: Record<string, unknown> = {};
        for (const [i, step] of own.entries()) {
          // A ServiceAccount has no spec: its overlay's spec holds its top-level fields.
          const spec = step.overlay.spec;
          const patch = {
            ...(step.overlay.metadata !== undefined ? { metadata: step.overlay.metadata } : {}),
            ...(spec === undefined ? {} : field === "serviceAccount" ? spec : { spec }),
          };
          const last = i === own.length - 1;
          const r = await cluster.request(
            "PATCH",
            pathOf(target, `fieldManager=overlay${last ? "&dryRun=All" : ""}`),
            patch,
            "application/strategic-merge-patch+json",
          );
          assert.ok(r.status < 300, `strategic merge of ${step.from}'s ${field}: ${statusMessage(r)}`);
          server = JSON.parse(r.body) as Record<string, unknown>;
        }
        const r = await cluster.request(
          "PATCH",
          pathOf(expected, "fieldManager=sluice&force=true&dryRun=All"),
          expected,
          "application/apply-patch+yaml",
        );
        assert.ok(r.status < 300, `Sluice's merged ${kind}: ${statusMessage(r)}`);
        assert.deepEqual(comparable(JSON.parse(r.body) as Record<string, unknown>), comparable(server), kind);
      }
    });
  }
});
