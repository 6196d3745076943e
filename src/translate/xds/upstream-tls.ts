// A backend's TLS settings (BackendTlsIR, resolved by backend-tls.ts) → Envoy's upstream TLS transport socket: for the
// clusters of Service and static backends (cluster.ts) and for each provider of an AI backend (llm.ts) alike.

import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { UpstreamTlsContextSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb.js";
import type { BackendTlsIR } from "../ir.js";

/** The system CA bundle (the image's). */
export const SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt";

/** backend.tls → the cluster's TLS transport socket (xds/backend-tls.ts says what each field becomes). */
export function upstreamTls(t: BackendTlsIR, http2: boolean) {
  const sds = { configSourceSpecifier: { case: "ads" as const, value: {} }, resourceApiVersion: ApiVersion.V3 };
  const validation =
    t.insecure === "All"
      ? undefined
      : {
          trustedCa: {
            specifier:
              t.ca !== undefined
                ? { case: "inlineString" as const, value: t.ca }
                : { case: "filename" as const, value: SYSTEM_CA },
          },
          matchTypedSubjectAltNames: t.sans.map((name) => ({
            // DNS SAN
            sanType: 2,
            matcher: { matchPattern: { case: "exact" as const, value: name } },
          })),
        };
  const tls = create(UpstreamTlsContextSchema, {
    ...(t.sni !== undefined ? { sni: t.sni } : {}),
    commonTlsContext: {
      alpnProtocols: [...(t.alpn ?? [http2 ? "h2" : "http/1.1"])],
      ...(t.curves !== undefined ? { tlsParams: { ecdhCurves: [...t.curves] } } : {}),
      ...(t.clientCert !== undefined
        ? { tlsCertificateSdsSecretConfigs: [{ name: t.clientCert.secret, sdsConfig: sds }] }
        : {}),
      ...(validation !== undefined ? { validationContextType: { case: "validationContext", value: validation } } : {}),
    },
  });
  return {
    name: "envoy.transport_sockets.tls",
    configType: { case: "typedConfig" as const, value: anyPack(UpstreamTlsContextSchema, tls) },
  };
}
