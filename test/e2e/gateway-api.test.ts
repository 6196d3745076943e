// Gateway API features end to end through Envoy: HTTPS with SNI and several certificates, host names, redirects,
// rewrites, mirroring, and cross-namespace references with and without a ReferenceGrant.

import assert from "node:assert/strict";
import { request as httpsRequest } from "node:https";
import { after, before, describe, test } from "node:test";
import { type EchoBody, freePort, request, startEchoUpstream, type Upstream, waitFor } from "../helpers/net.js";
import {
  type SluiceProcess,
  startSluice,
  startTestEnvoy,
  type TestEnvoy,
  tempConfigDir,
} from "../helpers/processes.js";
import { indentLines, tlsFixture } from "../helpers/tls.js";

const fixture = tlsFixture;
const indent = (t: string) => indentLines(t);

function tlsSecret(name: string, ns: string, host: string): string {
  return `---
apiVersion: v1
kind: Secret
metadata: { name: ${name}, namespace: ${ns} }
type: kubernetes.io/tls
stringData:
  tls.crt: |
${indent(fixture(`${host}.crt`))}
  tls.key: |
${indent(fixture(`${host}.key`))}
`;
}

function httpsGet(port: number, servername: string, host: string, path: string) {
  return new Promise<{ status: number; body: string; certCN: string }>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port,
        path,
        servername,
        headers: { host },
        ca: [fixture("example.com.crt"), fixture("foo.example.com.crt"), fixture("wildcard.example.org.crt")],
        agent: false,
        timeout: 5000,
      },
      (res) => {
        const cert = (res.socket as import("node:tls").TLSSocket).getPeerCertificate();
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            certCN: String(cert.subject?.CN),
          }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("Gateway API through Envoy", () => {
  const cfg = tempConfigDir();
  const ups: Record<string, Upstream> = {};
  let http = 0;
  let https = 0;
  let sluice: SluiceProcess;
  let envoy: TestEnvoy;

  before(async () => {
    for (const n of ["web", "api", "shadow", "other"]) ups[n] = await startEchoUpstream(n);
    http = await freePort();
    https = await freePort();
    const svc = (name: string, ns: string, port: number) => `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: ${ns} }
spec: { ports: [{ name: http, port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: ${ns}, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: http, port: ${port} }]
endpoints: [{ addresses: [127.0.0.1] }]
`;
    cfg.write(
      "all.yaml",
      `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gw, namespace: default }
spec:
  gatewayClassName: sluice
  addresses: [{ type: IPAddress, value: 127.0.0.1 }]
  listeners:
    - { name: http, protocol: HTTP, port: ${http}, allowedRoutes: { namespaces: { from: All } } }
    - name: example
      protocol: HTTPS
      port: ${https}
      hostname: example.com
      tls: { certificateRefs: [{ name: example-com }] }
    - name: foo
      protocol: HTTPS
      port: ${https}
      hostname: foo.example.com
      tls: { certificateRefs: [{ name: foo }] }
    - name: wildcard
      protocol: HTTPS
      port: ${https}
      hostname: "*.example.org"
      tls: { certificateRefs: [{ name: wildcard, namespace: certs }] }
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: { name: certs-for-gateways, namespace: certs }
spec:
  from: [{ group: gateway.networking.k8s.io, kind: Gateway, namespace: default }]
  to: [{ group: "", kind: Secret }]
${tlsSecret("example-com", "default", "example.com")}${tlsSecret("foo", "default", "foo.example.com")}${tlsSecret("wildcard", "certs", "wildcard.example.org")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: tls-routes, namespace: default }
spec:
  parentRefs: [{ name: gw, sectionName: example }, { name: gw, sectionName: foo }, { name: gw, sectionName: wildcard }]
  rules:
    - backendRefs: [{ name: web, port: 80 }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: hosts, namespace: default }
spec:
  parentRefs: [{ name: gw, sectionName: http }]
  hostnames: [api.example.com]
  rules:
    - backendRefs: [{ name: api, port: 80 }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: main, namespace: default }
spec:
  parentRefs: [{ name: gw, sectionName: http }]
  hostnames: [www.example.com]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /old } }]
      filters:
        - type: RequestRedirect
          requestRedirect: { scheme: https, hostname: example.com, statusCode: 301, path: { type: ReplacePrefixMatch, replacePrefixMatch: /new } }
    - matches: [{ path: { type: PathPrefix, value: /v1 } }]
      filters:
        - type: URLRewrite
          urlRewrite: { hostname: rewritten.internal, path: { type: ReplacePrefixMatch, replacePrefixMatch: /v2 } }
      backendRefs: [{ name: web, port: 80 }]
    - matches: [{ path: { type: Exact, value: /login } }]
      filters:
        - type: URLRewrite
          urlRewrite: { path: { type: ReplaceFullPath, replaceFullPath: /auth/login } }
      backendRefs: [{ name: web, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /mirrored } }]
      filters:
        - type: RequestMirror
          requestMirror: { backendRef: { name: shadow, port: 80 } }
      backendRefs: [{ name: web, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /granted } }]
      backendRefs: [{ name: other, namespace: team-b, port: 80 }]
    - matches: [{ path: { type: PathPrefix, value: /not-granted } }]
      backendRefs: [{ name: other, namespace: team-c, port: 80 }]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: { name: routes-from-default, namespace: team-b }
spec:
  from: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default }]
  to: [{ group: "", kind: Service }]
${svc("web", "default", ups["web"]!.port)}${svc("api", "default", ups["api"]!.port)}${svc("shadow", "default", ups["shadow"]!.port)}${svc("other", "team-b", ups["other"]!.port)}${svc("other", "team-c", ups["other"]!.port)}`,
    );
    sluice = await startSluice("serve", cfg.dir);
    envoy = await startTestEnvoy(sluice);
    await waitFor("routes", async () =>
      (await request(http, "/", { headers: { host: "api.example.com" } })).status === 200 ? true : undefined,
    );
  });

  after(async () => {
    await envoy?.stop();
    await sluice?.stop();
    for (const u of Object.values(ups)) await u.close();
    cfg.cleanup();
  });

  test("HTTPS: SNI selects the listener and its certificate", async () => {
    const a = await httpsGet(https, "example.com", "example.com", "/x");
    assert.equal(a.status, 200);
    assert.equal(a.certCN, "example.com");
    const b = await httpsGet(https, "foo.example.com", "foo.example.com", "/y");
    assert.equal(b.status, 200);
    assert.equal(b.certCN, "foo.example.com");
    const c = await httpsGet(https, "bar.example.org", "bar.example.org", "/z");
    assert.equal(c.status, 200);
    assert.equal(c.certCN, "*.example.org", "the wildcard certificate from another namespace, allowed by a grant");
    assert.equal((JSON.parse(c.body) as EchoBody).upstream, "web");
    await assert.rejects(httpsGet(https, "unknown.example.net", "unknown.example.net", "/"), "no chain for this SNI");
  });

  test("host names: a route answers only its host names", async () => {
    const ok = await request(http, "/", { headers: { host: "api.example.com" } });
    assert.equal((JSON.parse(ok.body) as EchoBody).upstream, "api");
    assert.equal((await request(http, "/", { headers: { host: "nope.example.com" } })).status, 404);
  });

  test("RequestRedirect", async () => {
    const r = await request(http, "/old/page?q=1", { headers: { host: "www.example.com" } });
    assert.equal(r.status, 301);
    assert.equal(r.headers["location"], "https://example.com/new/page?q=1");
  });

  test("URLRewrite: prefix and host, and full path", async () => {
    const r = await request(http, "/v1/items", { headers: { host: "www.example.com" } });
    const echo = JSON.parse(r.body) as EchoBody;
    assert.equal(echo.path, "/v2/items");
    assert.equal(echo.headers["host"], "rewritten.internal");
    const full = JSON.parse((await request(http, "/login", { headers: { host: "www.example.com" } })).body) as EchoBody;
    assert.equal(full.path, "/auth/login");
  });

  test("RequestMirror sends a copy to the mirror backend", async () => {
    const before = ups["shadow"]!.requests.length;
    const r = await request(http, "/mirrored/1", { headers: { host: "www.example.com" } });
    assert.equal((JSON.parse(r.body) as EchoBody).upstream, "web");
    await waitFor("the mirrored copy", async () => (ups["shadow"]!.requests.length > before ? true : undefined), 5000);
    assert.equal(ups["shadow"]!.requests.at(-1)?.path, "/mirrored/1");
  });

  test("cross-namespace backendRefs need a ReferenceGrant", async () => {
    const granted = await request(http, "/granted", { headers: { host: "www.example.com" } });
    assert.equal((JSON.parse(granted.body) as EchoBody).upstream, "other");
    const refused = await request(http, "/not-granted", { headers: { host: "www.example.com" } });
    assert.equal(refused.status, 500);
    const status = (await sluice.status()) as { resources: { kind: string; name: string; status: unknown }[] };
    const main = status.resources.find((r) => r.kind === "HTTPRoute" && r.name === "main");
    assert.match(JSON.stringify(main?.status), /RefNotPermitted|no ReferenceGrant in team-c/);
  });
});
