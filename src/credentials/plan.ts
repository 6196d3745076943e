// `backend.auth` forms that Sluice mints per request (docs/credentials.md), resolved at translation into a plan the
// credential ext_proc (service.ts) serves: Secrets read, CEL compiled and checked, token endpoints resolved to
// addresses. The plan is carried in the backend's cluster IR; Envoy only ever sees its id.

import { compileExpression } from "../cel/index.js";
import type { AwsAssumeRole } from "../translate/llm/table.js";

/** Role session names STS accepts. */
export const ROLE_SESSION_NAME = /^[\w+=,.@-]{2,64}$/;

/** gRPC initial metadata of the credential ext_proc's stream: the plan id. */
export const CREDENTIAL_METADATA = "x-sluice-credential";

/** Where a credential is written to the backend request (the spec's AuthorizationLocation). */
export type CredentialLocation =
  | { readonly kind: "header"; readonly name: string; readonly prefix: string }
  | { readonly kind: "query"; readonly name: string }
  | { readonly kind: "cookie"; readonly name: string };

/** `cloudA`: SigV4 over the request as it leaves Envoy (body included). */
export interface SigV4Plan {
  readonly kind: "cloudA";
  /** Keys of the policy's Secret; absent: the Sluice process's default credential chain. */
  readonly keys?: { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string };
  readonly assumeRole?: AwsAssumeRole;
  /** Signing region; absent: from the host (`<service>.<region>.amazonaws.com`), else AWS_REGION. */
  readonly region?: string;
  /** Signing service; absent: from the host. */
  readonly service?: string;
  /** Headers signed beside host and x-amz-*, when the request has them (lower case). */
  readonly signedHeaders?: readonly string[];
}

export type JwtAlg = "RS256" | "RS384" | "RS512" | "PS256" | "ES256" | "ES384";

/** `jwtSign`: a short-lived JWT signed by Sluice with the policy's key. */
export interface JwtSignPlan {
  readonly kind: "jwtSign";
  /** PEM (PKCS#8, PKCS#1 RSA or SEC1 EC). */
  readonly signingKey: string;
  readonly alg: JwtAlg;
  readonly kid?: string;
  readonly claims: Readonly<Record<string, unknown>>;
  readonly ttlMs: number;
  readonly location: CredentialLocation;
}

/** `key` / `secretRef` written where Envoy's credential injector cannot (query, cookie) or beside `credentials[]`. */
export interface StaticPlan {
  readonly kind: "static";
  readonly value: string;
  readonly location: CredentialLocation;
}

/** `passthrough`: the client's own bearer token (as the client authentication read it) re-added at `location`. */
export interface PassthroughPlan {
  readonly kind: "passthrough";
  readonly location: CredentialLocation;
}

/** Where Sluice calls a token endpoint (a Service's ready endpoints, or a static GwBackend). */
export interface TokenEndpoint {
  readonly targets: readonly { readonly host: string; readonly port: number }[];
  /** Authority sent (`name.ns.svc` or the static host). */
  readonly authority: string;
  readonly path: string;
  readonly tls: boolean;
}

export interface ClientAuthPlan {
  readonly clientId: string;
  readonly method: "ClientSecretBasic" | "ClientSecretPost" | "PrivateKeyJwt";
  readonly clientSecret?: string;
  readonly privateKeyJwt?: {
    readonly signingKey: string;
    readonly alg: JwtAlg;
    readonly kid?: string;
    readonly assertionAudience: string;
    /** PEM chain, leaf first, with `certificateHeader`. */
    readonly certificate?: string;
    readonly certificateHeader?: "x5c" | "x5t#S256";
  };
}

/**
 * Where a client's token is read from its request (the spec's ExtractionLocation): a header (without its prefix), a
 * query parameter, a cookie, or a CEL expression giving it.
 */
export type TokenSource =
  | { readonly header: string; readonly prefix: string }
  | { readonly query: string }
  | { readonly cookie: string }
  | { readonly expression: string };

/** `oauthTokenExchange`: RFC 8693 token exchange (or an RFC 7523 JWT bearer grant) with the client's token. */
export interface TokenExchangePlan {
  readonly kind: "oauthTokenExchange";
  readonly endpoint: TokenEndpoint;
  readonly grantType: "TokenExchange" | "JwtBearer";
  /** Where the subject token is read from the request (default `Authorization: Bearer`). */
  readonly subjectSource: TokenSource;
  /** RFC 8693 delegation: the actor token's source, its type, and whether the subject must name it in `may_act`. */
  readonly actor?: {
    readonly source: TokenSource;
    readonly tokenType: string;
    readonly mayActRequired: boolean;
  };
  /** `additionalParams`: form parameter → CEL (over `request`, and what the minter has: resolve.ts). */
  readonly additionalParams?: readonly (readonly [string, string])[];
  readonly subjectTokenType: string;
  readonly audiences: readonly string[];
  readonly scopes: readonly string[];
  readonly resources: readonly string[];
  readonly requestedTokenType?: string;
  readonly clientAuth?: ClientAuthPlan;
  readonly location: CredentialLocation;
  readonly cache: { readonly maxEntries: number; readonly defaultTtlMs: number };
}

/** `cloudB`: a Google access or ID token, from a credentials JSON or the ambient credentials. */
export interface GoogleTokenPlan {
  readonly kind: "cloudB";
  readonly type: "AccessToken" | "IdToken";
  /** The Secret's JSON (service account key or authorized user); absent: application default credentials. */
  readonly credentials?: Readonly<Record<string, unknown>>;
  /** ID tokens: absent means `https://` + the request's host. */
  readonly audience?: string;
}

/**
 * `crossAppAccess` (Identity Assertion Authorization Grant): the client's ID token exchanged at the identity provider
 * for an ID-JAG (RFC 8693, requested type id-jag, audience the resource authorization server), then the ID-JAG
 * presented to that server as an RFC 7523 JWT bearer grant for the access token the backend takes.
 */
export interface CrossAppPlan {
  readonly kind: "crossAppAccess";
  /** Step one, as a token exchange at the identity provider. */
  readonly identityProvider: TokenExchangePlan;
  /** Step two, as a JWT bearer grant at the resource authorization server. */
  readonly resourceServer: TokenExchangePlan;
}

/** `cloudC`: a Microsoft Entra ID access token (client secret, managed identity, workload identity, or the environment). */
export interface CloudCPlan {
  readonly kind: "cloudC";
  readonly mode: "secretRef" | "managedIdentity" | "workloadIdentity" | "environment";
  readonly secret?: { readonly tenant: string; readonly clientId: string; readonly secret: string };
  /** The identity a managed identity endpoint is asked for (the first of clientId, objectId, resourceId given). */
  readonly managedIdentity?: { readonly param: "client_id" | "object_id" | "msi_res_id"; readonly value: string };
  /** OAuth scope (`<resource>/.default`). */
  readonly scope: string;
}

export type MintPlan =
  | CloudCPlan
  | SigV4Plan
  | JwtSignPlan
  | StaticPlan
  | PassthroughPlan
  | TokenExchangePlan
  | GoogleTokenPlan
  | CrossAppPlan;

/** What the credential ext_proc does for one backend. */
export interface CredentialPlan {
  /** Named from where the policy is configured and what it says, never from a secret value. */
  readonly id: string;
  /** `namespace/name` of the backend, for messages. */
  readonly backend: string;
  /** The policy's field path of the primary mechanism (`backend.auth.cloudA`), for messages. */
  readonly field: string;
  readonly primary?: MintPlan;
  /** `credentials[]`: more static credentials, each at its location. */
  readonly extra: readonly { readonly value: string; readonly location: CredentialLocation }[];
  /**
   * A GwBackend `cloudA.agentCore`: the request becomes the runtime's invocation before its credential is written
   * (`:path`, `:authority`, and a session id in `sessionHeader` when the client sent none).
   */
  readonly invoke?: { readonly path: string; readonly authority: string; readonly sessionHeader: string };
}

/** The CEL expressions of a plan (session name and tags, additionalParams, token sources). */
function planExpressions(plan: CredentialPlan): string[] {
  const p = plan.primary;
  if (p === undefined) return [];
  if (p.kind === "cloudA") {
    const r = p.assumeRole;
    return [
      ...(r?.sessionNameExpression !== undefined ? [r.sessionNameExpression] : []),
      ...(r?.tags ?? []).flatMap((t) => (t.expression !== undefined ? [t.expression] : [])),
    ];
  }
  if (p.kind !== "oauthTokenExchange") return [];
  return [
    ...(p.additionalParams ?? []).map(([, text]) => text),
    ...[p.subjectSource, p.actor?.source].flatMap((s) => (s !== undefined && "expression" in s ? [s.expression] : [])),
  ];
}

/** The CEL variables a plan's expressions read besides `request` (what its minter must be given). */
export function planReads(plan: CredentialPlan): ReadonlySet<string> {
  const out = new Set<string>();
  for (const text of planExpressions(plan)) {
    const c = compileExpression(text);
    if ("ok" in c) for (const v of c.ok.variables) if (v !== "request") out.add(v);
  }
  return out;
}

/** Whether the ext_proc must see the body (SigV4 signs its hash). */
export function needsBody(plan: CredentialPlan): boolean {
  return plan.primary?.kind === "cloudA";
}

export const TOKEN_TYPE_URIS: Readonly<Record<string, string>> = {
  AccessToken: "urn:ietf:params:oauth:token-type:access_token",
  Jwt: "urn:ietf:params:oauth:token-type:jwt",
  IdToken: "urn:ietf:params:oauth:token-type:id_token",
  IdJag: "urn:ietf:params:oauth:token-type:id-jag",
};
