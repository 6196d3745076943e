// backend.auth forms Sluice mints for AI backends (GwBackend `ai`), through a real Envoy and the LLM ext_proc, which
// writes the provider's token once it has chosen the provider of an attempt. The official `openai` client talks to
// providers that check what they receive:
// - jwtSign: an ES256 JWT the provider verifies with the public key (audience, kid, exp);
// - oauthTokenExchange: the client's key is the subject token of an RFC 8693 exchange at a token endpoint that
//   authenticates Sluice by private_key_jwt (assertion signature, iss/sub, aud, jti checked) and issues short-lived
//   tokens the provider accepts only until they expire;
// - crossAppAccess: the client's ID token → ID-JAG at an identity provider → access token at the resource
//   authorization server, each authenticating its own client;
// - cloudC: an Entra ID token (client secret grant at a fake Entra ID) on a cloudC (Azure OpenAI) provider;
// - passthrough: the client's own key, in the provider's own header form (Authorization for providerA, x-api-key for
//   providerD).
// The `@anthropic-ai/sdk` client on a Messages route gets the same exchange, and its refusal in Anthropic's format;
// a failover writes each provider's own token and drops the previous provider's.
// 2 s tokens are refreshed ahead of expiry under concurrent traffic with no failed request; a revoked subject, a
// refused client secret or a token endpoint that is down fails the request closed in the client's error format (the
// provider is not called); unresolvable configuration is named in the GwBackend's status; no credential is logged.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import { decodeJwt, decodeProtectedHeader, jwtVerify, SignJWT } from "jose";
import OpenAI from "openai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type FakeEntra, startFakeEntra, startTokenService, type TokenService } from "../helpers/fake-token-service.js";
import { localService, prefixRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { freePort, sleep } from "../helpers/net.js";

const jwtKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const clientKeys = generateKeyPairSync("rsa", { modulusLength: 2048 });
/** The route's users' JWTs (a Permissive JWT authentication at x-user-jwt), read by a credential's expression. */
const userKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const userJwk = { ...userKeys.publicKey.export({ format: "jwk" }), kid: "u1", alg: "ES256", use: "sig" };
const USER_ISSUER = "https://users.example";
const pem = (k: { export(o: { type: "pkcs8"; format: "pem" }): string | Buffer }) =>
  JSON.stringify(k.export({ type: "pkcs8", format: "pem" }).toString());
const SUBJECT = "subj-alice-llm-4b1";
const ID_TOKEN = "idt-bob-llm-93c";
const CLIENT_KEY = "sk-client-own-key-77d";
const IDP_SECRET = "idp-cl1ent-secret";
const RAS_SECRET = "ras-cl1ent-secret";
const ASSERTION_AUD = "https://sts.example/token";
const TENANT = "4f2a-tenant";
const APP = { clientId: "llm-app-1", clientSecret: "entra-s3cret-Q~z" };

/** What an OpenAI-compatible provider saw, and whether it let it through. */
interface Seen {
  readonly path: string;
  readonly authorization: string;
  readonly ok: boolean;
  /** The failover test's first provider's credential header, if it (wrongly) came along. */
  readonly jwtHeader?: string;
}

/**
 * An OpenAI-compatible chat completions endpoint (any path ending in /chat/completions, as an Azure OpenAI deployment
 * has) that answers only requests whose `Authorization: Bearer` token `valid` accepts, else OpenAI's 401.
 */
async function startBearerProvider(valid: (token: string) => boolean | Promise<boolean>) {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const authorization = String(req.headers.authorization ?? "");
        // The Authorization header, else a `token` query parameter (a policy's queryParameter location).
        const query = new URL(req.url ?? "/", "http://x").searchParams.get("token");
        const token = /^Bearer (\S+)$/.exec(authorization)?.[1] ?? query ?? "";
        const ok = /\/chat\/completions(\?|$)/.test(req.url ?? "") && (await valid(token));
        const jwtHeader = req.headers["x-primary-jwt"];
        seen.push({ path: req.url ?? "", authorization, ok, ...(typeof jwtHeader === "string" ? { jwtHeader } : {}) });
        res.setHeader("content-type", "application/json");
        if (!ok) {
          res.writeHead(401);
          res.end(JSON.stringify({ error: { message: "invalid token", type: "invalid_request_error", code: null } }));
          return;
        }
        let body: { model?: string } = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { model?: string };
        } catch {
          // A probe without a body.
        }
        res.end(
          JSON.stringify({
            id: "chatcmpl-1",
            object: "chat.completion",
            created: 1700000000,
            model: body.model ?? "m",
            choices: [{ index: 0, message: { role: "assistant", content: "minted ok" }, finish_reason: "stop" }],
            usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
          }),
        );
      })();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    refused: () => seen.filter((s) => !s.ok).length,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
type BearerProvider = Awaited<ReturnType<typeof startBearerProvider>>;

function resources(p: {
  jwt: number;
  api: number;
  xaa: number;
  azure: number;
  openai: number;
  anthropic: number;
  idp: number;
  sts: number;
  ras: number;
  closed: number;
  failing: number;
}): string {
  const backend = (name: string, provider: string, auth: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { ${provider} }
  policies:
    auth:${auth}
`;
  const names = [
    "jwt",
    "exchange",
    "xaa",
    "azure",
    "pass",
    "pass-anthropic",
    "azure-wrong",
    "down",
    "nokey",
    "noidp",
    "failover",
    "messages",
    "jwt-query",
    "identity",
  ];
  const openai = (port: number) => `providerA: { model: gpt-test }, host: 127.0.0.1, port: ${port}`;
  const exchange = (service: string) => `
      oauthTokenExchange:
        backendRef: { name: ${service}, port: 80 }
        path: /token
        audiences: [llm]
        scopes: [chat]
        clientAuth:
          clientId: gateway
          method: PrivateKeyJwt
          privateKeyJwt: { signingKeyRef: { name: client }, kid: c1, assertionAudience: "${ASSERTION_AUD}" }`;
  return `${localService("sts", p.sts)}${localService("idp", p.idp)}${localService("ras", p.ras)}${localService("closed", p.closed)}---
apiVersion: v1
kind: Secret
metadata: { name: signer, namespace: default }
stringData: { signingKey: ${pem(jwtKeys.privateKey)} }
---
apiVersion: v1
kind: Secret
metadata: { name: client, namespace: default }
stringData: { signingKey: ${pem(clientKeys.privateKey)}, idp: ${IDP_SECRET}, ras: ${RAS_SECRET} }
---
apiVersion: v1
kind: Secret
metadata: { name: entra, namespace: default }
stringData: { clientID: ${APP.clientId}, tenantID: ${TENANT}, clientSecret: ${APP.clientSecret} }
---
apiVersion: v1
kind: Secret
metadata: { name: entra-wrong, namespace: default }
stringData: { clientID: ${APP.clientId}, tenantID: ${TENANT}, clientSecret: not-the-secret }
${backend(
  "jwt",
  openai(p.jwt),
  `
      jwtSign:
        signingKeyRef: { name: signer }
        alg: ES256
        kid: k1
        claims: { iss: sluice, aud: llm-provider, sub: gateway }
        ttl: 2s`,
)}${backend(
  "jwt-query",
  openai(p.jwt),
  `
      jwtSign:
        signingKeyRef: { name: signer }
        alg: ES256
        claims: { iss: sluice, aud: llm-provider, sub: by-query }
        location: { queryParameter: { name: token } }`,
)}${backend("exchange", openai(p.api), exchange("sts"))}${backend("down", openai(p.api), exchange("closed"))}${backend(
  "xaa",
  openai(p.xaa),
  `
      crossAppAccess:
        identityProvider:
          backendRef: { name: idp, port: 80 }
          path: /oauth2/token
          clientAuth: { clientId: gateway-at-idp, secretRef: { name: client, key: idp } }
        resourceAuthorizationServer:
          backendRef: { name: ras, port: 80 }
          path: /token
          clientAuth: { clientId: gateway-at-ras, method: ClientSecretPost, secretRef: { name: client, key: ras } }
        audience: https://ras.example
        scopes: [llm.chat]`,
)}${backend(
  "azure",
  `cloudC: { resourceName: acme, resourceType: OpenAI }, host: 127.0.0.1, port: ${p.azure}`,
  "\n      cloudC: { secretRef: { name: entra } }",
)}${backend(
  "azure-wrong",
  `cloudC: { resourceName: acme, resourceType: OpenAI }, host: 127.0.0.1, port: ${p.azure}`,
  "\n      cloudC: { secretRef: { name: entra-wrong } }",
)}${backend("pass", openai(p.openai), "\n      passthrough: {}")}${backend(
  "pass-anthropic",
  `providerD: { model: claude-test }, host: 127.0.0.1, port: ${p.anthropic}`,
  "\n      passthrough: {}",
)}${backend(
  "nokey",
  openai(p.jwt),
  "\n      jwtSign: { signingKeyRef: { name: no-such-secret }, claims: { sub: gateway } }",
)}${backend("noidp", openai(p.api), exchange("no-such-service"))}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: failover, namespace: default }
spec:
  ai:
    groups:
      - providers:
          - name: primary
            providerA: { model: gpt-test }
            host: 127.0.0.1
            port: ${p.failing}
            policies:
              auth:
                jwtSign:
                  signingKeyRef: { name: signer }
                  alg: ES256
                  claims: { iss: sluice, aud: primary }
                  location: { header: { name: X-Primary-Jwt } }
      - providers:
          - name: backup
            providerA: { model: gpt-test }
            host: 127.0.0.1
            port: ${p.api}
            policies:
              auth:${exchange("sts").replace(/\n/g, "\n          ")}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: messages, namespace: default }
spec:
  ai:
    provider: { ${openai(p.api)} }
  policies:
    ai:
      routes: { /v1/messages: Messages }
    auth:
      oauthTokenExchange:
        backendRef: { name: sts, port: 80 }
        path: /token
        clientAuth:
          clientId: gateway
          method: PrivateKeyJwt
          privateKeyJwt: { signingKeyRef: { name: client }, assertionAudience: "${ASSERTION_AUD}" }
${backend(
  "identity",
  openai(p.api),
  `
      oauthTokenExchange:
        backendRef: { name: sts, port: 80 }
        path: /token
        subjectToken: { source: { cookie: { name: sid } } }
        additionalParams: { user: "jwt.sub" }
        clientAuth:
          clientId: gateway
          method: PrivateKeyJwt
          privateKeyJwt: { signingKeyRef: { name: client }, kid: c1, assertionAudience: "${ASSERTION_AUD}" }`,
)}${prefixRoute(names, { name: "llm", to: "GwBackend" })}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: callers, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm }]
  traffic:
    jwtAuthentication:
      mode: Permissive
      location: { header: { name: x-user-jwt } }
      providers: [{ issuer: "${USER_ISSUER}", jwks: { inline: ${JSON.stringify(JSON.stringify({ keys: [userJwk] }))} } }]
`;
}

describe("AI backends: provider credentials minted by the LLM ext_proc, through Envoy", { timeout: 180_000 }, () => {
  let jwtProvider: BearerProvider;
  let apiProvider: BearerProvider;
  let xaaProvider: BearerProvider;
  let azureProvider: BearerProvider;
  let openaiProvider: FakeProvider;
  let anthropicProvider: FakeProvider;
  let failing: FakeProvider;
  let sts: TokenService;
  let idp: TokenService;
  let ras: TokenService;
  let entra: FakeEntra;
  let env: LlmEnv;
  const jwtSeen: string[] = [];

  before(async () => {
    jwtProvider = await startBearerProvider(async (t) => {
      jwtSeen.push(t);
      const v = await jwtVerify(t, jwtKeys.publicKey, { issuer: "sluice", audience: "llm-provider" }).catch(
        () => undefined,
      );
      return v !== undefined;
    });
    sts = await startTokenService({
      clientId: "gateway",
      publicKey: clientKeys.publicKey,
      assertionAudience: ASSERTION_AUD,
    });
    sts.subjects.add(SUBJECT);
    sts.subjects.add("subj-worker-2");
    sts.lifetimeSeconds = 2;
    apiProvider = await startBearerProvider((t) => sts.valid(t));
    idp = await startTokenService({ clientId: "gateway-at-idp", clientSecret: IDP_SECRET });
    idp.subjects.add(ID_TOKEN);
    ras = await startTokenService({ clientId: "gateway-at-ras", clientSecret: RAS_SECRET }, idp);
    xaaProvider = await startBearerProvider((t) => ras.valid(t));
    entra = await startFakeEntra({
      tenant: TENANT,
      app: APP,
      federated: { clientId: "unused", publicKey: clientKeys.publicKey, issuer: "https://unused", subject: "unused" },
      managedClientId: "unused",
    });
    entra.lifetimeSeconds = 2;
    azureProvider = await startBearerProvider((t) => entra.valid(t));
    openaiProvider = await startFakeProvider({ name: "openai", apiKey: CLIENT_KEY });
    anthropicProvider = await startFakeProvider({ name: "anthropic", apiKey: CLIENT_KEY });
    failing = await startFakeProvider({ name: "failing" });
    failing.failWith = 503;
    env = await startLlmEnv(
      resources({
        jwt: jwtProvider.port,
        api: apiProvider.port,
        xaa: xaaProvider.port,
        azure: azureProvider.port,
        openai: openaiProvider.port,
        anthropic: anthropicProvider.port,
        idp: idp.port,
        sts: sts.port,
        ras: ras.port,
        closed: await freePort(),
        failing: failing.port,
      }),
      "/jwt/v1/chat/completions",
      { AZURE_AUTHORITY_HOST: entra.url },
    );
  });
  after(async () => {
    await env?.stop();
    for (const s of [
      jwtProvider,
      apiProvider,
      xaaProvider,
      azureProvider,
      openaiProvider,
      anthropicProvider,
      failing,
    ]) {
      await s?.close();
    }
    for (const s of [sts, idp, ras, entra]) await s?.close();
  });

  const client = (prefix: string, apiKey = SUBJECT) =>
    new OpenAI({ apiKey, baseURL: `${env.baseUrl}/${prefix}/v1`, maxRetries: 0 });
  const chat = (prefix: string, apiKey?: string) =>
    client(prefix, apiKey).chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });

  test("jwtSign: an ES256 JWT with kid, the static claims and a 2 s life, verified by the provider", async () => {
    const r = await chat("jwt");
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const token = jwtSeen.at(-1) ?? "";
    assert.deepEqual(decodeProtectedHeader(token), { alg: "ES256", typ: "JWT", kid: "k1" });
    const c = decodeJwt(token);
    assert.equal(c.sub, "gateway");
    assert.equal((c.exp ?? 0) - (c.iat ?? 0), 2);
    // The client's own key never reaches the provider.
    assert.ok(!jwtProvider.seen.some((s) => s.authorization.includes(SUBJECT)));
  });

  test("jwtSign at a query parameter: added to the provider's path, the client's Authorization not sent", async () => {
    const r = await chat("jwt-query");
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const seen = jwtProvider.seen.at(-1);
    const url = new URL(seen?.path ?? "/", "http://x");
    assert.equal(url.pathname, "/v1/chat/completions");
    assert.equal(decodeJwt(url.searchParams.get("token") ?? "").sub, "by-query");
    assert.equal(seen?.authorization, "");
  });

  test("oauthTokenExchange: the client's key exchanged (RFC 8693, private_key_jwt); the issued token reaches the provider", async () => {
    const r = await chat("exchange");
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const g = sts.grants.at(-1);
    assert.equal(g?.grantType, "urn:ietf:params:oauth:grant-type:token-exchange");
    assert.equal(g?.clientAuth, "private_key_jwt");
    assert.equal(g?.subject, SUBJECT);
    assert.deepEqual(g?.audiences, ["llm"]);
    assert.equal(g?.scope, "chat");
    assert.equal(apiProvider.seen.at(-1)?.authorization, `Bearer ${g?.issued}`);
    assert.equal(apiProvider.seen.at(-1)?.path, "/v1/chat/completions");
  });

  test("oauthTokenExchange reading the route's identity: the subject from a cookie, a parameter from the JWT's claims", async () => {
    const token = await new SignJWT({ sub: "ada" })
      .setProtectedHeader({ alg: "ES256", kid: "u1" })
      .setIssuer(USER_ISSUER)
      .setExpirationTime("1h")
      .sign(userKeys.privateKey);
    const c = new OpenAI({
      apiKey: "not-the-subject",
      baseURL: `${env.baseUrl}/identity/v1`,
      maxRetries: 0,
      defaultHeaders: { cookie: `sid=${SUBJECT}`, "x-user-jwt": token },
    });
    const r = await c.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const g = sts.grants.at(-1);
    assert.equal(g?.subject, SUBJECT);
    assert.deepEqual(g?.other, { user: "ada" });
    assert.equal(apiProvider.seen.at(-1)?.authorization, `Bearer ${g?.issued}`);
  });

  test("crossAppAccess: ID token → ID-JAG at the identity provider → access token at the resource server", async () => {
    const r = await chat("xaa", ID_TOKEN);
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const one = idp.grants.at(-1);
    assert.equal(one?.subject, ID_TOKEN);
    assert.equal(one?.clientAuth, "basic");
    assert.equal(one?.requestedTokenType, "urn:ietf:params:oauth:token-type:id-jag");
    assert.deepEqual(one?.audiences, ["https://ras.example"]);
    const two = ras.grants.at(-1);
    assert.equal(two?.grantType, "urn:ietf:params:oauth:grant-type:jwt-bearer");
    assert.equal(two?.clientAuth, "post");
    assert.equal(two?.subject, one?.issued);
    assert.equal(xaaProvider.seen.at(-1)?.authorization, `Bearer ${two?.issued}`);
    // Cached per ID token: no new grant for the next request.
    const n = idp.grants.length + ras.grants.length;
    await chat("xaa", ID_TOKEN);
    assert.equal(idp.grants.length + ras.grants.length, n);
  });

  test("cloudC: an Entra ID token (client secret grant) on the Azure OpenAI provider's request", async () => {
    const r = await chat("azure");
    assert.equal(r.choices[0]?.message.content, "minted ok");
    assert.deepEqual(entra.calls.at(-1), {
      kind: "secret",
      clientId: APP.clientId,
      scope: "https://cognitiveservices.azure.com/.default",
    });
    const seen = azureProvider.seen.at(-1);
    assert.ok(seen?.ok);
    assert.match(seen?.path ?? "", /^\/openai\/.*chat\/completions/);
  });

  test("passthrough: the client's own key in the provider's header form (Authorization; x-api-key for providerD)", async () => {
    const r = await chat("pass", CLIENT_KEY);
    assert.equal(r.choices[0]?.message.content, "Hello from openai: hi");
    assert.equal(openaiProvider.requests.at(-1)?.headers.authorization, `Bearer ${CLIENT_KEY}`);
    const a = await chat("pass-anthropic", CLIENT_KEY);
    assert.match(a.choices[0]?.message.content ?? "", /Hello from anthropic/);
    const seen = anthropicProvider.requests.at(-1);
    assert.equal(seen?.headers["x-api-key"], CLIENT_KEY);
    assert.equal(seen?.headers.authorization, undefined);
    // Another client's key is what goes: the provider refuses it, as it would the client directly.
    await assert.rejects(chat("pass", "sk-someone-else"), (e: unknown) => e instanceof OpenAI.AuthenticationError);
  });

  test("failover: each provider's own credential; the first provider's token is not sent to the next", async () => {
    const r = await chat("failover");
    assert.equal(r.choices[0]?.message.content, "minted ok");
    const first = failing.requests.at(-1);
    const jwt = String(first?.headers["x-primary-jwt"] ?? "");
    const v = await jwtVerify(jwt, jwtKeys.publicKey, { issuer: "sluice", audience: "primary" }).catch(() => undefined);
    assert.ok(v !== undefined, "the primary provider got its own JWT");
    const g = sts.grants.at(-1);
    assert.equal(g?.subject, SUBJECT);
    const second = apiProvider.seen.at(-1);
    assert.equal(second?.authorization, `Bearer ${g?.issued}`);
    assert.equal(second?.jwtHeader, undefined, "the primary's JWT went on to the backup provider");
  });

  test("2 s tokens under concurrent traffic for 6 s: refreshed ahead of expiry, no request fails", async () => {
    const issuedBefore = sts.grants.filter((g) => g.issued !== undefined).length;
    const jwtBefore = new Set(jwtSeen).size;
    const entraBefore = entra.calls.length;
    const refusedBefore = jwtProvider.refused() + apiProvider.refused() + azureProvider.refused();
    const outcomes: string[] = [];
    const until = Date.now() + 6000;
    const worker = async (prefix: string, key?: string) => {
      while (Date.now() < until) {
        try {
          const r = await chat(prefix, key);
          outcomes.push(r.choices[0]?.message.content === "minted ok" ? "ok" : "wrong answer");
        } catch (e) {
          outcomes.push(`${prefix}: ${(e as Error).message}`);
        }
        await sleep(20);
      }
    };
    await Promise.all([
      worker("exchange"),
      worker("exchange", "subj-worker-2"),
      worker("jwt"),
      worker("jwt"),
      worker("azure"),
    ]);
    assert.ok(outcomes.length > 60, `only ${outcomes.length} requests`);
    assert.deepEqual(
      outcomes.filter((o) => o !== "ok"),
      [],
    );
    assert.equal(
      jwtProvider.refused() + apiProvider.refused() + azureProvider.refused(),
      refusedBefore,
      "a provider saw an expired or invalid token",
    );
    // Lifetimes of 2 s over 6 s: fresh tokens were minted along the way for each form.
    assert.ok(sts.grants.filter((g) => g.issued !== undefined).length - issuedBefore >= 4);
    assert.ok(new Set(jwtSeen).size - jwtBefore >= 2);
    assert.ok(entra.calls.length - entraBefore >= 2);
  });

  test("a revoked subject: 401 in the client's format naming the field; the provider is not called", async () => {
    sts.subjects.add("subj-revoked");
    sts.revoked.add("subj-revoked");
    const n = apiProvider.seen.length;
    await assert.rejects(chat("exchange", "subj-revoked"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
      assert.equal(e.status, 401);
      assert.match(
        e.message,
        /backend\.auth\.oauthTokenExchange: token endpoint sts\.default\.svc refused the exchange \(invalid_grant\)/,
      );
      return true;
    });
    assert.equal(apiProvider.seen.length, n);
  });

  test("the Anthropic client: its key (Authorization: Bearer) as the subject token; a revoked one refused in Anthropic's error format", async () => {
    const anthropic = (apiKey: string) => new Anthropic({ apiKey, baseURL: `${env.baseUrl}/messages`, maxRetries: 0 });
    const r = await anthropic(SUBJECT).messages.create({
      model: "m",
      max_tokens: 20,
      messages: [{ role: "user", content: "hi" }],
    });
    assert.deepEqual(r.content[0], { type: "text", text: "minted ok" });
    const g = sts.grants.at(-1);
    assert.equal(g?.subject, SUBJECT);
    assert.equal(apiProvider.seen.at(-1)?.authorization, `Bearer ${g?.issued}`);
    const n = apiProvider.seen.length;
    await assert.rejects(
      anthropic("subj-revoked").messages.create({
        model: "m",
        max_tokens: 20,
        messages: [{ role: "user", content: "x" }],
      }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
        assert.equal((e.error as { type?: string } | undefined)?.type, "error");
        assert.match(e.message, /authentication_error/);
        assert.match(
          e.message,
          /backend\.auth\.oauthTokenExchange: token endpoint sts\.default\.svc refused the exchange/,
        );
        return true;
      },
    );
    assert.equal(apiProvider.seen.length, n);
  });

  test("a client secret Entra ID refuses: 503 naming the field and the OAuth error; the provider is not called", async () => {
    const n = azureProvider.seen.length;
    await assert.rejects(chat("azure-wrong"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.equal(e.status, 503);
      assert.match(e.message, /backend\.auth\.cloudC: .*\/oauth2\/v2\.0\/token answered 401 \(invalid_client\)/);
      return true;
    });
    assert.equal(azureProvider.seen.length, n);
  });

  test("a token endpoint that does not answer: 503 naming the field; the provider is not called", async () => {
    const n = apiProvider.seen.length;
    await assert.rejects(chat("down"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError, String(e));
      assert.equal(e.status, 503);
      assert.match(e.message, /backend\.auth\.oauthTokenExchange: token endpoint closed\.default\.svc: unreachable/);
      return true;
    });
    assert.equal(apiProvider.seen.length, n);
  });

  test("configuration that does not resolve: named in the GwBackend's status, and its requests fail closed", async () => {
    const { resources } = (await env.sluice.status()) as {
      resources: {
        kind: string;
        name: string;
        status: { conditions: { type: string; reason: string; message: string }[] };
      }[];
    };
    const conditions = (name: string) =>
      resources.find((x) => x.kind === "GwBackend" && x.name === name)?.status.conditions ?? [];
    const refs = conditions("nokey").find((c) => c.type === "ResolvedRefs");
    assert.equal(refs?.reason, "SecretNotFound");
    assert.match(
      refs?.message ?? "",
      /spec\.policies\.auth\.jwtSign\.signingKeyRef: Secret default\/no-such-secret key signingKey not found/,
    );
    const warning = conditions("noidp").find((c) => c.type === "Warning");
    assert.equal(warning?.reason, "InvalidParameters");
    assert.match(warning?.message ?? "", /spec\.policies\.auth\.oauthTokenExchange\.backendRef: /);
    // Nothing else reports these forms as not applied.
    for (const name of ["jwt", "exchange", "xaa", "azure", "pass"]) {
      assert.deepEqual(
        conditions(name).filter((c) => c.type === "Warning" || c.type === "ResolvedRefs"),
        [],
        name,
      );
    }
    const n = jwtProvider.seen.length;
    await assert.rejects(chat("nokey"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.InternalServerError, String(e));
      assert.match(e.message, /credentials of provider default are not available/);
      return true;
    });
    assert.equal(jwtProvider.seen.length, n);
  });

  test("the token endpoint stopped: once the cached token lapses, 503; the provider is not called", async () => {
    await sts.close();
    await sleep(2100);
    const n = apiProvider.seen.length;
    await assert.rejects(chat("exchange"), (e: unknown) => {
      assert.ok(e instanceof OpenAI.APIError);
      assert.equal(e.status, 503);
      return true;
    });
    assert.equal(apiProvider.seen.length, n);
  });

  test("no token, key or secret in Sluice's or Envoy's output", async () => {
    const secrets = [
      SUBJECT,
      ID_TOKEN,
      CLIENT_KEY,
      IDP_SECRET,
      RAS_SECRET,
      APP.clientSecret,
      ...[sts, idp, ras].flatMap((s) => s.grants.flatMap((g) => g.issued ?? [])),
      ...azureProvider.seen.map((s) => s.authorization.replace(/^Bearer /, "")),
      ...jwtSeen.map((t) => t.split(".")[2] ?? ""),
    ].filter((s) => s !== "");
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    for (const s of secrets) assert.ok(!out.includes(s), "a credential in the logs");
    const dump = JSON.stringify(await env.envoy.configDump());
    for (const s of [IDP_SECRET, RAS_SECRET, APP.clientSecret])
      assert.ok(!dump.includes(s), "a secret in Envoy's config");
  });
});
