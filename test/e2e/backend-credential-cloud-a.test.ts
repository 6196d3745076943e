// backend.auth.cloudA (SigV4) on Service backends through a real Envoy: Envoy's upstream ext_proc hands each request
// (headers and the buffered body) to Sluice's credential service, which signs it as it leaves Envoy. The backend is an
// AWS-style service that verifies every signature (key, scope, signed headers, the body's hash) and refuses the rest;
// a fake STS verifies the SigV4 of AssumeRole with the base credentials; the default chain is the container
// credentials endpoint (what ECS and EKS Pod Identity give a pod). A role STS refuses fails the route closed with a
// status that names the field; nothing secret appears in Sluice's or Envoy's output. A session name and tag may read
// the route's identities and the client's address, which Envoy forwards to the signer.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type FakeAws, fakeAwsEnv, startFakeAws } from "../helpers/fake-aws.js";
import { type SignedService, startSignedService } from "../helpers/fake-token-service.js";
import { localService, prefixRoute, servicePolicy } from "../helpers/gateway.js";
import { testIssuer } from "../helpers/jwt.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";

const REGION = "eu-west-1";
const SERVICE = "execute-api";
const BASE = { accessKeyId: "AKIDSERVICEBASE", secretAccessKey: "c2VjcmV0LWtleS1mb3ItdGhlLXNlcnZpY2UtdGVzdA" };
const ROLE = "arn:aws:iam::123456789012:role/invoke-api";
const DENIED = "arn:aws:iam::123456789012:role/denied";
const ISSUER = "https://issuer.test";

function resources(port: number, jwks: string): string {
  const names = ["keys", "chain", "role", "percaller", "denied", "badexpr", "identity"];
  const policy = (name: string, cloudA: string) =>
    servicePolicy(
      name,
      `    auth:\n      cloudA:\n        region: ${REGION}\n        serviceName: ${SERVICE}${cloudA}`,
    );
  return `${names.map((n) => localService(n, port)).join("")}---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${BASE.accessKeyId}, secretKey: ${BASE.secretAccessKey} }
${prefixRoute(names)}${policy("keys", "\n        secretRef: { name: aws }")}${policy("chain", "")}${policy(
  "role",
  `
        secretRef: { name: aws }
        assumeRole:
          roleArn: ${ROLE}
          sessionName: static-session
          tags: [{ key: team, value: payments }]`,
)}${policy(
  "percaller",
  `
        assumeRole:
          roleArn: ${ROLE}
          sessionNameExpression: "'user-' + request.headers['x-user']"
          tags:
            - { key: team, value: payments }
            - { key: caller, expression: "request.headers['x-user']" }`,
)}${policy("denied", `\n        secretRef: { name: aws }\n        assumeRole: { roleArn: "${DENIED}" }`)}${policy(
  "badexpr",
  `\n        assumeRole: { roleArn: "${ROLE}", sessionNameExpression: "llm.requestModel" }`,
)}${policy(
  "identity",
  `
        assumeRole:
          roleArn: ${ROLE}
          sessionNameExpression: "'jwt-' + jwt.sub"
          tags: [{ key: from, expression: "string(source.address)" }]`,
)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: callers, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r }]
  traffic:
    jwtAuthentication:
      mode: Permissive
      location: { header: { name: x-user-jwt } }
      providers: [{ issuer: "${ISSUER}", jwks: { inline: ${JSON.stringify(jwks)} } }]
`;
}

describe("backend.auth.cloudA: SigV4 on Service backends through Envoy", { timeout: 90_000 }, () => {
  let aws: FakeAws;
  let api: SignedService;
  let env: LlmEnv;
  let token: string;
  const files = tempConfigDir();

  before(async () => {
    aws = await startFakeAws(REGION);
    aws.trust(BASE);
    // The service knows the base keys and whatever the fake issued (roles, container credentials).
    api = await startSignedService(REGION, SERVICE, (id) => aws.lookup(id) ?? aws.issued(id));
    aws.denied.add(DENIED);
    const issuer = await testIssuer(ISSUER);
    token = await issuer.sign({ sub: "ada" });
    env = await startLlmEnv(resources(api.port, issuer.jwks), "/keys", fakeAwsEnv(aws, join(files.dir, "absent")));
  });
  after(async () => {
    await env?.stop();
    await api?.close();
    await aws?.close();
    files.cleanup();
  });

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    request(env.port, path, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", authorization: "Bearer client-token", ...headers },
    });

  test("static keys: a POST with a body is signed over that body, the client's Authorization replaced", async () => {
    const body = JSON.stringify({ amount: 42, note: "x".repeat(3000) });
    const r = await post("/keys/v1/charge?b=2&a=1", body);
    assert.equal(r.status, 200, r.body);
    const seen = api.requests.at(-1);
    assert.equal(seen?.signer, BASE.accessKeyId);
    assert.equal(seen?.body, body);
    assert.match(String(seen?.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDSERVICEBASE\//);
    assert.equal(seen?.headers["x-amz-security-token"], undefined);
  });

  test("a client-sent x-amz-security-token does not survive long-term keys", async () => {
    const r = await post("/keys/x", "{}", { "x-amz-security-token": "forged" });
    assert.equal(r.status, 200, r.body);
    assert.equal(api.requests.at(-1)?.headers["x-amz-security-token"], undefined);
  });

  test("default chain: the container credentials sign (with their session token)", async () => {
    const r = await request(env.port, "/chain/items");
    assert.equal(r.status, 200, r.body);
    const signer = api.requests.at(-1)?.signer ?? "";
    assert.equal(aws.issued(signer)?.origin, "container");
    assert.ok(aws.containerRequests >= 1);
  });

  test("assumeRole with a static session name and tags: STS called once (signed with the base keys), then cached", async () => {
    const before = aws.calls.length;
    for (let i = 0; i < 3; i++) assert.equal((await post("/role/x", `{"i":${i}}`)).status, 200);
    assert.equal(aws.calls.length, before + 1);
    assert.deepEqual(aws.calls.at(-1), {
      action: "AssumeRole",
      signedWith: BASE.accessKeyId,
      roleArn: ROLE,
      sessionName: "static-session",
      tags: [{ key: "team", value: "payments" }],
    });
    assert.equal(aws.issued(api.requests.at(-1)?.signer ?? "")?.origin, `role:${ROLE}:static-session`);
  });

  test("assumeRole with CEL session name and tag over the ambient chain: one session per caller", async () => {
    for (const user of ["alice", "bob"]) {
      const r = await post("/percaller/x", "{}", { "x-user": user });
      assert.equal(r.status, 200, r.body);
      assert.equal(aws.issued(api.requests.at(-1)?.signer ?? "")?.origin, `role:${ROLE}:user-${user}`);
      const call = aws.calls.at(-1);
      assert.equal(call?.sessionName, `user-${user}`);
      assert.deepEqual(call?.tags, [
        { key: "team", value: "payments" },
        { key: "caller", value: user },
      ]);
      // Ambient credentials (the container's) signed the AssumeRole.
      assert.equal(aws.issued(call?.signedWith ?? "")?.origin, "container");
    }
  });

  test("a session name STS would refuse rejects the request with 400 naming the field; the backend is not called", async () => {
    const n = api.requests.length;
    const r = await post("/percaller/x", "{}", { "x-user": "a b" });
    assert.equal(r.status, 400);
    assert.match(
      r.body,
      /backend\.auth\.cloudA: cloudA\.assumeRole\.sessionNameExpression gave an invalid role session name/,
    );
    assert.equal(api.requests.length, n);
  });

  test("STS refusing the role fails the route closed: 503 naming the field, the backend never called", async () => {
    const n = api.requests.length;
    const r = await post("/denied/x", "{}");
    assert.equal(r.status, 503);
    assert.match(r.body, /backend\.auth\.cloudA: STS AssumeRole arn:aws:iam::123456789012:role\/denied/);
    assert.equal(api.requests.length, n);
  });

  test("session name and tags from the route's identity and the client's address (forwarded to the signer by Envoy)", async () => {
    const r = await post("/identity/x", "{}", { "x-user-jwt": token });
    assert.equal(r.status, 200, r.body);
    assert.equal(aws.issued(api.requests.at(-1)?.signer ?? "")?.origin, `role:${ROLE}:jwt-ada`);
    assert.deepEqual(aws.calls.at(-1)?.tags, [{ key: "from", value: "127.0.0.1" }]);
    // No JWT: jwt is absent, so the expression fails and the request is rejected naming the field.
    const n = api.requests.length;
    const without = await post("/identity/x", "{}");
    assert.equal(without.status, 400);
    assert.match(without.body, /sessionNameExpression/);
    assert.equal(api.requests.length, n);
  });

  test("an expression reading what the upstream signer does not have: 503 and the policy status names the field", async () => {
    const r = await request(env.port, "/badexpr/x");
    assert.equal(r.status, 503);
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "badexpr")?.status);
    assert.match(
      status,
      /backend\.auth\.cloudA\.assumeRole\.sessionNameExpression: reads llm; this credential is minted by the credential ext_proc of a Service or static backend, which has request, source, jwt, apiKey, basicAuth, extauthz/,
    );
  });

  test("no key, secret or session token in Sluice's or Envoy's output, nor in Envoy's configuration", async () => {
    const secrets = [BASE.secretAccessKey];
    for (const id of api.requests.map((r) => r.signer ?? "")) {
      const c = aws.issued(id);
      if (c !== undefined) secrets.push(c.secretAccessKey, c.sessionToken);
    }
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    const dump = JSON.stringify(await env.envoy.configDump());
    for (const s of secrets) {
      assert.ok(!out.includes(s), "a secret in the logs");
      assert.ok(!dump.includes(s), "a secret in Envoy's configuration");
    }
    assert.match(dump, /sluice\.credential_ext_proc/);
  });
});
