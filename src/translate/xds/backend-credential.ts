// `backend.auth` on Service and static backends → Envoy's credential_injector as an upstream filter of the backend's
// cluster (a cluster per distinct setting, backend-connection.ts), so each backendRef of a route gets its own: the key
// (`key`, or a Secret's value through `secretRef`) goes to Envoy as an SDS generic secret, never into the route or
// cluster configuration, and the filter writes it into the header the policy names (default
// `Authorization: Bearer <key>`), replacing the client's. A credential that cannot be had (a Secret missing) makes
// the route answer 503 rather than send the request without it. What Envoy cannot inject natively (query parameter
// and cookie locations, cloud credentials, passthrough, token exchanges) is reported.

import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { secretValue } from "../../api/core.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { CredentialInjectorSchema } from "../../gen/envoy/extensions/filters/http/credential_injector/v3/credential_injector_pb.js";
import { GenericSchema } from "../../gen/envoy/extensions/http/injected_credentials/generic/v3/generic_pb.js";
import { type Secret, SecretSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import type { TranslationInput } from "../input.js";
import type { PolicySourceIR } from "../ir.js";
import { findNamed } from "../lookup.js";
import { credentialSecretName } from "../names.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

export const CREDENTIAL_SCHEMAS = [CredentialInjectorSchema, GenericSchema] as const;

/** A backend credential Envoy injects. */
export interface BackendCredential {
  /** The SDS secret holding the key (named from where it is configured, never from its value). */
  readonly secret: string;
  readonly value: string;
  readonly header: string;
  /** Written before the key, with a space (`Bearer`); empty for none. */
  readonly prefix: string;
}

export type CredentialOutcome =
  | { readonly ok: true; readonly credential: BackendCredential }
  | {
      readonly ok: false;
      readonly from: PolicySourceIR;
      readonly field: string;
      readonly message: string;
      readonly fatal: boolean;
    };

/** Auth forms Envoy injects natively here; the others are reported. */
const NATIVE = new Set(["key", "secretRef"]);

/** The credential a `backend.auth` value gives `backend`, or why none is injected. */
export function backendCredential(
  authValue: unknown,
  from: PolicySourceIR,
  backend: string,
  input: TranslationInput | undefined,
): CredentialOutcome {
  if (!isRec(authValue)) return { ok: false, from, field: "backend.auth", message: "not an object", fatal: false };
  const auth = authValue;
  const forms = Object.keys(auth).filter((k) => k !== "location" && k !== "credentials");
  const other = forms.find((k) => !NATIVE.has(k));
  if (other !== undefined || forms.length === 0) {
    return {
      ok: false,
      from,
      field: `backend.auth${other !== undefined ? `.${other}` : ""}`,
      message: `not applied to ${backend} yet (only key and secretRef are injected into a header)`,
      fatal: false,
    };
  }
  const location = isRec(auth.location) ? auth.location : undefined;
  if (location !== undefined && !isRec(location.header)) {
    return {
      ok: false,
      from,
      field: "backend.auth.location",
      message: `only a header location is injected for ${backend} (not a query parameter or cookie); not applied`,
      fatal: false,
    };
  }
  const header =
    isRec(location?.header) && typeof location.header.name === "string" ? location.header.name : "Authorization";
  const prefix =
    isRec(location?.header) && typeof location.header.prefix === "string"
      ? location.header.prefix
      : location === undefined
        ? "Bearer"
        : "";
  let value: string | undefined;
  const ns = from.name.split("/")[0] ?? "";
  if (typeof auth.key === "string") value = auth.key;
  else if (isRec(auth.secretRef) && typeof auth.secretRef.name === "string") {
    const key = typeof auth.secretRef.key === "string" ? auth.secretRef.key : "Authorization";
    const secret = input === undefined ? undefined : findNamed(input.secrets, ns, auth.secretRef.name);
    const v = secret === undefined ? undefined : secretValue(secret, key);
    if (v === undefined) {
      return {
        ok: false,
        from,
        field: "backend.auth.secretRef",
        message: `Secret ${ns}/${auth.secretRef.name} key ${key} not found; requests to ${backend} are answered 503 until it is`,
        fatal: true,
      };
    }
    // A Bearer prefix is stripped only from the default key (as for AI backends).
    value = key === "Authorization" ? v.trim().replace(/^Bearer\s+/i, "") : v.trim();
  }
  if (value === undefined) {
    return { ok: false, from, field: "backend.auth", message: `no key for ${backend}; not applied`, fatal: false };
  }
  const secret = credentialSecretName(
    createHash("sha256").update(`${from.kind}|${from.name}|${backend}|${header}`).digest("hex").slice(0, 16),
  );
  return { ok: true, credential: { secret, value, header: header.toLowerCase(), prefix } };
}

export function credentialSecret(c: BackendCredential): Secret {
  return create(SecretSchema, {
    name: c.secret,
    type: { case: "genericSecret", value: { secret: { specifier: { case: "inlineString", value: c.value } } } },
  });
}

export function credentialInjector(c: BackendCredential) {
  return anyPack(
    CredentialInjectorSchema,
    create(CredentialInjectorSchema, {
      // The client's own value of the header never reaches the backend.
      overwrite: true,
      allowRequestWithoutCredential: false,
      credential: {
        name: "envoy.http.injected_credentials.generic",
        typedConfig: anyPack(
          GenericSchema,
          create(GenericSchema, {
            credential: {
              name: c.secret,
              sdsConfig: { configSourceSpecifier: { case: "ads", value: {} }, resourceApiVersion: ApiVersion.V3 },
            },
            header: c.header,
            ...(c.prefix !== "" ? { headerValuePrefix: `${c.prefix} ` } : {}),
          }),
        ),
      },
    }),
  );
}
