// backend.auth.cloudC on Service backends through a real Envoy and Sluice's credential ext_proc, against a fake
// Microsoft Entra ID token endpoint and instance metadata service speaking their wire formats (AZURE_AUTHORITY_HOST and
// AZURE_POD_IDENTITY_AUTHORITY_HOST point Sluice at them, as they do Azure's own libraries): a client secret from a
// Secret, a user-assigned managed identity, and workload identity with a projected service account token the fake
// verifies (signature, issuer, subject, audience api://AzureADTokenExchange). The backend accepts only unexpired tokens
// the fake issued. A wrong client secret fails the route closed with 503 naming the field; no secret or token is logged.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { SignJWT } from "jose";
import { type FakeEntra, startBearerBackend, startFakeEntra } from "../helpers/fake-token-service.js";
import { localService, prefixRoute, servicePolicy } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";

const TENANT = "7c1e9a2b-tenant";
const APP = { clientId: "app-client-1", clientSecret: "app-s3cret-Q~x" };
const KUBE_ISSUER = "https://oidc.aks.example/issuer";
const KUBE_SUBJECT = "system:serviceaccount:sluice:gateway";
const kube = generateKeyPairSync("rsa", { modulusLength: 2048 });

type Backend = Awaited<ReturnType<typeof startBearerBackend>>;

function resources(port: number): string {
  const names = ["secret", "managed", "workload", "wrong"];
  const policy = (name: string, auth: string) => servicePolicy(name, `    auth:\n      cloudC: ${auth}`);
  return `${names.map((n) => localService(n, port)).join("")}---
apiVersion: v1
kind: Secret
metadata: { name: entra, namespace: default }
stringData: { clientID: ${APP.clientId}, tenantID: ${TENANT}, clientSecret: ${APP.clientSecret} }
---
apiVersion: v1
kind: Secret
metadata: { name: entra-wrong, namespace: default }
stringData: { clientID: ${APP.clientId}, tenantID: ${TENANT}, clientSecret: not-the-secret }
${prefixRoute(names)}${policy("secret", "{ secretRef: { name: entra } }")}${policy(
  "managed",
  '{ managedIdentity: { clientId: mi-client-9, objectId: "00000000-0000-0000-0000-000000000001", resourceId: "/subscriptions/s/resourceGroups/g/providers/Microsoft.ManagedIdentity/userAssignedIdentities/gw" } }',
)}${policy("workload", "{ workloadIdentity: {} }")}${policy("wrong", "{ secretRef: { name: entra-wrong } }")}`;
}

describe("backend.auth.cloudC: Entra ID tokens minted by Sluice through Envoy", { timeout: 90_000 }, () => {
  let entra: FakeEntra;
  let backend: Backend;
  let env: LlmEnv;
  const files = tempConfigDir();
  let projected = "";

  before(async () => {
    entra = await startFakeEntra({
      tenant: TENANT,
      app: APP,
      federated: { clientId: "wi-client-3", publicKey: kube.publicKey, issuer: KUBE_ISSUER, subject: KUBE_SUBJECT },
      managedClientId: "mi-client-9",
    });
    backend = await startBearerBackend((t) => entra.valid(t));
    // What the kubelet projects for a pod with workload identity.
    projected = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256", kid: "kube-1" })
      .setIssuer(KUBE_ISSUER)
      .setSubject(KUBE_SUBJECT)
      .setAudience("api://AzureADTokenExchange")
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(kube.privateKey);
    files.write("azure-identity-token", projected);
    env = await startLlmEnv(resources(backend.port), "/secret", {
      AZURE_AUTHORITY_HOST: entra.url,
      AZURE_POD_IDENTITY_AUTHORITY_HOST: entra.url,
      AZURE_FEDERATED_TOKEN_FILE: join(files.dir, "azure-identity-token"),
      AZURE_CLIENT_ID: "wi-client-3",
      AZURE_TENANT_ID: TENANT,
      AZURE_CLIENT_SECRET: "",
      IDENTITY_ENDPOINT: "",
      IDENTITY_HEADER: "",
    });
  });
  after(async () => {
    await env?.stop();
    await backend?.close();
    await entra?.close();
    files.cleanup();
  });

  test("a client secret from the Secret: the client credentials grant at the tenant's v2.0 token endpoint", async () => {
    const r = await request(env.port, "/secret/x");
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(entra.calls.at(-1), {
      kind: "secret",
      clientId: APP.clientId,
      scope: "https://cognitiveservices.azure.com/.default",
    });
  });

  test("a user-assigned managed identity: the instance metadata service, asked for that client id", async () => {
    const r = await request(env.port, "/managed/x");
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(entra.calls.at(-1), {
      kind: "managed",
      clientId: "mi-client-9",
      resource: "https://cognitiveservices.azure.com",
    });
  });

  test("workload identity: the projected token as a federated client assertion the endpoint verified", async () => {
    const r = await request(env.port, "/workload/x");
    assert.equal(r.status, 200, r.body);
    assert.equal(entra.calls.at(-1)?.kind, "assertion");
    assert.equal(entra.calls.at(-1)?.clientId, "wi-client-3");
  });

  test("tokens are cached: a second request makes no token call", async () => {
    const n = entra.calls.length;
    for (const p of ["/secret/y", "/managed/y", "/workload/y"]) assert.equal((await request(env.port, p)).status, 200);
    assert.equal(entra.calls.length, n);
  });

  test("a wrong client secret: 503 naming the field and the OAuth error, the backend never called", async () => {
    const n = backend.seen.length;
    const r = await request(env.port, "/wrong/x");
    assert.equal(r.status, 503);
    assert.match(r.body, /backend\.auth\.cloudC: .*\/oauth2\/v2\.0\/token answered 401 \(invalid_client\)/);
    assert.equal(backend.seen.length, n);
  });

  test("no client secret, assertion or token in Sluice's or Envoy's output", () => {
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    for (const s of [APP.clientSecret, projected, ...backend.seen])
      assert.ok(!out.includes(s), "a credential in the logs");
  });

  test("Sluice down: Envoy's ext_proc fails the request (500) instead of sending it without a token", async () => {
    await env.sluice.stop();
    const n = backend.seen.length;
    const r = await request(env.port, "/secret/z");
    assert.equal(r.status, 500);
    assert.equal(backend.seen.length, n);
  });
});
