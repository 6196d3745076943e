// Local stand-ins for what backend credentials are checked against (test/e2e/backend-credential-*.test.ts):
// - an AWS-style service that verifies the SigV4 signature of every request (key, scope, signed headers, the body's
//   hash) as AWS does, answering 403 otherwise;
// - an OAuth 2.0 token endpoint speaking RFC 8693 token exchange (and RFC 7523 JWT bearer grants), authenticating the
//   client as an authorization server does (client_secret_basic, client_secret_post, or private_key_jwt whose
//   assertion signature, iss/sub, aud, exp and jti are checked), verifying the subject token it was given was one of
//   its own, and issuing short-lived access tokens; tokens can be revoked;
// - a backend that accepts only bearer tokens the token endpoint issued and that have not expired.

import { type KeyObject, randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type JWTPayload, jwtVerify } from "jose";

type KeyLike = KeyObject;

import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { verifySigV4 } from "./sigv4-verify.js";

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as AddressInfo).port;
}
const closer = (server: Server) => () =>
  new Promise<void>((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });

function body(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
}

export interface SignedRequestSeen {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** The access key that signed it, or why the signature was refused. */
  readonly signer?: string;
  readonly error?: string;
}

export interface SignedService {
  readonly port: number;
  readonly requests: SignedRequestSeen[];
  close(): Promise<void>;
}

/** An AWS-style service in `region` named `service` that knows the keys `lookup` gives. */
export async function startSignedService(
  region: string,
  service: string,
  lookup: (accessKeyId: string) => AwsCredentials | undefined,
): Promise<SignedService> {
  const requests: SignedRequestSeen[] = [];
  const server = createServer((req, res) => {
    void body(req).then((text) => {
      const seen = { method: req.method ?? "", path: req.url ?? "/", headers: req.headers, body: text };
      const check = verifySigV4(seen, { region, service }, lookup);
      if ("error" in check) {
        requests.push({ ...seen, error: check.error });
        res.writeHead(403, { "content-type": "application/json" });
        res.end(JSON.stringify({ message: `The request signature we calculated does not match: ${check.error}` }));
        return;
      }
      requests.push({ ...seen, signer: check.ok.accessKeyId });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ signer: check.ok.accessKeyId, body: text }));
    });
  });
  const port = await listen(server);
  return { port, requests, close: closer(server) };
}

export interface TokenGrant {
  readonly grantType: string;
  readonly clientAuth: "basic" | "post" | "private_key_jwt" | "none";
  readonly subject: string;
  readonly subjectTokenType?: string;
  readonly audiences: readonly string[];
  readonly scope?: string;
  readonly resources: readonly string[];
  readonly requestedTokenType?: string;
  readonly actorToken?: string;
  readonly actorTokenType?: string;
  /** Form parameters beyond the grant's own. */
  readonly other: Readonly<Record<string, string>>;
  readonly issued?: string;
}

export interface TokenService {
  readonly port: number;
  readonly grants: TokenGrant[];
  /** Access tokens' lifetime, seconds (expires_in). */
  lifetimeSeconds: number;
  /** Subject tokens the endpoint accepts (a real one verifies them; here they are the ones we hand clients). */
  readonly subjects: Set<string>;
  /** Revoked subjects: exchanges for them fail with invalid_grant, and their issued tokens stop working. */
  readonly revoked: Set<string>;
  /** Whether `token` was issued by this endpoint, is not revoked and has not expired. */
  valid(token: string): boolean;
  close(): Promise<void>;
}

export interface TokenServiceClient {
  readonly clientId: string;
  readonly clientSecret?: string;
  /** private_key_jwt: the client's public key and the audience its assertions must name. */
  readonly publicKey?: KeyLike;
  readonly assertionAudience?: string;
}

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const KNOWN_PARAMS = new Set([
  "grant_type",
  "subject_token",
  "subject_token_type",
  "actor_token",
  "actor_token_type",
  "audience",
  "resource",
  "scope",
  "requested_token_type",
  "assertion",
  "client_id",
  "client_secret",
  "client_assertion",
  "client_assertion_type",
]);

/** `trusts`: another token service whose valid tokens this one accepts as subjects (an ID-JAG issuer). */
export async function startTokenService(client: TokenServiceClient, trusts?: TokenService): Promise<TokenService> {
  const issued = new Map<string, { subject: string; expiresAt: number }>();
  const grants: TokenGrant[] = [];
  const jtis = new Set<string>();
  const server = createServer((req, res) => {
    void body(req).then(async (text) => {
      const fail = (status: number, error: string, description: string) => {
        res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" });
        res.end(JSON.stringify({ error, error_description: description }));
      };
      if (
        req.method !== "POST" ||
        !String(req.headers["content-type"]).startsWith("application/x-www-form-urlencoded")
      ) {
        return fail(400, "invalid_request", "POST a form");
      }
      const form = new URLSearchParams(text);
      // Client authentication (RFC 6749 §2.3, RFC 7523 §2.2): exactly one method.
      let clientAuth: TokenGrant["clientAuth"] = "none";
      const basic = /^Basic (.+)$/.exec(String(req.headers.authorization ?? ""))?.[1];
      if (basic !== undefined) {
        const [id, secret] = Buffer.from(basic, "base64")
          .toString("utf8")
          .split(":")
          .map((s) => decodeURIComponent(s.replace(/\+/g, " ")));
        if (id !== client.clientId || secret !== client.clientSecret) return fail(401, "invalid_client", "bad basic");
        clientAuth = "basic";
      } else if (form.has("client_assertion")) {
        if (form.get("client_assertion_type") !== ASSERTION_TYPE || client.publicKey === undefined) {
          return fail(401, "invalid_client", "bad assertion type");
        }
        let payload: JWTPayload;
        try {
          payload = (
            await jwtVerify(form.get("client_assertion") ?? "", client.publicKey, {
              issuer: client.clientId,
              subject: client.clientId,
              audience: client.assertionAudience ?? "",
              requiredClaims: ["exp", "jti"],
            })
          ).payload;
        } catch (e) {
          return fail(401, "invalid_client", `assertion: ${(e as Error).message}`);
        }
        if (jtis.has(String(payload.jti))) return fail(401, "invalid_client", "assertion replayed");
        jtis.add(String(payload.jti));
        if (form.has("client_id") && form.get("client_id") !== client.clientId) {
          return fail(401, "invalid_client", "client_id");
        }
        clientAuth = "private_key_jwt";
      } else if (form.has("client_secret")) {
        if (form.get("client_id") !== client.clientId || form.get("client_secret") !== client.clientSecret) {
          return fail(401, "invalid_client", "bad post");
        }
        clientAuth = "post";
      } else return fail(401, "invalid_client", "no client authentication");
      const grantType = form.get("grant_type") ?? "";
      let subject: string;
      if (grantType === TOKEN_EXCHANGE) {
        subject = form.get("subject_token") ?? "";
        if (form.get("subject_token_type") === null) return fail(400, "invalid_request", "subject_token_type");
      } else if (grantType === JWT_BEARER) subject = form.get("assertion") ?? "";
      else return fail(400, "unsupported_grant_type", grantType);
      const grant: Omit<TokenGrant, "issued"> = {
        grantType,
        clientAuth,
        subject,
        ...(form.get("subject_token_type") !== null
          ? { subjectTokenType: form.get("subject_token_type") as string }
          : {}),
        audiences: form.getAll("audience"),
        ...(form.get("scope") !== null ? { scope: form.get("scope") as string } : {}),
        resources: form.getAll("resource"),
        ...(form.get("requested_token_type") !== null
          ? { requestedTokenType: form.get("requested_token_type") as string }
          : {}),
        ...(form.get("actor_token") !== null ? { actorToken: form.get("actor_token") as string } : {}),
        ...(form.get("actor_token_type") !== null ? { actorTokenType: form.get("actor_token_type") as string } : {}),
        other: Object.fromEntries([...form].filter(([k]) => !KNOWN_PARAMS.has(k))),
      };
      // RFC 8693 §2.1: actor_token_type is required when actor_token is present.
      if (grant.actorToken !== undefined && grant.actorTokenType === undefined) {
        return fail(400, "invalid_request", "actor_token_type");
      }
      const known = fake.subjects.has(subject) || trusts?.valid(subject) === true;
      if (!known || fake.revoked.has(subject)) {
        grants.push(grant);
        return fail(400, "invalid_grant", "subject token not valid");
      }
      const token = `at-${randomBytes(12).toString("hex")}`;
      issued.set(token, { subject, expiresAt: Date.now() + fake.lifetimeSeconds * 1000 });
      grants.push({ ...grant, issued: token });
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(
        JSON.stringify({
          access_token: token,
          // An ID-JAG is issued as a token exchange's access_token with its own type and token_type N_A.
          issued_token_type: grant.requestedTokenType ?? "urn:ietf:params:oauth:token-type:access_token",
          token_type: grant.requestedTokenType?.endsWith(":id-jag") === true ? "N_A" : "Bearer",
          expires_in: fake.lifetimeSeconds,
        }),
      );
    });
  });
  const port = await listen(server);
  const fake: TokenService = {
    port,
    grants,
    lifetimeSeconds: 3600,
    subjects: new Set(),
    revoked: new Set(),
    valid: (token) => {
      const t = issued.get(token);
      return t !== undefined && t.expiresAt > Date.now() && !fake.revoked.has(t.subject);
    },
    close: closer(server),
  };
  return fake;
}

/** A backend that answers 200 only to `Authorization: Bearer <token>` that `valid` accepts, else 401. */
export async function startBearerBackend(
  valid: (token: string) => boolean | Promise<boolean>,
): Promise<{ port: number; seen: string[]; refused: number; close(): Promise<void> }> {
  const out = { port: 0, seen: [] as string[], refused: 0, close: async () => {} };
  const server = createServer((req, res) => {
    void body(req).then(async () => {
      const token = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ""))?.[1] ?? "";
      out.seen.push(token);
      if (!(await valid(token))) {
        out.refused++;
        res.writeHead(401, { "www-authenticate": 'Bearer error="invalid_token"' });
        res.end();
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("ok");
    });
  });
  out.port = await listen(server);
  out.close = closer(server);
  return out;
}

/** Verifies a JWT with `key` as a backend would; the payload, or the reason. */
export async function verifyJwt(
  token: string,
  key: KeyLike,
): Promise<{ payload: JWTPayload; header: Record<string, unknown> } | { error: string }> {
  try {
    const r = await jwtVerify(token, key);
    return { payload: r.payload, header: r.protectedHeader as Record<string, unknown> };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

export interface FakeEntra {
  readonly port: number;
  readonly url: string;
  /** Token requests seen: how the client authenticated, and the identity asked for. */
  readonly calls: { kind: "secret" | "assertion" | "managed"; clientId?: string; scope?: string; resource?: string }[];
  /** Lifetime of issued tokens, seconds. */
  lifetimeSeconds: number;
  valid(token: string): boolean;
  close(): Promise<void>;
}

/**
 * A stand-in for Microsoft Entra ID's v2.0 token endpoint (`/<tenant>/oauth2/v2.0/token`, client credentials grant
 * with a client secret or a federated client assertion whose signature, issuer, subject and audience
 * `api://AzureADTokenExchange` are checked) and for the instance metadata service's managed identity endpoint
 * (`GET /metadata/identity/oauth2/token`, `Metadata: true`, api-version, resource, the user-assigned client_id).
 */
export async function startFakeEntra(opts: {
  tenant: string;
  app: { clientId: string; clientSecret: string };
  federated: { clientId: string; publicKey: KeyObject; issuer: string; subject: string };
  managedClientId: string;
}): Promise<FakeEntra> {
  const issued = new Map<string, number>();
  const calls: FakeEntra["calls"] = [];
  const issue = () => {
    const t = `eyJ0eXAi.entra-${randomBytes(10).toString("hex")}`;
    issued.set(t, Date.now() + fake.lifetimeSeconds * 1000);
    return t;
  };
  const server = createServer((req, res) => {
    void body(req).then(async (text) => {
      const send = (status: number, json: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(json));
      };
      const url = new URL(req.url ?? "/", "http://x");
      if (req.method === "GET" && url.pathname === "/metadata/identity/oauth2/token") {
        if (req.headers.metadata !== "true")
          return send(400, { error: "invalid_request", error_description: "Required metadata header not specified" });
        if (url.searchParams.get("api-version") === null) return send(400, { error: "invalid_request" });
        const resource = url.searchParams.get("resource") ?? "";
        const clientId = url.searchParams.get("client_id") ?? undefined;
        if (resource === "") return send(400, { error: "invalid_request", error_description: "resource" });
        if (clientId !== undefined && clientId !== opts.managedClientId) {
          return send(400, { error: "invalid_request", error_description: "Identity not found" });
        }
        calls.push({ kind: "managed", ...(clientId !== undefined ? { clientId } : {}), resource });
        const expiresOn = Math.floor(Date.now() / 1000) + fake.lifetimeSeconds;
        // IMDS answers numbers as strings.
        return send(200, {
          access_token: issue(),
          expires_in: String(fake.lifetimeSeconds),
          expires_on: String(expiresOn),
          resource,
          token_type: "Bearer",
        });
      }
      if (req.method !== "POST" || url.pathname !== `/${opts.tenant}/oauth2/v2.0/token`) {
        return send(400, { error: "invalid_request", error_description: "AADSTS90002: Tenant not found" });
      }
      const form = new URLSearchParams(text);
      const scope = form.get("scope") ?? "";
      if (form.get("grant_type") !== "client_credentials") return send(400, { error: "unsupported_grant_type" });
      if (!scope.endsWith("/.default")) return send(400, { error: "invalid_scope" });
      const clientId = form.get("client_id") ?? "";
      if (form.has("client_assertion")) {
        if (form.get("client_assertion_type") !== ASSERTION_TYPE || clientId !== opts.federated.clientId) {
          return send(401, { error: "invalid_client" });
        }
        try {
          await jwtVerify(form.get("client_assertion") ?? "", opts.federated.publicKey, {
            issuer: opts.federated.issuer,
            subject: opts.federated.subject,
            audience: "api://AzureADTokenExchange",
          });
        } catch {
          return send(401, {
            error: "invalid_client",
            error_description: "AADSTS700211: No matching federated identity record found",
          });
        }
        calls.push({ kind: "assertion", clientId, scope });
      } else {
        if (clientId !== opts.app.clientId || form.get("client_secret") !== opts.app.clientSecret) {
          return send(401, {
            error: "invalid_client",
            error_description: "AADSTS7000215: Invalid client secret provided",
          });
        }
        calls.push({ kind: "secret", clientId, scope });
      }
      return send(200, {
        token_type: "Bearer",
        expires_in: fake.lifetimeSeconds,
        ext_expires_in: fake.lifetimeSeconds,
        access_token: issue(),
      });
    });
  });
  const port = await listen(server);
  const fake: FakeEntra = {
    port,
    url: `http://127.0.0.1:${port}`,
    calls,
    lifetimeSeconds: 3599,
    valid: (t) => (issued.get(t) ?? 0) > Date.now(),
    close: closer(server),
  };
  return fake;
}
