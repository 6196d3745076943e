// Google Cloud credentials (the spec's cloudB) → OAuth 2.0 tokens for providers such as Vertex AI, as Google's own
// client libraries get them:
// - a service account key: a JWT signed with its private key, exchanged at its `token_uri` (RFC 7523 JWT bearer
//   grant) for an access token (`scope`) or an ID token (`target_audience`);
// - an authorized user (gcloud's application default credentials): the refresh-token grant at its `token_uri`;
// - no credentials in the policy: application default credentials, that is the file named by
//   GOOGLE_APPLICATION_CREDENTIALS, else the metadata server (GCE_METADATA_HOST, else metadata.google.internal).
// Tokens are cached until a minute before they expire, and concurrent requests for the same token share one fetch.

import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { decodeJwt, importPKCS8, SignJWT } from "jose";

export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/** A token is replaced this long before it expires, so a request never goes out with one about to lapse. */
const REFRESH_MARGIN_MS = 60_000;
const FETCH_TIMEOUT_MS = 4000;

export interface GoogleTokenRequest {
  readonly type: "AccessToken" | "IdToken";
  /** A credentials JSON (service account key or authorized user); absent = application default credentials. */
  readonly credentials?: Readonly<Record<string, unknown>>;
  /** ID tokens: the audience. */
  readonly audience?: string;
}

interface Token {
  readonly value: string;
  readonly expiresAt: number;
}

type Json = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export class GoogleTokenError extends Error {
  readonly code = "SLUICE_GOOGLE_TOKEN";
}

export interface GoogleTokenOptions {
  readonly now?: () => number;
  readonly env?: Readonly<Record<string, string | undefined>>;
}

export class GoogleTokens {
  readonly #cache = new Map<string, Token>();
  readonly #pending = new Map<string, Promise<Token>>();
  readonly #now: () => number;
  readonly #env: Readonly<Record<string, string | undefined>>;

  constructor(opts: GoogleTokenOptions = {}) {
    this.#now = opts.now ?? Date.now;
    this.#env = opts.env ?? process.env;
  }

  /** A valid token for the request (from the cache when one is fresh enough). Rejects with GoogleTokenError. */
  async token(req: GoogleTokenRequest): Promise<string> {
    const key = createHash("sha256")
      .update(JSON.stringify([req.type, req.audience ?? "", req.credentials ?? null]))
      .digest("hex");
    const cached = this.#cache.get(key);
    if (cached !== undefined && cached.expiresAt - REFRESH_MARGIN_MS > this.#now()) return cached.value;
    let pending = this.#pending.get(key);
    if (pending === undefined) {
      pending = this.#fetch(req).finally(() => this.#pending.delete(key));
      this.#pending.set(key, pending);
    }
    const t = await pending;
    this.#cache.set(key, t);
    return t.value;
  }

  async #fetch(req: GoogleTokenRequest): Promise<Token> {
    const creds = req.credentials ?? (await this.#adcFile());
    if (creds === undefined) return this.#metadataServer(req);
    switch (creds.type) {
      case "service_account":
        return this.#serviceAccount(creds, req);
      case "authorized_user":
        if (req.type === "IdToken") {
          throw new GoogleTokenError("ID tokens with a chosen audience need service account credentials");
        }
        return this.#refreshToken(creds);
      default:
        throw new GoogleTokenError(
          `credentials of type ${String(creds.type)} are not supported; use service_account or authorized_user`,
        );
    }
  }

  async #adcFile(): Promise<Json | undefined> {
    const file = this.#env.GOOGLE_APPLICATION_CREDENTIALS;
    if (file === undefined || file === "") return undefined;
    try {
      return JSON.parse(await readFile(file, "utf8")) as Json;
    } catch (e) {
      throw new GoogleTokenError(`GOOGLE_APPLICATION_CREDENTIALS ${file}: ${(e as Error).message}`);
    }
  }

  async #serviceAccount(c: Json, req: GoogleTokenRequest): Promise<Token> {
    const email = str(c.client_email);
    const pem = str(c.private_key);
    if (email === undefined || pem === undefined) {
      throw new GoogleTokenError("service account credentials need client_email and private_key");
    }
    const tokenUri = str(c.token_uri) ?? DEFAULT_TOKEN_URI;
    let key: Awaited<ReturnType<typeof importPKCS8>>;
    try {
      key = await importPKCS8(pem, "RS256");
    } catch (e) {
      throw new GoogleTokenError(`service account private_key: ${(e as Error).message}`);
    }
    const iat = Math.floor(this.#now() / 1000);
    const claims: Json =
      req.type === "IdToken" ? { target_audience: req.audience ?? "" } : { scope: CLOUD_PLATFORM_SCOPE };
    const kid = str(c.private_key_id);
    const assertion = await new SignJWT(claims)
      .setProtectedHeader({ alg: "RS256", typ: "JWT", ...(kid !== undefined ? { kid } : {}) })
      .setIssuer(email)
      .setAudience(tokenUri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + 3600)
      .sign(key);
    const body = await this.#post(tokenUri, { grant_type: JWT_BEARER, assertion });
    return req.type === "IdToken" ? this.#idToken(body) : this.#accessToken(body);
  }

  async #refreshToken(c: Json): Promise<Token> {
    const clientId = str(c.client_id);
    const clientSecret = str(c.client_secret);
    const refreshToken = str(c.refresh_token);
    if (clientId === undefined || clientSecret === undefined || refreshToken === undefined) {
      throw new GoogleTokenError("authorized_user credentials need client_id, client_secret and refresh_token");
    }
    const body = await this.#post(str(c.token_uri) ?? DEFAULT_TOKEN_URI, {
      grant_type: "refresh_token",
      client_id: clientId,
      client_secret: clientSecret,
      refresh_token: refreshToken,
    });
    return this.#accessToken(body);
  }

  async #metadataServer(req: GoogleTokenRequest): Promise<Token> {
    const host = this.#env.GCE_METADATA_HOST ?? "metadata.google.internal";
    const base = `http://${host}/computeMetadata/v1/instance/service-accounts/default`;
    const url =
      req.type === "IdToken"
        ? `${base}/identity?audience=${encodeURIComponent(req.audience ?? "")}&format=full`
        : `${base}/token?scopes=${encodeURIComponent(CLOUD_PLATFORM_SCOPE)}`;
    const res = await this.#call(url, { headers: { "metadata-flavor": "Google" } });
    const text = await res.text();
    if (!res.ok) throw new GoogleTokenError(`metadata server answered ${res.status}: ${text.slice(0, 200)}`);
    if (req.type === "IdToken") return this.#idToken({ id_token: text.trim() });
    return this.#accessToken(parseJson(text, "metadata server"));
  }

  async #post(url: string, form: Record<string, string>): Promise<Json> {
    const res = await this.#call(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
    const text = await res.text();
    if (!res.ok) throw new GoogleTokenError(`token endpoint ${url} answered ${res.status}: ${text.slice(0, 200)}`);
    return parseJson(text, url);
  }

  async #call(url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    } catch (e) {
      throw new GoogleTokenError(`${url}: ${(e as Error).message}`);
    }
  }

  #accessToken(body: Json): Token {
    const value = str(body.access_token);
    if (value === undefined) throw new GoogleTokenError("token response has no access_token");
    const expiresIn = typeof body.expires_in === "number" ? body.expires_in : 3600;
    return { value, expiresAt: this.#now() + expiresIn * 1000 };
  }

  #idToken(body: Json): Token {
    const value = str(body.id_token);
    if (value === undefined) throw new GoogleTokenError("token response has no id_token");
    let exp: number | undefined;
    try {
      exp = decodeJwt(value).exp;
    } catch {
      exp = undefined;
    }
    return { value, expiresAt: exp !== undefined ? exp * 1000 : this.#now() + 3600_000 };
  }
}

function parseJson(text: string, from: string): Json {
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v === "object" && v !== null && !Array.isArray(v)) return v as Json;
  } catch {
    // reported below
  }
  throw new GoogleTokenError(`${from} did not answer a JSON object`);
}
