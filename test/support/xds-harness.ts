// Starts an XdsServer on a loopback port picked at run time, with a logger that keeps what it was told.
import type { LogFields, XdsLogger } from "../../src/xds-server/logger.js";
import { XdsServer } from "../../src/xds-server/server.js";
import { AdsProbeClient } from "./ads-probe.js";

export interface LogEntry {
  readonly level: "debug" | "info" | "warn" | "error";
  readonly message: string;
  readonly fields: LogFields;
}

export class MemoryLogger implements XdsLogger {
  readonly entries: LogEntry[] = [];
  debug(message: string, fields: LogFields = {}): void {
    this.entries.push({ level: "debug", message, fields });
  }
  info(message: string, fields: LogFields = {}): void {
    this.entries.push({ level: "info", message, fields });
  }
  warn(message: string, fields: LogFields = {}): void {
    this.entries.push({ level: "warn", message, fields });
  }
  error(message: string, fields: LogFields = {}): void {
    this.entries.push({ level: "error", message, fields });
  }
}

export interface XdsHarness {
  readonly server: XdsServer;
  readonly port: number;
  readonly client: AdsProbeClient;
  readonly logger: MemoryLogger;
  close(): Promise<void>;
}

export async function startXds(): Promise<XdsHarness> {
  const logger = new MemoryLogger();
  const server = new XdsServer({ logger });
  const { port } = await server.start({ host: "127.0.0.1", port: 0 });
  const client = new AdsProbeClient(port);
  return {
    server,
    port,
    client,
    logger,
    async close() {
      client.close();
      await server.stop();
      const bugs = logger.entries.filter((e) => e.level === "error");
      if (bugs.length > 0) throw new Error(`xDS server logged errors: ${JSON.stringify(bugs)}`);
    },
  };
}
