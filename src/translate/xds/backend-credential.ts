// `backend.auth` on Service and static backends → Envoy, in one of two ways (docs/credentials.md):
// - `key` / `secretRef` into a header, alone: Envoy's credential_injector as an upstream filter of the backend's
//   cluster (a cluster per distinct setting, backend-connection.ts), the key served as an SDS generic secret, never in
//   the route or cluster configuration; `overwrite`, so the client's own value never reaches the backend;
// - everything Sluice mints (query and cookie locations, `credentials[]`, `passthrough`, `cloudA` SigV4, `jwtSign`,
//   `oauthTokenExchange`): an upstream ext_proc filter on the cluster calling Sluice's credential service
//   (src/credentials/), which is given the plan id as gRPC metadata; the plan itself, with its Secrets, stays in
//   Sluice. SigV4 needs the final body (its hash is signed), so that filter buffers it.
// A credential that cannot be had makes the route answer 503 rather than send the request without it; forms not
// minted yet (cloudB, cloudC, crossAppAccess on these backends) are reported.

import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { secretValue } from "../../api/core.js";
import { CREDENTIAL_METADATA, type CredentialPlan, needsBody, planReads } from "../../credentials/plan.js";
import { type CredentialMinter, resolveBackendAuth } from "../../credentials/resolve.js";
import { ApiVersion } from "../../gen/envoy/config/core/v3/config_source_pb.js";
import { CredentialInjectorSchema } from "../../gen/envoy/extensions/filters/http/credential_injector/v3/credential_injector_pb.js";
import { ExternalProcessorSchema } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/ext_proc_pb.js";
import { ProcessingMode_BodySendMode } from "../../gen/envoy/extensions/filters/http/ext_proc/v3/processing_mode_pb.js";
import { GenericSchema } from "../../gen/envoy/extensions/http/injected_credentials/generic/v3/generic_pb.js";
import { type Secret, SecretSchema } from "../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb.js";
import type { TranslationInput } from "../input.js";
import type { PolicySourceIR } from "../ir.js";
import { findNamed } from "../lookup.js";
import { credentialSecretName } from "../names.js";
import { sluiceProcessor } from "./filters/sluice-stage.js";
import { IDENTITY } from "./filters/transformation.js";
import { IDENTITY_NAMESPACES } from "./llm.js";

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

export interface CredentialOutcomeProblem {
  readonly from: PolicySourceIR;
  readonly field: string;
  readonly message: string;
  readonly fatal: boolean;
}

export type CredentialOutcome =
  | {
      readonly ok: true;
      /** Injected by Envoy (key or secretRef into a header). */
      readonly credential?: BackendCredential;
      /** Minted by Sluice's credential ext_proc. */
      readonly minted?: CredentialPlan;
      /** Parts reported but not fatal. */
      readonly notes: readonly CredentialOutcomeProblem[];
    }
  | ({ readonly ok: false } & CredentialOutcomeProblem);

/** The credential a `backend.auth` value gives `backend`, or why none is given. */
export function backendCredential(
  authValue: unknown,
  from: PolicySourceIR,
  backend: string,
  input: TranslationInput | undefined,
  minter: CredentialMinter = "envoy",
): CredentialOutcome {
  if (!isRec(authValue)) return { ok: false, from, field: "backend.auth", message: "not an object", fatal: true };
  const auth = authValue;
  const ns = from.name.split("/")[0] ?? "";
  const resolved = resolveBackendAuth(auth, { input, ns, backend, source: `${from.kind}/${from.name}`, minter });
  const problems = resolved.problems.map((p) => ({ from, ...p }));
  const fatal = problems.find((p) => p.fatal);
  if (fatal !== undefined) {
    // Every problem is named; the first fatal one carries the route's 503.
    const others = problems.filter((p) => p !== fatal).map((p) => `${p.field}: ${p.message}`);
    return { ok: false, ...fatal, message: [fatal.message, ...others].join("; ") };
  }
  if (!resolved.native) {
    if (resolved.plan !== undefined) return { ok: true, minted: resolved.plan, notes: problems };
    const first = problems[0];
    return first !== undefined
      ? { ok: false, ...first }
      : { ok: false, from, field: "backend.auth", message: `no credential for ${backend}`, fatal: true };
  }
  const location = isRec(auth.location) ? auth.location : undefined;
  const header =
    isRec(location?.header) && typeof location.header.name === "string" ? location.header.name : "Authorization";
  const prefix =
    isRec(location?.header) && typeof location.header.prefix === "string"
      ? location.header.prefix
      : location === undefined
        ? "Bearer"
        : "";
  let value: string | undefined;
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
    return { ok: false, from, field: "backend.auth", message: `no key for ${backend}`, fatal: true };
  }
  const secret = credentialSecretName(
    createHash("sha256").update(`${from.kind}|${from.name}|${backend}|${header}`).digest("hex").slice(0, 16),
  );
  return { ok: true, credential: { secret, value, header: header.toLowerCase(), prefix }, notes: problems };
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

/**
 * The upstream ext_proc filter of a cluster whose credential Sluice mints: request headers (and the whole body for
 * SigV4) to Sluice's credential service with the plan id; the answer writes the credential, or refuses the request.
 * Sluice unreachable: the request fails (Envoy's ext_proc fails closed), never goes out without it.
 */
export function credentialExtProc(plan: CredentialPlan) {
  const reads = planReads(plan);
  return anyPack(
    ExternalProcessorSchema,
    create(ExternalProcessorSchema, {
      // The answer comes within 5 s; the credential's own fetches stop at 4 s, so the client hears why.
      ...sluiceProcessor(
        [{ key: CREDENTIAL_METADATA, value: plan.id }],
        needsBody(plan) ? { requestBodyMode: ProcessingMode_BodySendMode.BUFFERED } : {},
      ),
      // A query parameter credential changes :path.
      mutationRules: { allowAllRouting: true, allowEnvoy: false },
      // What the plan's expressions read besides the request: the identities' metadata, the client's address (an
      // upstream filter shares the request's stream info, as the transformation stage does).
      ...([...IDENTITY].some((v) => reads.has(v))
        ? { metadataOptions: { forwardingNamespaces: { untyped: IDENTITY_NAMESPACES } } }
        : {}),
      ...(reads.has("source") ? { requestAttributes: ["source.address", "source.port"] } : {}),
    }),
  );
}
