// A real Kubernetes control plane for end-to-end tests: etcd and kube-apiserver as built by scripts/kube-setup.sh,
// on ports picked at run time (test files run in parallel), TLS from a CA made here so clients verify the server,
// an admin token (group system:masters) and ServiceAccount tokens by TokenRequest. kube-controller-manager runs only
// when asked (`controllerManager`: its garbage collector, for the provisioning tests); without it there is no garbage
// collection, and a deleted namespace stays Terminating, so each test takes a fresh namespace.

import "reflect-metadata"; // @peculiar/x509 needs the Reflect polyfill
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes, webcrypto } from "node:crypto";
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { request as httpsRequest, type RequestOptions } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ApiextensionsV1Api,
  CoreV1Api,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from "@kubernetes/client-node";
import * as x509 from "@peculiar/x509";
import { parseAllDocuments } from "yaml";
import { projectRoot } from "../../src/cli/paths.js";
import { freePort, waitFor } from "./net.js";

export interface KubeCluster {
  /** `https://127.0.0.1:<port>`, the API server. */
  readonly server: string;
  /** A kubeconfig file for the admin user (group system:masters, by a static token). */
  readonly adminKubeconfig: string;
  /** PEM file of the CA that signed the API server's serving certificate. */
  readonly caFile: string;
  /** etcd's client URL (`http://127.0.0.1:<port>`), for tests that compact it to force 410 Gone. */
  readonly etcd: string;
  /** The temporary directory holding the certificates, etcd's data and the logs (etcd.log, kube-apiserver.log). */
  readonly dir: string;
  /** A client configuration for the admin user. */
  kubeConfig(): KubeConfig;
  /** Creates ServiceAccount `namespace/name` unless it exists, gets it a token by TokenRequest (valid 1 h) and
   * writes a kubeconfig file with it; returns the file's path. */
  kubeconfigForServiceAccount(namespace: string, name: string): Promise<string>;
  /** Creates a namespace with a fresh name starting with `prefix`; returns the name. */
  namespace(prefix: string): Promise<string>;
  /** A request to the API server as admin, sent as written (client-node's typed clients drop the fields of built-in
   * kinds they do not model, such as a CRD schema's x-kubernetes-* keywords); `body` other than a string is JSON. */
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<HttpsResult>;
  /** Server-side apply as admin (conflicts forced, unknown fields refused as kubectl does) of the documents of a YAML
   * text, or of objects, in order; the objects are sent as written. Throws with the API server's message on the
   * first one refused. */
  apply(docs: string | readonly object[], fieldManager?: string, opts?: { readonly dryRun?: boolean }): Promise<void>;
  /** Applies deploy/crds, the Gateway API CRDs of a channel (experimental by default: the standard kinds with more
   * fields, plus the experimental kinds), XListenerSet and InferencePool; resolves when every CRD is Established. */
  installCrds(opts?: { readonly gatewayApiChannel?: "standard" | "experimental" }): Promise<void>;
  /** Stops kube-apiserver (etcd keeps running) and starts it again on the same port; resolves once /readyz is ok. */
  restartApiServer(): Promise<void>;
  /** Stops kube-apiserver and etcd and removes the directory (kept when SLUICE_TEST_KEEP_KUBE=1). */
  stop(): Promise<void>;
}

export interface HttpsResult {
  readonly status: number;
  readonly body: string;
}

export interface KubeClusterOptions {
  /** More kube-apiserver flags, e.g. `--feature-gates=...`. */
  readonly apiServerArgs?: readonly string[];
  /** Also run kube-controller-manager with these controllers (e.g. `["garbagecollector"]`). */
  readonly controllerManager?: readonly string[];
}

/** KEY=VALUE lines of scripts/versions.sh, the one place versions are pinned. */
export function pinnedVersions(): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(join(projectRoot(), "scripts", "versions.sh"), "utf8").split("\n")) {
    const m = /^([A-Z_]+)=(\S+)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

function pinned(key: string): string {
  const v = pinnedVersions()[key];
  if (v === undefined) throw new Error(`scripts/versions.sh has no ${key}`);
  return v;
}

/** helm as scripts/kube-setup.sh builds it. */
export function helmBinary(): string {
  const path = join(projectRoot(), ".cache", `helm-${pinned("HELM_VERSION")}`, "helm");
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run setup\` (scripts/kube-setup.sh builds it)`);
  return path;
}

function kubeBinary(name: "kube-apiserver" | "etcd" | "kube-controller-manager"): string {
  const path = join(projectRoot(), ".cache", `kube-${pinned("KUBE_VERSION")}`, name);
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run setup\` (scripts/kube-setup.sh builds it)`);
  return path;
}

/** The CRD files installCrds applies, in order: Sluice's own, Gateway API, XListenerSet, InferencePool. */
export function crdFiles(channel: "standard" | "experimental" = "experimental"): string[] {
  const root = projectRoot();
  const cache = join(root, ".cache", "crds");
  const yamlIn = (dir: string) => {
    if (!existsSync(dir)) throw new Error(`${dir} is missing: run \`npm run setup\` (scripts/kube-setup.sh)`);
    return readdirSync(dir)
      .filter((f) => f.endsWith(".yaml"))
      .sort()
      .map((f) => join(dir, f));
  };
  return [
    ...yamlIn(join(root, "deploy", "crds")),
    ...yamlIn(join(cache, `gateway-api-v${pinned("GATEWAY_API_VERSION")}`, channel)),
    ...yamlIn(join(cache, `gateway-api-v${pinned("GATEWAY_API_XLISTENERSET_VERSION")}`, "experimental")),
    ...yamlIn(join(cache, `inference-extension-v${pinned("INFERENCE_EXTENSION_VERSION")}`)),
  ];
}

/** The objects of a YAML text of several documents (empty documents skipped). */
export function yamlObjects(text: string): KubernetesObject[] {
  const out: KubernetesObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`invalid YAML: ${doc.errors[0]?.message}`);
    const v: unknown = doc.toJS();
    if (v !== null && v !== undefined) out.push(v as KubernetesObject);
  }
  return out;
}

// ---- processes ----

/** Every process started here, killed when the test process exits however it exits. */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
// On Linux, setpriv makes the kernel kill the child when this process dies, even by SIGKILL.
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

interface LoggedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  readonly log: string;
  stop(): Promise<void>;
}

function startLogged(name: string, binary: string, args: readonly string[], log: string): LoggedProcess {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on("exit", () => {
      for (const c of live) c.kill("SIGKILL");
    });
  }
  const fd = openSync(log, "a");
  const [cmd, argv] = SETPRIV ? [SETPRIV, ["--pdeathsig", "SIGKILL", "--", binary, ...args]] : [binary, [...args]];
  const child = spawn(cmd, argv, { stdio: ["ignore", fd, fd] });
  closeSync(fd);
  live.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once("exit", () => {
      live.delete(child);
      resolve();
    }),
  );
  return {
    name,
    child,
    exited,
    log,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const t = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/** `waiting`, or an error as soon as the process exits before it settles. */
function untilExit<T>(proc: LoggedProcess, waiting: Promise<T>): Promise<T> {
  return Promise.race([
    waiting,
    proc.exited.then(() => {
      throw new Error(`${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode})`);
    }),
  ]);
}

/** The last lines of a log file, for error messages. */
export function logTail(file: string, lines = 40): string {
  try {
    return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

function sendHttps(url: string, opts: RequestOptions, body?: string): Promise<HttpsResult> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, opts, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`${opts.method ?? "GET"} ${url} timed out`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** The message of a Status the API server answered with, else the body. */
export function statusMessage(r: HttpsResult): string {
  try {
    const status = JSON.parse(r.body) as { message?: unknown };
    if (typeof status.message === "string") return status.message;
  } catch {
    // not JSON
  }
  return `HTTP ${r.status}: ${r.body.slice(0, 2000)}`;
}

/** Finds the REST path of an object through discovery (cached per client, asked again for a kind it lacks). */
class ResourcePaths extends KubernetesObjectApi {
  pathOf(o: KubernetesObject): Promise<string> {
    return this.specUriPath({ ...o, metadata: { ...o.metadata } }, "patch");
  }
}

// ---- certificates ----

const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

async function pem(key: CryptoKey): Promise<string> {
  const [format, label] =
    key.type === "private" ? (["pkcs8", "PRIVATE KEY"] as const) : (["spki", "PUBLIC KEY"] as const);
  const der = Buffer.from(await webcrypto.subtle.exportKey(format, key));
  return `-----BEGIN ${label}-----\n${der.toString("base64").replace(/(.{64})/g, "$1\n")}\n-----END ${label}-----\n`;
}

/** A CA and a serving certificate for 127.0.0.1 / localhost signed by it, as PEM. */
async function servingCertificates(): Promise<{ ca: string; cert: string; key: string }> {
  const notBefore = new Date(Date.now() - 60_000);
  const notAfter = new Date(Date.now() + 7 * 24 * 3600_000);
  const caKeys = (await webcrypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    name: "CN=sluice-test-kube-ca",
    keys: caKeys,
    notBefore,
    notAfter,
    signingAlgorithm: EC,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const keys = (await webcrypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.create({
    subject: "CN=kube-apiserver",
    issuer: ca.subject,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    notBefore,
    notAfter,
    signingAlgorithm: EC,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        { type: "ip", value: "127.0.0.1" },
        { type: "dns", value: "localhost" },
        { type: "dns", value: "kubernetes.default.svc" },
      ]),
      await x509.AuthorityKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  return { ca: ca.toString("pem"), cert: cert.toString("pem"), key: await pem(keys.privateKey) };
}

// ---- the cluster ----

function kubeConfigFor(server: string, ca: string, user: string, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "test", server, caData: Buffer.from(ca).toString("base64"), skipTLSVerify: false }],
    users: [{ name: user, token }],
    contexts: [{ name: "test", cluster: "test", user }],
    currentContext: "test",
  });
  return kc;
}

/** The message of a client-node error with the API server's own words when there are some. */
function apiError(e: unknown): Error {
  const body = (e as { body?: unknown }).body;
  if (typeof body === "string" && body !== "") {
    try {
      const status = JSON.parse(body) as { message?: string };
      if (status.message !== undefined) return new Error(status.message, { cause: e });
    } catch {
      // not JSON: keep the original error
    }
  }
  return e instanceof Error ? e : new Error(String(e));
}

function codeOf(e: unknown): number | undefined {
  const c = (e as { code?: unknown }).code;
  return typeof c === "number" ? c : undefined;
}

/**
 * Starts etcd and kube-apiserver (about 5 s) and returns the cluster once /readyz is ok. Stop it with stop(); if the
 * test process ends first, its processes are killed with it.
 */
export async function startKubeCluster(opts: KubeClusterOptions = {}): Promise<KubeCluster> {
  const apiServerBin = kubeBinary("kube-apiserver");
  const etcdBin = kubeBinary("etcd");
  const dir = mkdtempSync(join(tmpdir(), "sluice-kube-"));
  const file = (name: string, content: string) => {
    const p = join(dir, name);
    writeFileSync(p, content, { mode: 0o600 });
    return p;
  };
  const tls = await servingCertificates();
  const caFile = file("ca.crt", tls.ca);
  const certFile = file("apiserver.crt", tls.cert);
  const keyFile = file("apiserver.key", tls.key);
  const saKeys = (await webcrypto.subtle.generateKey(EC, true, ["sign", "verify"])) as CryptoKeyPair;
  const saKeyFile = file("service-account.key", await pem(saKeys.privateKey));
  const saPubFile = file("service-account.pub", await pem(saKeys.publicKey));
  const adminToken = randomBytes(24).toString("hex");
  const tokenFile = file("tokens.csv", `${adminToken},admin,admin,"system:masters"\n`);

  const [etcdClient, etcdPeer, port] = [await freePort(), await freePort(), await freePort()];
  const server = `https://127.0.0.1:${port}`;
  const etcd = startLogged(
    "etcd",
    etcdBin,
    [
      "--name=default",
      `--data-dir=${join(dir, "etcd")}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
      // Test data: no fsync, so parallel test files on one disk do not wait on each other.
      "--unsafe-no-fsync",
      "--log-level=warn",
    ],
    join(dir, "etcd.log"),
  );
  const apiServerArgs = [
    `--etcd-servers=http://127.0.0.1:${etcdClient}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${join(dir, "certs")}`,
    `--tls-cert-file=${certFile}`,
    `--tls-private-key-file=${keyFile}`,
    `--token-auth-file=${tokenFile}`,
    "--authorization-mode=RBAC",
    `--service-account-issuer=${server}`,
    `--service-account-key-file=${saPubFile}`,
    `--service-account-signing-key-file=${saKeyFile}`,
    "--service-cluster-ip-range=10.96.0.0/16",
    "--profiling=false",
    ...(opts.apiServerArgs ?? []),
  ];
  const apiServerLog = join(dir, "kube-apiserver.log");
  let apiServer: LoggedProcess | undefined;

  const failWith = (what: string, e: unknown, log: string): Error =>
    new Error(`${what}: ${(e as Error).message}\n--- ${log} (tail) ---\n${logTail(log)}`);

  const waitReady = async (proc: LoggedProcess) => {
    try {
      await untilExit(
        proc,
        waitFor(
          "kube-apiserver /readyz",
          async () => {
            const r = await sendHttps(`${server}/readyz`, {
              ca: tls.ca,
              timeout: 5000,
              agent: false,
              headers: { authorization: `Bearer ${adminToken}` },
            });
            return r.status === 200 ? true : undefined;
          },
          60_000,
          100,
        ),
      );
    } catch (e) {
      throw failWith("kube-apiserver did not become ready", e, apiServerLog);
    }
  };

  let controllerManager: LoggedProcess | undefined;
  const stopAll = async () => {
    await controllerManager?.stop();
    await apiServer?.stop();
    await etcd.stop();
  };

  try {
    await untilExit(
      etcd,
      waitFor("etcd /health", async () =>
        (await fetch(`http://127.0.0.1:${etcdClient}/health`)).ok ? true : undefined,
      ),
    ).catch((e: unknown) => {
      throw failWith("etcd did not start", e, etcd.log);
    });
    apiServer = startLogged("kube-apiserver", apiServerBin, apiServerArgs, apiServerLog);
    await waitReady(apiServer);
  } catch (e) {
    await stopAll();
    throw e;
  }

  const adminKc = () => kubeConfigFor(server, tls.ca, "admin", adminToken);
  const adminKubeconfig = file("admin.kubeconfig", adminKc().exportConfig());
  if (opts.controllerManager !== undefined) {
    // Admin credentials, no serving port, no leader election: one controller manager per test cluster.
    controllerManager = startLogged(
      "kube-controller-manager",
      kubeBinary("kube-controller-manager"),
      [
        `--kubeconfig=${adminKubeconfig}`,
        `--controllers=${opts.controllerManager.join(",")}`,
        "--leader-elect=false",
        "--secure-port=0",
        "--use-service-account-credentials=false",
        "--concurrent-gc-syncs=5",
      ],
      join(dir, "kube-controller-manager.log"),
    );
  }

  const request = async (method: string, path: string, body?: unknown, contentType = "application/json") => {
    const kc = adminKc();
    const opts: RequestOptions = { method, timeout: 30_000, agent: false, headers: { accept: "application/json" } };
    await kc.applyToHTTPSOptions(opts);
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
    if (payload !== undefined) opts.headers = { ...opts.headers, "content-type": contentType };
    return sendHttps(`${server}${path}`, opts, payload);
  };

  const apply = async (
    docs: string | readonly object[],
    fieldManager = "sluice-test",
    applyOpts: { readonly dryRun?: boolean } = {},
  ) => {
    const objects = typeof docs === "string" ? yamlObjects(docs) : (docs as readonly KubernetesObject[]);
    const paths = adminKc().makeApiClient(ResourcePaths);
    for (const o of objects) {
      const name = `${o.kind ?? "?"} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata?.name}`;
      let path: string;
      try {
        path = await paths.pathOf(o);
      } catch (e) {
        throw new Error(`apply ${name}: ${(e as Error).message}`, { cause: e });
      }
      // Strict, as kubectl: an unknown field is refused rather than dropped with a warning.
      const q = `?fieldManager=${encodeURIComponent(fieldManager)}&force=true&fieldValidation=Strict${applyOpts.dryRun === true ? "&dryRun=All" : ""}`;
      const r = await request("PATCH", `${path}${q}`, o, "application/apply-patch+yaml");
      if (r.status >= 300) throw new Error(`apply ${name}: ${statusMessage(r)}`);
    }
  };

  let stopped = false;
  const cluster: KubeCluster = {
    server,
    etcd: `http://127.0.0.1:${etcdClient}`,
    adminKubeconfig,
    caFile,
    dir,
    kubeConfig: adminKc,
    request,
    async kubeconfigForServiceAccount(namespace, name) {
      const core = adminKc().makeApiClient(CoreV1Api);
      try {
        await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
      } catch (e) {
        if (codeOf(e) !== 409) throw apiError(e);
      }
      let token: string | undefined;
      try {
        const tr = await core.createNamespacedServiceAccountToken({
          name,
          namespace,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        });
        token = tr.status?.token;
      } catch (e) {
        throw apiError(e);
      }
      if (token === undefined) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
      return file(`sa-${namespace}-${name}.kubeconfig`, kubeConfigFor(server, tls.ca, name, token).exportConfig());
    },
    async namespace(prefix) {
      const name = `${prefix
        .toLowerCase()
        .replace(/[^a-z0-9-]/g, "-")
        .slice(0, 50)}-${randomBytes(4).toString("hex")}`;
      try {
        await adminKc()
          .makeApiClient(CoreV1Api)
          .createNamespace({ body: { metadata: { name } } });
      } catch (e) {
        throw apiError(e);
      }
      return name;
    },
    apply,
    async installCrds(o = {}) {
      const crds: KubernetesObject[] = [];
      for (const f of crdFiles(o.gatewayApiChannel)) {
        crds.push(...yamlObjects(readFileSync(f, "utf8")).filter((d) => d.kind === "CustomResourceDefinition"));
      }
      await apply(crds);
      const ext = adminKc().makeApiClient(ApiextensionsV1Api);
      for (const crd of crds) {
        const name = crd.metadata?.name ?? "";
        await waitFor(`CRD ${name} to be Established`, async () => {
          const got = await ext.readCustomResourceDefinition({ name });
          const established = got.status?.conditions?.find((c) => c.type === "Established");
          return established?.status === "True" ? true : undefined;
        });
      }
    },
    async restartApiServer() {
      await apiServer?.stop();
      apiServer = startLogged("kube-apiserver", apiServerBin, apiServerArgs, apiServerLog);
      await waitReady(apiServer);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await stopAll();
      if (process.env["SLUICE_TEST_KEEP_KUBE"] !== "1") rmSync(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}
