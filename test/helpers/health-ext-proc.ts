// Envoy's health filter as src/health/service.ts sees it: an ext_proc Process call in observability mode carrying one
// upstream response, for unit tests that feed the service what Envoy would send.

import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { create, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { ProcessingRequestSchema } from "../../src/gen/envoy/service/ext_proc/v3/external_processor_pb.js";
import type { BidiCall } from "../../src/grpc/unary-server.js";
import { HEALTH_CLUSTER_METADATA, HEALTH_STAGE } from "../../src/health/endpoint-health.js";
import type { HealthService } from "../../src/health/service.js";
import { LLM_PROVIDER_ATTRIBUTE, LLM_STAGE_METADATA } from "../../src/translate/llm/table.js";

type Request = NonNullable<MessageInitShape<typeof ProcessingRequestSchema>["request"]>;

/** A Process call handed to `health` as the gRPC server would, with `headers` as its metadata. */
export class HealthCall extends EventEmitter implements BidiCall {
  ended = false;
  constructor(
    health: HealthService,
    readonly headers: Record<string, string>,
  ) {
    super();
    const handler = health.bidi.get("/envoy.service.ext_proc.v3.ExternalProcessor/Process");
    assert.ok(handler !== undefined);
    handler(this);
  }
  write(): void {
    assert.fail("observability mode: nothing is answered");
  }
  end(): void {
    this.ended = true;
  }
  /** One ProcessingRequest; `attributes`: the ext_proc filter's attributes (upstream.address ...), if any. */
  send(request: Request, attributes?: Record<string, string>): void {
    const init = { request, attributes: attributes !== undefined ? { "envoy.filters.http.ext_proc": attributes } : {} };
    this.emit("data", toBinary(ProcessingRequestSchema, create(ProcessingRequestSchema, init)));
  }
}

/** A call from the health filter of the cluster scored as `cluster`. */
export const healthFilterCall = (health: HealthService, cluster: string): HealthCall =>
  new HealthCall(health, { [LLM_STAGE_METADATA]: HEALTH_STAGE, [HEALTH_CLUSTER_METADATA]: cluster });

/** The response headers of an upstream response with `status`. */
export const responseHeaders = (status: number, endOfStream: boolean): Request => ({
  case: "responseHeaders",
  value: {
    headers: { headers: [{ key: ":status", rawValue: new TextEncoder().encode(String(status)) }] },
    endOfStream,
  },
});

/**
 * One response of AI provider `provider` (at `address`, host:port) with `status`, reported to `health` through the
 * health filter of the cluster scored as `cluster`; the call is ended, nothing answered.
 */
export function reportProviderResponse(
  health: HealthService,
  o: { readonly cluster: string; readonly provider: string; readonly address: string; readonly status: number },
): void {
  const call = healthFilterCall(health, o.cluster);
  call.send(responseHeaders(o.status, true), { "upstream.address": o.address, [LLM_PROVIDER_ATTRIBUTE]: o.provider });
  assert.ok(call.ended);
}
