// A guarded Realtime session to a provider behind an InferencePool: the relay asks the pool's endpoint picker once, at
// the upgrade, and the session stays on the model server it names. A websocket session is one HTTP request, which is
// what the picker chooses for; Envoy's own picker filter cannot be on the way, since the relay (not Envoy's cluster)
// opens the provider's websocket. So the relay speaks the extension's endpoint picking protocol itself, as Envoy's
// ext_proc filter does (xds/filters/inference-pool.ts): a gRPC ext_proc stream to the picker Service's ready endpoints,
// the request's headers and body, and the choice read from the dynamic metadata `envoy.lb` /
// `x-gateway-destination-endpoint` (the first of its comma-separated list), the picker's immediate response answered
// to the client as it is.
//
// The body: the extension's pickers choose by the body's `model` (the reference picker refuses a request without one,
// and reads a `prompt` or `messages`), while a Realtime upgrade has no body and carries its model in the query. The
// picker is shown the session as the completions request it would be, `{"model": <the session's model>, "prompt": ""}`:
// it scores the pool's servers for that model (queue, cache, adapters) with nothing to match a prefix on.

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  ExternalProcessor,
  type ProcessingRequest,
  ProcessingRequestSchema,
  type ProcessingResponse,
} from "../../../gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import { createGrpcClient, type GrpcClient } from "../../../grpc/service.js";
import type { InferencePoolIR } from "../../../translate/ir.js";
import { PICKED_ENDPOINT_METADATA } from "../../../translate/xds/llm.js";

/** As Envoy's filter waits for each of the picker's messages (xds/filters/inference-pool.ts). */
const PICK_TIMEOUT_MS = 10_000;
/** Picker channels kept open (one per picker endpoint reached); the oldest is closed past this. */
const MAX_CHANNELS = 32;

export type Pick =
  | { readonly endpoint: { readonly address: string; readonly port: number } }
  | { readonly status: number; readonly message: string };

/** What the picker is shown of the session's upgrade. */
export interface PickRequest {
  readonly authority: string;
  readonly model: string;
  /** The client's headers the provider gets too (none with a credential). */
  readonly headers: Readonly<Record<string, string>>;
}

export class EndpointPickers {
  readonly #channels = new Map<string, GrpcClient<typeof ExternalProcessor.method>>();
  #turn = 0;
  #podTurn = 0;

  close(): void {
    for (const c of this.#channels.values()) c.close();
    this.#channels.clear();
  }

  /** The model server the pool's picker names for this session, or the status the client's upgrade gets. */
  async pick(pool: InferencePoolIR, req: PickRequest): Promise<Pick> {
    const ready = pool.picker.endpoints.filter((e) => e.ready);
    const noPick = (why: string): Pick => {
      // FailOpen: one of the pool's ready Pods, in turn, as Envoy's requests get from the LLM stage (docs/llm.md).
      const pods = pool.failOpen ? (pool.fallback ?? []) : [];
      const pod = pods.length > 0 ? hostPort(pods[this.#podTurn++ % pods.length] as string) : undefined;
      if (pod !== undefined) return { endpoint: pod };
      return {
        status: 503,
        message: `InferencePool ${pool.name}: ${why}${pool.failOpen ? " (FailOpen: the pool has no ready Pod to go on to)" : ""}`,
      };
    };
    if (ready.length === 0) return noPick(`its endpoint picker ${pool.picker.service} has no ready endpoint`);
    const first = this.#turn++ % ready.length;
    let last = "";
    for (const e of [...ready.slice(first), ...ready.slice(0, first)]) {
      try {
        return await this.#ask(`${e.address}:${e.port}`, req);
      } catch (err) {
        last = (err as Error).message;
      }
    }
    return noPick(`its endpoint picker ${pool.picker.service} did not choose: ${last}`);
  }

  #channel(address: string): GrpcClient<typeof ExternalProcessor.method> {
    let c = this.#channels.get(address);
    if (c === undefined) {
      if (this.#channels.size >= MAX_CHANNELS) {
        const [oldest, channel] = this.#channels.entries().next().value ?? [];
        channel?.close();
        if (oldest !== undefined) this.#channels.delete(oldest);
      }
      c = createGrpcClient(ExternalProcessor, address, grpc.credentials.createInsecure());
      this.#channels.set(address, c);
    }
    return c;
  }

  /** One exchange with the picker at `address`: rejects when it fails or ends without a choice. */
  #ask(address: string, req: PickRequest): Promise<Pick> {
    const call = this.#channel(address).process(new grpc.Metadata(), {
      deadline: new Date(Date.now() + PICK_TIMEOUT_MS),
    });
    return new Promise<Pick>((resolve, reject) => {
      let done = false;
      const finish = (r: Pick | Error) => {
        if (done) return;
        done = true;
        // The choice is all the session needs from the picker: the exchange ends here.
        call.cancel();
        if (r instanceof Error) reject(r);
        else resolve(r);
      };
      call.on("data", (res: ProcessingResponse) => {
        const r = res.response;
        if (r.case === "immediateResponse") {
          const status = r.value.status?.code ?? 0;
          const body = Buffer.from(r.value.body).toString("utf8");
          finish({ status: status >= 200 ? status : 503, message: body !== "" ? body : r.value.details });
          return;
        }
        const endpoint = pickedEndpoint(res);
        if (endpoint !== undefined) finish({ endpoint });
      });
      call.on("error", (e: Error) => finish(e));
      call.on("end", () => finish(new Error("the picker ended the exchange without a choice")));
      const headers: [string, string][] = [
        [":method", "POST"],
        [":path", "/v1/completions"],
        [":authority", req.authority],
        [":scheme", "http"],
        ["content-type", "application/json"],
        ...Object.entries(req.headers),
      ];
      const te = new TextEncoder();
      const messages: ProcessingRequest[] = [
        create(ProcessingRequestSchema, {
          request: {
            case: "requestHeaders",
            value: {
              headers: { headers: headers.map(([key, v]) => ({ key, rawValue: te.encode(v) })) },
              endOfStream: false,
            },
          },
        }),
        create(ProcessingRequestSchema, {
          request: {
            case: "requestBody",
            value: { body: te.encode(JSON.stringify({ model: req.model, prompt: "" })), endOfStream: true },
          },
        }),
      ];
      for (const m of messages) call.write(m);
    });
  }
}

/** The `ip:port` in the picker's answer (the first of a list), or undefined when it names none or not one. */
function pickedEndpoint(res: ProcessingResponse): { address: string; port: number } | undefined {
  const ns = res.dynamicMetadata?.[PICKED_ENDPOINT_METADATA.namespace];
  const v = typeof ns === "object" && ns !== null && !Array.isArray(ns) ? ns[PICKED_ENDPOINT_METADATA.key] : undefined;
  if (typeof v !== "string") return undefined;
  return hostPort(v.split(",")[0]?.trim() ?? "");
}

/** IPv4 `a.b.c.d:port` or IPv6 `[::1]:port`: an address, never a host name to resolve. */
function hostPort(v: string): { address: string; port: number } | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3})):(\d{1,5})$/.exec(v);
  const address = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (address === undefined || !(port > 0 && port < 65536)) return undefined;
  return { address, port };
}
