// The install chart (deploy/helm/sluice) against a real API server with kube-controller-manager's garbage collector:
// helm lint; helm template applied by server-side apply, dry-run first, then for real; its RBAC is exactly
// deploy/kubernetes/rbac.yaml's; the controller, running as the chart's ServiceAccount, provisions a Gateway of the
// chart's GatewayClass (Deployment, Service, ServiceAccount, ConfigMap pointing at the chart's xDS Service), and
// deleting the Gateway deletes them.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import { projectRoot } from "../../src/cli/paths.js";
import { KubeClient, type KubeObject } from "../../src/sources/kube/client.js";
import { startController, waitForObject } from "../helpers/controller.js";
import { helmBinary, type KubeCluster, startKubeCluster, yamlObjects } from "../helpers/kube.js";
import { freePort, waitFor } from "../helpers/net.js";
import type { SluiceProcess } from "../helpers/processes.js";

const chart = join(projectRoot(), "deploy", "helm", "sluice");

function helm(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(helmBinary(), args, { encoding: "utf8", timeout: 60_000, maxBuffer: 64 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("the install chart", { timeout: 150_000 }, () => {
  let cluster: KubeCluster;
  let admin: KubeClient;
  let system: string;
  let ns: string;
  let rendered: ReturnType<typeof yamlObjects>;
  let controller: SluiceProcess | undefined;

  before(async () => {
    cluster = await startKubeCluster({ controllerManager: ["garbagecollector"] });
    // The Gateway API CRDs are the cluster's (installed before the chart, as the README says).
    await cluster.installCrds();
    admin = await KubeClient.load(cluster.adminKubeconfig);
    system = await cluster.namespace("sluice-system");
    ns = await cluster.namespace("app");
  });

  after(async () => {
    await controller?.stop();
    await admin?.close();
    await cluster?.stop();
  });

  test("helm lint", () => {
    const r = helm(["lint", chart]);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  });

  test("helm template | apply: a server-side dry-run, then for real", async () => {
    const r = helm(["template", "sluice", chart, "--namespace", system, "--include-crds"]);
    assert.equal(r.status, 0, r.stderr);
    rendered = yamlObjects(r.stdout);
    assert.deepEqual([...new Set(rendered.map((o) => o.kind))].sort(), [
      "ClusterRole",
      "ClusterRoleBinding",
      "CustomResourceDefinition",
      "Deployment",
      "GatewayClass",
      "PodDisruptionBudget",
      "Role",
      "RoleBinding",
      "Service",
      "ServiceAccount",
    ]);
    await cluster.apply(rendered, "helm-test", { dryRun: true });
    // A dry run stores nothing.
    assert.equal(
      (await cluster.request("GET", `/api/v1/namespaces/${system}/serviceaccounts/sluice-controller`)).status,
      404,
    );
    await cluster.apply(rendered, "helm-test");
    const deployment = await admin.get<KubeObject>(`/apis/apps/v1/namespaces/${system}/deployments/sluice-controller`);
    const spec = deployment["spec"] as {
      replicas: number;
      template: { spec: { containers: { args: string[]; readinessProbe: unknown; livenessProbe: unknown }[] } };
    };
    assert.equal(spec.replicas, 2);
    const c = spec.template.spec.containers[0];
    assert.ok(c?.args.includes("controller") && c.args.includes(`--proxy-xds-host=sluice-xds.${system}.svc`));
    assert.deepEqual(c?.readinessProbe, {
      httpGet: { path: "/readyz", port: "admin", scheme: "HTTP" },
      periodSeconds: 5,
      timeoutSeconds: 1,
      successThreshold: 1,
      failureThreshold: 3,
    });
    assert.ok(c?.livenessProbe !== undefined);
    const pdb = await admin.get<KubeObject>(
      `/apis/policy/v1/namespaces/${system}/poddisruptionbudgets/sluice-controller`,
    );
    assert.equal((pdb["spec"] as { minAvailable: number }).minAvailable, 1);
    const service = await admin.get<KubeObject>(`/api/v1/namespaces/${system}/services/sluice-xds`);
    assert.deepEqual(
      (service["spec"] as { ports: { name: string; port: number }[] }).ports.map((p) => [p.name, p.port]),
      [
        ["grpc-xds", 18000],
        ["grpc-authz", 18002],
        ["http-mcp", 18003],
      ],
    );
  });

  test("the chart's RBAC is deploy/kubernetes/rbac.yaml's, rule for rule", () => {
    const own = yamlObjects(readFileSync(join(projectRoot(), "deploy", "kubernetes", "rbac.yaml"), "utf8"));
    for (const kind of ["ClusterRole", "Role"]) {
      const rules = (objects: ReturnType<typeof yamlObjects>) =>
        (objects.find((o) => o.kind === kind) as unknown as { rules: unknown }).rules;
      assert.deepEqual(rules(rendered), rules(own), kind);
    }
  });

  test("the controller as the chart's ServiceAccount provisions a Gateway of the chart's class; deleting the Gateway deletes it all", async () => {
    const kubeconfig = await cluster.kubeconfigForServiceAccount(system, "sluice-controller");
    controller = await startController(kubeconfig, system, {
      provision: true,
      xdsPort: await freePort(),
      // As the chart runs it: what Envoys dial is the chart's Service.
      extraArgs: ["--proxy-xds-port", "18000", "--proxy-authz-port", "18002", "--proxy-mcp-port", "18003"],
    });
    await cluster.apply(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: web, namespace: ${ns} }
spec:
  gatewayClassName: sluice
  listeners: [{ name: http, protocol: HTTP, port: 80 }, { name: alt, protocol: HTTP, port: 8080 }]
`);
    const gateway = await admin.get<KubeObject>(`/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/gateways/web`);
    const base = `/namespaces/${ns}`;
    const paths = {
      deployment: `/apis/apps/v1${base}/deployments/sluice-web`,
      service: `/api/v1${base}/services/sluice-web`,
      serviceAccount: `/api/v1${base}/serviceaccounts/sluice-web`,
      configMap: `/api/v1${base}/configmaps/sluice-web`,
    };
    const got: Record<string, KubeObject> = {};
    for (const [what, path] of Object.entries(paths)) {
      got[what] = await waitForObject(admin, path, `the ${what}`, () => true, 70_000).catch(async (e: unknown) => {
        const gw = await admin.get<KubeObject>(`/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/gateways/web`);
        const status = await controller?.status();
        throw new Error(
          `${(e as Error).message}\n${controller?.output.slice(-20).join("\n")}\n${JSON.stringify(gw["status"])}\n${JSON.stringify(status).slice(0, 3000)}`,
        );
      });
      const refs = got[what]?.metadata["ownerReferences"] as { uid: string; kind: string }[];
      assert.deepEqual(
        refs.map((r) => [r.kind, r.uid]),
        [["Gateway", gateway.metadata.uid]],
        what,
      );
    }
    const { deployment, service, configMap } = got as Record<"deployment" | "service" | "configMap", KubeObject>;
    const pod = (deployment["spec"] as { template: { spec: Record<string, unknown> } }).template.spec as {
      serviceAccountName: string;
      securityContext: unknown;
      containers: { image: string; ports: { containerPort: number }[] }[];
    };
    assert.equal(pod.serviceAccountName, "sluice-web");
    assert.equal(pod.containers[0]?.image, "docker.io/envoyproxy/envoy:v1.40.0");
    assert.deepEqual(
      pod.containers[0]?.ports.map((p) => p.containerPort),
      [80, 8080, 19003],
    );
    // Port 80 without root.
    assert.deepEqual(pod.securityContext, { sysctls: [{ name: "net.ipv4.ip_unprivileged_port_start", value: "0" }] });
    const svc = service["spec"] as { type: string; ports: { port: number }[] };
    assert.equal(svc.type, "LoadBalancer");
    assert.deepEqual(
      svc.ports.map((p) => p.port),
      [80, 8080],
    );
    const bootstrap = parse((configMap["data"] as Record<string, string>)["bootstrap.yaml"] ?? "") as {
      node: { cluster: string };
      static_resources: { clusters: { name: string; type: string; load_assignment: unknown }[] };
    };
    assert.equal(bootstrap.node.cluster, `${ns}/web`);
    const xds = bootstrap.static_resources.clusters.find((c) => c.name === "sluice_xds");
    assert.equal(xds?.type, "STRICT_DNS");
    assert.match(
      JSON.stringify(xds?.load_assignment),
      new RegExp(`"address":"sluice-xds\\.${system}\\.svc","port_value":18000`),
    );

    await cluster.request("DELETE", `/apis/gateway.networking.k8s.io/v1/namespaces/${ns}/gateways/web`);
    for (const path of Object.values(paths)) {
      await waitFor(
        `${path} garbage-collected`,
        async () => ((await cluster.request("GET", path)).status === 404 ? true : undefined),
        30_000,
      );
    }
  });
});
