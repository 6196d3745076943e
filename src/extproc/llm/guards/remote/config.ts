// What a remote prompt guard needs to run, as plain JSON-serialisable data: the LLM table carries one per guard entry
// (secrets already resolved by the translator, as for providers), and `remoteGuardFor` (index.ts) builds the client.

import type { KeepaliveProbes } from "../../../../translate/keepalive.js";
import type { AwsAuth } from "../../../../translate/llm/table.js";

/** Where a key goes on the guard service's request (the schema's AuthorizationLocation). */
export type GuardKeyLocation =
  | { readonly header: { readonly name: string; readonly prefix?: string } }
  | { readonly queryParameter: { readonly name: string } }
  | { readonly cookie: { readonly name: string } };

/** A key (`auth.key`, or the value of `auth.secretRef`); absent location = `Authorization: Bearer <key>`. */
export interface GuardKeyAuth {
  readonly key: string;
  readonly location?: GuardKeyLocation;
}

/** cloudB credentials, as ProviderAuth["google"] carries them. */
export interface GuardGoogleAuth {
  /** Default AccessToken (what Google APIs accept); IdToken only makes sense behind a proxy that wants one. */
  readonly type?: "AccessToken" | "IdToken";
  /** The parsed credentials JSON of the Secret; absent = application default credentials. */
  readonly credentials?: Readonly<Record<string, unknown>>;
  readonly audience?: string;
}

/**
 * How a guard's calls connect, from its `policies.tls`, `tcp`, `http.version` and `tunnel` as the translator resolved
 * them (the CA and client certificate read from their ConfigMap and Secret, the proxy from its Service or GwBackend).
 * Absent: the shared pool's defaults (system CAs, name check and SNI from the URL, HTTP/1.1, no proxy).
 */
export interface GuardConnection {
  readonly tls?: {
    readonly sni?: string;
    /** PEM bundle replacing the system CAs. */
    readonly ca?: string;
    readonly insecure?: "All" | "Hostname";
    /** Names the certificate must carry (`verifySubjectAltNames`); absent: the SNI, else the URL's host. */
    readonly sans?: readonly string[];
    readonly clientCert?: { readonly chain: string; readonly key: string };
    /** `keyExchangeGroups` in OpenSSL's names (as a Service's backend TLS resolves them), offered in this order. */
    readonly curves?: readonly string[];
  };
  readonly connectTimeoutMs?: number;
  /** Idle time before TCP keepalive probes (`tcp.keepalive.time`). */
  readonly keepAliveMs?: number;
  /** The probes' interval and count, where this Node.js sets them (translate/keepalive.ts) and no tunnel is used. */
  readonly keepAliveProbes?: KeepaliveProbes;
  /** `http.version: HTTP2`: h2 by ALPN over TLS, prior knowledge (h2c) over plain HTTP. */
  readonly http2?: boolean;
  /** An HTTP CONNECT proxy every call goes through (plain HTTP ones too). */
  readonly tunnel?: { readonly address: string; readonly port: number; readonly proxy: string };
}

interface Common {
  /**
   * Base URL replacing the service's default (scheme, host, optional path prefix); see index.ts for the environment
   * variables consulted when this is absent.
   */
  readonly endpoint?: string;
  /** Bound on one check, credential lookup included (default DEFAULT_GUARD_TIMEOUT_MS). */
  readonly timeoutMs?: number;
  /**
   * Why the translator could not resolve the credentials (a missing Secret ...): every check then fails with a
   * GuardError saying so, rather than calling the service without them.
   */
  readonly problem?: string;
  readonly connection?: GuardConnection;
}

/** moderationA: the OpenAI moderation endpoint. Request direction only (spec). */
export interface ModerationAConfig extends Common {
  readonly kind: "moderationA";
  /** Moderation model; absent = the service's default (omni-moderation-latest). */
  readonly model?: string;
  readonly auth?: GuardKeyAuth;
}

/** guardrailsA: Bedrock Guardrails ApplyGuardrail. */
export interface GuardrailsAConfig extends Common {
  readonly kind: "guardrailsA";
  readonly identifier: string;
  readonly version: string;
  readonly region: string;
  /**
   * `{aws}`: SigV4 (cloudA; `aws.region` "" = `region`, `aws.service` normally "bedrock"); a key: Bedrock API key as a
   * bearer token; absent = SigV4 with the default credential discovery (as `cloudA: {}`).
   */
  readonly auth?: GuardKeyAuth | { readonly aws: AwsAuth };
}

/** guardrailsB: Google Cloud Model Armor sanitizeUserPrompt / sanitizeModelResponse. */
export interface GuardrailsBConfig extends Common {
  readonly kind: "guardrailsB";
  readonly templateId: string;
  readonly projectId: string;
  /** Default us-central1. */
  readonly location?: string;
  /** Absent = application default credentials (as `cloudB: {}`). */
  readonly auth?: { readonly google: GuardGoogleAuth };
}

export type RemoteGuardConfig = ModerationAConfig | GuardrailsAConfig | GuardrailsBConfig;

/** Under the LLM ext_proc's message timeout (5 s), so a failure mode applies before Envoy gives up on the stream. */
export const DEFAULT_GUARD_TIMEOUT_MS = 4000;
