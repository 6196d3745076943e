// backend.auth on Service backends through a real Envoy (xds/backend-credential.ts): Envoy's credential_injector
// writes the key from an SDS secret into the header the policy names, replacing the client's; a Secret's value works
// the same, under a custom header without prefix; a Secret that is missing makes the route answer 503 instead of
// sending the request without it. The key never appears in Envoy's routes or clusters, only in an SDS secret.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { localService, prefixRoute, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

function resources(a: number, b: number, c: number): string {
  const policy = (name: string, auth: string) => servicePolicy(name, `    auth: ${auth}`);
  return `${localService("keyed", a)}${localService("secreted", b)}${localService("missing", c)}---
apiVersion: v1
kind: Secret
metadata: { name: upstream-key, namespace: default }
stringData: { token: s3cr3t-from-secret }
${prefixRoute(["keyed", "secreted", "missing"])}${policy("keyed", "{ key: k-123 }")}${policy("secreted", "{ secretRef: { name: upstream-key, key: token }, location: { header: { name: X-Api-Key } } }")}${policy("missing", "{ secretRef: { name: nowhere } }")}`;
}

describe("backend.auth injected by Envoy", { timeout: 60_000 }, () => {
  let keyed: Upstream;
  let secreted: Upstream;
  let missing: Upstream;
  let gw: TestGateway;
  const echo = (body: string) => JSON.parse(body) as EchoBody;

  before(async () => {
    keyed = await startEchoUpstream("keyed");
    secreted = await startEchoUpstream("secreted");
    missing = await startEchoUpstream("missing");
    gw = await startTestGateway(
      () => resources(keyed.port, secreted.port, missing.port),
      "/keyed",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    for (const u of [keyed, secreted, missing]) await u?.close();
  });

  test("key: Authorization: Bearer <key>, replacing the client's own", async () => {
    const r = await request(gw.port, "/keyed", { headers: { authorization: "Bearer client-token" } });
    assert.equal(r.status, 200);
    assert.equal(echo(r.body).headers.authorization, "Bearer k-123");
  });

  test("secretRef with a header location: the Secret's value, as written, under that header", async () => {
    const seen = echo((await request(gw.port, "/secreted")).body);
    assert.equal(seen.headers["x-api-key"], "s3cr3t-from-secret");
    assert.equal(seen.headers.authorization, undefined);
  });

  test("a missing Secret: 503, and the backend is never called", async () => {
    const r = await request(gw.port, "/missing");
    assert.equal(r.status, 503);
    assert.equal(missing.requests.length, 0);
  });

  test("the keys are in SDS secrets only: nowhere in Envoy's configuration dump (which redacts secrets)", async () => {
    const dump = JSON.stringify(await gw.envoy.configDump());
    assert.match(dump, /sluice-credential\//, "the credential_injector reads an SDS secret");
    assert.ok(!dump.includes("k-123") && !dump.includes("s3cr3t-from-secret"));
  });
});
