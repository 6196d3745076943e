// backend.auth → credential plans (src/credentials/resolve.ts) and what the minter writes (mint.ts), without Envoy:
// every bad input is named by its field path and makes the backend's route fail closed; what Envoy injects natively
// stays native; the plan id never depends on an inline key; a jwtSign token is re-signed ahead of its expiry and a
// location writes where it says.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import { decodeJwt } from "jose";
import { Minter } from "../../src/credentials/mint.js";
import type { CredentialPlan } from "../../src/credentials/plan.js";
import { type ResolveContext, resolveBackendAuth } from "../../src/credentials/resolve.js";
import { AwsCredentialSource } from "../../src/extproc/llm/aws-credentials.js";
import type { TranslationInput } from "../../src/translate/input.js";

const ec = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
const pem = (k: typeof ec.privateKey) => k.export({ type: "pkcs8", format: "pem" }).toString();

const secret = (name: string, data: Record<string, string>) => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name, namespace: "default" },
  stringData: data,
});

const input = {
  secrets: [
    secret("ec", { signingKey: pem(ec.privateKey) }),
    secret("rsa", { signingKey: pem(rsa.privateKey) }),
    secret("aws", { accessKey: "AKID", secretKey: "SECRET" }),
    secret("garbage", { signingKey: "not a key" }),
  ],
  services: [],
  endpointSlices: [],
  backends: [],
} as unknown as TranslationInput;

const ctx: ResolveContext = { input, ns: "default", backend: "default/api", source: "GwPolicy/default/p" };

function problems(auth: Record<string, unknown>, minter: ResolveContext["minter"] = "envoy"): string[] {
  return resolveBackendAuth(auth, { ...ctx, minter }).problems.map(
    (p) => `${p.field}: ${p.message}${p.fatal ? " [fatal]" : ""}`,
  );
}

describe("credential plans from backend.auth", () => {
  test("key or secretRef into a header alone stays with Envoy's credential injector", () => {
    assert.equal(resolveBackendAuth({ key: "k" }, ctx).native, true);
    assert.equal(resolveBackendAuth({ key: "k", location: { header: { name: "X-Key" } } }, ctx).native, true);
    assert.equal(resolveBackendAuth({ key: "k", location: { queryParameter: { name: "k" } } }, ctx).native, false);
  });

  test("jwtSign: reserved claims, a short ttl, no claims and a key that cannot sign the alg are each named", () => {
    assert.deepEqual(
      problems({
        jwtSign: { signingKeyRef: { name: "ec" }, alg: "ES256", claims: { sub: "x", iat: 1, nbf: 2 }, ttl: "999ms" },
      }),
      [
        "backend.auth.jwtSign.claims.iat: is reserved: Sluice sets iat, exp and nbf from ttl [fatal]",
        "backend.auth.jwtSign.claims.nbf: is reserved: Sluice sets iat, exp and nbf from ttl [fatal]",
        "backend.auth.jwtSign.ttl: must be a duration of at least 1s [fatal]",
      ],
    );
    assert.deepEqual(problems({ jwtSign: { signingKeyRef: { name: "ec" }, alg: "ES256", claims: {} } }), [
      "backend.auth.jwtSign.claims: is required: a map of at least one static claim [fatal]",
    ]);
    assert.match(
      problems({ jwtSign: { signingKeyRef: { name: "rsa" }, alg: "ES256", claims: { a: 1 } } })[0] ?? "",
      /^backend\.auth\.jwtSign\.signingKeyRef: a rsa key cannot sign ES256/,
    );
    assert.match(
      problems({ jwtSign: { signingKeyRef: { name: "garbage" }, claims: { a: 1 } } })[0] ?? "",
      /^backend\.auth\.jwtSign\.signingKeyRef: is not a PEM private key/,
    );
    assert.match(
      problems({ jwtSign: { signingKeyRef: { name: "nowhere" }, claims: { a: 1 } } })[0] ?? "",
      /^backend\.auth\.jwtSign\.signingKeyRef: Secret default\/nowhere key signingKey not found/,
    );
  });

  test("cloudA: a role ARN, session name, tags and expressions STS or the signer cannot take are named", () => {
    const got = problems({
      cloudA: {
        secretRef: { name: "aws" },
        assumeRole: {
          roleArn: "role/x",
          sessionName: "a b",
          tags: [
            { key: "k" },
            { key: "t", value: "v", expression: "'x'" },
            { key: "j", expression: "jwt.sub" },
            { key: "m", expression: "llm.requestModel" },
          ],
        },
      },
    });
    assert.deepEqual(got, [
      "backend.auth.cloudA.assumeRole.roleArn: must be an IAM role ARN (arn:aws:iam::<account>:role/<name>) [fatal]",
      "backend.auth.cloudA.assumeRole.sessionName: must be 2 to 64 letters, digits or _+=,.@- [fatal]",
      "backend.auth.cloudA.assumeRole.tags[0]: exactly one of value and expression [fatal]",
      "backend.auth.cloudA.assumeRole.tags[1]: exactly one of value and expression [fatal]",
      "backend.auth.cloudA.assumeRole.tags[3].expression: reads llm; this credential is minted by the credential ext_proc of a Service or static backend, which has request, source, jwt, apiKey, basicAuth, extauthz [fatal]",
    ]);
  });

  test("token sources and expressions: what each minter reads of the client's request", () => {
    const exchange = (subjectToken: unknown, more: Record<string, unknown> = {}) => ({
      oauthTokenExchange: {
        backendRef: { name: "idp", port: 80 },
        clientAuth: { clientId: "c", secretRef: { name: "aws" } },
        subjectToken,
        ...more,
      },
    });
    const sources = (p: string[]) => p.filter((x) => /subjectToken|additionalParams|actorToken/.test(x));
    // Envoy's credential ext_proc: a header, a query parameter, a cookie, an expression over the identities.
    for (const source of [
      { header: { name: "X-Token" } },
      { queryParameter: { name: "t" } },
      { cookie: { name: "sid" } },
      { expression: "jwt.sub + string(source.address)" },
    ]) {
      assert.deepEqual(sources(problems(exchange({ source }))), [], JSON.stringify(source));
    }
    assert.deepEqual(sources(problems(exchange({ source: { cookie: {} } }))), [
      "backend.auth.oauthTokenExchange.subjectToken.source.cookie.name: is required [fatal]",
    ]);
    assert.deepEqual(sources(problems(exchange({ source: { header: { name: "a" }, cookie: { name: "b" } } }))), [
      "backend.auth.oauthTokenExchange.subjectToken.source: exactly one of header, queryParameter, cookie, expression is required (found header, cookie) [fatal]",
    ]);
    // The LLM ext_proc: the identities, not the client's address; not the client's query (the path is the provider's).
    assert.deepEqual(sources(problems(exchange({ source: { expression: "apiKey.name" } }), "llm")), []);
    assert.deepEqual(
      sources(problems(exchange(undefined, { additionalParams: { ip: "string(source.address)" } }), "llm")),
      [
        "backend.auth.oauthTokenExchange.additionalParams.ip: reads source; this credential is minted by the LLM ext_proc, for an AI provider, which has request, jwt, apiKey, basicAuth, extauthz [fatal]",
      ],
    );
    assert.match(
      sources(problems(exchange({ source: { queryParameter: { name: "t" } } }), "llm"))[0] ?? "",
      /subjectToken\.source\.queryParameter: not read: an AI provider's credential is minted on the provider's request/,
    );
    // The MCP service: the client's Authorization header alone.
    assert.deepEqual(
      sources(problems(exchange({ source: { header: { name: "Authorization", prefix: "Bearer" } } }), "mcp")),
      [],
    );
    assert.match(
      sources(problems(exchange({ source: { cookie: { name: "sid" } } }), "mcp"))[0] ?? "",
      /subjectToken\.source\.cookie: not read: an MCP target's credential is minted by the MCP service/,
    );
    assert.match(
      sources(problems(exchange(undefined, { additionalParams: { u: "jwt.sub" } }), "mcp"))[0] ?? "",
      /additionalParams\.u: reads jwt; this credential is minted by the MCP service per request to an MCP target, which has request/,
    );
  });

  test("oauthTokenExchange: the token endpoint, client authentication and token types are checked", () => {
    assert.deepEqual(
      problems({
        oauthTokenExchange: {
          backendRef: { name: "idp", port: 80 },
          path: "token",
          requestedTokenType: "urn:x:custom",
          clientAuth: { clientId: "c", method: "PrivateKeyJwt" },
        },
      }),
      [
        "backend.auth.oauthTokenExchange.path: must start with / [fatal]",
        "backend.auth.oauthTokenExchange.requestedTokenType: must be AccessToken, Jwt, IdToken or IdJag [fatal]",
        "backend.auth.oauthTokenExchange.clientAuth.privateKeyJwt: is required for PrivateKeyJwt [fatal]",
      ],
    );
    assert.match(
      problems({ oauthTokenExchange: { backendRef: { name: "idp", port: 80 } } })[0] ?? "",
      /^backend\.auth\.oauthTokenExchange\.backendRef: Service default\/idp not found; requests to default\/api are answered 503/,
    );
    assert.match(
      problems({
        oauthTokenExchange: { backendRef: { name: "idp", port: 80 }, clientAuth: { clientId: "c" } },
      }).join("\n"),
      /clientAuth\.secretRef: is required for ClientSecretBasic/,
    );
  });

  test("cloudB, cloudC and crossAppAccess inputs are checked; two forms at once are refused", () => {
    assert.deepEqual(problems({ cloudC: { secretRef: { name: "aws" }, workloadIdentity: {} } }), [
      "backend.auth.cloudC: at most one of secretRef, managedIdentity, workloadIdentity (found secretRef, workloadIdentity) [fatal]",
    ]);
    assert.deepEqual(problems({ cloudC: { secretRef: { name: "aws" } } }), [
      "backend.auth.cloudC.secretRef: Secret default/aws key clientID not found; requests to default/api are answered 503 until it is [fatal]",
      "backend.auth.cloudC.secretRef: Secret default/aws key tenantID not found; requests to default/api are answered 503 until it is [fatal]",
      "backend.auth.cloudC.secretRef: Secret default/aws key clientSecret not found; requests to default/api are answered 503 until it is [fatal]",
    ]);
    assert.deepEqual(problems({ cloudB: { type: "AccessToken", audience: "x" } }), [
      "backend.auth.cloudB.audience: is only valid with type IdToken [fatal]",
    ]);
    assert.deepEqual(problems({ cloudB: { secretRef: { name: "aws", key: "accessKey" } } }), [
      "backend.auth.cloudB.secretRef: is not a service account key or authorized user credentials JSON [fatal]",
    ]);
    assert.deepEqual(problems({ crossAppAccess: { audience: "a" } }), [
      "backend.auth.crossAppAccess.identityProvider: is required ({backendRef, path, clientAuth}) [fatal]",
      "backend.auth.crossAppAccess.resourceAuthorizationServer: is required ({backendRef, path, clientAuth}) [fatal]",
    ]);
    assert.match(
      problems({ key: "a", jwtSign: {} })[0] ?? "",
      /^backend\.auth: at most one of .* \(found key, jwtSign\) \[fatal\]$/,
    );
    assert.deepEqual(problems({ credentials: [{ secretRef: { name: "aws", key: "accessKey" } }] }), [
      "backend.auth.credentials[0].location: is required [fatal]",
    ]);
  });

  test("the plan id does not depend on an inline key", () => {
    const a = resolveBackendAuth({ key: "one", location: { cookie: { name: "c" } } }, ctx);
    const b = resolveBackendAuth({ key: "two", location: { cookie: { name: "c" } } }, ctx);
    assert.ok(!a.native && !b.native && a.plan !== undefined && b.plan !== undefined);
    assert.equal(a.plan.id, b.plan.id);
    assert.ok(!a.plan.id.includes("one"));
  });
});

describe("the minter", () => {
  test("jwtSign: the same token until the last quarter of its life, then a fresh one; never past expiry", async () => {
    let now = 1_700_000_000_000;
    const minter = new Minter({ aws: new AwsCredentialSource(), now: () => now });
    const r = resolveBackendAuth(
      { jwtSign: { signingKeyRef: { name: "ec" }, alg: "ES256", claims: { sub: "s" }, ttl: "8s" } },
      ctx,
    );
    assert.ok(!r.native && r.plan !== undefined);
    const plan = r.plan as CredentialPlan;
    const token = async () => {
      const m = await minter.mint(plan, { headers: { ":path": "/" } });
      assert.ok("ok" in m);
      return (m.ok.set.authorization ?? "").replace("Bearer ", "");
    };
    const first = await token();
    now += 5000;
    assert.equal(await token(), first, "still in the first three quarters");
    now += 1500; // 6.5 s of 8: refresh starts in the background; the current one is still served
    assert.equal(await token(), first);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 20));
    const second = await token();
    assert.notEqual(second, first);
    assert.equal(decodeJwt(second).iat, Math.floor(now / 1000));
  });

  test("query and cookie locations replace the client's value and keep the rest", async () => {
    const minter = new Minter({ aws: new AwsCredentialSource() });
    const r = resolveBackendAuth(
      {
        key: "K",
        location: { queryParameter: { name: "key" } },
        credentials: [{ location: { cookie: { name: "s" } }, secretRef: { name: "aws", key: "accessKey" } }],
      },
      ctx,
    );
    assert.ok(!r.native && r.plan !== undefined);
    const m = await minter.mint(r.plan as CredentialPlan, {
      headers: { ":path": "/a?key=mine&b=1", cookie: "s=mine; t=2" },
    });
    assert.ok("ok" in m);
    assert.equal(m.ok.set[":path"], "/a?key=K&b=1");
    assert.equal(m.ok.set.cookie, "t=2; s=AKID");
  });
});
