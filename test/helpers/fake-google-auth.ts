// A local stand-in for Google's OAuth 2.0 token endpoint and the GCE metadata server, speaking their real wire format:
// the token endpoint verifies a service account's JWT assertion (RFC 7523, signed with the key of the service account
// it made) or a refresh-token grant, and answers access tokens (`scope`) or ID tokens (`target_audience`); the
// metadata server answers the default service account's token when asked with `Metadata-Flavor: Google`.

import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { importSPKI, jwtVerify, SignJWT } from "jose";

export interface FakeGoogleAuth {
  readonly port: number;
  readonly tokenUri: string;
  /** A service account key file whose token_uri is this fake. */
  readonly serviceAccount: Record<string, string>;
  /** Grants seen: `jwt-bearer` (with its claims), `refresh_token`, `metadata`. */
  readonly grants: { kind: string; claims?: Record<string, unknown> }[];
  /** Whether `token` is an access token this fake issued. */
  issued(token: string): boolean;
  /** The public key Google's ID tokens verify with (its JWKS, here one key). */
  readonly idTokenKey: KeyObject;
  /** ID tokens' lifetime, seconds (Google's: 3600). */
  idTokenSeconds: number;
  close(): Promise<void>;
}

const SCOPE = "https://www.googleapis.com/auth/cloud-platform";

export async function startFakeGoogleAuth(): Promise<FakeGoogleAuth> {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pkcs8 = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const spki = await importSPKI(publicKey.export({ type: "spki", format: "pem" }).toString(), "RS256");
  const tokens = new Set<string>();
  // Google signs ID tokens with its own key; a backend verifies them against Google's JWKS.
  const google = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const idToken = (aud: string, sub: string) => {
    const iat = Math.floor(Date.now() / 1000);
    return new SignJWT({ email: sub, email_verified: true })
      .setProtectedHeader({ alg: "RS256", kid: "google-1", typ: "JWT" })
      .setIssuer("https://accounts.google.com")
      .setAudience(aud)
      .setSubject(sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + fake.idTokenSeconds)
      .sign(google.privateKey);
  };
  const grants: FakeGoogleAuth["grants"] = [];
  let n = 0;
  const state = { tokenUri: "" };
  const email = "sluice-test@my-project.iam.gserviceaccount.com";

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const send = (status: number, body: unknown) => {
          const text = typeof body === "string" ? body : JSON.stringify(body);
          res.writeHead(status, { "content-type": typeof body === "string" ? "text/plain" : "application/json" });
          res.end(text);
        };
        const url = new URL(req.url ?? "/", "http://x");
        if (url.pathname === "/computeMetadata/v1/instance/service-accounts/default/token") {
          if (req.headers["metadata-flavor"] !== "Google") return send(403, "Missing Metadata-Flavor:Google header.");
          grants.push({ kind: "metadata" });
          const t = `ya29.metadata-${++n}`;
          tokens.add(t);
          return send(200, { access_token: t, expires_in: 3599, token_type: "Bearer" });
        }
        if (url.pathname === "/computeMetadata/v1/instance/service-accounts/default/identity") {
          if (req.headers["metadata-flavor"] !== "Google") return send(403, "Missing Metadata-Flavor:Google header.");
          const aud = url.searchParams.get("audience") ?? "";
          if (aud === "") return send(400, "non-empty audience parameter required");
          grants.push({ kind: "metadata-identity", claims: { aud } });
          return send(200, await idToken(aud, "default@my-project.iam.gserviceaccount.com"));
        }
        if (url.pathname !== "/token" || req.method !== "POST") return send(404, { error: "not_found" });
        const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
        const grant = form.get("grant_type");
        if (grant === "urn:ietf:params:oauth:grant-type:jwt-bearer") {
          try {
            const { payload } = await jwtVerify(form.get("assertion") ?? "", spki, {
              issuer: email,
              audience: state.tokenUri,
              algorithms: ["RS256"],
            });
            grants.push({ kind: "jwt-bearer", claims: payload as Record<string, unknown> });
            if (typeof payload.target_audience === "string") {
              return send(200, { id_token: await idToken(payload.target_audience, email) });
            }
            if (payload.scope !== SCOPE) return send(400, { error: "invalid_scope" });
          } catch (e) {
            return send(400, { error: "invalid_grant", error_description: `Invalid JWT: ${(e as Error).message}` });
          }
          const t = `ya29.sa-${++n}`;
          tokens.add(t);
          return send(200, { access_token: t, expires_in: 3599, token_type: "Bearer" });
        }
        if (grant === "refresh_token") {
          grants.push({ kind: "refresh_token" });
          if (form.get("refresh_token") !== "1//refresh" || form.get("client_secret") !== "secret") {
            return send(400, { error: "invalid_grant", error_description: "Bad Request" });
          }
          const t = `ya29.user-${++n}`;
          tokens.add(t);
          return send(200, { access_token: t, expires_in: 3599, token_type: "Bearer", scope: SCOPE });
        }
        return send(400, { error: "unsupported_grant_type" });
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  state.tokenUri = `http://127.0.0.1:${port}/token`;
  const fake: FakeGoogleAuth = {
    port,
    tokenUri: state.tokenUri,
    idTokenKey: google.publicKey,
    idTokenSeconds: 3600,
    serviceAccount: {
      type: "service_account",
      project_id: "my-project",
      private_key_id: "key-1",
      private_key: pkcs8,
      client_email: email,
      client_id: "1234567890",
      token_uri: state.tokenUri,
    },
    grants,
    issued: (t) => tokens.has(t),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return fake;
}
