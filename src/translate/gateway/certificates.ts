// certificateRefs of HTTPS listeners → SDS secrets, with ReferenceGrant checks and PEM validation.

import { createPrivateKey, X509Certificate } from "node:crypto";
import { secretValue } from "../../api/core.js";
import { GATEWAY_API_GROUP, type Gateway, type Listener } from "../../api/gateway-api.js";
import { namespaceOf } from "../../api/resource.js";
import { referenceAllowed } from "../backend/resolve.js";
import type { TranslationInput } from "../input.js";
import type { SecretIR } from "../ir.js";
import { secretName } from "../names.js";
import { ListenerConditionReason } from "../status/conditions.js";

export type CertificatesResult =
  | { readonly ok: true; readonly secrets: readonly SecretIR[] }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export function resolveCertificates(
  input: TranslationInput,
  gw: Gateway,
  listener: Listener,
  listenerNamespace: string,
): CertificatesResult {
  const refs = listener.tls?.certificateRefs ?? [];
  if (refs.length === 0) {
    return {
      ok: false,
      reason: ListenerConditionReason.InvalidCertificateRef,
      message: `HTTPS listener ${listener.name} needs tls.certificateRefs`,
    };
  }
  const secrets: SecretIR[] = [];
  for (const ref of refs) {
    const group = ref.group ?? "";
    const kind = ref.kind ?? "Secret";
    const ns = ref.namespace ?? listenerNamespace;
    const what = `Secret ${ns}/${ref.name}`;
    if (group !== "" || kind !== "Secret") {
      return {
        ok: false,
        reason: ListenerConditionReason.InvalidCertificateRef,
        message: `certificateRef kind ${group}/${kind} is not supported; use a core Secret`,
      };
    }
    const from = { group: GATEWAY_API_GROUP, kind: "Gateway", namespace: namespaceOf(gw) };
    if (!referenceAllowed(input, from, { group: "", kind: "Secret", namespace: ns, name: ref.name })) {
      return {
        ok: false,
        reason: ListenerConditionReason.RefNotPermitted,
        message: `${what} is in another namespace and no ReferenceGrant in ${ns} allows it`,
      };
    }
    const secret = input.secrets.find((s) => namespaceOf(s) === ns && s.metadata.name === ref.name);
    if (secret === undefined) {
      return { ok: false, reason: ListenerConditionReason.InvalidCertificateRef, message: `${what} not found` };
    }
    const cert = secretValue(secret, "tls.crt");
    const key = secretValue(secret, "tls.key");
    if (cert === undefined || key === undefined) {
      return {
        ok: false,
        reason: ListenerConditionReason.InvalidCertificateRef,
        message: `${what} needs the keys tls.crt and tls.key`,
      };
    }
    try {
      const x509 = new X509Certificate(cert);
      if (!x509.checkPrivateKey(createPrivateKey(key))) {
        return {
          ok: false,
          reason: ListenerConditionReason.InvalidCertificateRef,
          message: `${what}: tls.key does not belong to tls.crt`,
        };
      }
    } catch (e) {
      // Never echo key material: name the secret and what failed only.
      return {
        ok: false,
        reason: ListenerConditionReason.InvalidCertificateRef,
        message: `${what}: tls.crt/tls.key is not a valid PEM certificate and key (${(e as Error).message.split("\n")[0]})`,
      };
    }
    secrets.push({ name: secretName(ns, ref.name), certificateChain: cert, privateKey: key });
  }
  return { ok: true, secrets };
}
