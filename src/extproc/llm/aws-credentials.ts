// AWS credentials (the spec's cloudA) for the SigV4 signature of provider requests, found as the AWS SDK finds them:
// - the keys of the policy's Secret, else the SDK's default chain (`fromNodeProviderChain`: environment variables,
//   shared config and credentials files with AWS_PROFILE, web identity token (IRSA), ECS / EKS Pod Identity container
//   credentials, EC2 IMDSv2), which the SDK memoizes and refreshes five minutes before the credentials expire;
// - with `assumeRole`, STS AssumeRole made with those base credentials; the role's credentials are cached per (base
//   credentials, region, role, session name, tags) until five minutes before they expire, concurrent misses share one
//   STS call, and the cache is bounded. The session name and tag expressions are evaluated per request first
//   (`roleSession`); a value STS would refuse rejects the request before any call.
// Secret values are never logged nor put in error messages.

import { createHash } from "node:crypto";
import { fromNodeProviderChain, fromTemporaryCredentials } from "@aws-sdk/credential-providers";
import { evaluate, fromCel } from "../../cel/index.js";
import type { AwsCredentials } from "../../llm/index.js";
import { type AwsAssumeRole, type AwsAuth, ROLE_SESSION_NAME } from "../../translate/llm/table.js";
import { compileCached } from "./cel.js";

/** Credentials are replaced this long before they expire (the SDK's own margin), so none lapses on the way. */
const REFRESH_MARGIN_MS = 5 * 60_000;
/** Under the LLM ext_proc's message timeout (5 s), so a client hears why rather than Envoy's timeout. */
const RESOLVE_TIMEOUT_MS = 4000;
const DEFAULT_MAX_ENTRIES = 1024;
/** Assumed-role credentials without an Expiration (STS always gives one) are kept the STS default of an hour. */
const DEFAULT_LIFETIME_MS = 3600_000;
/** STS session tag values: up to 256 letters, digits, spaces and `_.:/=+-@`. */
const TAG_VALUE = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]{0,256}$/u;

/** Role, session name and tags of one request, after its expressions are evaluated. */
export interface RoleSession {
  readonly roleArn: string;
  readonly sessionName: string;
  readonly tags: readonly { readonly key: string; readonly value: string }[];
}

export interface AwsCredentialRequest {
  readonly auth: AwsAuth;
  /** The region the provider's requests are signed for; STS is asked in it too. */
  readonly region: string;
  /** Present when `auth.assumeRole` is. */
  readonly role?: RoleSession;
}

export class AwsCredentialError extends Error {
  readonly code = "SLUICE_AWS_CREDENTIALS";
}

/** What the AWS SDK's credential providers give. */
export interface ResolvedCredentials extends AwsCredentials {
  readonly expiration?: Date;
}
type CredentialProvider = () => Promise<ResolvedCredentials>;

export interface AwsCredentialOptions {
  readonly now?: () => number;
  /** STS endpoint (tests); else the SDK's, which honours AWS_ENDPOINT_URL_STS and AWS_ENDPOINT_URL. */
  readonly stsEndpoint?: string;
  /** Bound of the assumed-role cache. */
  readonly maxEntries?: number;
  /** The default chain of a region (tests); else the SDK's `fromNodeProviderChain`. */
  readonly discover?: (region: string) => CredentialProvider;
  /** How long a request waits for credentials (default 4 s). */
  readonly timeoutMs?: number;
}

interface Cached {
  readonly credentials: ResolvedCredentials;
  readonly expiresAt: number;
}

/**
 * The role session of a request: the policy's session name or the value of its expression, and its tags, checked
 * against what STS accepts. `vars` is the CEL activation of the request. An error names the field, not the value.
 */
export function roleSession(role: AwsAssumeRole, vars: Record<string, unknown>): RoleSession | { error: string } {
  const at = "cloudA.assumeRole";
  let sessionName = role.sessionName;
  if (role.sessionNameExpression !== undefined) {
    const v = evaluateString(role.sessionNameExpression, vars);
    if ("error" in v) return { error: `${at}.sessionNameExpression ${v.error}` };
    if (!ROLE_SESSION_NAME.test(v.value)) {
      return {
        error: `${at}.sessionNameExpression gave an invalid role session name (${v.value.length} characters; 2 to 64 letters, digits or _+=,.@- are valid)`,
      };
    }
    sessionName = v.value;
  }
  if (sessionName === undefined) return { error: `${at} has no session name` };
  const tags: { key: string; value: string }[] = [];
  for (const [i, t] of role.tags.entries()) {
    if (t.expression === undefined) {
      tags.push({ key: t.key, value: t.value ?? "" });
      continue;
    }
    const v = evaluateString(t.expression, vars);
    if ("error" in v) return { error: `${at}.tags[${i}].expression ${v.error}` };
    if (!TAG_VALUE.test(v.value)) {
      return {
        error: `${at}.tags[${i}].expression gave an invalid session tag value (${v.value.length} characters; up to 256 letters, digits, spaces or _.:/=+-@ are valid)`,
      };
    }
    tags.push({ key: t.key, value: v.value });
  }
  return { roleArn: role.roleArn, sessionName, tags };
}

function evaluateString(text: string, vars: Record<string, unknown>): { value: string } | { error: string } {
  const expr = compileCached(text);
  if (expr === undefined) return { error: "does not compile" };
  const r = evaluate(expr, vars as Parameters<typeof evaluate>[1]);
  if ("error" in r) return { error: `failed: ${r.error}` };
  const v = fromCel(r.value);
  return typeof v === "string" ? { value: v } : { error: `gave a ${v === null ? "null" : typeof v}, not a string` };
}

export class AwsCredentialSource {
  readonly #cache = new Map<string, Cached>();
  readonly #pending = new Map<string, Promise<Cached>>();
  readonly #chains = new Map<string, CredentialProvider>();
  readonly #now: () => number;
  readonly #stsEndpoint: string | undefined;
  readonly #maxEntries: number;
  readonly #discover: (region: string) => CredentialProvider;
  readonly #timeoutMs: number;

  constructor(opts: AwsCredentialOptions = {}) {
    this.#now = opts.now ?? Date.now;
    this.#stsEndpoint = opts.stsEndpoint;
    this.#maxEntries = opts.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.#discover = opts.discover ?? ((region) => fromNodeProviderChain({ clientConfig: { region } }));
    this.#timeoutMs = opts.timeoutMs ?? RESOLVE_TIMEOUT_MS;
  }

  /** Credentials that need no lookup (the Secret's keys, no role), synchronously; undefined otherwise. */
  static immediate(auth: AwsAuth): AwsCredentials | undefined {
    return auth.assumeRole === undefined ? auth.keys : undefined;
  }

  /**
   * The credentials to sign with. Rejects with AwsCredentialError, within the timeout; a lookup still running then goes
   * on and fills the cache for the next request.
   */
  credentials(req: AwsCredentialRequest): Promise<AwsCredentials> {
    let timer: NodeJS.Timeout | undefined;
    const ms = this.#timeoutMs;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new AwsCredentialError(`no credentials within ${ms} ms`)), ms);
    });
    return Promise.race([this.#credentials(req), timeout]).finally(() => clearTimeout(timer));
  }

  async #credentials(req: AwsCredentialRequest): Promise<AwsCredentials> {
    const role = req.role;
    if (role === undefined) return this.#base(req);
    const key = createHash("sha256")
      .update(
        JSON.stringify([
          req.auth.keys?.accessKeyId ?? "",
          req.auth.keys?.secretAccessKey ?? "",
          req.auth.keys?.sessionToken ?? "",
          req.region,
          this.#stsEndpoint ?? "",
          role.roleArn,
          role.sessionName,
          role.tags,
        ]),
      )
      .digest("hex");
    const cached = this.#cache.get(key);
    if (cached !== undefined && cached.expiresAt - REFRESH_MARGIN_MS > this.#now()) {
      // Most recently used last: the bound evicts from the front.
      this.#cache.delete(key);
      this.#cache.set(key, cached);
      return cached.credentials;
    }
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      pending = this.#assume(req, role)
        .then((c) => {
          this.#cache.delete(key);
          this.#cache.set(key, c);
          for (const k of this.#cache.keys()) {
            if (this.#cache.size <= this.#maxEntries) break;
            this.#cache.delete(k);
          }
          return c;
        })
        .finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    return (await pending).credentials;
  }

  /** The keys of the Secret, else the default chain's credentials (memoized and refreshed by the SDK). */
  async #base(req: AwsCredentialRequest): Promise<ResolvedCredentials> {
    if (req.auth.keys !== undefined) return req.auth.keys;
    try {
      return await this.#chain(req.region)();
    } catch (e) {
      throw new AwsCredentialError(`default credential discovery: ${(e as Error).message}`);
    }
  }

  #chain(region: string): CredentialProvider {
    let c = this.#chains.get(region);
    if (c === undefined) {
      c = this.#discover(region);
      this.#chains.set(region, c);
    }
    return c;
  }

  async #assume(req: AwsCredentialRequest, role: RoleSession): Promise<Cached> {
    const base = await this.#base(req);
    const provider = fromTemporaryCredentials({
      // A copy: the SDK marks the credential objects it is given (`$source`), and the table's entry stays as it was.
      masterCredentials: { ...base },
      params: {
        RoleArn: role.roleArn,
        RoleSessionName: role.sessionName,
        ...(role.tags.length > 0 ? { Tags: role.tags.map((t) => ({ Key: t.key, Value: t.value })) } : {}),
      },
      clientConfig: {
        region: req.region,
        maxAttempts: 2,
        ...(this.#stsEndpoint !== undefined ? { endpoint: this.#stsEndpoint } : {}),
      },
    });
    let c: ResolvedCredentials;
    try {
      c = await provider();
    } catch (e) {
      throw new AwsCredentialError(`STS AssumeRole ${role.roleArn}: ${(e as Error).message}`);
    }
    const expiresAt = c.expiration?.getTime() ?? this.#now() + DEFAULT_LIFETIME_MS;
    return {
      credentials: {
        accessKeyId: c.accessKeyId,
        secretAccessKey: c.secretAccessKey,
        ...(c.sessionToken !== undefined ? { sessionToken: c.sessionToken } : {}),
      },
      expiresAt,
    };
  }
}
