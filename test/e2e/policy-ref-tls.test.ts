// A backend policy on a Service that a traffic field names (here a remote JWKS server) applies to Envoy's calls to it:
// the spec's "TLS to a remote key source is set by a backend policy on that Service". A real Envoy fetches the keys
// from an HTTPS server (the example.com fixture certificate, checked against the CA of a ConfigMap, SNI example.com)
// through a variant of the Service's cluster; a token signed with those keys is accepted. The same JWKS server named
// through a Service without that policy is fetched in plain HTTP, which the HTTPS server refuses: no keys, so the token
// is not accepted (401). The GwPolicy's status says backend.tls applies. A gRPC ext_authz service that speaks TLS only
// is called over TLS by Envoy, and by Sluice when it fronts the service (a cache).

import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { TLSSocket } from "node:tls";
import { localService, rulePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { startGrpcExtAuthz } from "../helpers/grpc-services.js";
import { testIssuer } from "../helpers/jwt.js";
import { request, startEchoUpstream, type Upstream } from "../helpers/net.js";
import { caConfigMapYaml, tlsFixture } from "../helpers/tls.js";

const ISSUER = "https://idp.example.com";

function resources(echo: number, jwksPort: number, authzPort: number): string {
  const jwt = (name: string, service: string) =>
    rulePolicy(
      name,
      `jwtAuthentication:
  providers: [{ issuer: "${ISSUER}", jwks: { remote: { jwksPath: /keys, backendRef: { name: ${service}, port: 80 } } } }]`,
    );
  const check = (name: string, cache: boolean) =>
    rulePolicy(
      name,
      `extAuth:
  backendRef: { name: authz, port: 80 }
  grpc: {}${cache ? `\n  cache: { key: ["request.headers['x-user']"], ttl: 30s }` : ""}`,
    );
  return `${localService("app", echo)}${localService("idp", jwksPort)}${localService("idp-plain", jwksPort)}${localService("authz", authzPort, "kubernetes.io/h2c")}${caConfigMapYaml()}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - name: secure
      matches: [{ path: { type: PathPrefix, value: /secure } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: plain
      matches: [{ path: { type: PathPrefix, value: /plain } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: direct
      matches: [{ path: { type: PathPrefix, value: /direct } }]
      backendRefs: [{ name: app, port: 80 }]
    - name: fronted
      matches: [{ path: { type: PathPrefix, value: /fronted } }]
      backendRefs: [{ name: app, port: 80 }]
${jwt("secure", "idp")}${jwt("plain", "idp-plain")}${check("direct", false)}${check("fronted", true)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: idp-tls, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: idp }]
  backend:
    tls: { sni: example.com, caCertificateRefs: [{ group: "", kind: ConfigMap, name: example-ca }] }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: authz-tls, namespace: default }
spec:
  targetRefs: [{ group: "", kind: Service, name: authz }]
  backend:
    tls: { sni: example.com, caCertificateRefs: [{ group: "", kind: ConfigMap, name: example-ca }] }
`;
}

describe("a Service's backend policy on Envoy's calls to it from a traffic field (remote JWKS over TLS)", {
  timeout: 90_000,
}, () => {
  let echo: Upstream;
  let jwks: Server;
  let authz: Awaited<ReturnType<typeof startGrpcExtAuthz>>;
  let gw: TestGateway;
  let token: string;
  const fetches: string[] = [];

  before(async () => {
    echo = await startEchoUpstream("app");
    const issuer = await testIssuer(ISSUER);
    token = await issuer.sign({ sub: "ada" });
    const { keys } = JSON.parse(issuer.jwks) as { keys: unknown[] };
    jwks = createServer({ cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") }, (req, res) => {
      fetches.push(`${(req.socket as TLSSocket).servername || ""} ${req.url ?? ""}`);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ keys }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve));
    const jwksPort = (jwks.address() as AddressInfo).port;
    authz = await startGrpcExtAuthz({ cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") });
    gw = await startTestGateway(
      () => resources(echo.port, jwksPort, authz.port),
      "/secure",
      (s) => s === 401,
    );
  });
  after(async () => {
    await gw?.stop();
    jwks?.close();
    await authz?.close();
    await echo?.close();
  });

  const get = (path: string) => request(gw.port, path, { headers: { authorization: `Bearer ${token}` } });

  test("keys fetched over TLS (the Service's CA and SNI): the token is accepted", async () => {
    let status = 0;
    // Envoy fetches the keys when it loads the listener; the first requests may come before they arrive.
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await get("/secure/x")).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(status, 200);
    assert.ok(
      fetches.some((f) => f === "example.com /keys"),
      JSON.stringify(fetches),
    );
    // Without a token: refused as before.
    assert.equal((await request(gw.port, "/secure/x")).status, 401);
  });

  test("the same server through a Service without the policy: plain HTTP, no keys, the token is refused", async () => {
    assert.equal((await get("/plain/x")).status, 401);
  });

  test("an ext_authz service over TLS: Envoy's own call, and Sluice's when it fronts the service (a cache)", async () => {
    for (const path of ["/direct/x", "/fronted/x"]) {
      const checked = authz.checks.length;
      const allowed = await request(gw.port, path, { headers: { "x-allow": "yes", "x-user": "ada" } });
      assert.equal(allowed.status, 200, `${path}: ${allowed.body}`);
      assert.equal(authz.checks.length, checked + 1, path);
      const denied = await request(gw.port, path, { headers: { "x-allow": "no", "x-user": "bob" } });
      assert.equal(denied.status, 403, path);
    }
  });

  test("the Service's GwPolicy says backend.tls applies", async () => {
    const { resources: all } = (await gw.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(all.find((x) => x.kind === "GwPolicy" && x.name === "idp-tls")?.status);
    assert.match(status, /"reason":"Attached","message":"applies backend\.tls"/);
  });
});
