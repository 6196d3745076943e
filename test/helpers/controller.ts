// `sluice controller` against the test cluster, with exactly the RBAC of deploy/kubernetes/rbac.yaml.

import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import type { BootstrapTls } from "../../src/cli/envoy.js";
import { projectRoot } from "../../src/cli/paths.js";
import { KubeClient, type KubeObject } from "../../src/sources/kube/client.js";
import { type KubeCluster, startKubeCluster } from "./kube.js";
import { waitFor } from "./net.js";
import { type SluiceProcess, startSluiceCommand, startTestEnvoy, type TestEnvoy } from "./processes.js";

/** deploy/kubernetes/rbac.yaml with the controller's namespace replaced by `namespace`. */
export function controllerRbac(namespace: string): string {
  return readFileSync(join(projectRoot(), "deploy", "kubernetes", "rbac.yaml"), "utf8").replaceAll(
    "sluice-system",
    namespace,
  );
}

/**
 * Applies the RBAC for a controller living in `namespace` and returns a kubeconfig of its ServiceAccount
 * (`sluice-controller`): the controller then runs with exactly the rules deploy/ grants.
 */
export async function controllerKubeconfig(cluster: KubeCluster, namespace: string): Promise<string> {
  await cluster.apply(controllerRbac(namespace));
  return cluster.kubeconfigForServiceAccount(namespace, "sluice-controller");
}

/** What a test of the controller starts from (see clusterForController). */
export interface ControllerCluster {
  readonly cluster: KubeCluster;
  readonly admin: KubeClient;
  /** The controller's namespace (its RBAC from deploy/ applied), and its ServiceAccount's kubeconfig. */
  readonly system: string;
  readonly kubeconfig: string;
  /** A namespace of its own for the test's resources. */
  readonly ns: string;
}

/**
 * A real API server ready for a controller under test: Sluice's and Gateway API's CRDs installed (unless `crds` is
 * false: the test installs what it needs), an admin client, the controller's namespace and kubeconfig, and a
 * namespace (`namespace`, default "app") for the test's resources. The cluster is stopped if any step fails.
 */
export async function clusterForController(
  opts: {
    readonly crds?: boolean;
    readonly namespace?: string;
    /** kube-controller-manager's controllers to run (its garbage collector for the provisioning tests). */
    readonly controllerManager?: readonly string[];
  } = {},
): Promise<ControllerCluster> {
  const cluster = await startKubeCluster(
    opts.controllerManager !== undefined ? { controllerManager: opts.controllerManager } : {},
  );
  try {
    if (opts.crds !== false) await cluster.installCrds();
    const admin = await KubeClient.load(cluster.adminKubeconfig);
    const system = await cluster.namespace("sluice-system");
    const kubeconfig = await controllerKubeconfig(cluster, system);
    const ns = await cluster.namespace(opts.namespace ?? "app");
    return { cluster, admin, system, kubeconfig, ns };
  } catch (e) {
    await cluster.stop();
    throw e;
  }
}

/** Starts `sluice controller` on loopback ports and waits until /readyz answers 200. */
export async function startController(
  kubeconfig: string,
  namespace: string,
  opts: {
    identity?: string;
    extraArgs?: string[];
    env?: Readonly<Record<string, string>>;
    xdsPort?: number;
    authzPort?: number;
    /** Provision each Gateway's Envoy objects (off unless asked: most tests run their own Envoy). */
    provision?: boolean;
  } = {},
): Promise<SluiceProcess> {
  const sluice = await startSluiceCommand(
    "controller",
    [
      "--kubeconfig",
      kubeconfig,
      "--namespace",
      namespace,
      "--identity",
      opts.identity ?? "replica-0",
      "--xds-host",
      "127.0.0.1",
      "--admin-host",
      "127.0.0.1",
    ],
    {
      // It lists every kind of the cluster before it listens; a loaded test machine (parallel clusters) is slow.
      listenTimeoutMs: 60_000,
      extraArgs: [...(opts.provision === true ? [] : ["--no-provision"]), ...(opts.extraArgs ?? [])],
      ...(opts.env !== undefined ? { env: opts.env } : {}),
      ...(opts.xdsPort !== undefined ? { xdsPort: opts.xdsPort } : {}),
      ...(opts.authzPort !== undefined ? { authzPort: opts.authzPort } : {}),
    },
  );
  try {
    await waitFor(
      "the controller to be ready",
      async () => {
        const r = await fetch(`http://127.0.0.1:${sluice.adminPort}/readyz`);
        return r.ok ? true : undefined;
      },
      60_000,
    );
  } catch (e) {
    await sluice.stop("SIGKILL");
    throw new Error(`${(e as Error).message}\n${sluice.output.slice(-30).join("\n")}`);
  }
  return sluice;
}

/** An admin client of the cluster (reads objects and their status in assertions). */
export function adminClient(cluster: KubeCluster): Promise<KubeClient> {
  return KubeClient.load(cluster.adminKubeconfig);
}

/** Waits until `path`'s object satisfies `ok`, and returns it. */
export async function waitForObject(
  client: KubeClient,
  path: string,
  what: string,
  ok: (o: KubeObject) => boolean,
  timeoutMs = 20_000,
): Promise<KubeObject> {
  let last: KubeObject | undefined;
  try {
    return await waitFor(
      what,
      async () => {
        last = await client.get<KubeObject>(path).catch(() => undefined);
        return last !== undefined && ok(last) ? last : undefined;
      },
      timeoutMs,
    );
  } catch (e) {
    throw new Error(`${(e as Error).message}; last seen: ${JSON.stringify(last?.["status"] ?? last)}`);
  }
}

/** The condition `type` of a conditions list. */
export function conditionOf(
  conditions: unknown,
  type: string,
):
  | { status: string; reason: string; message: string; observedGeneration?: number; lastTransitionTime: string }
  | undefined {
  if (!Array.isArray(conditions)) return undefined;
  return conditions.find((c) => (c as { type?: string }).type === type);
}

/**
 * This machine's own non-loopback IPv4 address. The API server refuses loopback addresses in EndpointSlices, so a
 * test's upstream that a Service points at listens here; traffic to it still never leaves the machine.
 */
export function hostAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  }
  throw new Error("no non-loopback IPv4 address on this machine: EndpointSlices cannot point at a local upstream");
}

/** The files of Gateway `namespace/gateway`'s client certificate Secret, as its pod mounts them. */
export async function gatewayCertificateFiles(
  admin: KubeClient,
  namespace: string,
  gateway: string,
): Promise<BootstrapTls> {
  const secret = await waitForObject(
    admin,
    `/api/v1/namespaces/${namespace}/secrets/sluice-xds-${gateway}`,
    `Gateway ${namespace}/${gateway}'s client certificate Secret`,
    (o) => (o["data"] as Record<string, string> | undefined)?.["tls.key"] !== undefined,
  );
  const data = secret["data"] as Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-cert-"));
  const files = { certFile: join(dir, "tls.crt"), keyFile: join(dir, "tls.key"), caFile: join(dir, "ca.crt") };
  writeFileSync(files.certFile, Buffer.from(data["tls.crt"] ?? "", "base64"));
  writeFileSync(files.keyFile, Buffer.from(data["tls.key"] ?? "", "base64"), { mode: 0o600 });
  writeFileSync(files.caFile, Buffer.from(data["ca.crt"] ?? "", "base64"));
  return { ...files, serverName: "127.0.0.1" };
}

/**
 * An Envoy of Gateway `namespace/gateway`, as its pod would run: with the client certificate the controller wrote into
 * the Gateway's Secret (sluice-xds-<name>). `node` names another Gateway in the node (an impostor); `ready: false`
 * does not wait for a configuration (one that is refused never gets one).
 */
export async function gatewayEnvoy(
  admin: KubeClient,
  controller: Pick<SluiceProcess, "xdsPort" | "authzPort">,
  namespace: string,
  gateway: string,
  opts: { node?: string; ready?: boolean } = {},
): Promise<TestEnvoy> {
  return startTestEnvoy(controller, {
    gateway: `${namespace}/${opts.node ?? gateway}`,
    tls: await gatewayCertificateFiles(admin, namespace, gateway),
    ...(opts.ready !== undefined ? { ready: opts.ready } : {}),
  });
}

/** GatewayClass `sluice` of Sluice's controller (cluster-scoped: one per test cluster). */
export const SLUICE_GATEWAY_CLASS = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: sluice }
spec: { controllerName: sluice.dev/gateway-controller }
`;

/** Gateway `namespace/gw` of class sluice with one HTTP listener on 127.0.0.1:`port`; `extra` is more spec YAML. */
export function kubeGatewayYaml(namespace: string, port: number, extra = ""): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: ${namespace} }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
${extra}  listeners: [{ name: http, protocol: HTTP, port: ${port} }]
`;
}

/**
 * Service `namespace/name` (port 80) and its EndpointSlice: one ready endpoint, this machine's address (hostAddress)
 * on `port` — the upstream must listen there.
 */
export function kubeServiceYaml(namespace: string, name: string, port: number): string {
  return `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${namespace} }
spec: { ports: [{ name: http, port: 80, targetPort: ${port} }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: ${namespace}, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [${hostAddress()}], conditions: { ready: true } }]
`;
}

/** HTTPRoute `namespace/name` on Gateway gw: PathPrefix /`path` (default the name) to Service app. */
export function kubeRouteYaml(namespace: string, name: string, path = name): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: ${name}, namespace: ${namespace} }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /${path} } }]
      backendRefs: [{ name: app, port: 80 }]
`;
}
