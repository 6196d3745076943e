// Small gRPC services speaking Envoy's own protocols, for end-to-end tests: a rate limit service (RLS), an
// external authorization service (envoy.service.auth.v3) and an external processor (envoy.service.ext_proc.v3).

import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { ProcessingMode_BodySendMode } from "../../src/gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import {
  Authorization,
  type CheckRequest,
  CheckResponseSchema,
} from "../../src/gen/envoy/service/auth/v3/external_auth_pb.js";
import {
  ExternalProcessor,
  type ProcessingRequest,
  type ProcessingResponse,
  ProcessingResponseSchema,
} from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import {
  RateLimitResponse_Code,
  RateLimitResponseSchema,
  RateLimitService,
} from "../../src/gen/envoy/service/ratelimit/v3/rls_pb.js";
import { addGrpcService } from "../../src/grpc/service.js";

export interface GrpcTestServer {
  readonly port: number;
  close(): Promise<void>;
}

/** A server certificate and key (PEM): the service then speaks TLS only. */
export interface TestServerTls {
  readonly cert: string;
  readonly key: string;
  /** A CA (PEM): clients must then present a certificate it issued (mTLS). */
  readonly clientCa?: string;
}

/** A grpc-js server on a free loopback port with the services `add` puts on it; with `tls`, over TLS only. */
export async function serve(add: (s: grpc.Server) => void, tls?: TestServerTls): Promise<GrpcTestServer> {
  const server = new grpc.Server();
  add(server);
  const credentials =
    tls === undefined
      ? grpc.ServerCredentials.createInsecure()
      : grpc.ServerCredentials.createSsl(
          tls.clientCa !== undefined ? Buffer.from(tls.clientCa) : null,
          [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }],
          tls.clientCa !== undefined,
        );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", credentials, (e, p) => (e ? reject(e) : resolve(p))),
  );
  return { port, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) };
}

/**
 * A rate limit service: `limit` hits per distinct (domain, descriptor) for the life of the server. A descriptor's own
 * `hits_addend` counts as given, 0 included (a check that adds nothing, as envoyproxy/ratelimit does); without one the
 * request's, else 1. A call is over the limit when the hits counted after it exceed `limit`.
 */
export async function startRateLimitService(limit: number): Promise<
  GrpcTestServer & {
    readonly seen: string[];
    readonly hits: Map<string, number>;
    /** Every descriptor of every call, with the hits it added and the code answered. */
    readonly calls: { key: string; hits: number; over: boolean }[];
  }
> {
  const hits = new Map<string, number>();
  const seen: string[] = [];
  const calls: { key: string; hits: number; over: boolean }[] = [];
  const s = await serve((server) =>
    addGrpcService(server, RateLimitService, {
      shouldRateLimit(call, callback) {
        const req = call.request;
        let over = false;
        const statuses = req.descriptors.map((d) => {
          const key = `${req.domain}|${d.entries.map((e) => `${e.key}=${e.value}`).join(",")}`;
          seen.push(key);
          const add = d.hitsAddend !== undefined ? Number(d.hitsAddend) : req.hitsAddend || 1;
          const n = (hits.get(key) ?? 0) + add;
          hits.set(key, n);
          const code = n > limit ? RateLimitResponse_Code.OVER_LIMIT : RateLimitResponse_Code.OK;
          if (code === RateLimitResponse_Code.OVER_LIMIT) over = true;
          calls.push({ key, hits: add, over: n > limit });
          return { code };
        });
        callback(
          null,
          create(RateLimitResponseSchema, {
            overallCode: over ? RateLimitResponse_Code.OVER_LIMIT : RateLimitResponse_Code.OK,
            statuses,
          }),
        );
      },
    }),
  );
  return { ...s, seen, hits, calls };
}

/**
 * A gRPC ext_authz: allows when `x-allow: yes`, and adds `x-authz: grpc` and the context extensions upstream; an
 * `x-role` header comes back as dynamic metadata `role`. Records each CheckRequest and the call's metadata. With
 * `tls`, over TLS only.
 */
export async function startGrpcExtAuthz(
  tls?: TestServerTls,
): Promise<GrpcTestServer & { readonly checks: CheckRequest[]; readonly metadata: Record<string, unknown>[] }> {
  const checks: CheckRequest[] = [];
  const metadata: Record<string, unknown>[] = [];
  const s = await serve(
    (server) =>
      addGrpcService(server, Authorization, {
        check(call, callback) {
          checks.push(call.request);
          metadata.push(call.metadata.getMap());
          const headers = call.request.attributes?.request?.http?.headers ?? {};
          const allow = headers["x-allow"] === "yes";
          const ext = call.request.attributes?.contextExtensions ?? {};
          const role = headers["x-role"];
          callback(
            null,
            create(
              CheckResponseSchema,
              allow
                ? {
                    status: { code: 0 },
                    httpResponse: {
                      case: "okResponse",
                      value: {
                        headers: [
                          { header: { key: "x-authz", value: "grpc" } },
                          { header: { key: "x-tenant", value: ext["tenant"] ?? "" } },
                        ],
                      },
                    },
                    // What later steps read as `extauthz` when Sluice fronts the service.
                    ...(role !== undefined ? { dynamicMetadata: { role } } : {}),
                  }
                : {
                    status: { code: 7 },
                    httpResponse: { case: "deniedResponse", value: { status: { code: 403 }, body: "denied by grpc" } },
                  },
            ),
          );
        },
      }),
    tls,
  );
  return { ...s, checks, metadata };
}

/**
 * An ext_proc processor: adds `x-processed: <phase>` to request and response headers, and upper-cases bodies it is
 * sent (whole bodies in buffered modes, each chunk when streamed).
 */
export async function startExtProc(): Promise<GrpcTestServer & { readonly phases: string[] }> {
  const phases: string[] = [];
  const s = await serve((server) =>
    addGrpcService(server, ExternalProcessor, {
      process(call) {
        // Envoy sends the body modes on the first message; streamed bodies are answered chunk by chunk.
        let reqStreamed = false;
        let resStreamed = false;
        call.on("data", (req: ProcessingRequest) => {
          if (req.protocolConfig !== undefined) {
            reqStreamed = req.protocolConfig.requestBodyMode === ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED;
            resStreamed = req.protocolConfig.responseBodyMode === ProcessingMode_BodySendMode.FULL_DUPLEX_STREAMED;
          }
          const r = req.request;
          phases.push(r.case ?? "none");
          let res: ProcessingResponse;
          const headerMutation = (v: string) => ({
            response: {
              headerMutation: {
                setHeaders: [{ header: { key: "x-processed", rawValue: new TextEncoder().encode(v) } }],
              },
            },
          });
          const bodyMutation = (body: Uint8Array, eos: boolean, streamed: boolean) => {
            const upper = new TextEncoder().encode(new TextDecoder().decode(body).toUpperCase());
            return {
              response: {
                bodyMutation: {
                  mutation: streamed
                    ? { case: "streamedResponse" as const, value: { body: upper, endOfStream: eos } }
                    : { case: "body" as const, value: upper },
                },
              },
            };
          };
          switch (r.case) {
            case "requestHeaders":
              res = create(ProcessingResponseSchema, {
                response: { case: "requestHeaders", value: headerMutation("request") },
              });
              break;
            case "responseHeaders":
              res = create(ProcessingResponseSchema, {
                response: { case: "responseHeaders", value: headerMutation("response") },
              });
              break;
            case "requestBody":
              res = create(ProcessingResponseSchema, {
                response: {
                  case: "requestBody",
                  value: bodyMutation(r.value.body, r.value.endOfStream, reqStreamed),
                },
              });
              break;
            case "responseBody":
              res = create(ProcessingResponseSchema, {
                response: { case: "responseBody", value: bodyMutation(r.value.body, r.value.endOfStream, resStreamed) },
              });
              break;
            case "requestTrailers":
              res = create(ProcessingResponseSchema, { response: { case: "requestTrailers", value: {} } });
              break;
            case "responseTrailers":
              res = create(ProcessingResponseSchema, { response: { case: "responseTrailers", value: {} } });
              break;
            default:
              return;
          }
          call.write(res);
        });
        call.on("end", () => call.end());
        call.on("error", () => undefined);
      },
    }),
  );
  return { ...s, phases };
}

/**
 * InferencePool `default/llama` (Pods labelled `app: vllm-llama`, target port `targetPort`) whose endpoint picker is Service `llama-epp` with one endpoint,
 * 127.0.0.1:`pickerPort` (a picker from startEndpointPicker), as YAML documents (each after a `---`).
 */
export function inferencePoolYaml(
  pickerPort: number,
  failureMode?: "FailClose" | "FailOpen",
  targetPort = 8000,
): string {
  return `---
apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: { name: llama, namespace: default }
spec:
  selector: { matchLabels: { app: vllm-llama } }
  targetPorts: [{ number: ${targetPort} }]
  endpointPickerRef: { name: llama-epp, port: { number: 9002 }${failureMode !== undefined ? `, failureMode: ${failureMode}` : ""} }
---
apiVersion: v1
kind: Service
metadata: { name: llama-epp, namespace: default }
spec:
  ports: [{ name: grpc, port: 9002, appProtocol: kubernetes.io/h2c }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: llama-epp-1, namespace: default, labels: { kubernetes.io/service-name: llama-epp } }
addressType: IPv4
ports: [{ name: grpc, port: ${pickerPort} }]
endpoints: [{ addresses: [127.0.0.1] }]
`;
}

/**
 * AI GwBackend `<ns>/llama` whose one provider is the custom `Completions` server behind InferencePool `llama`, with a
 * static key `pool-key`; `policies` (indented YAML lines) go under `policies` after the key. A YAML document after `---`.
 */
export function poolGwBackendYaml(ns = "default", policies = ""): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llama, namespace: ${ns} }
spec:
  ai:
    provider:
      custom:
        backendRef: { group: inference.networking.k8s.io, kind: InferencePool, name: llama }
        formats: [{ type: Completions }]
  policies:
    auth: { key: pool-key }
${policies}`;
}

/**
 * An InferencePool endpoint picker (the Gateway API Inference Extension's endpoint picking protocol over ext_proc), in
 * FULL_DUPLEX_STREAMED mode as real pickers run: it holds the request headers until the whole body has come, reads
 * the model from it, and answers with the chosen `ip:port` in the dynamic metadata `envoy.lb` (and the
 * `x-gateway-destination-endpoint` header), then streams the body back unchanged; response bodies are echoed chunk by
 * chunk. `pick` maps a model to an endpoint; `picked` records each decision.
 */
export async function startEndpointPicker(
  pick: (model: string) => string,
): Promise<GrpcTestServer & { readonly picked: string[] }> {
  const picked: string[] = [];
  const te = new TextEncoder();
  const s = await serve((server) =>
    addGrpcService(server, ExternalProcessor, {
      process(call) {
        const body: Uint8Array[] = [];
        const write = (init: Parameters<typeof create<typeof ProcessingResponseSchema>>[1]) =>
          call.write(create(ProcessingResponseSchema, init));
        const streamed = (value: Uint8Array, endOfStream: boolean) => ({
          response: {
            bodyMutation: { mutation: { case: "streamedResponse" as const, value: { body: value, endOfStream } } },
          },
        });
        const answerHeaders = (model: string) => {
          const endpoint = pick(model);
          picked.push(`${model}→${endpoint}`);
          write({
            response: {
              case: "requestHeaders",
              value: {
                response: {
                  headerMutation: {
                    setHeaders: [{ header: { key: "x-gateway-destination-endpoint", rawValue: te.encode(endpoint) } }],
                  },
                },
              },
            },
            dynamicMetadata: { "envoy.lb": { "x-gateway-destination-endpoint": endpoint } },
          });
        };
        call.on("data", (req: ProcessingRequest) => {
          const r = req.request;
          switch (r.case) {
            case "requestHeaders":
              // Answered once the body is read (allowed in full duplex mode), or now when there is none.
              if (r.value.endOfStream) answerHeaders("");
              return;
            case "requestBody": {
              body.push(r.value.body);
              if (!r.value.endOfStream) return;
              const all = Buffer.concat(body);
              let model = "";
              try {
                model = String((JSON.parse(all.toString()) as { model?: unknown }).model ?? "");
              } catch {
                model = "";
              }
              answerHeaders(model);
              write({ response: { case: "requestBody", value: streamed(all, true) } });
              return;
            }
            case "requestTrailers":
              write({ response: { case: "requestTrailers", value: {} } });
              return;
            case "responseHeaders":
              write({ response: { case: "responseHeaders", value: {} } });
              return;
            case "responseBody":
              write({ response: { case: "responseBody", value: streamed(r.value.body, r.value.endOfStream) } });
              return;
            case "responseTrailers":
              write({ response: { case: "responseTrailers", value: {} } });
              return;
            default:
              return;
          }
        });
        call.on("end", () => call.end());
        call.on("error", () => undefined);
      },
    }),
  );
  return { ...s, picked };
}
