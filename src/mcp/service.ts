// Sluice's MCP service as one of the services the server hosts: its own HTTP port (Envoy's bootstrap cluster
// `sluice_mcp`), and the MCP table of each new translation.

import type * as grpc from "@grpc/grpc-js";
import type { MutualTls } from "../security/tls.js";
import type { McpBackendEntry } from "../translate/mcp/table.js";
import type { TranslationResult } from "../translate/translate.js";
import { McpHttpServer } from "./http.js";
import { McpMetrics } from "./metrics.js";
import { SessionCodec } from "./session-codec.js";

export interface McpServiceOptions {
  readonly log: (line: string) => void;
  /**
   * The key sealing session ids (SessionCodec.fromEnv reads `SESSION_KEY`). Replicas serving one Gateway must share
   * it; a per-Gateway Secret is for the deployment to provide (it then passes its key here).
   */
  readonly codec?: SessionCodec;
}

export class McpService {
  readonly name = "mcp";
  readonly metrics = new McpMetrics();
  readonly #http: McpHttpServer;
  #current: ReadonlyMap<string, McpBackendEntry> = new Map();
  /** The table before the newest: an Envoy that has not applied the new routes yet still sends their keys. */
  #previous: ReadonlyMap<string, McpBackendEntry> = new Map();
  port = 0;

  constructor(opts: McpServiceOptions) {
    const codec = opts.codec ?? SessionCodec.fromEnv(process.env["SESSION_KEY"], opts.log);
    this.#http = new McpHttpServer({
      codec,
      metrics: this.metrics,
      entry: (key) => this.#current.get(key) ?? this.#previous.get(key),
      log: opts.log,
    });
    this.metrics.spares = () => ({ ...this.#http.spares.counters });
  }

  addTo(_server: grpc.Server): void {}

  update(result: TranslationResult): void {
    if (result.mcp.entries === this.#current) return;
    this.#previous = this.#current;
    this.#current = result.mcp.entries;
    // Spare target sessions and cached initialize answers are kept for backends as they are configured now only.
    this.#http.retain(this.#current);
  }

  /** `tls`: mutual TLS as on the ext_authz port (Envoy's `sluice_mcp` cluster then presents its certificate). */
  async start(host: string, port: number, tls?: MutualTls): Promise<number> {
    this.port = await this.#http.start(host, port, tls);
    return this.port;
  }

  get counters(): McpHttpServer["counters"] {
    return this.#http.counters;
  }

  /** Spare target sessions (spare-pool.ts): held sets and counters, for tests and metrics. */
  get spares(): McpHttpServer["spares"] {
    return this.#http.spares;
  }

  close(): void {
    void this.#http.stop();
  }

  stop(): Promise<void> {
    return this.#http.stop();
  }
}
