// Bridges protobuf-es v2 service descriptors to @grpc/grpc-js: the generated `GenService` gives paths and message
// schemas, toBinary/fromBinary are the codec. Measured faster than connect-node for our servers (ARCHITECTURE.md).
import { type DescMessage, fromBinary, type MessageShape, toBinary } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import * as grpc from "@grpc/grpc-js";

type MethodShape = GenServiceMethods[string];
type RequestOf<M extends MethodShape> = M["input"] extends DescMessage ? MessageShape<M["input"]> : never;
type ResponseOf<M extends MethodShape> = M["output"] extends DescMessage ? MessageShape<M["output"]> : never;

/** The grpc-js handler type for one RPC, chosen by its streaming kind. */
export type GrpcHandler<M extends MethodShape> = M["methodKind"] extends "unary"
  ? grpc.handleUnaryCall<RequestOf<M>, ResponseOf<M>>
  : M["methodKind"] extends "server_streaming"
    ? grpc.handleServerStreamingCall<RequestOf<M>, ResponseOf<M>>
    : M["methodKind"] extends "client_streaming"
      ? grpc.handleClientStreamingCall<RequestOf<M>, ResponseOf<M>>
      : grpc.handleBidiStreamingCall<RequestOf<M>, ResponseOf<M>>;

/** A full implementation of a service, keyed by the methods' ECMAScript names (e.g. `streamAggregatedResources`). */
export type GrpcImplementation<S extends GenServiceMethods> = { [K in keyof S]: GrpcHandler<S[K]> };

/** The grpc-js client method for one RPC (the full-argument form of grpc-js's overloads). */
export type GrpcClientMethod<M extends MethodShape> = M["methodKind"] extends "unary"
  ? (
      request: RequestOf<M>,
      metadata: grpc.Metadata,
      options: Partial<grpc.CallOptions>,
      callback: grpc.requestCallback<ResponseOf<M>>,
    ) => grpc.ClientUnaryCall
  : M["methodKind"] extends "server_streaming"
    ? (
        request: RequestOf<M>,
        metadata?: grpc.Metadata,
        options?: Partial<grpc.CallOptions>,
      ) => grpc.ClientReadableStream<ResponseOf<M>>
    : M["methodKind"] extends "client_streaming"
      ? (
          metadata: grpc.Metadata,
          options: Partial<grpc.CallOptions>,
          callback: grpc.requestCallback<ResponseOf<M>>,
        ) => grpc.ClientWritableStream<RequestOf<M>>
      : (
          metadata?: grpc.Metadata,
          options?: Partial<grpc.CallOptions>,
        ) => grpc.ClientDuplexStream<RequestOf<M>, ResponseOf<M>>;

/** A grpc-js client whose methods are typed from the protobuf-es service. */
export type GrpcClient<S extends GenServiceMethods> = grpc.Client & { [K in keyof S]: GrpcClientMethod<S[K]> };

function serializer(schema: DescMessage): (message: MessageShape<DescMessage>) => Buffer {
  return (message) => {
    const bytes = toBinary(schema, message);
    // Wrap without copying: grpc-js wants a Buffer, toBinary returns a Uint8Array.
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer(schema: DescMessage): (bytes: Buffer) => MessageShape<DescMessage> {
  // fromBinary throws on malformed input; grpc-js catches deserializer errors and fails only that call (INTERNAL).
  return (bytes) => fromBinary(schema, bytes);
}

/** The grpc-js `ServiceDefinition` of a protobuf-es service, with protobuf-es as the codec. */
export function grpcServiceDefinition<S extends GenServiceMethods>(
  service: GenService<S>,
): grpc.ServiceDefinition<GrpcImplementation<S>> {
  const definition: Record<string, grpc.MethodDefinition<MessageShape<DescMessage>, MessageShape<DescMessage>>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: `/${service.typeName}/${method.name}`,
      originalName: method.name,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: serializer(method.input),
      requestDeserialize: deserializer(method.input),
      responseSerialize: serializer(method.output),
      responseDeserialize: deserializer(method.output),
    };
  }
  return definition as grpc.ServiceDefinition<GrpcImplementation<S>>;
}

/** Adds a typed implementation of `service` to a grpc-js server. */
export function addGrpcService<S extends GenServiceMethods>(
  server: grpc.Server,
  service: GenService<S>,
  implementation: GrpcImplementation<S>,
): void {
  // grpc-js types implementations loosely (UntypedServiceImplementation); ours is checked by GrpcImplementation.
  server.addService(grpcServiceDefinition(service), implementation as unknown as grpc.UntypedServiceImplementation);
}

/** A typed grpc-js client of `service` (tests, and Sluice services calling each other). */
export function createGrpcClient<S extends GenServiceMethods>(
  service: GenService<S>,
  address: string,
  credentials: grpc.ChannelCredentials,
  options?: grpc.ClientOptions,
): GrpcClient<S> {
  const Client = grpc.makeClientConstructor(grpcServiceDefinition(service), service.typeName);
  return new Client(address, credentials, options) as unknown as GrpcClient<S>;
}
