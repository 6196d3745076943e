// An Envoy socket address, as clusters, endpoints and transport sockets name one.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { AddressSchema } from "../../gen/envoy/config/core/v3/address_pb.js";

export function socketAddress(address: string, port: number): MessageInitShape<typeof AddressSchema> {
  return { address: { case: "socketAddress", value: { address, portSpecifier: { case: "portValue", value: port } } } };
}
