// The ADS gRPC server: wires grpc-js bidi streams to SotwStream/DeltaStream and exposes status and counters.
import * as grpc from "@grpc/grpc-js";
import { AggregatedDiscoveryService } from "../gen/envoy/service/discovery/v3/ads_pb.js";
import type { DeltaDiscoveryResponse, DiscoveryResponse } from "../gen/envoy/service/discovery/v3/discovery_pb.js";
import { addGrpcService } from "../grpc/service.js";
import type { MutualTls } from "../security/tls.js";
import { DeltaStream } from "./delta-stream.js";
import { stderrLogger, type XdsLogger } from "./logger.js";
import { SnapshotCache } from "./snapshot-cache.js";
import { SotwStream } from "./sotw-stream.js";
import type { StreamDeps, StreamPeer } from "./stream-base.js";
import { type XdsServerStatus, XdsTracker } from "./tracker.js";

export interface XdsServerOptions {
  /** The cache to serve; a new one when omitted (reach it as `server.cache`). */
  readonly cache?: SnapshotCache;
  readonly logger?: XdsLogger;
  /**
   * Envoys on delta ADS get RouteConfigurations without virtual hosts and fetch those over VHDS, so a change sends
   * and Envoy decodes only the virtual hosts it touched (default true). SotW streams and other clients always get
   * whole RouteConfigurations.
   */
  readonly vhds?: boolean;
}

export interface ListenOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** Adds other gRPC services (Sluice's ext_authz, ext_proc) to the same server and port. */
  readonly addServices?: (server: grpc.Server) => void;
  /**
   * Mutual TLS: only clients with a certificate of `tls.ca` connect (to ADS and the added services alike), and an ADS
   * stream gets only the snapshot of the Gateway its certificate names. Plaintext without it.
   */
  readonly tls?: MutualTls;
}

function credentials(tls: MutualTls | undefined): grpc.ServerCredentials {
  if (tls === undefined) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    Buffer.from(tls.ca),
    [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }],
    true,
  );
}

interface OpenCall {
  end(): void;
}

export class XdsServer {
  readonly cache: SnapshotCache;
  readonly #deps: StreamDeps;
  readonly #tracker = new XdsTracker();
  readonly #calls = new Set<OpenCall>();
  #server: grpc.Server | undefined;
  #nextStreamId = 0;
  /** Reads the Gateway a client certificate names; set when the server requires client certificates. */
  #identify: ((certificate: Uint8Array) => string | undefined) | undefined;

  constructor(options: XdsServerOptions = {}) {
    this.cache = options.cache ?? new SnapshotCache();
    this.#deps = {
      cache: this.cache,
      tracker: this.#tracker,
      logger: options.logger ?? stderrLogger,
      vhds: options.vhds ?? true,
    };
  }

  /** Adds the ADS service to a grpc-js server (to share one port with other Sluice services). */
  addTo(server: grpc.Server): void {
    addGrpcService(server, AggregatedDiscoveryService, {
      streamAggregatedResources: (call) => {
        const peer = this.#authenticate(call);
        if (peer === null) return;
        const send = (response: DiscoveryResponse) => {
          if (!call.cancelled) call.write(response);
        };
        this.#serve(call, new SotwStream(this.#deps, ++this.#nextStreamId, send, peer));
      },
      deltaAggregatedResources: (call) => {
        const peer = this.#authenticate(call);
        if (peer === null) return;
        const send = (response: DeltaDiscoveryResponse) => {
          if (!call.cancelled) call.write(response);
        };
        this.#serve(call, new DeltaStream(this.#deps, ++this.#nextStreamId, send, peer));
      },
    });
  }

  /**
   * The client of a stream on a server that requires client certificates: the Gateway its certificate names (the
   * stream then checks its node against it). Undefined on a plaintext server; null when the stream was refused here
   * (a certificate of Sluice's CA that names no Gateway).
   */
  #authenticate(call: grpc.ServerDuplexStream<unknown, unknown>): StreamPeer | undefined | null {
    const identify = this.#identify;
    if (identify === undefined) return undefined;
    const address = call.getPeer();
    const refuse = (message: string) => {
      if (!call.cancelled) call.emit("error", { code: grpc.status.PERMISSION_DENIED, details: message });
    };
    // The handshake has verified the certificate against the CA; what is left is whose it is.
    const certificate = call.getAuthContext()?.sslPeerCertificate?.raw;
    const gateway = certificate === undefined ? undefined : identify(certificate);
    if (gateway !== undefined) return { gateway, address, refuse };
    const message =
      certificate === undefined
        ? "no client certificate"
        : "the client certificate names no Gateway (one URI SAN spiffe://sluice.dev/ns/<namespace>/gateway/<name>)";
    this.#tracker.recordRefusal({
      at: new Date(),
      peer: address,
      identity: undefined,
      nodeId: undefined,
      group: undefined,
      message,
    });
    this.#deps.logger.warn("stream refused (PERMISSION_DENIED)", { peer: address, reason: message });
    refuse(message);
    return null;
  }

  #serve<Req, Res>(
    call: grpc.ServerDuplexStream<Req, Res>,
    stream: { onRequest(request: Req): void; close(): void },
  ): void {
    const open: OpenCall = {
      end: () => {
        stream.close();
        if (!call.cancelled && call.writable) call.end();
      },
    };
    this.#calls.add(open);
    const finish = () => {
      this.#calls.delete(open);
      stream.close();
    };
    call.on("data", (request: Req) => stream.onRequest(request));
    // The client half-closed: end our half too, which completes the call with OK.
    call.on("end", () => {
      finish();
      if (call.writable) call.end();
    });
    call.on("cancelled", finish);
    call.on("error", (e: Error) => {
      this.#deps.logger.debug("stream error", { error: e.message });
      finish();
    });
    call.on("close", finish);
  }

  /** Listens on host:port and resolves with the bound port. */
  async start(options: ListenOptions): Promise<{ port: number }> {
    if (this.#server) throw new Error("XdsServer already started");
    const server = new grpc.Server({
      // Envoy keeps one long-lived ADS stream: keepalives notice dead peers; allow Envoy's own pings.
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 10_000,
      "grpc.keepalive_permit_without_calls": 1,
      "grpc.http2.min_ping_interval_without_data_ms": 5_000,
      // Channelz bookkeeping costs about a sixth of an ext_authz call's CPU (bench/authz.ts); nothing reads it.
      "grpc.enable_channelz": 0,
    });
    // Envoy resets an ext_proc stream whenever its HTTP request ends first, so Sluice's services see thousands of
    // RST_STREAMs a second in normal traffic. nghttp2's rapid-reset protection (Node's defaults: a burst of 1000, then
    // 33/s) then drops the whole connection, failing every request on it with 500. grpc-js has no option for this;
    // it passes these Node http2 server options through as they are.
    const http2Options = (server as unknown as { commonServerOptions?: Record<string, unknown> }).commonServerOptions;
    if (http2Options !== undefined) {
      http2Options["streamResetBurst"] = 1_000_000;
      http2Options["streamResetRate"] = 1_000_000;
    }
    if (options.tls !== undefined) {
      // Loaded only here: plaintext file mode does without the X.509 library.
      this.#identify = (await import("../security/certificates.js")).gatewayOfCertificate;
    }
    this.addTo(server);
    options.addServices?.(server);
    const address = options.host.includes(":")
      ? `[${options.host}]:${options.port}`
      : `${options.host}:${options.port}`;
    const port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(address, credentials(options.tls), (error, bound) => (error ? reject(error) : resolve(bound)));
    });
    this.#server = server;
    return { port };
  }

  /** Ends every stream (clients reconnect elsewhere or later) and stops listening. */
  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const call of [...this.#calls]) call.end();
    this.#calls.clear();
    if (!server) return;
    await new Promise<void>((resolve) => {
      // Streams were ended above; force after a grace period in case a client does not finish its half.
      const timer = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, 1_000);
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** Calls `listener` on every NACK, with the node's group (its Gateway). */
  onNack(listener: XdsTracker["nackListeners"][number]): void {
    this.#tracker.nackListeners.push(listener);
  }

  /** Connected nodes with what was sent, ACKed and NACKed per type, and counters for metrics. */
  status(): XdsServerStatus {
    return this.#tracker.status();
  }

  /** Pushes, ACKs and NACKs per node id (per-Envoy metrics). */
  get nodeCounters(): XdsTracker["byNode"] {
    return this.#tracker.byNode;
  }
}
