// `sluice controller`: Sluice in a cluster. Watches the API server (KubeSource), translates with the same pipeline
// as file mode, serves xDS and Sluice's services from every replica, and — on the replica holding the Lease — writes
// status back and records Events.

import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname } from "node:os";
import { parseArgs } from "node:util";
import { SLUICE_CONTROLLER_NAME } from "../api/gateway-api.js";
import { applyObservability, stopObservability } from "../observability/options.js";
import { DEFAULT_ENVOY_IMAGE, DEFAULT_XDS_SERVICE } from "../provision/defaults.js";
import { Provisioner, type ProvisionOutcome } from "../provision/provisioner.js";
import type { ProvisionSettings } from "../provision/render.js";
import type { CertificateAuthority } from "../security/certificates.js";
import type { MutualTls } from "../security/tls.js";
import type { LoadResult } from "../sources/file-source.js";
import { KubeClient } from "../sources/kube/client.js";
import { EventRecorder } from "../sources/kube/events.js";
import { KubeSource } from "../sources/kube/kube-source.js";
import { LeaderElector } from "../sources/kube/leader.js";
import { type DesiredStatus, StatusWriter } from "../sources/kube/status-writer.js";
import { GatewayCertificates, loadOrCreateCaSecret } from "../sources/kube/xds-credentials.js";
import type { TranslationResult } from "../translate/translate.js";
import { CONTROLLER_OPTIONS } from "./controller-options.js";
import type { CommandIO } from "./io.js";
import { parseAuthorizationPath, parsePort, untilSignal } from "./serve.js";
import { SluiceServer } from "./server.js";
import { serverTls } from "./xds-tls.js";

const SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

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
  /** Provisioning settings; undefined provisions nothing. */
  readonly provision?: { readonly settings: ProvisionSettings; readonly resyncMs: number };
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
  /** Each Gateway's Envoy objects (the Lease holder's). */
  readonly provisioner: Provisioner | undefined;
  /** The translator's statuses last given to the status writer, and the provisioner's (GwParameters). */
  #translatedStatuses: readonly DesiredStatus[] = [];
  #parametersStatuses: readonly DesiredStatus[] = [];
  /** Provisioning problems last told of in an Event, by Gateway. */
  #provisionNotes = new Map<string, string>();
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
    this.provisioner =
      opts.provision !== undefined
        ? new Provisioner(opts.client, this.source, {
            settings: opts.provision.settings,
            resyncMs: opts.provision.resyncMs,
            log: opts.log,
            onOutcomes: (o) => this.#onProvisioned(o),
          })
        : undefined;
    this.server = new SluiceServer({
      source: this.source,
      ...(opts.xds !== undefined ? { tls: opts.xds.tls } : {}),
      impliedGatewayClass: false,
      listenOnGatewayAddress: false,
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
      ...(this.provisioner !== undefined ? { provision: { ...this.provisioner.stats } } : {}),
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
    if (this.provisioner !== undefined) {
      if (on) this.#provisionNotes = new Map();
      this.provisioner.active = on;
      this.provisioner.reconcile(this.#lastGateways);
    }
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
    this.#translatedStatuses = result.statuses;
    this.status.update([...this.#translatedStatuses, ...this.#parametersStatuses]);
    this.#reportRefusals(load);
    this.#reconcileCertificates();
    this.provisioner?.reconcile(this.#lastGateways);
  }

  /**
   * A provisioning pass ended: each GwParameters used gets its conditions (Accepted, naming the fields that cannot be
   * applied; a Warning for the fields not served), each Gateway with problems a Warning Event when they change.
   */
  #onProvisioned(outcomes: readonly ProvisionOutcome[]): void {
    const byParams = new Map<string, { gateways: string[]; errors: string[]; warnings: string[] }>();
    for (const o of outcomes) {
      for (const source of o.sources) {
        const entry = byParams.get(source) ?? { gateways: [], errors: [], warnings: [] };
        entry.gateways.push(o.gateway);
        for (const p of o.problems) {
          if (p.parameters !== source) continue;
          (p.severity === "error" ? entry.errors : entry.warnings).push(`${p.path}: ${p.message}`);
        }
        byParams.set(source, entry);
      }
    }
    this.#parametersStatuses = [...byParams].map(([key, e]) => {
      const [namespace = "", name = ""] = key.split("/");
      const gateways = [...new Set(e.gateways)].sort().join(", ");
      const conditions = [
        e.errors.length === 0
          ? { type: "Accepted", status: "True", reason: "Accepted", message: `provisions Gateway ${gateways}` }
          : {
              type: "Accepted",
              status: "False",
              reason: "Invalid",
              message: `${[...new Set(e.errors)].join("; ")}; Gateway ${gateways} keeps its last good objects`,
            },
        ...(e.warnings.length > 0
          ? [
              {
                type: "Warning",
                status: "True",
                reason: "NotYetSupported",
                message: [...new Set(e.warnings)].join("; "),
              },
            ]
          : []),
      ];
      return { kind: "GwParameters", namespace, name, status: { conditions } };
    });
    this.status.update([...this.#translatedStatuses, ...this.#parametersStatuses]);
    const notes = new Map<string, string>();
    for (const o of outcomes) {
      const problems = o.problems.filter((p) => p.severity === "error" || p.parameters === undefined);
      if (problems.length === 0) continue;
      const note = problems
        .map((p) => `${p.parameters !== undefined ? `GwParameters ${p.parameters} ` : ""}${p.path}: ${p.message}`)
        .join("; ");
      notes.set(o.gateway, note);
      if (this.#provisionNotes.get(o.gateway) === note) continue;
      const [namespace = "", name = ""] = o.gateway.split("/");
      const gateway = this.source.object("Gateway", namespace, name);
      if (gateway === undefined) continue;
      this.events.warning(
        {
          apiVersion: gateway.apiVersion ?? "gateway.networking.k8s.io/v1",
          kind: "Gateway",
          namespace,
          name,
          ...(gateway.metadata.uid !== undefined ? { uid: gateway.metadata.uid } : {}),
        },
        o.applied ? "ProvisioningWarning" : "ProvisioningRefused",
        o.applied ? `Sluice provisions with: ${note}` : `Sluice keeps the last good Envoy objects: ${note}`,
        "Provision",
      );
    }
    this.#provisionNotes = notes;
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
    await this.provisioner?.close();
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

/** `--proxy-image registry/repository:tag` (or `@digest`) as the default image parts; the official Envoy image without. */
function parseImage(flag: string | undefined): ProvisionSettings["image"] {
  if (flag === undefined) return DEFAULT_ENVOY_IMAGE;
  const slash = flag.indexOf("/");
  const registry = slash > 0 && /[.:]|^localhost$/.test(flag.slice(0, slash)) ? flag.slice(0, slash) : "";
  const rest = registry === "" ? flag : flag.slice(slash + 1);
  const colon = rest.lastIndexOf(":");
  if (colon < 0) throw new Error(`--proxy-image ${flag}: give a tag (repository:tag)`);
  return { registry, repository: rest.slice(0, colon), tag: rest.slice(colon + 1) };
}

function nonNegative(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${flag} must be a number of seconds, 0 or more, got "${value}"`);
  return n;
}

function positive(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${flag} must be a positive integer, got "${value}"`);
  return n;
}

export async function runController(argv: string[], io: CommandIO): Promise<number> {
  const { values } = parseArgs({ args: argv, options: CONTROLLER_OPTIONS });
  // JSON by default: a cluster's log collector reads it.
  const log = applyObservability(values, "json", (t) => io.stderr(t));
  const client = await KubeClient.load(values.kubeconfig ?? (process.env["KUBECONFIG"] || undefined));
  const namespace = controllerNamespace(values.namespace);
  let xds: ControllerOptions["xds"];
  if (!values["no-xds-tls"]) {
    const ca = await loadOrCreateCaSecret(client, namespace, log);
    // The name provisioned Envoys check Sluice's certificate for is among its names.
    const names = [...(values["xds-server-name"] ?? [])];
    const proxyHost = values["proxy-xds-host"] ?? `${DEFAULT_XDS_SERVICE}.${namespace}.svc`;
    if (!values["no-provision"] && isIP(proxyHost) === 0) names.push(proxyHost);
    xds = { ca, tls: await serverTls(ca, values["xds-host"], [...new Set(names)]) };
  } else log("sluice controller: --no-xds-tls: xDS and the services are plaintext and unauthenticated");
  const xdsPort = parsePort("xds-port", values["xds-port"]);
  const authzPort = parsePort("authz-port", values["authz-port"]);
  const proxyXdsHost = values["proxy-xds-host"] ?? `${DEFAULT_XDS_SERVICE}.${namespace}.svc`;
  const proxyMcpPort = parsePort("proxy-mcp-port", values["proxy-mcp-port"] ?? values["mcp-port"]);
  const controller = new Controller({
    client,
    namespace,
    ...(values["no-provision"]
      ? {}
      : {
          provision: {
            settings: {
              xdsHost: proxyXdsHost,
              xdsPort:
                values["proxy-xds-port"] !== undefined
                  ? parsePort("proxy-xds-port", values["proxy-xds-port"])
                  : xdsPort,
              authzPort:
                values["proxy-authz-port"] !== undefined
                  ? parsePort("proxy-authz-port", values["proxy-authz-port"])
                  : authzPort,
              // Port 0 (picked at start, tests) is no port a proxy can be told of: no MCP cluster.
              ...(proxyMcpPort !== 0 ? { mcpPort: proxyMcpPort } : {}),
              adminPort: parsePort("proxy-admin-port", values["proxy-admin-port"]),
              readyPort: parsePort("proxy-ready-port", values["proxy-ready-port"]),
              delta: true,
              tls: xds !== undefined,
              image: parseImage(values["proxy-image"]),
              logLevel: values["proxy-log-level"],
            },
            resyncMs: nonNegative("provision-resync", values["provision-resync"]) * 1000,
          },
        }),
    ...(xds !== undefined ? { xds } : {}),
    identity: values.identity ?? process.env["POD_NAME"] ?? hostname(),
    leaseName: values["lease-name"],
    leaseDurationSeconds: positive("lease-duration", values["lease-duration"]),
    leaderElect: values["leader-elect"] && !values["no-leader-elect"],
    statusConcurrency: positive("status-concurrency", values["status-concurrency"]),
    xdsHost: values["xds-host"],
    xdsPort,
    authzPort,
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
  await stopObservability();
  return 0;
}
