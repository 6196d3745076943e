// Minted credentials on guarded Realtime sessions through a real Envoy: Node's WebSocket client (the key in OpenAI's
// browser subprotocol) → Envoy → Sluice's Realtime relay, which mints the provider's token with src/credentials/ as
// the LLM ext_proc does for HTTP requests, and opens the provider's websocket with it:
// - jwtSign: an ES256 JWT the test verifies with the public key (issuer, audience, kid, exp);
// - oauthTokenExchange: the client's key is the subject token of an RFC 8693 exchange at a token endpoint (client
//   secret, basic), the provider accepting only the tokens that endpoint issued; a revoked subject answers the
//   upgrade 401 naming the field, the provider not called;
// - passthrough: the client's own key reaches the provider as its Bearer token.
// The prompt guard still masks what the client sends; the client's key never reaches the provider otherwise.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { decodeProtectedHeader, jwtVerify } from "jose";
import { type FakeRealtime, startFakeRealtime, waitForEvents } from "../helpers/fake-realtime.js";
import { startTokenService, type TokenService } from "../helpers/fake-token-service.js";
import { localService } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { openRealtime, refusedUpgrade, userTextEvent } from "../helpers/realtime-client.js";

const jwtKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const pem = JSON.stringify(jwtKeys.privateKey.export({ type: "pkcs8", format: "pem" }).toString());
const SUBJECT = "subj-realtime-alice-5c1";
const REVOKED = "subj-realtime-mallory-9e0";
const STS_SECRET = "sts-cl1ent-secret";

function backend(name: string, rt: FakeRealtime, auth: string): string {
  return `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${rt.port} }
  policies:
    auth:${auth}
    ai:
      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
`;
}

function rule(name: string): string {
  return `    - matches: [{ path: { type: PathPrefix, value: /${name}/v1 } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /v1 } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
}

function resources(jwt: FakeRealtime, exchange: FakeRealtime, pass: FakeRealtime, sts: number): string {
  return [
    localService("sts", sts),
    `---
apiVersion: v1
kind: Secret
metadata: { name: signer, namespace: default }
stringData: { signingKey: ${pem} }
---
apiVersion: v1
kind: Secret
metadata: { name: sts-client, namespace: default }
stringData: { secret: ${STS_SECRET} }
`,
    backend(
      "jwt",
      jwt,
      `
      jwtSign:
        signingKeyRef: { name: signer }
        alg: ES256
        kid: rt1
        claims: { iss: sluice, aud: realtime-provider, sub: gateway }
        ttl: 60s`,
    ),
    backend(
      "exchange",
      exchange,
      `
      oauthTokenExchange:
        backendRef: { name: sts, port: 80 }
        path: /token
        audiences: [realtime]
        clientAuth: { clientId: gateway, secretRef: { name: sts-client, key: secret } }`,
    ),
    backend("pass", pass, "\n      passthrough: {}"),
    `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${rule("jwt")}
${rule("exchange")}
${rule("pass")}
`,
  ].join("\n");
}

/** A websocket through Envoy with the client's key in OpenAI's subprotocol; its events queued. */
const open = (env: LlmEnv, path: string, key: string) => openRealtime(env.port, path, key);

describe("minted credentials on guarded Realtime sessions", { timeout: 60_000 }, () => {
  let jwt: FakeRealtime;
  let exchange: FakeRealtime;
  let pass: FakeRealtime;
  let sts: TokenService;
  let env: LlmEnv;

  before(async () => {
    sts = await startTokenService({ clientId: "gateway", clientSecret: STS_SECRET });
    sts.subjects.add(SUBJECT);
    sts.subjects.add(REVOKED);
    jwt = await startFakeRealtime({
      name: "jwt",
      apiKey: "",
      authorize: (a) => /^Bearer ey[\w-]+\.[\w-]+\.[\w-]+$/.test(a),
    });
    exchange = await startFakeRealtime({
      name: "exchange",
      apiKey: "",
      authorize: (a) => sts.valid(/^Bearer (\S+)$/.exec(a)?.[1] ?? ""),
    });
    pass = await startFakeRealtime({ name: "pass", apiKey: "sk-client-own-7f" });
    env = await startLlmEnv(resources(jwt, exchange, pass, sts.port), "/jwt/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    for (const s of [jwt, exchange, pass, sts]) await s?.close();
  });

  test("jwtSign: the provider's websocket opens with a JWT Sluice signed; the guard still masks", async () => {
    const { ws, next } = await open(env, "/jwt/v1/realtime", "client-key-1");
    assert.equal((await next()).type, "session.created");
    ws.send(userTextEvent("my card is 4111 1111 1111 1111"));
    await waitForEvents(jwt, 1);
    ws.close();
    const h = jwt.handshakes.at(-1);
    const token = /^Bearer (\S+)$/.exec(String(h?.headers.authorization))?.[1] ?? "";
    const { payload } = await jwtVerify(token, jwtKeys.publicKey, { issuer: "sluice", audience: "realtime-provider" });
    assert.equal(payload.sub, "gateway");
    assert.ok(typeof payload.exp === "number" && payload.exp > Date.now() / 1000);
    assert.equal(decodeProtectedHeader(token).kid, "rt1");
    // The client's key never goes on (not in a header, not in the subprotocol).
    assert.doesNotMatch(JSON.stringify(h?.headers), /client-key-1/);
    const text = JSON.stringify(jwt.events.at(-1));
    assert.doesNotMatch(text, /4111 1111 1111 1111/);
  });

  test("oauthTokenExchange: the client's key is exchanged; the provider gets the issued token", async () => {
    const grants = sts.grants.length;
    const { ws, next } = await open(env, "/exchange/v1/realtime", SUBJECT);
    assert.equal((await next()).type, "session.created");
    ws.close();
    const grant = sts.grants.at(-1);
    assert.equal(sts.grants.length, grants + 1);
    assert.equal(grant?.subject, SUBJECT);
    assert.equal(grant?.clientAuth, "basic");
    assert.deepEqual(grant?.audiences, ["realtime"]);
    const bearer = /^Bearer (\S+)$/.exec(String(exchange.handshakes.at(-1)?.headers.authorization))?.[1] ?? "";
    assert.equal(bearer, grant?.issued);
    assert.notEqual(bearer, SUBJECT);
  });

  test("oauthTokenExchange refused: the upgrade is answered 401 naming the field, the provider not called", async () => {
    sts.revoked.add(REVOKED);
    const handshakes = exchange.handshakes.length;
    const r = await refusedUpgrade(env.port, "/exchange/v1/realtime?model=gpt-realtime", [
      `Sec-WebSocket-Protocol: realtime, openai-insecure-api-key.${REVOKED}`,
    ]);
    assert.equal(r.status, 401);
    assert.match(r.body, /credentials of provider default are not available: .*oauthTokenExchange/);
    assert.doesNotMatch(r.body, new RegExp(REVOKED));
    assert.equal(exchange.handshakes.length, handshakes);
  });

  test("passthrough: the client's own key opens the provider's websocket", async () => {
    const { ws, next } = await open(env, "/pass/v1/realtime", "sk-client-own-7f");
    assert.equal((await next()).type, "session.created");
    ws.close();
    assert.equal(pass.handshakes.at(-1)?.headers.authorization, "Bearer sk-client-own-7f");
    assert.doesNotMatch(String(pass.handshakes.at(-1)?.headers["sec-websocket-protocol"]), /sk-client/);
  });
});
