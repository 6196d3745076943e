// A raw ADS client for tests: a real grpc-js bidi stream with the generated types, and a queue of what came back.
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { AggregatedDiscoveryService } from "../../src/gen/envoy/service/discovery/v3/ads_pb.js";
import {
  type DeltaDiscoveryRequest,
  DeltaDiscoveryRequestSchema,
  type DeltaDiscoveryResponse,
  type DiscoveryRequest,
  DiscoveryRequestSchema,
  type DiscoveryResponse,
} from "../../src/gen/envoy/service/discovery/v3/discovery_pb.js";
import { createGrpcClient, type GrpcClient } from "../../src/grpc/service.js";

type AdsClient = GrpcClient<typeof AggregatedDiscoveryService extends { method: infer M } ? M : never>;

export class StreamProbe<Req, Res> {
  readonly #call: grpc.ClientDuplexStream<Req, Res>;
  readonly #queue: Res[] = [];
  #waiter: (() => void) | undefined;
  #ended = false;
  #error: grpc.ServiceError | undefined;

  constructor(call: grpc.ClientDuplexStream<Req, Res>) {
    this.#call = call;
    call.on("data", (response: Res) => {
      this.#queue.push(response);
      this.#waiter?.();
    });
    const done = () => {
      this.#ended = true;
      this.#waiter?.();
    };
    call.on("error", (e: grpc.ServiceError) => {
      this.#error = e;
      done();
    });
    call.on("end", done);
  }

  /** How the call ended, once it ended with an error status. */
  get error(): grpc.ServiceError | undefined {
    return this.#error;
  }

  /** Resolves with the call's error status once it ends with one (and every response received so far). */
  async failure(timeoutMs = 5_000): Promise<{ error: grpc.ServiceError; responses: readonly Res[] }> {
    const deadline = Date.now() + timeoutMs;
    while (this.#error === undefined) {
      if (Date.now() > deadline) throw new Error(`the call did not fail within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return { error: this.#error, responses: [...this.#queue] };
  }

  write(request: Req): void {
    this.#call.write(request);
  }

  /** The next response, or a rejection after `timeoutMs`. */
  async next(timeoutMs = 2_000): Promise<Res> {
    const deadline = Date.now() + timeoutMs;
    while (this.#queue.length === 0) {
      if (this.#ended) throw new Error("stream ended while waiting for a response");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no response within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#waiter = undefined;
    }
    return this.#queue.shift() as Res;
  }

  /** Fails if any response arrives within `ms`. */
  async expectNothing(ms = 200): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, ms));
    if (this.#queue.length > 0) throw new Error(`unexpected response: ${JSON.stringify(this.#queue[0], replacer)}`);
  }

  close(): void {
    this.#call.cancel();
  }
}

function replacer(_key: string, value: unknown): unknown {
  return value instanceof Uint8Array ? `<${value.length} bytes>` : typeof value === "bigint" ? String(value) : value;
}

export class AdsProbeClient {
  readonly #client: AdsClient;

  constructor(port: number, credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure()) {
    this.#client = createGrpcClient(AggregatedDiscoveryService, `127.0.0.1:${port}`, credentials);
  }

  sotw(): StreamProbe<DiscoveryRequest, DiscoveryResponse> {
    return new StreamProbe(this.#client.streamAggregatedResources());
  }

  delta(): StreamProbe<DeltaDiscoveryRequest, DeltaDiscoveryResponse> {
    return new StreamProbe(this.#client.deltaAggregatedResources());
  }

  close(): void {
    this.#client.close();
  }
}

export interface NodeInit {
  readonly id: string;
  readonly cluster?: string;
  /** "envoy" makes the server treat the client as Envoy (VHDS on delta). */
  readonly userAgentName?: string;
}

function node(init: NodeInit) {
  return { id: init.id, cluster: init.cluster ?? "", userAgentName: init.userAgentName ?? "" };
}

type SotwInit = Partial<Pick<DiscoveryRequest, "versionInfo" | "resourceNames" | "responseNonce">> & {
  readonly typeUrl: string;
  readonly node?: NodeInit;
  readonly error?: string;
};

export function sotwRequest(init: SotwInit): DiscoveryRequest {
  return create(DiscoveryRequestSchema, {
    typeUrl: init.typeUrl,
    versionInfo: init.versionInfo ?? "",
    resourceNames: init.resourceNames ?? [],
    responseNonce: init.responseNonce ?? "",
    ...(init.node ? { node: node(init.node) } : {}),
    ...(init.error !== undefined ? { errorDetail: { code: 3, message: init.error } } : {}),
  });
}

type DeltaInit = Partial<
  Pick<
    DeltaDiscoveryRequest,
    "resourceNamesSubscribe" | "resourceNamesUnsubscribe" | "initialResourceVersions" | "responseNonce"
  >
> & {
  readonly typeUrl: string;
  readonly node?: NodeInit;
  readonly error?: string;
};

export function deltaRequest(init: DeltaInit): DeltaDiscoveryRequest {
  return create(DeltaDiscoveryRequestSchema, {
    typeUrl: init.typeUrl,
    resourceNamesSubscribe: init.resourceNamesSubscribe ?? [],
    resourceNamesUnsubscribe: init.resourceNamesUnsubscribe ?? [],
    initialResourceVersions: init.initialResourceVersions ?? {},
    responseNonce: init.responseNonce ?? "",
    ...(init.node ? { node: node(init.node) } : {}),
    ...(init.error !== undefined ? { errorDetail: { code: 3, message: init.error } } : {}),
  });
}
