// The long-running part of `sluice serve` and `sluice run`: watch the files, translate, publish snapshots to the
// ADS server, and answer the admin endpoints (/status, /metrics, /healthz).

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isConsolePath, serveConsole } from "../console/serve.js";
import { MetricsHistory } from "../console/usage.js";
import { EXT_PROC_PATH } from "../credentials/service.js";
import { UnaryGrpcServer } from "../grpc/unary-server.js";
import { HealthService } from "../health/service.js";
import { McpService } from "../mcp/service.js";
import { withHttp1Context, withRequestContext, withStreamContext } from "../observability/context.js";
import { updateLlmLabels } from "../observability/llm.js";
import { registry, series } from "../observability/metrics.js";
import { requestContextWanted } from "../observability/options.js";
import { escapeLabel } from "../observability/series.js";
import type { MutualTls } from "../security/tls.js";
import { FileSource, formatProblem, type LoadResult, type SourceProblem } from "../sources/file-source.js";
import type { AuthorizationPath } from "../translate/authz/plan.js";
import { TranslationMemo } from "../translate/memo.js";
import type { ResourceStatus } from "../translate/status/conditions.js";
import type { TranslationResult } from "../translate/translate.js";
import { buildSnapshot, XdsServer } from "../xds-server/index.js";
import { xdsLogger } from "../xds-server/logger.js";
import { translateLoad } from "./load.js";
import { defaultServices, type SluiceService } from "./services.js";

/** Quiet time after a file event before a reload starts: the events of one save usually arrive within a millisecond. */
const START_QUIET_MS = 2;
/**
 * What is published was read with no file event in the SETTLE_MS after the last one (the debounce that keeps
 * half-written files out); a reload that saw an event after it began reading is thrown away and done again.
 */
const SETTLE_MS = 10;
/** Longest pause between two reloads of a source whose changes keep coming (see reload()). */
const MAX_PACE_MS = 500;

/**
 * Resolves after the event loop has polled for I/O once more, so that events which arrived while this thread was busy
 * (file watchers') have been delivered: one setImmediate may still run in the turn whose poll phase came before.
 */
async function pollOnce(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
}

/** Where resources come from: YAML files (FileSource) or a Kubernetes API server (KubeSource). */
export interface ConfigSource {
  load(): Promise<LoadResult>;
  /** Calls `onChange` whenever the source's content may have changed. */
  watch(onChange: () => void): Promise<void>;
  close(): void | Promise<void>;
}

export interface SluiceServerOptions {
  /** Files and directories served (with `source` unset). */
  readonly paths?: readonly string[];
  /**
   * Another source instead of files. Its loads are consistent views (no half-written files), so they are published
   * as soon as they are translated, without the settle time files need.
   */
  readonly source?: ConfigSource;
  /** File mode implies a GatewayClass `sluice` when none is defined (default true); a cluster does not. */
  readonly impliedGatewayClass?: boolean;
  /** Listeners bind a Gateway's spec.addresses (default true, file mode); a cluster's Envoys bind every address. */
  readonly listenOnGatewayAddress?: boolean;
  readonly xdsHost: string;
  readonly xdsPort: number;
  /** Port of the unary gRPC server (ext_authz Check); 0 picks one. */
  readonly authzPort: number;
  /** Port of the MCP service (src/mcp/); 0 picks one; undefined serves none. */
  readonly mcpPort?: number;
  readonly adminHost: string;
  /** 0 picks a free port; undefined starts no admin endpoint. */
  readonly adminPort?: number;
  readonly log: (line: string) => void;
  /** See TranslateOptions.authorizationPath. */
  readonly authorizationPath?: AuthorizationPath;
  /** Virtual hosts over VHDS to Envoys on delta ADS (default true; XdsServerOptions.vhds). */
  readonly vhds?: boolean;
  /** See SETTLE_MS (the default); tests set a longer one to make their timing independent of the host's load. */
  readonly reloadSettleMs?: number;
  /** Called after each successful publish with the Gateways now served. */
  readonly onGateways?: (gateways: readonly string[]) => void;
  /** Mutual TLS on the xDS and ext_authz ports (docs/xds-security.md); plaintext without. */
  readonly tls?: MutualTls;
  /** Why the server is not ready (/readyz answers 503 with it), or undefined; default: ready after the first publish. */
  readonly ready?: () => string | undefined;
  /** More of /status (the controller's: the Lease, status writes, watches). */
  readonly extraStatus?: () => Record<string, unknown>;
  /** More Prometheus lines for /metrics (HELP, TYPE and samples). */
  readonly extraMetrics?: () => readonly string[];
  /** Called after each publish with what was loaded and its translation (the controller writes status from it). */
  readonly onPublish?: (load: LoadResult, result: TranslationResult) => void;
}

export interface ReloadStats {
  readonly at: Date;
  readonly durationMs: number;
  /** From the first change this reload takes in to the reload's start (a reload already running, a file settle). */
  readonly queuedMs: number;
  /** Reading and validating the files; translating; building snapshots and pushing them to connected Envoys. */
  readonly phasesMs: { readonly load: number; readonly translate: number; readonly publish: number };
  readonly resources: number;
  readonly problems: readonly SourceProblem[];
  readonly gateways: readonly string[];
  readonly rejectedSnapshots: readonly string[];
}

export class SluiceServer {
  readonly xds: XdsServer;
  readonly #source: ConfigSource;
  /** Loads of a non-file source are consistent: no settle time, never thrown away. */
  readonly #consistent: boolean;
  readonly #services: readonly SluiceService[];
  readonly #opts: SluiceServerOptions;
  #admin: Server | undefined;
  #gateways = new Set<string>();
  #statuses: readonly ResourceStatus[] = [];
  #last: ReloadStats | undefined;
  #reloads = 0;
  #reloading: Promise<void> | undefined;
  #again = false;
  /** File events seen, the time of the last one, and reloads thrown away because files changed while being read. */
  #events = 0;
  #lastEventAt = 0;
  /** When the first change not yet taken in by a reload arrived (a reload's queueing delay). */
  #pendingSince: number | undefined;
  #discarded = 0;
  /** The load last published, and reloads skipped because the source handed it back (nothing read changed). */
  #lastLoad: LoadResult | undefined;
  /** The translation last published, and /metrics samples over the last hour (the web console's). */
  #lastResult: TranslationResult | undefined;
  readonly #history = new MetricsHistory(() => this.metricsText());
  #unchanged = 0;
  #startTimer: NodeJS.Timeout | undefined;
  xdsPort = 0;
  authzPort = 0;
  mcpPort = 0;
  adminPort = 0;
  readonly #mcp: McpService | undefined;
  #unary: UnaryGrpcServer | undefined;
  /** Kept between reloads: a reload after a small change translates only what changed. */
  readonly #memo = new TranslationMemo();
  /** Backend health scoring (src/health/): endpoint health published between translations; a republish queued. */
  readonly #health: HealthService;
  #republishQueued = false;

  constructor(opts: SluiceServerOptions) {
    this.#opts = opts;
    if (opts.source === undefined && opts.paths === undefined) throw new Error("SluiceServer needs paths or a source");
    this.#source = opts.source ?? new FileSource(opts.paths ?? []);
    this.#consistent = opts.source !== undefined;
    this.xds = new XdsServer({ logger: xdsLogger(), vhds: opts.vhds ?? true });
    this.#mcp = opts.mcpPort !== undefined ? new McpService({ log: opts.log }) : undefined;
    const services = defaultServices({ log: opts.log });
    // Its stage's ext_proc streams; the others go on to the service that had the method (the credential one). Last in
    // the list: the last service's handler of a method is the one served.
    const extProc = services.findLast((s) => s.bidi?.has(EXT_PROC_PATH))?.bidi?.get(EXT_PROC_PATH);
    this.#health = new HealthService({ log: opts.log, next: extProc, onChange: () => this.#republish() });
    for (const s of services) s.useHealth?.(this.#health.health);
    this.#services = [...services, ...(this.#mcp !== undefined ? [this.#mcp] : []), this.#health];
  }

  get gateways(): readonly string[] {
    return [...this.#gateways].sort();
  }

  async start(): Promise<void> {
    await this.reload();
    this.xdsPort = (
      await this.xds.start({
        host: this.#opts.xdsHost,
        port: this.#opts.xdsPort,
        addServices: (server) => {
          for (const s of this.#services) s.addTo(server);
        },
        ...(this.#opts.tls !== undefined ? { tls: this.#opts.tls } : {}),
      })
    ).port;
    this.#opts.log(`sluice: ADS on ${this.#opts.xdsHost}:${this.xdsPort}`);
    // Each call runs in a request context of its own: its log lines carry its trace id, its span is Envoy's child.
    const wrap = requestContextWanted();
    const unary = new Map(
      this.#services.flatMap((s) =>
        [...(s.unary ?? [])].map(([k, h]) => [k, wrap ? withRequestContext(s.name, h) : h] as const),
      ),
    );
    const bidi = new Map(
      this.#services.flatMap((s) =>
        [...(s.bidi ?? [])].map(([k, h]) => [k, wrap ? withStreamContext(s.name, h) : h] as const),
      ),
    );
    const http1Service = this.#services.find((s) => s.http1 !== undefined);
    const http1 =
      http1Service?.http1 !== undefined && wrap
        ? withHttp1Context(http1Service.name, http1Service.http1)
        : http1Service?.http1;
    const upgrade = this.#services.find((s) => s.upgrade !== undefined)?.upgrade;
    this.#unary = new UnaryGrpcServer(unary, bidi, {
      log: this.#opts.log,
      ...(http1 !== undefined ? { http1 } : {}),
      ...(upgrade !== undefined ? { upgrade } : {}),
      ...(this.#opts.tls !== undefined ? { tls: this.#opts.tls } : {}),
    });
    this.authzPort = await this.#unary.start(this.#opts.xdsHost, this.#opts.authzPort);
    this.#opts.log(`sluice: ext_authz on ${this.#opts.xdsHost}:${this.authzPort}`);
    if (this.#mcp !== undefined && this.#opts.mcpPort !== undefined) {
      this.mcpPort = await this.#mcp.start(this.#opts.xdsHost, this.#opts.mcpPort, this.#opts.tls);
      this.#opts.log(`sluice: mcp on ${this.#opts.xdsHost}:${this.mcpPort}`);
    }
    if (this.#opts.adminPort !== undefined) await this.#startAdmin(this.#opts.adminPort);
    await this.#source.watch(() => this.#onFileEvent());
    // A source whose changes arrived while the servers were starting: they had no listener yet.
    if (this.#consistent) void this.reload();
  }

  /**
   * A file under the paths changed. A save is often several events (truncate then write; write then rename; a
   * ConfigMap's symlink swap), usually within a millisecond: the reload starts once the files have been quiet for
   * START_QUIET_MS. What keeps a half-written file from being served is not that wait but the check before publishing
   * (#reloadOnce): the files must have stayed quiet for SETTLE_MS since the last event and since the read began, or
   * the reload is thrown away and done again. A large configuration's reload takes longer than SETTLE_MS, so a change
   * reaches Envoy sooner than after a plain debounce; a small one is published when a debounce would have.
   */
  #onFileEvent(): void {
    this.#events++;
    this.#lastEventAt = performance.now();
    this.#pendingSince ??= this.#lastEventAt;
    if (this.#consistent) {
      // One reload at a time; events during one make one more (a burst of changes coalesces).
      void this.reload();
      return;
    }
    if (this.#reloading !== undefined) {
      this.#again = true;
      return;
    }
    if (this.#startTimer !== undefined) clearTimeout(this.#startTimer);
    this.#startTimer = setTimeout(() => {
      this.#startTimer = undefined;
      void this.reload();
    }, START_QUIET_MS);
  }

  /** Reloads the files and publishes; concurrent calls coalesce into one more run. */
  reload(): Promise<void> {
    if (this.#reloading !== undefined) {
      this.#again = true;
      return this.#reloading;
    }
    this.#reloading = (async () => {
      do {
        this.#again = false;
        const started = performance.now();
        await this.#reloadOnce();
        // Changes that keep coming (10,000 EndpointSlices created by a rollout) are taken in batches: after a reload
        // of d ms, the next waits d ms (up to MAX_PACE_MS), so reloads take at most half of the time and the
        // changes arriving meanwhile coalesce. A lone change still starts its reload at once.
        if (this.#again && this.#consistent) {
          const pace = Math.min(performance.now() - started, MAX_PACE_MS);
          await new Promise((resolve) => setTimeout(resolve, pace));
        }
      } while (this.#again);
      this.#reloading = undefined;
    })();
    return this.#reloading;
  }

  async #reloadOnce(): Promise<void> {
    for (;;) {
      const events = this.#events;
      const started = performance.now();
      const queued = this.#pendingSince !== undefined ? started - this.#pendingSince : 0;
      this.#pendingSince = undefined;
      const load = await this.#source.load();
      // A source that found nothing translation reads changed hands back its last load: nothing to do.
      if (this.#consistent && load === this.#lastLoad) {
        this.#unchanged++;
        return;
      }
      const loaded = performance.now();
      const result = translateLoad(load, {
        authorizationPath: this.#opts.authorizationPath ?? "auto",
        memo: this.#memo,
        impliedGatewayClass: this.#opts.impliedGatewayClass ?? true,
        listenOnGatewayAddress: this.#opts.listenOnGatewayAddress ?? true,
      });
      const translated = performance.now();
      // Scored AI providers' host names: looked up before Envoy gets their EDS (health/provider-dns.ts).
      await this.#health.prepare(result);
      if (this.#consistent) {
        this.#publish(load, result, { queued, started, loaded, translated });
        return;
      }
      // Let the watchers report what happened while the files were read and translated (their events wait for the
      // event loop). A file that changed meanwhile may have been read half written: read everything again once the
      // files are quiet, and publish nothing from this round (the memo keeps the work that is still valid).
      // A save's events may also be further apart than this reload took: publish no sooner than SETTLE_MS after the
      // last event, as a plain debounce would.
      await pollOnce();
      const settle = this.#opts.reloadSettleMs ?? SETTLE_MS;
      await this.#quiet(settle, events);
      if (this.#events !== events) {
        this.#discarded++;
        await this.#quiet(settle);
        this.#again = false;
        continue;
      }
      this.#publish(load, result, { queued, started, loaded, translated });
      return;
    }
  }

  /** Resolves once no file event has arrived for `ms`, or (with `events`) as soon as one arrives after those. */
  async #quiet(ms: number, events?: number): Promise<void> {
    for (;;) {
      if (events !== undefined && this.#events !== events) return;
      const wait = this.#lastEventAt + ms - performance.now();
      if (wait <= 0) return;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  #publish(
    load: LoadResult,
    result: TranslationResult,
    t: { readonly queued: number; readonly started: number; readonly loaded: number; readonly translated: number },
  ): void {
    const { queued, started, loaded, translated } = t;
    this.#lastLoad = load;
    this.#lastResult = result;
    // Services learn the new policy tables before Envoy can learn their ids.
    for (const s of this.#services) s.update(result);
    updateLlmLabels(result.llm);
    const rejected: string[] = [];
    const served = new Set<string>();
    for (const g of result.gateways) {
      const r = this.xds.cache.setSnapshot(g.key, buildSnapshot(this.#withHealth(g.xds)));
      if (!r.ok) {
        // A bug, not user input: the translator produced dangling references. Keep the previous snapshot.
        rejected.push(g.key);
        this.#opts.log(`sluice: snapshot for ${g.key} rejected: ${r.errors.map((e) => e.message).join("; ")}`);
      }
      served.add(g.key);
    }
    // A Gateway that disappeared gets an empty snapshot: its Envoys drop its listeners and clusters.
    for (const gone of this.#gateways) if (!served.has(gone)) this.xds.cache.setSnapshot(gone, buildSnapshot({}));
    this.#gateways = served;
    this.#statuses = result.statuses;
    this.#reloads++;
    const done = performance.now();
    const stats: ReloadStats = {
      at: new Date(),
      durationMs: done - started,
      queuedMs: queued,
      phasesMs: { load: loaded - started, translate: translated - loaded, publish: done - translated },
      resources: load.resources.length,
      problems: load.problems,
      gateways: [...served].sort(),
      rejectedSnapshots: rejected,
    };
    const previous = this.#last;
    this.#last = stats;
    const problemText = load.problems.map(formatProblem);
    const previousText = previous?.problems.map(formatProblem) ?? [];
    // Print problems when they change, not on every save.
    if (problemText.join("\n") !== previousText.join("\n")) for (const p of problemText) this.#opts.log(p);
    this.#opts.log(
      `sluice: ${stats.resources} resources, ${load.problems.length} problems, gateways [${stats.gateways.join(", ")}] in ${stats.durationMs.toFixed(1)} ms (queued ${stats.queuedMs.toFixed(1)}, load ${stats.phasesMs.load.toFixed(1)}, translate ${stats.phasesMs.translate.toFixed(1)}, publish ${stats.phasesMs.publish.toFixed(1)})`,
    );
    this.#opts.onGateways?.(stats.gateways);
    const onPublish = this.#opts.onPublish;
    if (onPublish === undefined) return;
    // After the pushes above have left: the hook's work (status, for the controller) need not delay Envoy.
    setImmediate(() => onPublish(load, result));
  }

  /** `xds` with the endpoints Sluice's health scoring evicted marked so (src/health/endpoint-health.ts). */
  #withHealth(xds: TranslationResult["gateways"][number]["xds"]) {
    return { ...xds, endpoints: this.#health.overlay(xds.endpoints) };
  }

  /** An endpoint was evicted or returned: the last translation's snapshots again, with endpoint health (coalesced). */
  #republish(): void {
    if (this.#republishQueued) return;
    this.#republishQueued = true;
    setImmediate(() => {
      this.#republishQueued = false;
      for (const g of this.#lastResult?.gateways ?? []) {
        this.xds.cache.setSnapshot(g.key, buildSnapshot(this.#withHealth(g.xds)));
      }
    });
  }

  /** Reloads published so far (readiness: at least one). */
  get reloads(): number {
    return this.#reloads;
  }

  status(): unknown {
    return {
      gateways: this.gateways,
      lastReload: this.#last && { ...this.#last, problems: this.#last.problems.map(formatProblem) },
      resources: this.#statuses,
      // Content-addressed: two servers of the same configuration show the same versions.
      snapshots: Object.fromEntries(this.gateways.map((g) => [g, this.xds.cache.getSnapshot(g)?.version ?? null])),
      xds: this.xds.status(),
      ...(this.#opts.extraStatus?.() ?? {}),
    };
  }

  metrics(): string {
    const c = this.xds.status().counters;
    const memory = process.memoryUsage();
    const lines = [
      "# HELP sluice_xds_pushes_total xDS responses sent.",
      "# TYPE sluice_xds_pushes_total counter",
      `sluice_xds_pushes_total ${c.pushes}`,
      "# HELP sluice_xds_acks_total xDS ACKs received.",
      "# TYPE sluice_xds_acks_total counter",
      `sluice_xds_acks_total ${c.acks}`,
      "# HELP sluice_xds_nacks_total xDS NACKs received (Envoy rejected a config; see /status).",
      "# TYPE sluice_xds_nacks_total counter",
      `sluice_xds_nacks_total ${c.nacks}`,
      "# HELP sluice_xds_connected_streams ADS streams open now.",
      "# TYPE sluice_xds_connected_streams gauge",
      `sluice_xds_connected_streams ${c.connectedStreams}`,
      "# HELP sluice_xds_refused_streams_total ADS streams refused: the client certificate's Gateway is not the node's.",
      "# TYPE sluice_xds_refused_streams_total counter",
      `sluice_xds_refused_streams_total ${c.refused}`,
      "# HELP sluice_tls_refused_connections_total Connections to the ext_authz port refused in the TLS handshake.",
      "# TYPE sluice_tls_refused_connections_total counter",
      `sluice_tls_refused_connections_total ${this.#unary?.refusedConnections ?? 0}`,
      "# HELP sluice_reloads_total Configuration reloads.",
      "# TYPE sluice_reloads_total counter",
      `sluice_reloads_total ${this.#reloads}`,
      "# HELP sluice_reloads_discarded_total Reloads thrown away because files changed while they were read.",
      "# TYPE sluice_reloads_discarded_total counter",
      `sluice_reloads_discarded_total ${this.#discarded}`,
      "# HELP sluice_reloads_unchanged_total Changes of the source that changed nothing translated (no translation).",
      "# TYPE sluice_reloads_unchanged_total counter",
      `sluice_reloads_unchanged_total ${this.#unchanged}`,
      "# HELP sluice_config_problems Problems in the current configuration files.",
      "# TYPE sluice_config_problems gauge",
      `sluice_config_problems ${this.#last?.problems.length ?? 0}`,
      "# HELP sluice_translate_duration_seconds Duration of the last load + translation.",
      "# TYPE sluice_translate_duration_seconds gauge",
      `sluice_translate_duration_seconds ${((this.#last?.durationMs ?? 0) / 1000).toFixed(6)}`,
      "# HELP sluice_process_resident_memory_bytes Resident memory of the Sluice process.",
      "# TYPE sluice_process_resident_memory_bytes gauge",
      `sluice_process_resident_memory_bytes ${memory.rss}`,
      "# HELP sluice_process_heap_used_bytes JavaScript heap in use (after the last garbage collection, plus new objects).",
      "# TYPE sluice_process_heap_used_bytes gauge",
      `sluice_process_heap_used_bytes ${memory.heapUsed}`,
      "# HELP sluice_process_heap_total_bytes JavaScript heap reserved (used, and free space the heap keeps).",
      "# TYPE sluice_process_heap_total_bytes gauge",
      `sluice_process_heap_total_bytes ${memory.heapTotal}`,
      "# HELP sluice_process_external_memory_bytes Memory outside the JavaScript heap held by its objects (buffers).",
      "# TYPE sluice_process_external_memory_bytes gauge",
      `sluice_process_external_memory_bytes ${memory.external}`,
    ];
    lines.push(...this.#perEnvoyLines());
    lines.push(...(this.#mcp?.metrics.lines() ?? []));
    lines.push(...(this.#opts.extraMetrics?.() ?? []));
    return `${lines.join("\n")}\n`;
  }

  /** The control-plane series (metrics()) and the request path's (src/observability/metrics.ts). */
  async metricsText(): Promise<string> {
    return `${this.metrics()}${series.text()}${await registry.metrics()}`;
  }

  /** Pushes, ACKs and NACKs per Envoy (node id) and its Gateway. */
  #perEnvoyLines(): string[] {
    const nodes = [...this.xds.nodeCounters].sort(([a], [b]) => (a < b ? -1 : 1));
    const labels = (node: string, group: string) => `node="${escapeLabel(node)}",gateway="${escapeLabel(group)}"`;
    return [
      "# HELP sluice_xds_envoy_pushes_total xDS responses sent to one Envoy (node id).",
      "# TYPE sluice_xds_envoy_pushes_total counter",
      ...nodes.map(([n, c]) => `sluice_xds_envoy_pushes_total{${labels(n, c.group)}} ${c.pushes}`),
      "# HELP sluice_xds_envoy_acks_total xDS ACKs from one Envoy.",
      "# TYPE sluice_xds_envoy_acks_total counter",
      ...nodes.map(([n, c]) => `sluice_xds_envoy_acks_total{${labels(n, c.group)}} ${c.acks}`),
      "# HELP sluice_xds_envoy_nacks_total xDS NACKs from one Envoy by resource type (see /status for Envoy's error).",
      "# TYPE sluice_xds_envoy_nacks_total counter",
      ...nodes.flatMap(([n, c]) =>
        [...c.nacks]
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([type, count]) => `sluice_xds_envoy_nacks_total{${labels(n, c.group)},type="${type}"} ${count}`),
      ),
    ];
  }

  async #startAdmin(port: number): Promise<void> {
    const server = createServer((req, res) => {
      const path = (req.url ?? "/").split("?")[0];
      if (path === "/status") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(this.status(), null, 2));
      } else if (path === "/status/xds") {
        // Just the connected Envoys: cheap enough to poll.
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(this.xds.status()));
      } else if (path === "/metrics") {
        this.metricsText().then(
          (text) => {
            res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
            res.end(text);
          },
          (e: unknown) => {
            res.writeHead(500, { "content-type": "text/plain" });
            res.end(`metrics failed: ${(e as Error).message}\n`);
          },
        );
      } else if (path === "/healthz") {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("ok\n");
      } else if (path === "/readyz") {
        const why = this.#opts.ready !== undefined ? this.#opts.ready() : this.#reloads > 0 ? undefined : "starting";
        res.writeHead(why === undefined ? 200 : 503, { "content-type": "text/plain" });
        res.end(why === undefined ? "ok\n" : `not ready: ${why}\n`);
      } else if (isConsolePath(path ?? "")) {
        void serveConsole(path ?? "", req, res, async () => ({
          load: this.#lastLoad,
          result: this.#lastResult,
          xds: this.xds.status(),
          usage: await this.#history.usage(),
          lastReloadAt: this.#last?.at,
        }));
      } else {
        res.writeHead(404, { "content-type": "text/plain" });
        res.end("not found; try /console, /status, /status/xds, /metrics, /healthz or /readyz\n");
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, this.#opts.adminHost, () => resolve());
    });
    this.#admin = server;
    this.#history.start();
    this.adminPort = (server.address() as AddressInfo).port;
    this.#opts.log(`sluice: admin on http://${this.#opts.adminHost}:${this.adminPort} (/console, /status, /metrics)`);
  }

  async stop(): Promise<void> {
    await this.#source.close();
    if (this.#startTimer !== undefined) clearTimeout(this.#startTimer);
    this.#startTimer = undefined;
    await this.xds.stop();
    await this.#unary?.stop();
    await this.#mcp?.stop();
    for (const s of this.#services) if (s !== this.#mcp) s.close?.();
    this.#history.stop();
    const admin = this.#admin;
    this.#admin = undefined;
    if (admin) await new Promise<void>((resolve) => admin.close(() => resolve()));
  }
}
