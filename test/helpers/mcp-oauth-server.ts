// An OAuth 2.1 authorization server for MCP authorization tests, speaking the real protocols and checking what a real
// one checks: RFC 8414 metadata, RFC 7591 dynamic client registration, the authorization code grant with PKCE (S256
// only), RFC 8707 resource indicators (the token request must name the resource the authorization named), and RS256
// access tokens with `kid`, `exp` and `aud` = the resource, verifiable through its JWKS. It cannot run a login page:
// `/authorize` approves at once and redirects with the code, as a consenting user's browser would end up.

import { createHash, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose";

interface Client {
  readonly client_id: string;
  readonly redirect_uris: readonly string[];
}

interface Grant {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly challenge: string;
  readonly resource: string | undefined;
  readonly scope: string | undefined;
}

export interface FakeAuthServer {
  readonly issuer: string;
  readonly port: number;
  /** `{ keys: [...] }` as a string, for an inline JWKS. */
  readonly jwks: string;
  /** Every request it served, `METHOD path`. */
  readonly requests: string[];
  /** Clients registered (dynamically or beforehand). */
  readonly clients: Map<string, Client>;
  /** Pre-registers a client (what `clientId` stands for). */
  preRegister(clientId: string, redirectUris: readonly string[]): void;
  /** Tokens issued: their `aud`. */
  readonly issued: string[];
  stop(): Promise<void>;
}

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
  res.end(JSON.stringify(value));
}

const oauthError = (res: ServerResponse, status: number, error: string, description: string) =>
  json(res, status, { error, error_description: description });

export async function startFakeAuthServer(): Promise<FakeAuthServer> {
  const key = await generateKeyPair("RS256", { extractable: true });
  const jwk: JWK = { ...(await exportJWK(key.publicKey)), kid: "as-1", alg: "RS256", use: "sig" };
  const clients = new Map<string, Client>();
  const codes = new Map<string, Grant>();
  const requests: string[] = [];
  const issued: string[] = [];
  let issuer = "";

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", issuer);
    requests.push(`${req.method} ${url.pathname}`);
    if (req.method === "GET" && url.pathname === "/.well-known/oauth-authorization-server") {
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        registration_endpoint: `${issuer}/register`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        scopes_supported: ["mcp"],
      });
    }
    if (req.method === "GET" && url.pathname === "/jwks") return json(res, 200, { keys: [jwk] });
    if (req.method === "POST" && url.pathname === "/register") {
      let meta: Record<string, unknown>;
      try {
        meta = JSON.parse(await body(req)) as Record<string, unknown>;
      } catch {
        return oauthError(res, 400, "invalid_client_metadata", "not JSON");
      }
      const uris = meta["redirect_uris"];
      if (!Array.isArray(uris) || uris.length === 0 || !uris.every((u) => typeof u === "string")) {
        return oauthError(res, 400, "invalid_redirect_uri", "redirect_uris is required");
      }
      const client: Client = { client_id: `dyn-${randomBytes(6).toString("hex")}`, redirect_uris: uris as string[] };
      clients.set(client.client_id, client);
      return json(res, 201, {
        ...meta,
        client_id: client.client_id,
        client_id_issued_at: Math.floor(Date.now() / 1000),
        token_endpoint_auth_method: "none",
      });
    }
    if (req.method === "GET" && url.pathname === "/authorize") {
      const q = url.searchParams;
      const client = clients.get(q.get("client_id") ?? "");
      const redirect = q.get("redirect_uri") ?? "";
      if (client === undefined) return oauthError(res, 400, "invalid_client", "unknown client_id");
      if (!client.redirect_uris.includes(redirect)) return oauthError(res, 400, "invalid_request", "redirect_uri");
      if (q.get("response_type") !== "code") return oauthError(res, 400, "unsupported_response_type", "code only");
      if (q.get("code_challenge_method") !== "S256" || (q.get("code_challenge") ?? "") === "") {
        return oauthError(res, 400, "invalid_request", "PKCE with S256 is required");
      }
      const code = randomBytes(16).toString("base64url");
      codes.set(code, {
        clientId: client.client_id,
        redirectUri: redirect,
        challenge: q.get("code_challenge") ?? "",
        resource: q.get("resource") ?? undefined,
        scope: q.get("scope") ?? undefined,
      });
      const to = new URL(redirect);
      to.searchParams.set("code", code);
      const state = q.get("state");
      if (state !== null) to.searchParams.set("state", state);
      res.writeHead(302, { location: to.toString() });
      res.end();
      return;
    }
    if (req.method === "POST" && url.pathname === "/token") {
      const form = new URLSearchParams(await body(req));
      if (form.get("grant_type") !== "authorization_code") {
        return oauthError(res, 400, "unsupported_grant_type", "authorization_code only");
      }
      const grant = codes.get(form.get("code") ?? "");
      codes.delete(form.get("code") ?? "");
      if (grant === undefined) return oauthError(res, 400, "invalid_grant", "unknown or used code");
      if (form.get("client_id") !== grant.clientId) return oauthError(res, 400, "invalid_grant", "client_id");
      if (form.get("redirect_uri") !== grant.redirectUri) return oauthError(res, 400, "invalid_grant", "redirect_uri");
      const verifier = form.get("code_verifier") ?? "";
      if (createHash("sha256").update(verifier).digest("base64url") !== grant.challenge) {
        return oauthError(res, 400, "invalid_grant", "code_verifier does not match the challenge");
      }
      const resource = form.get("resource") ?? undefined;
      if (resource !== grant.resource) return oauthError(res, 400, "invalid_target", "resource differs");
      const aud = resource ?? issuer;
      const token = await new SignJWT({ scope: grant.scope ?? "", client_id: grant.clientId, sub: "user-1" })
        .setProtectedHeader({ alg: "RS256", kid: "as-1" })
        .setIssuer(issuer)
        .setAudience(aud)
        .setIssuedAt()
        .setExpirationTime("10m")
        .sign(key.privateKey);
      issued.push(aud);
      return json(res, 200, { access_token: token, token_type: "Bearer", expires_in: 600 });
    }
    json(res, 404, { error: "not_found" });
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => oauthError(res, 500, "server_error", (e as Error).message));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  issuer = `http://127.0.0.1:${port}`;
  return {
    issuer,
    port,
    jwks: JSON.stringify({ keys: [jwk] }),
    requests,
    clients,
    issued,
    preRegister(clientId, redirectUris) {
      clients.set(clientId, { client_id: clientId, redirect_uris: [...redirectUris] });
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
