// traffic.jwtAuthentication end to end through Envoy's jwt_authn: 401 for missing, malformed, expired or
// unverifiable tokens under Strict (including the usual attacks and a token without `kid`), none under Permissive, remote keys with rotation
// picked up after cacheDuration, and verified claims reaching the upstream.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT, UnsecuredJWT } from "jose";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";

const ISS = "https://issuer.test";
const AUD = "api";
type Key = Awaited<ReturnType<typeof generateKeyPair>>;

async function jwkOf(k: Key, kid: string): Promise<JWK> {
  return { ...(await exportJWK(k.publicKey)), kid, alg: "RS256", use: "sig" };
}

function mint(
  key: Key["privateKey"],
  o: { kid?: string; iss?: string; aud?: string; exp?: number | null; nbf?: number; sub?: string } = {},
) {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ sub: o.sub ?? "alice", group: "eng" })
    .setProtectedHeader({ alg: "RS256", ...(o.kid === undefined ? {} : { kid: o.kid }) })
    .setIssuer(o.iss ?? ISS)
    .setAudience(o.aud ?? AUD)
    .setIssuedAt(now);
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? now + 600);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  return jwt.sign(key);
}

describe("JWT authentication through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;
  let k1: Key;
  let k2: Key;
  let attacker: Key;
  let jwksServer: Server;
  let served: JWK[] = [];

  before(async () => {
    [k1, k2, attacker] = await Promise.all([
      generateKeyPair("RS256", { extractable: true }),
      generateKeyPair("RS256", { extractable: true }),
      generateKeyPair("RS256", { extractable: true }),
    ]);
    served = [await jwkOf(k1, "k1")];
    jwksServer = createServer((req, res) => {
      res.writeHead(req.url === "/keys/jwks.json" ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify({ keys: served }));
    });
    await new Promise<void>((r) => jwksServer.listen(0, "127.0.0.1", r));
    const jwksPort = (jwksServer.address() as AddressInfo).port;
    up = await startEchoUpstream("app");
    const inline = JSON.stringify({ keys: [await jwkOf(k1, "k1")] });
    const provider = `{ issuer: "${ISS}", audiences: [${AUD}], jwks: { inline: '${inline}' } }`;
    gw = await startTestGateway(
      () => `${localService("app", up.port)}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: idp, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${jwksPort} } }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: strict
      matches: [{ path: { type: PathPrefix, value: /strict } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: permissive
      matches: [{ path: { type: PathPrefix, value: /permissive } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: optional
      matches: [{ path: { type: PathPrefix, value: /optional } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: remote
      matches: [{ path: { type: PathPrefix, value: /remote } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: open
      matches: [{ path: { type: PathPrefix, value: /open } }]
      backendRefs: [{ name: app, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: strict, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: strict }]
  traffic:
    jwtAuthentication: { providers: [${provider}] }
    headerModifiers:
      request:
        set: [{ name: x-jwt-sub, value: "%DYNAMIC_METADATA(envoy.filters.http.jwt_authn:jwt_payload:sub)%" }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: permissive, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: permissive }]
  traffic:
    jwtAuthentication: { mode: Permissive, providers: [${provider}] }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: optional, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: optional }]
  traffic:
    jwtAuthentication: { mode: Optional, providers: [${provider}] }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: remote, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: remote }]
  traffic:
    jwtAuthentication:
      location: { header: { name: x-token } }
      providers:
        - issuer: "${ISS}"
          jwks:
            remote:
              jwksPath: /keys/jwks.json
              cacheDuration: 2s
              backendRef: { group: sluice.dev, kind: GwBackend, name: idp }
`,
      "/open",
      (s) => s === 200,
    );
    // The listener is up; wait until the JWT routes are served too.
    await waitFor("jwt routes", async () => ((await request(gw.port, "/strict")).status === 401 ? true : undefined));
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
    await new Promise<void>((r) => (jwksServer ? jwksServer.close(() => r()) : r()));
  });

  const get = (path: string, token?: string, header = "authorization") =>
    request(gw.port, path, {
      headers: token === undefined ? {} : { [header]: header === "authorization" ? `Bearer ${token}` : token },
    });

  test("Strict: a valid token passes and its claims reach the upstream through dynamic metadata", async () => {
    const r = await get("/strict", await mint(k1.privateKey, { kid: "k1" }));
    assert.equal(r.status, 200, r.body);
    const echo = JSON.parse(r.body) as EchoBody;
    assert.equal(echo.headers["x-jwt-sub"], "alice");
    // The token itself is forwarded as received.
    assert.match(String(echo.headers["authorization"]), /^Bearer ey/);
  });

  test("Strict: 401 for missing, malformed, expired, not yet valid, wrong iss/aud, unknown kid and forged tokens", async () => {
    const now = Math.floor(Date.now() / 1000);
    const pem = await exportSPKI(k1.publicKey);
    const cases: Record<string, string | undefined> = {
      missing: undefined,
      malformed: "not.a.jwt",
      garbage: "abc",
      "alg none": new UnsecuredJWT({ sub: "alice" }).setIssuer(ISS).setAudience(AUD).setExpirationTime("10m").encode(),
      "HS256 signed with the RSA public key": await new SignJWT({ sub: "alice" })
        .setProtectedHeader({ alg: "HS256", kid: "k1" })
        .setIssuer(ISS)
        .setAudience(AUD)
        .setExpirationTime("10m")
        .sign(new TextEncoder().encode(pem)),
      expired: await mint(k1.privateKey, { kid: "k1", exp: now - 3600 }),
      "not yet valid": await mint(k1.privateKey, { kid: "k1", nbf: now + 3600 }),
      "no exp": await mint(k1.privateKey, { kid: "k1", exp: null }),
      "wrong iss": await mint(k1.privateKey, { kid: "k1", iss: "https://evil.test" }),
      "unknown kid": await mint(attacker.privateKey, { kid: "k9" }),
      "attacker key claiming kid k1": await mint(attacker.privateKey, { kid: "k1" }),
      "no kid, attacker key": await mint(attacker.privateKey, {}),
      // Signed by the published key k1, but tokens must name their key (spec, JWT rule 1).
      "no kid, published key": await mint(k1.privateKey, {}),
    };
    const before = up.requests.length;
    for (const [name, token] of Object.entries(cases)) {
      const r = await get("/strict", token);
      assert.equal(r.status, 401, `${name}: ${r.status} ${r.body}`);
    }
    // Envoy's jwt_authn answers a verified token for another audience with 403; Sluice maps it to the spec's 401.
    const wrongAud = await get("/strict", await mint(k1.privateKey, { kid: "k1", aud: "other" }));
    assert.equal(wrongAud.status, 401, wrongAud.body);
    assert.equal(up.requests.length, before, "no rejected request reached the upstream");
  });

  test("Optional: a token without kid is rejected with 401 and says why; no token passes", async () => {
    const r = await get("/optional", await mint(k1.privateKey, {}));
    assert.equal(r.status, 401);
    assert.equal(r.body, "Jwt has no key id (kid)");
    assert.equal((await get("/optional", undefined)).status, 200);
    assert.equal((await get("/optional", await mint(k1.privateKey, { kid: "k1" }))).status, 200);
  });

  test("Permissive never answers 401", async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const token of [undefined, "abc", await mint(k1.privateKey, { kid: "k1", exp: now - 3600 })]) {
      assert.equal((await get("/permissive", token)).status, 200);
    }
    assert.equal((await get("/permissive", await mint(k1.privateKey, { kid: "k1" }))).status, 200);
  });

  test("remote JWKS from a key server, from a custom header, with rotation picked up after cacheDuration", async () => {
    const t1 = await mint(k1.privateKey, { kid: "k1" });
    const t2 = await mint(k2.privateKey, { kid: "k2" });
    await waitFor("keys fetched", async () =>
      (await get("/remote", t1, "x-token")).status === 200 ? true : undefined,
    );
    assert.equal((await get("/remote", t2, "x-token")).status, 401, "k2 is not published yet");
    served = [await jwkOf(k2, "k2")];
    const rotated = Date.now();
    await waitFor(
      "rotation picked up",
      async () => ((await get("/remote", t2, "x-token")).status === 200 ? true : undefined),
      10_000,
      100,
    );
    const took = Date.now() - rotated;
    assert.ok(took < 6000, `rotation took ${took} ms with cacheDuration 2s`);
    assert.equal((await get("/remote", t1, "x-token")).status, 401, "k1 was retired");
  });
});
