// backend.auth forms Sluice mints or writes for Service backends, through a real Envoy and its upstream ext_proc:
// - key / secretRef at a query parameter, and `credentials[]` at a cookie and a header, beside it;
// - passthrough: the client's bearer token re-added under another header;
// - jwtSign: an ES256 JWT the backend verifies with the public key (static claims, kid, iat/nbf/exp from ttl);
// - oauthTokenExchange: RFC 8693 against a token endpoint that authenticates the client (client_secret_basic, or
//   private_key_jwt whose assertion signature, iss/sub, aud and jti it checks) and issues short-lived access tokens
//   that a backend accepts only until they expire.
// Short-lived tokens (2 s) are refreshed ahead of expiry under concurrent traffic with no failed request; a token
// endpoint that refuses or is down fails the route closed with a status naming the field; bad input is named in the
// policy status and answered 503; no token or key appears in Sluice's or Envoy's output.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { decodeJwt, decodeProtectedHeader, jwtVerify } from "jose";
import { startBearerBackend, startTokenService, type TokenService, verifyJwt } from "../helpers/fake-token-service.js";
import { localService, prefixRoute, servicePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { type EchoBody, request, sleep, startEchoUpstream, type Upstream } from "../helpers/net.js";

const jwtKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const clientKeys = generateKeyPairSync("rsa", { modulusLength: 2048 });
const pem = (k: { export(o: { type: "pkcs8"; format: "pem" }): string | Buffer }) =>
  JSON.stringify(k.export({ type: "pkcs8", format: "pem" }).toString());
const SUBJECT = "subj-alice-7f3a";
const CLIENT_SECRET = "cl1ent-s3cret-value";
const API_KEY = "api-key-q-9d2";
const COOKIE = "cookie-val-51c";
const EXTRA = "extra-hdr-77e";
const ASSERTION_AUD = "https://idp.example/token";

type Backend = Awaited<ReturnType<typeof startBearerBackend>>;

function resources(ports: { echo: number; jwt: number; api: number; idp: number }): string {
  const services = [
    localService("static", ports.echo),
    localService("passthrough", ports.echo),
    localService("jwt", ports.jwt),
    localService("badjwt", ports.echo),
    localService("exchange", ports.api),
    localService("pkjwt", ports.api),
    localService("delegated", ports.api),
    localService("sources", ports.api),
    localService("idp", ports.idp),
  ].join("");
  const names = ["static", "passthrough", "jwt", "badjwt", "exchange", "pkjwt", "delegated", "sources"];
  const policy = (name: string, auth: string) => servicePolicy(name, `    auth:${auth}`);
  return `${services}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: static-jwt, namespace: default }
spec:
  static: { host: 127.0.0.1, port: ${ports.jwt} }
  policies:
    auth:
      jwtSign: { signingKeyRef: { name: signer }, alg: ES256, claims: { iss: sluice, aud: orders, sub: static-backend } }
---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { api: ${API_KEY}, cookie: ${COOKIE}, extra: ${EXTRA} }
---
apiVersion: v1
kind: Secret
metadata: { name: signer, namespace: default }
stringData: { signingKey: ${pem(jwtKeys.privateKey)} }
---
apiVersion: v1
kind: Secret
metadata: { name: client, namespace: default }
stringData: { clientSecret: ${CLIENT_SECRET}, signingKey: ${pem(clientKeys.privateKey)} }
${prefixRoute(names)}    - matches: [{ path: { type: PathPrefix, value: /static-jwt } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: static-jwt }]
${policy(
  "static",
  `
      secretRef: { name: keys, key: api }
      location: { queryParameter: { name: api_key } }
      credentials:
        - { location: { cookie: { name: session } }, secretRef: { name: keys, key: cookie } }
        - { location: { header: { name: X-Extra, prefix: Token } }, secretRef: { name: keys, key: extra } }`,
)}${policy("passthrough", `\n      passthrough: {}\n      location: { header: { name: X-Forwarded-Token } }`)}${policy(
  "jwt",
  `
      jwtSign:
        signingKeyRef: { name: signer }
        alg: ES256
        kid: k1
        claims: { iss: sluice, aud: orders, sub: gateway, scope: [read] }
        ttl: 2s`,
)}${policy("badjwt", `\n      jwtSign: { signingKeyRef: { name: signer }, claims: { sub: x, exp: 1 }, ttl: 500ms }`)}${policy(
  "exchange",
  `
      oauthTokenExchange:
        backendRef: { name: idp, port: 80 }
        path: /token
        audiences: [orders]
        scopes: [read, write]
        resources: ["https://orders.example"]
        clientAuth: { clientId: gateway, secretRef: { name: client } }`,
)}${policy(
  "pkjwt",
  `
      oauthTokenExchange:
        backendRef: { name: idp, port: 80 }
        path: /token
        requestedTokenType: AccessToken
        clientAuth:
          clientId: gateway
          method: PrivateKeyJwt
          privateKeyJwt: { signingKeyRef: { name: client }, kid: c1, assertionAudience: "${ASSERTION_AUD}" }`,
)}${policy(
  "delegated",
  `
      oauthTokenExchange:
        backendRef: { name: idp, port: 80 }
        path: /token
        subjectToken: { tokenType: Jwt }
        actorToken: { source: { header: { name: X-Actor-Token } }, tokenType: Jwt, mayAct: Required }
        additionalParams: { tenant: "request.headers['x-tenant']" }
        clientAuth: { clientId: gateway, secretRef: { name: client } }`,
)}${policy(
  "sources",
  `
      oauthTokenExchange:
        backendRef: { name: idp, port: 80 }
        path: /token
        subjectToken: { source: { cookie: { name: sid } } }
        actorToken: { source: { expression: "request.query['actor']" } }
        additionalParams: { client: "string(source.address)" }
        clientAuth: { clientId: gateway, secretRef: { name: client } }`,
)}`;
}

describe("backend.auth tokens minted by Sluice through Envoy", { timeout: 120_000 }, () => {
  let echo: Upstream;
  let jwtBackend: Backend;
  let api: Backend;
  let idp: TokenService;
  let env: LlmEnv;
  const jwtSeen: { token: string; at: number }[] = [];

  before(async () => {
    echo = await startEchoUpstream("echo");
    jwtBackend = await startBearerBackend(async (token) => {
      jwtSeen.push({ token, at: Date.now() });
      return (
        (await jwtVerify(token, jwtKeys.publicKey, { issuer: "sluice", audience: "orders" }).catch(() => undefined)) !==
        undefined
      );
    });
    idp = await startTokenService({
      clientId: "gateway",
      clientSecret: CLIENT_SECRET,
      publicKey: clientKeys.publicKey,
      assertionAudience: ASSERTION_AUD,
    });
    idp.subjects.add(SUBJECT);
    idp.subjects.add("subj-bob");
    idp.lifetimeSeconds = 2;
    api = await startBearerBackend((t) => idp.valid(t));
    env = await startLlmEnv(
      resources({ echo: echo.port, jwt: jwtBackend.port, api: api.port, idp: idp.port }),
      "/static",
    );
  });
  after(async () => {
    await env?.stop();
    await echo?.close();
    await jwtBackend?.close();
    await api?.close();
    await idp?.close();
  });

  const get = (path: string, token = SUBJECT, headers: Record<string, string> = {}) =>
    request(env.port, path, { headers: { authorization: `Bearer ${token}`, ...headers } });

  test("key at a query parameter, credentials[] at a cookie and a header, the client's own values replaced", async () => {
    const r = await get("/static/x?api_key=client&q=1", SUBJECT, { cookie: "session=client; theme=dark" });
    assert.equal(r.status, 200, r.body);
    const seen = JSON.parse(r.body) as EchoBody;
    const url = new URL(seen.path, "http://x");
    assert.equal(url.searchParams.get("api_key"), API_KEY);
    assert.equal(url.searchParams.get("q"), "1");
    assert.equal(seen.headers.cookie, `theme=dark; session=${COOKIE}`);
    assert.equal(seen.headers["x-extra"], `Token ${EXTRA}`);
    // Served, so the policy's status says so: no Warning (it once said credentials[] was not applied).
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "static")?.status);
    assert.match(status, /Attached/);
    assert.doesNotMatch(status, /Warning/);
  });

  test("passthrough: the client's bearer token re-added under the configured header", async () => {
    const r = await get("/passthrough/x", "client-jwt-abc");
    assert.equal(r.status, 200, r.body);
    assert.equal((JSON.parse(r.body) as EchoBody).headers["x-forwarded-token"], "client-jwt-abc");
  });

  test("jwtSign: an ES256 JWT with kid, the static claims and iat/nbf/exp from ttl, verified by the backend", async () => {
    const r = await get("/jwt/x");
    assert.equal(r.status, 200, r.body);
    const token = jwtSeen.at(-1)?.token ?? "";
    const v = await verifyJwt(token, jwtKeys.publicKey);
    assert.ok("payload" in v, "error" in v ? v.error : "");
    assert.deepEqual(decodeProtectedHeader(token), { alg: "ES256", typ: "JWT", kid: "k1" });
    const c = decodeJwt(token);
    assert.equal(c.sub, "gateway");
    assert.deepEqual(c.scope, ["read"]);
    assert.equal((c.exp ?? 0) - (c.iat ?? 0), 2);
    assert.equal(c.nbf, c.iat);
  });

  test("a static GwBackend's own spec.policies.auth: the same jwtSign, verified by the backend", async () => {
    const r = await get("/static-jwt/x");
    assert.equal(r.status, 200, r.body);
    assert.equal(decodeJwt(jwtSeen.at(-1)?.token ?? "").sub, "static-backend");
  });

  test("oauthTokenExchange: RFC 8693 with client_secret_basic; the exchanged token reaches the backend", async () => {
    const r = await get("/exchange/x");
    assert.equal(r.status, 200, r.body);
    const g = idp.grants.at(-1);
    assert.equal(g?.grantType, "urn:ietf:params:oauth:grant-type:token-exchange");
    assert.equal(g?.clientAuth, "basic");
    assert.equal(g?.subject, SUBJECT);
    assert.equal(g?.subjectTokenType, "urn:ietf:params:oauth:token-type:access_token");
    assert.deepEqual(g?.audiences, ["orders"]);
    assert.equal(g?.scope, "read write");
    assert.deepEqual(g?.resources, ["https://orders.example"]);
    assert.equal(api.seen.at(-1), g?.issued);
  });

  test("private_key_jwt client authentication: the token endpoint verified the signed assertion", async () => {
    const r = await get("/pkjwt/x", "subj-bob");
    assert.equal(r.status, 200, r.body);
    const g = idp.grants.at(-1);
    assert.equal(g?.clientAuth, "private_key_jwt");
    assert.equal(g?.requestedTokenType, "urn:ietf:params:oauth:token-type:access_token");
    assert.equal(api.seen.at(-1), g?.issued);
  });

  test("delegation: actor token and additionalParams sent; a subject whose may_act does not name the actor is refused", async () => {
    const jwt = (claims: Record<string, unknown>) =>
      `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.`;
    const subject = jwt({ sub: "alice", may_act: { sub: "agent-7" } });
    const actor = jwt({ sub: "agent-7" });
    idp.subjects.add(subject);
    const r = await get("/delegated/x", subject, { "x-actor-token": actor, "x-tenant": "acme" });
    assert.equal(r.status, 200, r.body);
    const g = idp.grants.at(-1);
    assert.equal(g?.subjectTokenType, "urn:ietf:params:oauth:token-type:jwt");
    assert.equal(g?.actorToken, actor);
    assert.equal(g?.actorTokenType, "urn:ietf:params:oauth:token-type:jwt");
    assert.deepEqual(g?.other, { tenant: "acme" });
    const stranger = jwt({ sub: "agent-9" });
    const n = idp.grants.length;
    const refused = await get("/delegated/x", subject, { "x-actor-token": stranger, "x-tenant": "acme" });
    assert.equal(refused.status, 403);
    assert.match(
      refused.body,
      /backend\.auth\.oauthTokenExchange: actorToken\.mayAct: the subject token's may_act does not name this actor/,
    );
    assert.equal(idp.grants.length, n, "refused before any call to the token endpoint");
    const noActor = await get("/delegated/x", subject, { "x-tenant": "acme" });
    assert.equal(noActor.status, 401);
    assert.match(noActor.body, /no actor token in the x-actor-token header/);
  });

  test("2 s tokens under concurrent traffic for 6 s: refreshed ahead of expiry, no request fails", async () => {
    const issuedBefore = idp.grants.filter((g) => g.issued !== undefined).length;
    const jwtBefore = new Set(jwtSeen.map((s) => s.token)).size;
    const refusedBefore = api.refused + jwtBackend.refused;
    const statuses: number[] = [];
    const until = Date.now() + 6000;
    const worker = async (path: string) => {
      while (Date.now() < until) {
        statuses.push((await get(path)).status);
        await sleep(20);
      }
    };
    await Promise.all([worker("/exchange/a"), worker("/exchange/b"), worker("/jwt/a"), worker("/jwt/b")]);
    assert.ok(statuses.length > 100, `only ${statuses.length} requests`);
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
    );
    assert.equal(api.refused + jwtBackend.refused, refusedBefore, "a backend saw an expired or invalid token");
    // Fresh tokens were minted along the way (lifetime 2 s over 6 s: at least two more of each).
    assert.ok(idp.grants.filter((g) => g.issued !== undefined).length - issuedBefore >= 2);
    assert.ok(new Set(jwtSeen.map((s) => s.token)).size - jwtBefore >= 2);
  });

  test("a revoked subject: 401 naming the field; the backend is not called", async () => {
    idp.subjects.add("subj-revoked");
    idp.revoked.add("subj-revoked");
    const n = api.seen.length;
    const r = await get("/exchange/x", "subj-revoked");
    assert.equal(r.status, 401);
    assert.match(
      r.body,
      /backend\.auth\.oauthTokenExchange: token endpoint idp\.default\.svc refused the exchange \(invalid_grant\)/,
    );
    assert.equal(api.seen.length, n);
  });

  test("token sources: the subject from a cookie, the actor from an expression; a parameter from the client's address", async () => {
    const subject = "subj-cookie";
    const actor = "actor-from-query";
    idp.subjects.add(subject);
    const r = await request(env.port, `/sources/x?actor=${actor}`, { headers: { cookie: `a=1; sid=${subject}` } });
    assert.equal(r.status, 200, r.body);
    const g = idp.grants.at(-1);
    assert.equal(g?.subject, subject);
    assert.equal(g?.actorToken, actor);
    assert.deepEqual(g?.other, { client: "127.0.0.1" });
    assert.equal(api.seen.at(-1), g?.issued);
    const noCookie = await request(env.port, `/sources/x?actor=${actor}`);
    assert.equal(noCookie.status, 401);
    assert.match(noCookie.body, /no subject token in the sid cookie/);
    const noActor = await request(env.port, "/sources/x", { headers: { cookie: `sid=${subject}` } });
    assert.equal(noActor.status, 401);
    assert.match(noActor.body, /no actor token in what its source expression gave/);
  });

  test("no subject token: 401 naming the header", async () => {
    const r = await request(env.port, "/exchange/x");
    assert.equal(r.status, 401);
    assert.match(r.body, /no subject token in the authorization header/);
  });

  test("bad input: a reserved claim and a ttl under 1s are named in the policy status", async () => {
    // The validator refuses the policy as a whole (src/api); the translator's own checks are in test/unit.
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "badjwt")?.status);
    assert.match(status, /backend\.auth\.jwtSign\.claims/);
    assert.match(status, /backend\.auth\.jwtSign\.ttl/);
  });

  test("the token endpoint down: once the cached token lapses, 503 naming the field", async () => {
    await idp.close();
    await sleep(2100);
    const r = await get("/exchange/x");
    assert.equal(r.status, 503);
    assert.match(r.body, /backend\.auth\.oauthTokenExchange: token endpoint idp\.default\.svc: unreachable/);
  });

  test("no token, key or secret in Sluice's or Envoy's output", async () => {
    const secrets = [CLIENT_SECRET, API_KEY, COOKIE, EXTRA, SUBJECT, ...idp.grants.flatMap((g) => g.issued ?? [])];
    secrets.push(...jwtSeen.map((s) => s.token.split(".")[2] ?? "").filter((s) => s !== ""));
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    for (const s of secrets) assert.ok(!out.includes(s), "a credential in the logs");
    const dump = JSON.stringify(await env.envoy.configDump());
    for (const s of [CLIENT_SECRET, API_KEY, COOKIE, EXTRA]) assert.ok(!dump.includes(s), "a secret in Envoy's config");
  });
});
