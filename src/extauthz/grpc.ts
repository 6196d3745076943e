// Minimal adapter from a protobuf-es v2 service descriptor to a grpc-js ServiceDefinition (unary methods only).
// NOTE: src/grpc/service.ts (another workstream) generalises this; the two should be unified at integration.

import { type DescService, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import type { ServiceDefinition } from "@grpc/grpc-js";

export function grpcServiceDefinition(service: DescService): ServiceDefinition {
  const def: Record<string, ServiceDefinition[string]> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    def[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: (m: Message) => Buffer.from(toBinary(method.input, m)),
      requestDeserialize: (b: Buffer) => fromBinary(method.input, b),
      responseSerialize: (m: Message) => Buffer.from(toBinary(method.output, m)),
      responseDeserialize: (b: Buffer) => fromBinary(method.output, b),
      originalName: method.name,
    };
  }
  return def;
}
