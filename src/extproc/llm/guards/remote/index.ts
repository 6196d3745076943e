// The remote prompt guards, from the plain description the LLM table carries (config.ts) to a RemoteGuard.
//
// Where each one calls, in order: the config's `endpoint`; the environment's convention for that service; its public
// endpoint.
// - moderationA: OPENAI_BASE_URL (as the OpenAI SDKs read it, `/v1` included), else https://api.openai.com/v1; the
//   call is `{base}/moderations`.
// - guardrailsA: AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else AWS_ENDPOINT_URL (as the AWS SDKs read them), else
//   https://bedrock-runtime.{region}.amazonaws.com.
// - guardrailsB: SLUICE_MODEL_ARMOR_ENDPOINT (Google's libraries have no such variable), else
//   https://modelarmor.{location}.rep.googleapis.com.
// The environment is read when the guard is built.

import type { Dispatcher } from "undici";
import type { RemoteGuardSpec } from "../../../../translate/llm/guards.js";
import { AwsCredentialSource } from "../../aws-credentials.js";
import { GoogleTokens } from "../../google-tokens.js";
import type { RemoteGuard } from "../types.js";
import type { RemoteGuardConfig } from "./config.js";
import { GuardrailsAGuard } from "./guardrails-a.js";
import { GuardrailsBGuard } from "./guardrails-b.js";
import { dispatcherFor, sharedDispatcher } from "./http.js";
import { ModerationAGuard } from "./moderation-a.js";

export type {
  GuardConnection,
  GuardGoogleAuth,
  GuardKeyAuth,
  GuardKeyLocation,
  GuardrailsAConfig,
  GuardrailsBConfig,
  ModerationAConfig,
  RemoteGuardConfig,
} from "./config.js";
export { DEFAULT_GUARD_TIMEOUT_MS } from "./config.js";

/** What the guards share with the rest of the LLM ext_proc; each defaults to one instance per process. */
export interface RemoteGuardDeps {
  /** cloudA credentials (the service's own source, so assumed-role credentials are cached once). */
  readonly aws?: AwsCredentialSource;
  /** cloudB tokens. */
  readonly google?: GoogleTokens;
  /** Connection pool of the guard calls (default one keep-alive Agent for all remote guards). */
  readonly dispatcher?: Dispatcher;
  /** Environment consulted for endpoints (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Clock of the SigV4 signature, ms. */
  readonly now?: () => number;
}

let defaultAws: AwsCredentialSource | undefined;
let defaultGoogle: GoogleTokens | undefined;

function sharedAws(): AwsCredentialSource {
  defaultAws ??= new AwsCredentialSource();
  return defaultAws;
}

function sharedGoogle(): GoogleTokens {
  defaultGoogle ??= new GoogleTokens();
  return defaultGoogle;
}

/** The client of one remote guard. Never throws: a config that cannot work fails each check with a GuardError. */
export function remoteGuardFor(config: RemoteGuardConfig, deps: RemoteGuardDeps = {}): RemoteGuard {
  // A guard with its own connection settings (policies.tls / tcp / http.version / tunnel) gets a pool of its own.
  const dispatcher = dispatcherFor(config.connection, deps.dispatcher ?? sharedDispatcher());
  const env = deps.env ?? process.env;
  switch (config.kind) {
    case "moderationA":
      return new ModerationAGuard(config, { dispatcher, env });
    case "guardrailsA":
      return new GuardrailsAGuard(config, {
        dispatcher,
        env,
        aws: deps.aws ?? sharedAws(),
        now: deps.now ?? Date.now,
      });
    case "guardrailsB":
      return new GuardrailsBGuard(config, {
        dispatcher,
        env,
        google: deps.google ?? sharedGoogle(),
      });
  }
}

/**
 * The remote guards of the LLM table, one client per guard spec (the table's entries are immutable, so a spec object is
 * one guard as configured): built on first use, gone with the table that held it.
 */
export function remoteGuards(deps: RemoteGuardDeps = {}): (spec: RemoteGuardSpec) => RemoteGuard {
  const built = new WeakMap<RemoteGuardSpec, RemoteGuard>();
  return (spec) => {
    let guard = built.get(spec);
    if (guard === undefined) {
      guard = remoteGuardFor(spec.config, deps);
      built.set(spec, guard);
    }
    return guard;
  };
}
