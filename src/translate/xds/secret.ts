// SecretIR → Envoy SDS Secret (a TLS certificate with its key, inline).

import { create } from "@bufbuild/protobuf";
import { type Secret, SecretSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import type { SecretIR } from "../ir.js";

export function buildSecret(s: SecretIR): Secret {
  return create(SecretSchema, {
    name: s.name,
    type: {
      case: "tlsCertificate",
      value: {
        certificateChain: { specifier: { case: "inlineString", value: s.certificateChain } },
        privateKey: { specifier: { case: "inlineString", value: s.privateKey } },
      },
    },
  });
}
