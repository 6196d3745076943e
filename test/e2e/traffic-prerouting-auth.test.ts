// phase: PreRouting authentication and authorization through a real Envoy: a Gateway-level PreRouting policy's
// apiKeyAuthentication, basicAuthentication and authorization run (before every PostRouting filter, in filters of
// their own), and a route's PostRouting authorization still runs after them.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { localService, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type EchoBody, request, startEchoUpstream, type Upstream } from "../helpers/net.js";

const GOLD = "key-gold-0123456789";
const SILVER = "key-silver-0123456789";

function routes(): string {
  return `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: guarded
      matches: [{ path: { type: PathPrefix, value: /guarded } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: rest
      matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs: [{ name: app, port: 80 }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: post, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: guarded }]
  traffic:
    authorization: { action: Deny, policy: { matchExpressions: ["request.headers['x-block'] == '1'"] } }
`;
}

describe("PreRouting API key authentication and authorization through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;

  before(async () => {
    up = await startEchoUpstream("app");
    gw = await startTestGateway(
      () => `${localService("app", up.port)}---
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData:
  gold: ${JSON.stringify(JSON.stringify({ key: GOLD, metadata: { group: "gold" } }))}
  silver: ${JSON.stringify(JSON.stringify({ key: SILVER, metadata: { group: "silver" } }))}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: pre, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    phase: PreRouting
    apiKeyAuthentication: { secretRef: { name: keys }, mode: Optional }
    authorization:
      action: Require
      policy: { matchExpressions: ["request.path.startsWith('/public') || (has(apiKey.group) && apiKey.group == 'gold')"] }
${routes()}`,
      "/public",
      (s) => s === 200,
    );
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
  });

  test("the PreRouting key and rule decide before the route's own policy", async () => {
    assert.equal((await request(gw.port, "/public")).status, 200, "no key needed where the rule allows");
    assert.equal((await request(gw.port, "/x")).status, 403, "no key: the Require rule fails");
    const gold = await request(gw.port, "/x", { headers: { authorization: `Bearer ${GOLD}` } });
    assert.equal(gold.status, 200);
    assert.equal((JSON.parse(gold.body) as EchoBody).upstream, "app");
    assert.equal((await request(gw.port, "/x", { headers: { authorization: `Bearer ${SILVER}` } })).status, 403);
    assert.equal((await request(gw.port, "/x", { headers: { authorization: "Bearer wrong-key" } })).status, 401);
  });

  test("the route's PostRouting authorization runs after the PreRouting one", async () => {
    const h = { authorization: `Bearer ${GOLD}` };
    assert.equal((await request(gw.port, "/guarded", { headers: h })).status, 200);
    assert.equal((await request(gw.port, "/guarded", { headers: { ...h, "x-block": "1" } })).status, 403);
    // The PreRouting decision comes first: without a key the PostRouting rule is never reached.
    assert.equal((await request(gw.port, "/guarded", { headers: { "x-block": "0" } })).status, 403);
  });
});

describe("PreRouting basic authentication through Envoy", () => {
  let gw: TestGateway;
  let up: Upstream;
  const sha = (p: string) => `{SHA}${createHash("sha1").update(p).digest("base64")}`;

  before(async () => {
    up = await startEchoUpstream("app");
    gw = await startTestGateway(
      () => `${localService("app", up.port)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: pre, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: Gateway, name: gw }]
  traffic:
    phase: PreRouting
    basicAuthentication: { realm: pre, users: ["ann:${sha("ann-pass")}", "ben:${sha("ben-pass")}"] }
    authorization: { action: Deny, policy: { matchExpressions: ["basicAuth.username == 'ben'"] } }
${routes()}`,
      "/",
      (s) => s === 401,
    );
  });

  after(async () => {
    await gw?.stop();
    await up?.close();
  });

  const basic = (u: string, p: string) => ({ authorization: `Basic ${Buffer.from(`${u}:${p}`).toString("base64")}` });

  test("every route asks for the PreRouting credentials; its Deny rule reads the user", async () => {
    const none = await request(gw.port, "/x");
    assert.equal(none.status, 401);
    assert.match(String(none.headers["www-authenticate"]), /realm="pre"/);
    assert.equal((await request(gw.port, "/x", { headers: basic("ann", "wrong") })).status, 401);
    assert.equal((await request(gw.port, "/x", { headers: basic("ann", "ann-pass") })).status, 200);
    assert.equal((await request(gw.port, "/x", { headers: basic("ben", "ben-pass") })).status, 403);
    const guarded = await request(gw.port, "/guarded", { headers: { ...basic("ann", "ann-pass"), "x-block": "1" } });
    assert.equal(guarded.status, 403, "the route's PostRouting rule still applies");
  });
});
