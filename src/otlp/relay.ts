// Sluice's span relay: Envoy's OpenTelemetry tracer exports to Sluice (OTLP/gRPC on the authz port) when a
// `frontend.tracing` policy asks for what the tracer cannot do itself (`attributes.remove`, a `filter` reading the
// response); the relay applies it (./spans.ts) and sends the export on to the user's collector over OTLP/gRPC or
// OTLP/HTTP.
//
// The collector's address is never taken from the call: the call names the collector's cluster, and the relay sends
// to that cluster's endpoints in the newest translation (or the one before, for an Envoy still on the old snapshot),
// so a client of the authz port cannot make Sluice send anywhere else. It connects with the TLS of the collector's
// backend policy, as Envoy's cluster to it does (gRPC over h2 with TLS, HTTPS; the same CA, SNI, names and client
// certificate: security/backend-tls.ts).

import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Cluster } from "../gen/envoy/config/cluster/v3/cluster_pb.js";
import { HealthStatus } from "../gen/envoy/config/core/v3/health_check_pb.js";
import { targetKey, UnaryGrpcClient } from "../grpc/unary-client.js";
import type { Headers, UnaryHandler } from "../grpc/unary-server.js";
import { HttpsAgents } from "../security/backend-tls.js";
import type { BackendTlsIR } from "../translate/ir.js";
import type { TranslationResult } from "../translate/translate.js";
import { decodeRelaySpec, EXPORT_PATH, RELAY_METADATA, type RelaySpec, rewriteExport } from "./spans.js";

type Target = { readonly host: string; readonly port: number; readonly tls?: BackendTlsIR };
type Table = ReadonlyMap<string, readonly Target[]>;

/** Within Envoy's own export timeout (5 s), so a slow collector fails the call rather than Envoy giving up first. */
const FORWARD_TIMEOUT_MS = 4000;
/** Failures are logged at most this often (with how many there were). */
const LOG_EVERY_MS = 10_000;

/** The endpoints of every collector cluster (`tracing/...`) of a translation, each with the cluster's TLS. */
export function collectorTargets(result: Pick<TranslationResult, "gateways">): Table {
  const out = new Map<string, Target[]>();
  for (const gw of result.gateways) {
    for (const c of gw.xds.clusters) {
      if (c.name.startsWith("tracing/")) out.set(c.name, clusterTargets(c, gw.collectorTls?.get(c.name)));
    }
  }
  return out;
}

function clusterTargets(c: Cluster, tls: BackendTlsIR | undefined): Target[] {
  const out: Target[] = [];
  for (const group of c.loadAssignment?.endpoints ?? []) {
    for (const lb of group.lbEndpoints) {
      if (lb.hostIdentifier.case !== "endpoint" || lb.healthStatus === HealthStatus.UNHEALTHY) continue;
      const a = lb.hostIdentifier.value.address?.address;
      if (a?.case !== "socketAddress" || a.value.portSpecifier.case !== "portValue") continue;
      out.push({ host: a.value.address, port: a.value.portSpecifier.value, ...(tls !== undefined ? { tls } : {}) });
    }
  }
  return out;
}

export interface RelayOptions {
  readonly log: (line: string) => void;
}

export class SpanRelay {
  #current: Table = new Map();
  #previous: Table = new Map();
  #published: unknown;
  #next = 0;
  readonly #grpc = new UnaryGrpcClient();
  readonly #http = new HttpAgent({ keepAlive: true, maxSockets: 16 });
  readonly #https = new HttpsAgents({ keepAlive: true, maxSockets: 16 });
  readonly #log: (line: string) => void;
  #failures = 0;
  #logged = { at: 0, count: 0 };
  /** Spans received and dropped by a filter, since start. */
  readonly counts = { spans: 0, dropped: 0, exports: 0, failures: 0 };

  constructor(opts: RelayOptions) {
    this.#log = opts.log;
  }

  update(result: Pick<TranslationResult, "gateways">): void {
    if (result.gateways === this.#published) return;
    this.#published = result.gateways;
    this.#previous = this.#current;
    this.#current = collectorTargets(result);
  }

  /** The unary handler of EXPORT_PATH. */
  readonly handle: UnaryHandler = async (message: Uint8Array, headers: Headers) => {
    const spec = decodeRelaySpec(headers[RELAY_METADATA]);
    if ("error" in spec) throw new Error(spec.error);
    const targets = this.#current.get(spec.cluster) ?? this.#previous.get(spec.cluster);
    if (targets === undefined || targets.length === 0) {
      throw this.#failed(`collector ${spec.cluster} has no endpoints in the current configuration`);
    }
    const out = rewriteExport(message, spec);
    this.counts.spans += out.spans;
    this.counts.dropped += out.dropped;
    this.counts.exports++;
    // Each endpoint in turn, the next one after a failure.
    let last = "";
    for (let i = 0; i < Math.min(2, targets.length); i++) {
      const t = targets[this.#next++ % targets.length] as Target;
      const r = await this.#send(spec, t, out.bytes);
      if (r === undefined) return new Uint8Array(0);
      last = `${targetKey(t)}: ${r}`;
    }
    throw this.#failed(`export to collector ${spec.cluster} failed (${last})`);
  };

  /** Undefined when the collector took the export, else why not. */
  async #send(spec: RelaySpec, t: Target, body: Uint8Array): Promise<string | undefined> {
    if (spec.protocol === "GRPC") {
      const r = await this.#grpc.call(t, EXPORT_PATH, body, {
        timeoutMs: FORWARD_TIMEOUT_MS,
        authority: spec.authority,
      });
      return r.ok ? undefined : r.error;
    }
    return this.#post(t, spec.path, body);
  }

  /** An OTLP/HTTP export: undefined when the collector answered 2xx, else why not. */
  #post(t: Target, path: string, body: Uint8Array): Promise<string | undefined> {
    return new Promise((resolve) => {
      const options = {
        host: t.host,
        port: t.port,
        path,
        method: "POST",
        headers: { "content-type": "application/x-protobuf", "content-length": body.byteLength },
        timeout: FORWARD_TIMEOUT_MS,
      };
      const answered = (res: IncomingMessage) => {
        res.resume();
        res.on("end", () =>
          resolve(res.statusCode !== undefined && res.statusCode < 300 ? undefined : `HTTP status ${res.statusCode}`),
        );
        res.on("error", (e) => resolve(e.message));
      };
      const req =
        t.tls !== undefined
          ? httpsRequest({ ...options, agent: this.#https.agent(t.tls) }, answered)
          : httpRequest({ ...options, agent: this.#http }, answered);
      req.on("timeout", () => req.destroy(new Error(`no answer within ${FORWARD_TIMEOUT_MS} ms`)));
      req.on("error", (e) => resolve(e.message));
      req.end(body);
    });
  }

  /** Counts a failure and logs it, at most once per LOG_EVERY_MS (spans carry no secrets, but this says none). */
  #failed(message: string): Error {
    this.counts.failures++;
    this.#failures++;
    const now = Date.now();
    if (now - this.#logged.at >= LOG_EVERY_MS) {
      const since = this.#failures - this.#logged.count;
      this.#logged = { at: now, count: this.#failures };
      this.#log(`sluice: span relay: ${message} (${since} failure(s) since the last report)`);
    }
    return new Error(message);
  }

  close(): void {
    this.#grpc.close();
    this.#http.destroy();
    this.#https.close();
  }
}
