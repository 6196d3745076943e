// MCP OAuth (MCP authorization spec, docs/mcp.md "OAuth"): the protected resource metadata of the MCP endpoint
// (RFC 9728), the authorization server's metadata (RFC 8414 or OpenID Connect discovery, fetched from the JWT
// provider's issuer and passed on with the registration endpoint pointing here), and client registration (RFC 7591)
// proxied to the authorization server, or answered with the policy's `clientId`. For the deprecated
// `backend.mcp.authentication` the service also verifies the token itself (Envoy does not).

import type { IncomingMessage, ServerResponse } from "node:http";
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from "jose";
import {
  AUTHORIZATION_SERVER_PREFIX,
  OPENID_CONFIGURATION_PREFIX,
  PROTECTED_RESOURCE_PREFIX,
} from "../translate/mcp/oauth-routes.js";
import type { McpOAuthEntry } from "../translate/mcp/table.js";

/** How long an authorization server's metadata is kept. */
const METADATA_TTL_MS = 5 * 60_000;
const FETCH_TIMEOUT_MS = 5_000;
const MAX_REGISTRATION_BYTES = 64 * 1024;
const REGISTER_SUFFIX = "/register";

export type OAuthPath =
  | { readonly kind: "resource"; readonly resource: string }
  | { readonly kind: "server"; readonly resource: string }
  | { readonly kind: "register"; readonly resource: string };

/** The OAuth endpoint a path names, with the resource path it is about; undefined for MCP traffic. */
export function oauthPath(pathname: string): OAuthPath | undefined {
  const after = (prefix: string) =>
    pathname === prefix || pathname.startsWith(`${prefix}/`) ? pathname.slice(prefix.length) : undefined;
  const prm = after(PROTECTED_RESOURCE_PREFIX);
  if (prm !== undefined) return { kind: "resource", resource: prm };
  const as = after(AUTHORIZATION_SERVER_PREFIX);
  if (as !== undefined) {
    return as.endsWith(REGISTER_SUFFIX)
      ? { kind: "register", resource: as.slice(0, -REGISTER_SUFFIX.length) }
      : { kind: "server", resource: as };
  }
  const oidc = after(OPENID_CONFIGURATION_PREFIX);
  if (oidc !== undefined) return { kind: "server", resource: oidc };
  return undefined;
}

/** `scheme://host` the client used, as Envoy forwarded it. */
export function publicOrigin(req: IncomingMessage): string {
  const proto =
    String(req.headers["x-forwarded-proto"] ?? "http")
      .split(",")[0]
      ?.trim() || "http";
  return `${proto}://${String(req.headers.host ?? "localhost")}`;
}

/** The 401 challenge of the MCP authorization spec: where the protected resource metadata of this URL is. */
export function challenge(req: IncomingMessage): string {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  return `Bearer resource_metadata="${publicOrigin(req)}${PROTECTED_RESOURCE_PREFIX}${path}"`;
}

/**
 * Discovery and registration are public and meant for browser clients too (an MCP client in a web page on another
 * origin): any origin may read them, without credentials.
 */
const CORS = {
  "access-control-allow-origin": "*",
  "access-control-allow-methods": "GET, POST, OPTIONS",
  "access-control-allow-headers": "content-type, authorization, mcp-protocol-version",
  "access-control-max-age": "600",
};

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...CORS,
    ...headers,
  });
  res.end(text);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export class McpOAuth {
  readonly #log: (line: string) => void;
  readonly #metadata = new Map<string, { at: number; value: Promise<Record<string, unknown>> }>();
  readonly #keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

  constructor(log: (line: string) => void) {
    this.#log = log;
  }

  /** Serves one OAuth endpoint. */
  async serve(req: IncomingMessage, res: ServerResponse, oauth: McpOAuthEntry, at: OAuthPath): Promise<void> {
    const origin = publicOrigin(req);
    const resource = `${origin}${at.resource}`;
    if (req.method === "OPTIONS") {
      // A browser's preflight (registration is a JSON POST; discovery may carry MCP-Protocol-Version).
      req.resume();
      res.writeHead(204, CORS).end();
      return;
    }
    if (at.kind === "register") {
      if (req.method !== "POST") return send(res, 405, { error: "invalid_request" }, { allow: "POST" });
      return this.#register(req, res, oauth, resource);
    }
    req.resume();
    if (req.method !== "GET" && req.method !== "HEAD")
      return send(res, 405, { error: "invalid_request" }, { allow: "GET" });
    if (at.kind === "resource") {
      // RFC 9728 §2; the policy's own fields win (it may name another authorization server, or scopes).
      return send(res, 200, {
        resource,
        authorization_servers: [resource],
        bearer_methods_supported: ["header"],
        ...oauth.resourceMetadata,
      });
    }
    let upstream: Record<string, unknown>;
    try {
      upstream = await this.#serverMetadata(oauth.issuer);
    } catch (e) {
      this.#log(`sluice mcp: ${oauth.path}: authorization server metadata of ${oauth.issuer}: ${(e as Error).message}`);
      return send(res, 502, {
        error: "temporarily_unavailable",
        error_description: `the metadata of authorization server ${oauth.issuer} cannot be had: ${(e as Error).message}`,
      });
    }
    // The authorization and token endpoints stay the authorization server's; registration comes here.
    send(res, 200, {
      ...upstream,
      registration_endpoint: `${origin}${AUTHORIZATION_SERVER_PREFIX}${at.resource}${REGISTER_SUFFIX}`,
    });
  }

  /** The issuer's metadata: RFC 8414 first, then OpenID Connect discovery (both placements), cached for a while. */
  #serverMetadata(issuer: string): Promise<Record<string, unknown>> {
    const hit = this.#metadata.get(issuer);
    if (hit !== undefined && Date.now() - hit.at < METADATA_TTL_MS) return hit.value;
    const value = (async () => {
      if (issuer === "") throw new Error("no issuer is configured");
      const url = new URL(issuer);
      const path = url.pathname === "/" ? "" : url.pathname.replace(/\/+$/, "");
      const candidates = [
        `${url.origin}${AUTHORIZATION_SERVER_PREFIX}${path}`,
        `${url.origin}${OPENID_CONFIGURATION_PREFIX}${path}`,
        ...(path !== "" ? [`${url.origin}${path}${OPENID_CONFIGURATION_PREFIX}`] : []),
      ];
      const tried: string[] = [];
      for (const c of candidates) {
        const r = await fetch(c, {
          headers: { accept: "application/json" },
          signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
        });
        if (!r.ok) {
          await r.body?.cancel();
          tried.push(`${c}: ${r.status}`);
          continue;
        }
        const body: unknown = await r.json();
        if (!isRecord(body)) throw new Error(`${c} is not a JSON object`);
        return body;
      }
      throw new Error(tried.join("; "));
    })();
    this.#metadata.set(issuer, { at: Date.now(), value });
    value.catch(() => this.#metadata.delete(issuer));
    return value;
  }

  async #register(req: IncomingMessage, res: ServerResponse, oauth: McpOAuthEntry, resource: string): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.byteLength;
      if (size > MAX_REGISTRATION_BYTES) {
        return send(res, 400, { error: "invalid_client_metadata", error_description: "client metadata too large" });
      }
      chunks.push(c);
    }
    const text = Buffer.concat(chunks).toString("utf8");
    if (oauth.clientId !== undefined) {
      // A client registered beforehand: every registration gets its id (RFC 7591 §3.2.1), and no secret.
      let metadata: unknown;
      try {
        metadata = JSON.parse(text);
      } catch {
        return send(res, 400, { error: "invalid_client_metadata", error_description: "the body is not JSON" });
      }
      if (!isRecord(metadata)) {
        return send(res, 400, { error: "invalid_client_metadata", error_description: "the body is not a JSON object" });
      }
      const { client_secret: _s, client_secret_expires_at: _e, ...rest } = metadata;
      return send(res, 201, {
        ...rest,
        client_id: oauth.clientId,
        client_id_issued_at: Math.floor(Date.now() / 1000),
        token_endpoint_auth_method: "none",
      });
    }
    let endpoint: unknown;
    try {
      endpoint = (await this.#serverMetadata(oauth.issuer))["registration_endpoint"];
    } catch (e) {
      return send(res, 502, { error: "temporarily_unavailable", error_description: (e as Error).message });
    }
    if (typeof endpoint !== "string") {
      return send(res, 400, {
        error: "invalid_request",
        error_description: `authorization server ${oauth.issuer} offers no client registration; configure a clientId`,
      });
    }
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    // An initial access token (RFC 7591 §3) is the authorization server's business.
    if (typeof req.headers.authorization === "string") headers["authorization"] = req.headers.authorization;
    let r: Response;
    try {
      r = await fetch(endpoint, { method: "POST", headers, body: text, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    } catch (e) {
      this.#log(
        `sluice mcp: ${oauth.path}: client registration at ${endpoint} for ${resource}: ${(e as Error).message}`,
      );
      return send(res, 502, {
        error: "temporarily_unavailable",
        error_description: "the authorization server did not answer",
      });
    }
    const body = Buffer.from(await r.arrayBuffer());
    res.writeHead(r.status, {
      ...CORS,
      "content-type": r.headers.get("content-type") ?? "application/json",
      "content-length": body.byteLength,
      "cache-control": "no-store",
    });
    res.end(body);
  }

  /**
   * The deprecated form: the bearer token verified against the remote key set. The payload, undefined when there is
   * none and the mode allows it; "refused" when the request must get a 401.
   */
  async verify(req: IncomingMessage, oauth: McpOAuthEntry): Promise<JWTPayload | undefined | "refused"> {
    const v = oauth.verify;
    if (v === undefined) return undefined;
    const h = req.headers.authorization;
    const token = typeof h === "string" && /^bearer /i.test(h) ? h.slice(7).trim() : undefined;
    if (token === undefined || token === "") return v.mode === "Strict" ? "refused" : undefined;
    for (const url of v.jwksUrls) {
      let keys = this.#keySets.get(url);
      if (keys === undefined) {
        keys = createRemoteJWKSet(new URL(url), { cacheMaxAge: v.cacheMs, timeoutDuration: FETCH_TIMEOUT_MS });
        this.#keySets.set(url, keys);
      }
      try {
        const { payload, protectedHeader } = await jwtVerify(token, keys, {
          ...(oauth.issuer !== "" ? { issuer: oauth.issuer } : {}),
          ...(v.audiences.length > 0 ? { audience: [...v.audiences] } : {}),
          requiredClaims: ["exp"],
        });
        // Tokens must carry a key id (spec, JWT rule 1).
        if (protectedHeader.kid === undefined) break;
        return payload;
      } catch (e) {
        const code = (e as { code?: string }).code;
        // Another key server may know the key; any other failure is the token's.
        if (code !== "ERR_JWKS_NO_MATCHING_KEY" && code !== "ERR_JWKS_TIMEOUT" && code !== "ERR_JOSE_GENERIC") break;
      }
    }
    return v.mode === "Permissive" ? undefined : "refused";
  }
}
