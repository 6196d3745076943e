// `backend.tls` on Service and static backends → TLS from Envoy to the backend (UpstreamTlsContext on the backend's
// cluster variant, backend-connection.ts). The CA is the ConfigMap of `caCertificateRefs` (key `ca.crt`), else the
// mTLS Secret's `ca.cert`, else the system bundle; SNI and the names the certificate must carry default to the
// destination host name (`<service>.<namespace>.svc.cluster.local`, or a static backend's host; none for an IP).
// `insecureSkipVerify: All` trusts any certificate, `Hostname` skips only the name check. ALPN is the policy's list,
// else the protocol the cluster speaks. A CA or client certificate that cannot be had, or does not parse (Envoy would
// refuse the cluster update, holding back every other change), makes the route answer 503.

import { createPrivateKey, X509Certificate } from "node:crypto";
import { secretValue } from "../../api/core.js";
import type { TranslationInput } from "../input.js";
import type { BackendTlsIR, ClusterIR, PolicySourceIR } from "../ir.js";
import { findNamed } from "../lookup.js";
import { clientCertificateSecretName } from "../names.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export type TlsOutcome =
  | { readonly ok: true; readonly tls: BackendTlsIR }
  | { readonly ok: false; readonly from: PolicySourceIR; readonly field: string; readonly message: string };

const CURVES: Readonly<Record<string, string>> = { X25519_MLKEM768: "X25519MLKEM768" };
const IP = /^(\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]+:[0-9a-fA-F:]*)$/;

/** The host name a backend is reached by, for SNI and the certificate check; undefined for an IP address. */
export function destinationHost(backend: string, base: ClusterIR | undefined): string | undefined {
  const svc = /^Service ([^/ ]+)\/([^ ]+)/.exec(backend);
  if (svc !== null) return `${svc[2]}.${svc[1]}.svc.cluster.local`;
  if (base?.kind === "dns") return base.host;
  return undefined;
}

/** Whether `pem` holds at least one certificate and every certificate in it parses (Envoy refuses the cluster else). */
function validCertificates(pem: string): boolean {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return false;
  try {
    for (const b of blocks) new X509Certificate(b);
    return true;
  } catch {
    return false;
  }
}

function validKey(pem: string): boolean {
  try {
    createPrivateKey(pem);
    return true;
  } catch {
    return false;
  }
}

export function backendTls(
  value: unknown,
  from: PolicySourceIR,
  backend: string,
  base: ClusterIR | undefined,
  input: TranslationInput | undefined,
): TlsOutcome {
  const ns = from.name.split("/")[0] ?? "";
  const r = resolveBackendTls(value, ns, destinationHost(backend, base), input);
  if (r.ok) return r;
  return {
    ok: false,
    from,
    field: `backend.tls.${r.field}`,
    message: `${r.message}; requests to ${backend} are answered 503 until it is`,
  };
}

/**
 * A `tls` value of a backend's policies, whose ConfigMaps and Secrets are in `ns`, toward a destination named `host`
 * (undefined for an IP address); `field` of a failure is relative to the `tls` value. AI providers use it too
 * (backend/ai.ts), so a GwBackend `ai` provider's TLS means exactly what a Service's does.
 */
export function resolveBackendTls(
  value: unknown,
  ns: string,
  host: string | undefined,
  input: TranslationInput | undefined,
):
  | { readonly ok: true; readonly tls: BackendTlsIR }
  | { readonly ok: false; readonly field: string; readonly message: string } {
  const t = isRec(value) ? value : {};
  const fail = (field: string, message: string) => ({ ok: false as const, field, message });
  let clientCert: BackendTlsIR["clientCert"];
  let secretCa: string | undefined;
  const mtls = Array.isArray(t.mtlsCertificateRef) ? t.mtlsCertificateRef[0] : undefined;
  if (isRec(mtls) && typeof mtls.name === "string") {
    const secret = input === undefined ? undefined : findNamed(input.secrets, ns, mtls.name);
    const chain = secret === undefined ? undefined : secretValue(secret, "tls.crt");
    const key = secret === undefined ? undefined : secretValue(secret, "tls.key");
    if (chain === undefined || key === undefined) {
      return fail("mtlsCertificateRef", `Secret ${ns}/${mtls.name} with tls.crt and tls.key not found`);
    }
    if (!validCertificates(chain) || !validKey(key)) {
      return fail(
        "mtlsCertificateRef",
        `Secret ${ns}/${mtls.name}: tls.crt or tls.key is not a valid PEM certificate or key`,
      );
    }
    clientCert = { secret: clientCertificateSecretName(ns, mtls.name), chain, key };
    secretCa = secret === undefined ? undefined : secretValue(secret, "ca.cert");
  }
  let ca: string | undefined;
  const caRef = Array.isArray(t.caCertificateRefs) ? t.caCertificateRefs[0] : undefined;
  if (isRec(caRef) && typeof caRef.name === "string") {
    const cm = input === undefined ? undefined : findNamed(input.configMaps, ns, caRef.name);
    ca = cm?.data?.["ca.crt"];
    if (ca === undefined) return fail("caCertificateRefs", `ConfigMap ${ns}/${caRef.name} key ca.crt not found`);
    if (!validCertificates(ca)) {
      return fail("caCertificateRefs", `ConfigMap ${ns}/${caRef.name} key ca.crt holds no valid PEM certificate`);
    }
  }
  if (ca === undefined && secretCa !== undefined && validCertificates(secretCa)) ca = secretCa;
  const sni = typeof t.sni === "string" ? t.sni : host;
  const insecure =
    t.insecureSkipVerify === "All" || t.insecureSkipVerify === "Hostname" ? t.insecureSkipVerify : undefined;
  const sans =
    insecure !== undefined
      ? []
      : Array.isArray(t.verifySubjectAltNames)
        ? t.verifySubjectAltNames.map(String)
        : sni !== undefined && !IP.test(sni)
          ? [sni]
          : [];
  const curves = Array.isArray(t.keyExchangeGroups)
    ? t.keyExchangeGroups.map((g) => CURVES[String(g)] ?? String(g))
    : [];
  return {
    ok: true,
    tls: {
      ...(sni !== undefined && !IP.test(sni) ? { sni } : {}),
      sans,
      ...(ca !== undefined ? { ca } : {}),
      ...(insecure !== undefined ? { insecure } : {}),
      ...(Array.isArray(t.alpnProtocols) ? { alpn: t.alpnProtocols.map(String) } : {}),
      ...(curves.length > 0 ? { curves } : {}),
      ...(clientCert !== undefined ? { clientCert } : {}),
    },
  };
}
