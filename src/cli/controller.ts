// `sluice controller`: Sluice in a cluster. Watches the API server (KubeSource), translates with the same pipeline
// as file mode, serves xDS and Sluice's services from every replica, and — on the replica holding the Lease — writes
// status back and records Events.

import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { parseArgs } from "node:util";
import { SLUICE_CONTROLLER_NAME } from "../api/gateway-api.js";
import type { CertificateAuthority } from "../security/certificates.js";
import type { MutualTls } from "../security/tls.js";
import type { LoadResult } from "../sources/file-source.js";
import { KubeClient } from "../sources/kube/client.js";
import { EventRecorder } from "../sources/kube/events.js";
import { KubeSource } from "../sources/kube/kube-source.js";
import { LeaderElector } from "../sources/kube/leader.js";
import { StatusWriter } from "../sources/kube/status-writer.js";
import { GatewayCertificates, loadOrCreateCaSecret } from "../sources/kube/xds-credentials.js";
import type { TranslationResult } from "../translate/translate.js";
import type { CommandIO } from "./io.js";
import { parseAuthorizationPath, parsePort, untilSignal } from "./serve.js";
import { SluiceServer } from "./server.js";
import { serverTls } from "./xds-tls.js";

const SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

export const CONTROLLER_OPTIONS = {
  kubeconfig: { type: "string" },
  // Where the Lease (and the xDS CA Secret) live: the controller's own namespace.
  namespace: { type: "string" },
  // This replica's name in the Lease (the pod name in a cluster).
  identity: { type: "string" },
  "lease-name": { type: "string", default: "sluice-controller" },
  "lease-duration": { type: "string", default: "15" },
  "leader-elect": { type: "boolean", default: true },
  "no-leader-elect": { type: "boolean", default: false },
  "status-concurrency": { type: "string", default: "4" },
  "xds-host": { type: "string", default: "0.0.0.0" },
  "xds-port": { type: "string", default: "18000" },
  "authz-port": { type: "string", default: "18002" },
  "mcp-port": { type: "string", default: "18003" },
  "admin-host": { type: "string", default: "0.0.0.0" },
  "admin-port": { type: "string", default: "18001" },
  "authorization-path": { type: "string", default: "auto" },
  "no-vhds": { type: "boolean", default: false },
  // Authenticated xDS (on by default): Envoys need their Gateway's client certificate (docs/xds-security.md).
  "no-xds-tls": { type: "boolean", default: false },
  // DNS names Envoys reach Sluice by (the xDS Service's), for Sluice's serving certificate.
  "xds-server-name": { type: "string", multiple: true },
} as const;

export interface ControllerOptions {
  readonly client: KubeClient;
  /** Namespace of the Lease. */
  readonly namespace: string;
  readonly identity: string;
  readonly leaseName: string;
  readonly leaseDurationSeconds: number;
  /** Without leader election this replica writes status as if it held the Lease (one replica only). */
  readonly leaderElect: boolean;
  readonly statusConcurrency: number;
  readonly xdsHost: string;
  readonly xdsPort: number;
  readonly authzPort: number;
  /** Sluice's MCP service; undefined serves none. */
  readonly mcpPort?: number;
  readonly adminHost: string;
  readonly adminPort?: number;
  readonly vhds: boolean;
  readonly authorizationPath: "auto" | "sluice" | "sluice-grpc";
  /**
   * Authenticated xDS (docs/xds-security.md): Sluice's CA (from its Secret) and this replica's serving certificate.
   * Without it, xDS and the services are plaintext (a trusted network only).
   */
  readonly xds?: { readonly ca: CertificateAuthority; readonly tls: MutualTls };
  readonly log: (line: string) => void;
}

/** The controller's parts, started and stopped together (the command and the tests use this). */
export class Controller {
  readonly source: KubeSource;
  readonly status: StatusWriter;
  readonly server: SluiceServer;
  readonly events: EventRecorder;
  readonly elector: LeaderElector | undefined;
  /** Each Gateway's xDS client certificate Secret (with authenticated xDS). */
  readonly certificates: GatewayCertificates | undefined;
  #lastGateways: readonly string[] = [];
  readonly #opts: ControllerOptions;
  /** The problems last reported as Events, by resource: one Event per new refusal, not one per reload. */
  #refused = new Map<string, string>();
  #published = false;
  #leading = false;

  constructor(opts: ControllerOptions) {
    this.#opts = opts;
    this.source = new KubeSource(opts.client, { log: opts.log });
    this.status = new StatusWriter(opts.client, this.source, {
      controllerName: SLUICE_CONTROLLER_NAME,
      log: opts.log,
      concurrency: opts.statusConcurrency,
    });
    this.source.onStatusOnly((o) => this.status.recheck(o.kind ?? "", o.metadata.namespace, o.metadata.name));
    // The certificate Secrets are named by no resource, so their changes publish nothing (KubeSource leaves them out
    // of translation): a change of any kind looks at them, once per turn of the event loop.
    void this.source.watch(() => {
      if (this.#certificatesQueued) return;
      this.#certificatesQueued = true;
      setImmediate(() => {
        this.#certificatesQueued = false;
        this.#reconcileCertificates();
      });
    });
    this.events = new EventRecorder(opts.client, { identity: opts.identity, log: opts.log });
    this.elector = opts.leaderElect
      ? new LeaderElector(opts.client, {
          namespace: opts.namespace,
          name: opts.leaseName,
          identity: opts.identity,
          leaseDurationSeconds: opts.leaseDurationSeconds,
          // client-go's proportions (15 / 10 / 2 s by default).
          renewDeadlineSeconds: (opts.leaseDurationSeconds * 2) / 3,
          retryPeriodSeconds: opts.leaseDurationSeconds / 7.5,
          onStartedLeading: () => this.setLeading(true),
          onStoppedLeading: () => this.setLeading(false),
          log: opts.log,
        })
      : undefined;
    this.certificates =
      opts.xds !== undefined ? new GatewayCertificates(opts.client, opts.xds.ca, opts.log) : undefined;
    this.server = new SluiceServer({
      source: this.source,
      ...(opts.xds !== undefined ? { tls: opts.xds.tls } : {}),
      impliedGatewayClass: false,
      xdsHost: opts.xdsHost,
      xdsPort: opts.xdsPort,
      authzPort: opts.authzPort,
      ...(opts.mcpPort !== undefined ? { mcpPort: opts.mcpPort } : {}),
      adminHost: opts.adminHost,
      ...(opts.adminPort !== undefined ? { adminPort: opts.adminPort } : {}),
      authorizationPath: opts.authorizationPath,
      vhds: opts.vhds,
      log: opts.log,
      ready: () => this.notReady(),
      extraStatus: () => ({ kube: this.kubeStatus() }),
      extraMetrics: () => this.metrics(),
      onPublish: (load, result) => this.#onPublish(load, result),
    });
  }

  /** Why this replica is not ready yet, or undefined when it is (/readyz). */
  notReady(): string | undefined {
    const unsynced = this.source.unsynced();
    if (unsynced.length > 0) return `waiting for the first list of ${unsynced.join(", ")}`;
    if (!this.#published) return "the first snapshot is not built yet";
    return undefined;
  }

  /** The controller's part of /status: the Lease, status writes and each kind's watch. */
  kubeStatus(): Record<string, unknown> {
    const w = this.status.stats;
    return {
      identity: this.#opts.identity,
      leading: this.#leading,
      leader: this.elector?.leader ?? (this.#leading ? this.#opts.identity : undefined),
      statusWrites: {
        writes: w.writes,
        conflicts: w.conflicts,
        errors: w.errors,
        refused: w.refused,
        objects: w.perObject.size,
        maxPerObject: [...w.perObject.values()].reduce((a, b) => Math.max(a, b), 0),
        // The objects written most, for a look at what churns.
        busiest: [...w.perObject]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 5)
          .map(([key, writes]) => ({ key, writes })),
        pending: this.status.pending,
      },
      kinds: Object.fromEntries(
        [...this.source.reflectors.values()].map((r) => [
          r.kind.kind,
          {
            state: r.state,
            version: r.version ?? null,
            objects: r.objects.size,
            translated: this.source.translated(r.kind.kind),
            ...r.counts,
          },
        ]),
      ),
    };
  }

  /** Prometheus lines of the controller. */
  metrics(): string[] {
    const w = this.status.stats;
    const lines = [
      "# HELP sluice_kube_leader Whether this replica holds the Lease (writes status and Events).",
      "# TYPE sluice_kube_leader gauge",
      `sluice_kube_leader ${this.#leading ? 1 : 0}`,
      "# HELP sluice_kube_status_writes_total Status writes to the API server.",
      "# TYPE sluice_kube_status_writes_total counter",
      `sluice_kube_status_writes_total ${w.writes}`,
      "# HELP sluice_kube_status_conflicts_total Status writes that met a conflict (re-read and retried).",
      "# TYPE sluice_kube_status_conflicts_total counter",
      `sluice_kube_status_conflicts_total ${w.conflicts}`,
      "# HELP sluice_kube_watch_events_total Watch events received, per kind.",
      "# TYPE sluice_kube_watch_events_total counter",
    ];
    const reflectors = [...this.source.reflectors.values()];
    for (const r of reflectors) lines.push(`sluice_kube_watch_events_total{kind="${r.kind.kind}"} ${r.counts.events}`);
    lines.push(
      "# HELP sluice_kube_lists_total Full lists (the first one, and relists after 410 Gone), per kind.",
      "# TYPE sluice_kube_lists_total counter",
    );
    for (const r of reflectors) lines.push(`sluice_kube_lists_total{kind="${r.kind.kind}"} ${r.counts.lists}`);
    lines.push(
      "# HELP sluice_kube_watch_gone_total Watches answered 410 Gone (their resourceVersion was too old), per kind.",
      "# TYPE sluice_kube_watch_gone_total counter",
    );
    for (const r of reflectors) lines.push(`sluice_kube_watch_gone_total{kind="${r.kind.kind}"} ${r.counts.gone}`);
    lines.push("# HELP sluice_kube_objects Objects held in memory, per kind.", "# TYPE sluice_kube_objects gauge");
    for (const r of reflectors) lines.push(`sluice_kube_objects{kind="${r.kind.kind}"} ${r.objects.size}`);
    return lines;
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** Starts watching; serves xDS once every kind has been listed and the first snapshot built. */
  async start(): Promise<void> {
    this.source.start();
    let waited = 0;
    while (!this.source.synced) {
      await new Promise((r) => setTimeout(r, 50));
      waited += 50;
      if (waited % 10_000 === 0) this.#opts.log(`kube: ${this.notReady() ?? ""}`);
    }
    await this.server.start();
    this.server.xds.onNack((n) => this.#onNack(n.group, n.nodeId, n.typeUrl, n.record.message));
    if (this.elector !== undefined) this.elector.start();
    else this.setLeading(true);
  }

  /** The Lease was won or lost: only the holder writes status and records Events. */
  setLeading(on: boolean): void {
    if (on === this.#leading) return;
    this.#leading = on;
    this.#opts.log(
      `kube: ${this.#opts.identity} ${on ? "holds" : "no longer holds"} the Lease; status writes ${on ? "on" : "off"}`,
    );
    this.status.active = on;
    this.events.enabled = on;
    // A new holder tells of the refusals it finds, even those the previous holder told of (Events are idempotent
    // within their window).
    if (on) this.#refused = new Map();
    if (on) this.#reconcileCertificates();
  }

  #certificatesQueued = false;

  /** The Lease holder keeps every served Gateway's client certificate Secret valid. */
  #reconcileCertificates(): void {
    if (!this.#leading || this.certificates === undefined) return;
    const gateways = this.#lastGateways.map((key) => {
      const [namespace = "", name = ""] = key.split("/");
      const uid = this.source.object("Gateway", namespace, name)?.metadata.uid;
      return { namespace, name, ...(uid !== undefined ? { uid } : {}) };
    });
    this.certificates.reconcile(gateways, (ns, name) => this.source.object("Secret", ns, name));
  }

  #onPublish(load: LoadResult, result: TranslationResult): void {
    this.#published = true;
    this.#lastGateways = result.gateways.map((g) => g.key);
    this.status.update(result.statuses);
    this.#reportRefusals(load);
    this.#reconcileCertificates();
  }

  /** A Warning Event on each resource Sluice refuses, naming the field; again only when its problems change. */
  #reportRefusals(load: LoadResult): void {
    if (!this.#leading) return;
    const byResource = new Map<string, string[]>();
    for (const p of load.problems) {
      if (p.severity !== "error" || p.resource === undefined) continue;
      const list = byResource.get(p.resource) ?? [];
      list.push(`${p.path}: ${p.message}`);
      byResource.set(p.resource, list);
    }
    const next = new Map<string, string>();
    for (const [resource, problems] of byResource) {
      const note = problems.join("; ");
      next.set(resource, note);
      if (this.#refused.get(resource) === note) continue;
      const [kind = "", ref = ""] = resource.split(" ");
      const [namespace = "", name = ""] = ref.split("/");
      const object = this.source.object(kind, namespace, name);
      if (object === undefined) continue;
      this.events.warning(
        {
          apiVersion: object.apiVersion ?? "",
          kind,
          ...(object.metadata.namespace !== undefined ? { namespace: object.metadata.namespace } : {}),
          name,
          ...(object.metadata.uid !== undefined ? { uid: object.metadata.uid } : {}),
        },
        "Invalid",
        `Sluice refuses ${resource}: ${note}`,
        "Validate",
      );
    }
    this.#refused = next;
  }

  /** An Envoy rejected its Gateway's configuration: a Warning Event on the Gateway, with Envoy's message. */
  #onNack(group: string, nodeId: string, typeUrl: string, message: string): void {
    const [namespace = "", name = ""] = group.split("/");
    const gateway = this.source.object("Gateway", namespace, name);
    if (gateway === undefined) return;
    this.events.warning(
      {
        apiVersion: gateway.apiVersion ?? "gateway.networking.k8s.io/v1",
        kind: "Gateway",
        namespace,
        name,
        ...(gateway.metadata.uid !== undefined ? { uid: gateway.metadata.uid } : {}),
      },
      "ConfigRejected",
      `Envoy ${nodeId} rejected ${typeUrl.split(".").pop() ?? typeUrl}: ${message}`,
      "Push",
    );
  }

  async stop(): Promise<void> {
    await this.elector?.stop({ release: true });
    this.status.close();
    await this.events.close();
    await this.certificates?.idle();
    await this.server.stop();
  }
}

function controllerNamespace(flag: string | undefined): string {
  if (flag !== undefined) return flag;
  const env = process.env["POD_NAMESPACE"];
  if (env !== undefined && env !== "") return env;
  try {
    return readFileSync(SERVICE_ACCOUNT_NAMESPACE, "utf8").trim();
  } catch {
    return "sluice-system";
  }
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${flag} must be a positive integer, got "${value}"`);
  return n;
}

export async function runController(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({ args: argv, options: CONTROLLER_OPTIONS });
  const log = (line: string) => io.stderr(`${line}\n`);
  const client = await KubeClient.load(values.kubeconfig ?? (process.env["KUBECONFIG"] || undefined));
  const namespace = controllerNamespace(values.namespace);
  let xds: ControllerOptions["xds"];
  if (!values["no-xds-tls"]) {
    const ca = await loadOrCreateCaSecret(client, namespace, log);
    xds = { ca, tls: await serverTls(ca, values["xds-host"], values["xds-server-name"] ?? []) };
  } else log("sluice controller: --no-xds-tls: xDS and the services are plaintext and unauthenticated");
  const controller = new Controller({
    client,
    namespace,
    ...(xds !== undefined ? { xds } : {}),
    identity: values.identity ?? process.env["POD_NAME"] ?? hostname(),
    leaseName: values["lease-name"],
    leaseDurationSeconds: positive("lease-duration", values["lease-duration"]),
    leaderElect: values["leader-elect"] && !values["no-leader-elect"],
    statusConcurrency: positive("status-concurrency", values["status-concurrency"]),
    xdsHost: values["xds-host"],
    xdsPort: parsePort("xds-port", values["xds-port"]),
    authzPort: parsePort("authz-port", values["authz-port"]),
    mcpPort: parsePort("mcp-port", values["mcp-port"]),
    adminHost: values["admin-host"],
    adminPort: parsePort("admin-port", values["admin-port"]),
    vhds: !values["no-vhds"],
    authorizationPath: parseAuthorizationPath(values["authorization-path"]),
    log,
  });
  log(`sluice controller: watching ${client.server}`);
  await controller.start();
  const signal = await untilSignal();
  log(`sluice controller: ${signal}, stopping`);
  await controller.stop();
  await client.close();
  return 0;
}
