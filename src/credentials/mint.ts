// What the credential ext_proc does to one request leaving Envoy for a backend (docs/credentials.md): the plan's
// primary credential (a static key, the client's own token, a signed JWT, an exchanged token, or a SigV4 signature
// over the final request) and its `credentials[]`, each written at its location. Minted tokens are cached and
// refreshed ahead of their expiry while the old one is still served, so traffic never waits on a refresh it does not
// need and never carries an expired token. Nothing here logs or returns a credential; errors name the field.

import { createHash, createPrivateKey, type KeyObject, randomUUID, X509Certificate } from "node:crypto";
import { decodeJwt, SignJWT } from "jose";
import { cookieValue, parseQuery } from "../extauthz/credentials.js";
import { type AwsCredentialSource, roleSession } from "../extproc/llm/aws-credentials.js";
import { evaluateText, requestVariable } from "../extproc/llm/cel.js";
import { GoogleTokens } from "../extproc/llm/google-tokens.js";
import { signSigV4 } from "../llm/codec/sigv4.js";
import { cloudCSource, fetchCloudCToken } from "./cloud-c-tokens.js";
import type {
  ClientAuthPlan,
  CloudCPlan,
  CredentialLocation,
  CredentialPlan,
  GoogleTokenPlan,
  JwtAlg,
  JwtSignPlan,
  SigV4Plan,
  TokenExchangePlan,
  TokenSource,
} from "./plan.js";

/** The request as the upstream filter sees it (lower-case names, pseudo-headers included). */
export interface OutgoingRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Uint8Array;
  /**
   * CEL variables besides `request` that the plan's expressions may read, as the minter has them (`jwt`, `apiKey`,
   * `basicAuth`, `extauthz`, `source`: resolve.ts CREDENTIAL_VARIABLES); one absent makes an expression reading it fail.
   */
  readonly variables?: Readonly<Record<string, unknown>>;
}

export interface Mutation {
  readonly set: Record<string, string>;
  readonly remove: string[];
}

export type MintResult = { readonly ok: Mutation } | { readonly status: number; readonly message: string };

export class MintError extends Error {
  readonly code = "SLUICE_CREDENTIAL";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/** Below the ext_proc message timeout (5 s), so the client hears why. */
const FETCH_TIMEOUT_MS = 4000;
/** A token is never sent closer than this to its expiry (clock skew, time on the wire). */
const SAFETY_MS = 1000;
const AWS_HOST = /^([a-z0-9-]+)\.(?:([a-z0-9-]+)\.)?amazonaws\.com(?:\.cn)?(?::\d+)?$/;

interface Token {
  readonly value: string;
  readonly expiresAt: number;
  readonly issuedAt: number;
}

/**
 * Replaced ahead of expiry: in the last quarter of its life (at most a minute before), a refresh starts and the
 * current token is still served until SAFETY_MS before it expires.
 */
function refreshAt(t: Token): number {
  return t.expiresAt - Math.min(60_000, (t.expiresAt - t.issuedAt) / 4);
}

/** A bounded, single-flight token cache with refresh-ahead. */
class TokenCache {
  readonly #entries = new Map<string, Token>();
  readonly #pending = new Map<string, Promise<Token>>();
  constructor(
    readonly maxEntries: number,
    readonly now: () => number,
  ) {}

  async get(key: string, fetch: () => Promise<Token>): Promise<string> {
    const now = this.now();
    const t = this.#entries.get(key);
    if (t !== undefined && now < t.expiresAt - SAFETY_MS) {
      if (now >= refreshAt(t)) void this.#refresh(key, fetch).catch(() => {});
      return t.value;
    }
    return (await this.#refresh(key, fetch)).value;
  }

  #refresh(key: string, fetch: () => Promise<Token>): Promise<Token> {
    let p = this.#pending.get(key);
    if (p === undefined) {
      p = fetch()
        .then((t) => {
          if (this.maxEntries > 0) {
            this.#entries.delete(key);
            this.#entries.set(key, t);
            for (const k of this.#entries.keys()) {
              if (this.#entries.size <= this.maxEntries) break;
              this.#entries.delete(k);
            }
          }
          return t;
        })
        .finally(() => this.#pending.delete(key));
      this.#pending.set(key, p);
    }
    return p;
  }

  /** Forgets the tokens of a plan whose source failed (a revoked credential is not served from the cache). */
  drop(key: string): void {
    this.#entries.delete(key);
  }
}

const sha = (...parts: readonly string[]) => createHash("sha256").update(JSON.stringify(parts)).digest("hex");

const keyObjects = new Map<string, KeyObject>();
function privateKey(pem: string): KeyObject {
  const h = sha(pem);
  let k = keyObjects.get(h);
  if (k === undefined) {
    k = createPrivateKey(pem);
    if (keyObjects.size > 256) keyObjects.clear();
    keyObjects.set(h, k);
  }
  return k;
}

/** Writes `value` at `location` into `m`, given the request's current headers. */
export function writeAt(
  location: CredentialLocation,
  value: string,
  headers: Readonly<Record<string, string>>,
  m: Mutation,
): void {
  const current = (name: string) => m.set[name] ?? headers[name];
  switch (location.kind) {
    case "header":
      m.set[location.name] = location.prefix === "" ? value : `${location.prefix} ${value}`;
      return;
    case "query": {
      const path = current(":path") ?? "/";
      const q = path.indexOf("?");
      const params = new URLSearchParams(q < 0 ? "" : path.slice(q + 1));
      params.set(location.name, value);
      m.set[":path"] = `${q < 0 ? path : path.slice(0, q)}?${params.toString()}`;
      return;
    }
    case "cookie": {
      const others = (current("cookie") ?? "")
        .split(";")
        .map((c) => c.trim())
        .filter((c) => c !== "" && c.split("=")[0] !== location.name);
      m.set.cookie = [...others, `${location.name}=${value}`].join("; ");
      return;
    }
  }
}

export interface MinterOptions {
  readonly aws: AwsCredentialSource;
  /** cloudB tokens (shared with the LLM ext_proc); a private one when absent. */
  readonly google?: GoogleTokens;
  readonly now?: () => number;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export class Minter {
  readonly #aws: AwsCredentialSource;
  readonly #google: GoogleTokens;
  readonly #now: () => number;
  readonly #env: Readonly<Record<string, string | undefined>>;
  readonly #jwts: TokenCache;
  readonly #cloudC: TokenCache;
  readonly #exchanges = new Map<string, TokenCache>();

  constructor(opts: MinterOptions) {
    this.#aws = opts.aws;
    this.#google = opts.google ?? new GoogleTokens();
    this.#now = opts.now ?? Date.now;
    this.#env = opts.env ?? process.env;
    this.#jwts = new TokenCache(1024, this.#now);
    this.#cloudC = new TokenCache(1024, this.#now);
  }

  /** Forgets the exchange caches of plans no longer served (the other caches are bounded). */
  retain(ids: ReadonlySet<string>): void {
    for (const id of this.#exchanges.keys()) if (!ids.has(id)) this.#exchanges.delete(id);
  }

  /** The changes to `req` for `plan`, or the status and message the client gets instead. */
  async mint(plan: CredentialPlan, req: OutgoingRequest): Promise<MintResult> {
    try {
      const m: Mutation = { set: {}, remove: [] };
      if (plan.invoke !== undefined) {
        // The agent runtime's invocation; a new session (as the AWS SDKs make) unless the client continues one.
        m.set[":path"] = plan.invoke.path;
        m.set[":authority"] = plan.invoke.authority;
        if ((req.headers[plan.invoke.sessionHeader] ?? "") === "") m.set[plan.invoke.sessionHeader] = randomUUID();
      }
      for (const c of plan.extra) writeAt(c.location, c.value, req.headers, m);
      const p = plan.primary;
      switch (p?.kind) {
        case undefined:
          break;
        case "static":
          writeAt(p.location, p.value, req.headers, m);
          break;
        case "passthrough": {
          // The client's bearer token as JWT and API key authentication read it (they forward it as received).
          const token = /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
          if (token !== undefined) writeAt(p.location, token, req.headers, m);
          break;
        }
        case "jwtSign":
          writeAt(p.location, await this.#jwt(plan.id, p), req.headers, m);
          break;
        case "oauthTokenExchange":
          writeAt(p.location, await this.#exchange(plan.id, p, req), req.headers, m);
          break;
        case "crossAppAccess": {
          // The access token is cached per ID token (the exchange's cache); the ID-JAG lives only between the steps.
          const token = await this.#exchange(plan.id, p.resourceServer, req, (subject) =>
            this.#tokenRequest(p.identityProvider, subject).then((jag) =>
              this.#tokenRequest(p.resourceServer, jag.value),
            ),
          );
          m.set.authorization = `Bearer ${token}`;
          break;
        }
        case "cloudA":
          await this.#sign(p, req, m);
          break;
        case "cloudB":
          m.set.authorization = `Bearer ${await this.#googleToken(p, req)}`;
          break;
        case "cloudC":
          m.set.authorization = `Bearer ${await this.#cloudCToken(p)}`;
          break;
      }
      return { ok: m };
    } catch (e) {
      if (e instanceof MintError) return { status: e.status, message: `${plan.field}: ${e.message}` };
      throw e;
    }
  }

  #jwt(id: string, p: JwtSignPlan): Promise<string> {
    return this.#jwts.get(sha(id, p.signingKey, String(p.ttlMs)), async () => {
      const now = this.#now();
      const iat = Math.floor(now / 1000);
      const exp = iat + Math.ceil(p.ttlMs / 1000);
      const value = await new SignJWT({ ...p.claims })
        .setProtectedHeader({ alg: p.alg, typ: "JWT", ...(p.kid !== undefined ? { kid: p.kid } : {}) })
        .setIssuedAt(iat)
        .setNotBefore(iat)
        .setExpirationTime(exp)
        .sign(privateKey(p.signingKey));
      return { value, issuedAt: iat * 1000, expiresAt: exp * 1000 };
    });
  }

  async #exchange(
    id: string,
    p: TokenExchangePlan,
    req: OutgoingRequest,
    fetchToken?: (subject: string) => Promise<Token>,
  ): Promise<string> {
    const vars = celVariables(req);
    const subject = tokenIn(req.headers, p.subjectSource, vars);
    if (subject === undefined) {
      throw new MintError(401, `no subject token in ${describeSource(p.subjectSource)} to exchange`);
    }
    const extra: [string, string][] = [];
    if (p.actor !== undefined) {
      const actor = tokenIn(req.headers, p.actor.source, vars);
      if (actor === undefined) throw new MintError(401, `no actor token in ${describeSource(p.actor.source)}`);
      if (p.actor.mayActRequired) checkMayAct(subject, actor);
      extra.push(["actor_token", actor], ["actor_token_type", p.actor.tokenType]);
    }
    if (p.additionalParams !== undefined) {
      for (const [name, text] of p.additionalParams) {
        const v = evaluateText(text, vars);
        if (typeof v !== "string" && typeof v !== "number" && typeof v !== "bigint" && typeof v !== "boolean") {
          throw new MintError(400, `additionalParams.${name} did not give a string`);
        }
        extra.push([name, String(v)]);
      }
    }
    const fetchOne = fetchToken ?? ((s: string) => this.#tokenRequest(p, s, extra));
    let cache = this.#exchanges.get(id);
    if (cache === undefined || cache.maxEntries !== p.cache.maxEntries) {
      cache = new TokenCache(p.cache.maxEntries, this.#now);
      this.#exchanges.set(id, cache);
    }
    const key = sha(
      subject,
      JSON.stringify(extra),
      p.clientAuth?.clientSecret ?? "",
      p.clientAuth?.privateKeyJwt?.signingKey ?? "",
    );
    try {
      return await cache.get(key, () => fetchOne(subject));
    } catch (e) {
      cache.drop(key);
      throw e;
    }
  }

  async #tokenRequest(
    p: TokenExchangePlan,
    subject: string,
    extra: readonly (readonly [string, string])[] = [],
  ): Promise<Token> {
    const form = new URLSearchParams();
    if (p.grantType === "JwtBearer") {
      form.set("grant_type", JWT_BEARER_GRANT);
      form.set("assertion", subject);
    } else {
      form.set("grant_type", TOKEN_EXCHANGE_GRANT);
      form.set("subject_token", subject);
      form.set("subject_token_type", p.subjectTokenType);
      for (const a of p.audiences) form.append("audience", a);
      for (const r of p.resources) form.append("resource", r);
      if (p.requestedTokenType !== undefined) form.set("requested_token_type", p.requestedTokenType);
    }
    if (p.scopes.length > 0) form.set("scope", p.scopes.join(" "));
    for (const [k, v] of extra) form.append(k, v);
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
      host: p.endpoint.authority,
    };
    if (p.clientAuth !== undefined) await this.#clientAuth(p.clientAuth, form, headers);
    const issuedAt = this.#now();
    let res: Response | undefined;
    let lastError = "no ready endpoints";
    for (const t of p.endpoint.targets) {
      const url = `${p.endpoint.tls ? "https" : "http"}://${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}${p.endpoint.path}`;
      try {
        res = await fetch(url, {
          method: "POST",
          headers,
          body: form.toString(),
          signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
        });
        break;
      } catch (e) {
        lastError = (e as Error).name === "TimeoutError" ? "timed out" : "unreachable";
      }
    }
    if (res === undefined) throw new MintError(503, `token endpoint ${p.endpoint.authority}: ${lastError}`);
    const text = await res.text();
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // Reported below by what is missing.
    }
    if (!res.ok) {
      // RFC 6749 §5.2 error codes only: an error description could echo what was sent.
      const code = typeof json.error === "string" ? json.error : `HTTP ${res.status}`;
      const status = code === "invalid_grant" || code === "invalid_token" || code === "invalid_request" ? 401 : 503;
      throw new MintError(status, `token endpoint ${p.endpoint.authority} refused the exchange (${code})`);
    }
    const value = json.access_token;
    if (typeof value !== "string" || value === "") {
      throw new MintError(503, `token endpoint ${p.endpoint.authority} answered without an access_token`);
    }
    const expiresIn = typeof json.expires_in === "number" && json.expires_in > 0 ? json.expires_in * 1000 : undefined;
    return { value, issuedAt, expiresAt: issuedAt + (expiresIn ?? p.cache.defaultTtlMs) };
  }

  async #clientAuth(c: ClientAuthPlan, form: URLSearchParams, headers: Record<string, string>): Promise<void> {
    if (c.method === "ClientSecretBasic") {
      // RFC 6749 §2.3.1: each part form-urlencoded before base64.
      const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
      headers.authorization = `Basic ${Buffer.from(`${enc(c.clientId)}:${enc(c.clientSecret ?? "")}`).toString("base64")}`;
      return;
    }
    form.set("client_id", c.clientId);
    if (c.method === "ClientSecretPost") {
      if (c.clientSecret !== undefined) form.set("client_secret", c.clientSecret);
      return;
    }
    const k = c.privateKeyJwt;
    if (k === undefined) return;
    const now = Math.floor(this.#now() / 1000);
    const header: Record<string, unknown> = { alg: k.alg, typ: "JWT", ...(k.kid !== undefined ? { kid: k.kid } : {}) };
    if (k.certificate !== undefined) {
      const chain = pemBlocks(k.certificate);
      if (k.certificateHeader === "x5c") header.x5c = chain.map((d) => d.toString("base64"));
      else if (chain[0] !== undefined) {
        header["x5t#S256"] = createHash("sha256").update(chain[0]).digest("base64url");
      }
    }
    // RFC 7523 §3: iss and sub the client, aud the authorization server, a unique jti, a short exp.
    const assertion = await new SignJWT({ jti: randomUUID() })
      .setProtectedHeader(header as { alg: JwtAlg })
      .setIssuer(c.clientId)
      .setSubject(c.clientId)
      .setAudience(k.assertionAudience)
      .setIssuedAt(now)
      .setExpirationTime(now + 60)
      .sign(privateKey(k.signingKey));
    form.set("client_assertion_type", CLIENT_ASSERTION_TYPE);
    form.set("client_assertion", assertion);
  }

  async #cloudCToken(p: CloudCPlan): Promise<string> {
    const source = cloudCSource(p, this.#env);
    if ("error" in source) throw new MintError(503, source.error);
    const key = sha(JSON.stringify(source), p.scope);
    try {
      return await this.#cloudC.get(key, async () => {
        const issuedAt = this.#now();
        const t = await fetchCloudCToken(source, p.scope, this.#env, this.#now);
        return { value: t.value, expiresAt: t.expiresAt, issuedAt };
      });
    } catch (e) {
      this.#cloudC.drop(key);
      throw new MintError(503, (e as Error).message);
    }
  }

  async #googleToken(p: GoogleTokenPlan, req: OutgoingRequest): Promise<string> {
    let audience = p.audience;
    if (p.type === "IdToken" && audience === undefined) {
      // The backend's URL, as Cloud Run and IAP expect: the host the request goes to, without its port.
      const host = (req.headers[":authority"] ?? "").replace(/:\d+$/, "");
      audience = `https://${host}`;
    }
    try {
      return await this.#google.token({
        type: p.type,
        ...(p.credentials !== undefined ? { credentials: p.credentials } : {}),
        ...(audience !== undefined ? { audience } : {}),
      });
    } catch (e) {
      throw new MintError(503, (e as Error).message);
    }
  }

  async #sign(p: SigV4Plan, req: OutgoingRequest, m: Mutation): Promise<void> {
    const headers = { ...req.headers, ...m.set };
    const authority = headers[":authority"] ?? headers.host ?? "";
    const host = AWS_HOST.exec(authority.toLowerCase());
    const service = p.service ?? host?.[1];
    const region = p.region ?? host?.[2] ?? this.#env.AWS_REGION ?? this.#env.AWS_DEFAULT_REGION;
    if (service === undefined) {
      throw new MintError(503, `serviceName is needed: the host ${authority} does not name an AWS service`);
    }
    if (region === undefined || region === "") {
      throw new MintError(503, "region is needed: not in the policy, the host, nor AWS_REGION");
    }
    let role: ReturnType<typeof roleSession> | undefined;
    if (p.assumeRole !== undefined) {
      role = roleSession(p.assumeRole, { ...req.variables, request: requestVariable(headers) });
      if ("error" in role) throw new MintError(400, role.error);
    }
    let creds: Awaited<ReturnType<AwsCredentialSource["credentials"]>>;
    try {
      creds = await this.#aws.credentials({
        auth: { ...(p.keys !== undefined ? { keys: p.keys } : {}), region, service },
        region,
        ...(role !== undefined && !("error" in role) ? { role } : {}),
      });
    } catch (e) {
      throw new MintError(503, (e as Error).message);
    }
    const path = headers[":path"] ?? "/";
    const q = path.indexOf("?");
    const extra: Record<string, string> = {};
    for (const h of p.signedHeaders ?? []) {
      const v = headers[h];
      if (v !== undefined) extra[h] = v;
    }
    const signed = signSigV4(
      {
        method: headers[":method"] ?? "GET",
        host: authority,
        path: q < 0 ? path : path.slice(0, q),
        query: q < 0 ? "" : path.slice(q + 1),
        headers: extra,
        body: req.body ?? new Uint8Array(0),
      },
      { region, service, credentials: creds, date: new Date(this.#now()), contentSha256Header: true },
    );
    Object.assign(m.set, signed.headers);
    if (creds.sessionToken === undefined) m.remove.push("x-amz-security-token");
  }
}

/** The CEL variables of a request's expressions: what the minter was given, and the request as it leaves. */
function celVariables(req: OutgoingRequest): Record<string, unknown> {
  return { ...req.variables, request: requestVariable(req.headers) };
}

/** The token `source` names in the request (without a header's prefix); undefined when absent or empty. */
function tokenIn(
  headers: Readonly<Record<string, string>>,
  source: TokenSource,
  vars: Record<string, unknown>,
): string | undefined {
  let raw: string | undefined;
  if ("expression" in source) {
    const v = evaluateText(source.expression, vars);
    raw = typeof v === "string" ? v : undefined;
  } else if ("query" in source) {
    raw = parseQuery(headers[":path"] ?? "").get(source.query);
  } else if ("cookie" in source) {
    raw = cookieValue(headers["cookie"], source.cookie);
  } else {
    raw = headers[source.header]?.trim();
    if (raw !== undefined && source.prefix !== "") {
      const sp = raw.indexOf(" ");
      if (sp < 0 || raw.slice(0, sp).toLowerCase() !== source.prefix.toLowerCase()) return undefined;
      raw = raw.slice(sp + 1);
    }
  }
  const t = raw?.trim();
  return t === undefined || t === "" ? undefined : t;
}

/** Where a token source reads, for messages (never the token). */
function describeSource(source: TokenSource): string {
  if ("expression" in source) return "what its source expression gave";
  if ("query" in source) return `the ${source.query} query parameter`;
  if ("cookie" in source) return `the ${source.cookie} cookie`;
  return `the ${source.header} header`;
}

/**
 * `mayAct: Required` (RFC 8693 §4.4): the subject token must be a JWT whose `may_act` claim names the actor; when both
 * carry a `sub`, they must match. A pre-check only: the authorization server verifies both tokens.
 */
function checkMayAct(subject: string, actor: string): void {
  let mayAct: unknown;
  try {
    mayAct = decodeJwt(subject).may_act;
  } catch {
    throw new MintError(403, "actorToken.mayAct is Required but the subject token is not a JWT");
  }
  if (typeof mayAct !== "object" || mayAct === null) {
    throw new MintError(403, "actorToken.mayAct is Required but the subject token has no may_act claim");
  }
  const allowed = (mayAct as Record<string, unknown>).sub;
  let actorSub: unknown;
  try {
    actorSub = decodeJwt(actor).sub;
  } catch {
    actorSub = undefined;
  }
  if (typeof allowed === "string" && typeof actorSub === "string" && allowed !== actorSub) {
    throw new MintError(403, "actorToken.mayAct: the subject token's may_act does not name this actor");
  }
}

/** The DER of each PEM certificate in `pem`, in order. */
function pemBlocks(pem: string): Buffer[] {
  const out: Buffer[] = [];
  for (const m of pem.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)) {
    out.push(Buffer.from(new X509Certificate(m[0]).raw));
  }
  return out;
}
