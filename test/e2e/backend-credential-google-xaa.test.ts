// backend.auth.cloudB and crossAppAccess on Service backends through a real Envoy and Sluice's credential ext_proc:
// - cloudB from a service account key in a Secret: an access token (RFC 7523 assertion the fake Google token endpoint
//   verifies against the key) and an ID token whose audience defaults to https://<backend host>; from the ambient
//   credentials (the metadata server, GCE_METADATA_HOST): an access token and an ID token for a chosen audience; the
//   backend verifies ID tokens with Google's key;
// - crossAppAccess: the client's ID token exchanged at the identity provider for an ID-JAG (RFC 8693, requested type
//   id-jag, audience the resource authorization server), then the ID-JAG as an RFC 7523 grant at that server for the
//   access token the backend accepts; each server authenticates its own client. The access token is cached per ID
//   token; a refused ID token answers 401 naming the field.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { jwtVerify } from "jose";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { startBearerBackend, startTokenService, type TokenService } from "../helpers/fake-token-service.js";
import { localService, prefixRoute, servicePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";

type Backend = Awaited<ReturnType<typeof startBearerBackend>>;
const ID_TOKEN = "idt-alice-51";
const IDP_SECRET = "idp-client-secret-1";
const RAS_SECRET = "ras-client-secret-2";

function resources(p: { google: number; api: number; idp: number; ras: number }, sa: Record<string, string>): string {
  const names = ["sa-access", "sa-id", "adc-access", "adc-id", "xaa"];
  const policy = (name: string, auth: string) => servicePolicy(name, `    auth:${auth}`);
  return `${names.map((n) => localService(n, n === "xaa" ? p.api : p.google)).join("")}${localService("idp", p.idp)}${localService("ras", p.ras)}---
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData: { credentials.json: ${JSON.stringify(JSON.stringify(sa))} }
---
apiVersion: v1
kind: Secret
metadata: { name: clients, namespace: default }
stringData: { idp: ${IDP_SECRET}, ras: ${RAS_SECRET} }
${prefixRoute(names)}${policy("sa-access", "\n      cloudB: { type: AccessToken, secretRef: { name: gcp } }")}${policy(
  "sa-id",
  "\n      cloudB: { type: IdToken, secretRef: { name: gcp } }",
)}${policy("adc-access", "\n      cloudB: {}")}${policy(
  "adc-id",
  '\n      cloudB: { type: IdToken, audience: "https://orders.example" }',
)}${policy(
  "xaa",
  `
      crossAppAccess:
        identityProvider:
          backendRef: { name: idp, port: 80 }
          path: /oauth2/token
          clientAuth: { clientId: gateway-at-idp, secretRef: { name: clients, key: idp } }
        resourceAuthorizationServer:
          backendRef: { name: ras, port: 80 }
          path: /token
          clientAuth: { clientId: gateway-at-ras, method: ClientSecretPost, secretRef: { name: clients, key: ras } }
        audience: https://ras.example
        resources: ["https://api.example/orders"]
        scopes: [orders.read]`,
)}`;
}

describe("backend.auth cloudB and crossAppAccess minted by Sluice through Envoy", { timeout: 90_000 }, () => {
  let google: FakeGoogleAuth;
  let googleBackend: Backend;
  let api: Backend;
  let idp: TokenService;
  let ras: TokenService;
  let env: LlmEnv;
  const idTokens: { aud: unknown; sub: unknown }[] = [];

  before(async () => {
    google = await startFakeGoogleAuth();
    // Accepts Google access tokens the fake issued, or ID tokens signed by Google's key.
    googleBackend = await startBearerBackend(async (t) => {
      if (google.issued(t)) return true;
      const v = await jwtVerify(t, google.idTokenKey, { issuer: "https://accounts.google.com" }).catch(() => undefined);
      if (v !== undefined) idTokens.push({ aud: v.payload.aud, sub: v.payload.sub });
      return v !== undefined;
    });
    idp = await startTokenService({ clientId: "gateway-at-idp", clientSecret: IDP_SECRET });
    idp.subjects.add(ID_TOKEN);
    ras = await startTokenService({ clientId: "gateway-at-ras", clientSecret: RAS_SECRET }, idp);
    api = await startBearerBackend((t) => ras.valid(t));
    env = await startLlmEnv(
      resources({ google: googleBackend.port, api: api.port, idp: idp.port, ras: ras.port }, google.serviceAccount),
      "/sa-access",
      { GCE_METADATA_HOST: `127.0.0.1:${google.port}`, GOOGLE_APPLICATION_CREDENTIALS: "" },
    );
  });
  after(async () => {
    await env?.stop();
    for (const s of [googleBackend, api, idp, ras, google]) await s?.close();
  });

  const get = (path: string, token = ID_TOKEN) =>
    request(env.port, path, { headers: { authorization: `Bearer ${token}` } });

  test("a service account key: an access token from the JWT bearer grant the token endpoint verified", async () => {
    const r = await get("/sa-access/x");
    assert.equal(r.status, 200, r.body);
    assert.match(googleBackend.seen.at(-1) ?? "", /^ya29\.sa-/);
    assert.equal(google.grants.at(-1)?.kind, "jwt-bearer");
  });

  test("a service account key: an ID token for https://<the backend's host>", async () => {
    const r = await get("/sa-id/x");
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(idTokens.at(-1), { aud: "https://127.0.0.1", sub: google.serviceAccount.client_email });
  });

  test("ambient credentials (metadata server): an access token, and an ID token for the chosen audience", async () => {
    assert.equal((await get("/adc-access/x")).status, 200);
    assert.match(googleBackend.seen.at(-1) ?? "", /^ya29\.metadata-/);
    assert.equal((await get("/adc-id/x")).status, 200);
    assert.deepEqual(idTokens.at(-1)?.aud, "https://orders.example");
    assert.deepEqual(google.grants.at(-1), { kind: "metadata-identity", claims: { aud: "https://orders.example" } });
  });

  test("crossAppAccess: ID token → ID-JAG at the identity provider → access token at the resource server", async () => {
    const r = await get("/xaa/orders");
    assert.equal(r.status, 200, r.body);
    const one = idp.grants.at(-1);
    assert.equal(one?.grantType, "urn:ietf:params:oauth:grant-type:token-exchange");
    assert.equal(one?.clientAuth, "basic");
    assert.equal(one?.subject, ID_TOKEN);
    assert.equal(one?.subjectTokenType, "urn:ietf:params:oauth:token-type:id_token");
    assert.equal(one?.requestedTokenType, "urn:ietf:params:oauth:token-type:id-jag");
    assert.deepEqual(one?.audiences, ["https://ras.example"]);
    assert.deepEqual(one?.resources, ["https://api.example/orders"]);
    assert.equal(one?.scope, "orders.read");
    const two = ras.grants.at(-1);
    assert.equal(two?.grantType, "urn:ietf:params:oauth:grant-type:jwt-bearer");
    assert.equal(two?.clientAuth, "post");
    assert.equal(two?.subject, one?.issued);
    assert.equal(api.seen.at(-1), two?.issued);
    // Cached per ID token: the next request makes no new grant.
    const before = idp.grants.length + ras.grants.length;
    assert.equal((await get("/xaa/orders")).status, 200);
    assert.equal(idp.grants.length + ras.grants.length, before);
  });

  test("crossAppAccess with an ID token the identity provider refuses: 401 naming the field, backend not called", async () => {
    const n = api.seen.length;
    const r = await get("/xaa/orders", "idt-unknown");
    assert.equal(r.status, 401);
    assert.match(
      r.body,
      /backend\.auth\.crossAppAccess: token endpoint idp\.default\.svc refused the exchange \(invalid_grant\)/,
    );
    assert.equal(api.seen.length, n);
  });

  test("no token or client secret in Sluice's or Envoy's output", () => {
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    const secrets = [
      IDP_SECRET,
      RAS_SECRET,
      ID_TOKEN,
      ...googleBackend.seen,
      ...api.seen,
      ...idp.grants.flatMap((g) => g.issued ?? []),
    ];
    for (const s of secrets.filter((x) => x !== "")) assert.ok(!out.includes(s), "a credential in the logs");
  });
});
