// backend.tls on Service backends through a real Envoy (xds/backend-tls.ts): Envoy originates TLS to HTTPS backends,
// trusting the CA of a ConfigMap and checking the name SNI asks for; a backend whose certificate is not trusted, or
// does not carry the names required, is refused (503); `insecureSkipVerify: All` trusts it anyway; mTLS presents the
// client certificate of a Secret, which the backend checks; a CA ConfigMap that is missing makes the route answer 503.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import type { TLSSocket } from "node:tls";
import { localService, prefixRoute, servicePolicy, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { request } from "../helpers/net.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

function resources(plain: number, mtls: number): string {
  const policy = (name: string, tls: string) => servicePolicy(name, `    tls: ${tls}`);
  const services = ["trusted", "untrusted", "skip", "wrongname", "noca"].map((n) => localService(n, plain)).join("");
  return `${services}${localService("mtls", mtls)}${caConfigMapYaml()}${tlsSecretYaml()}${prefixRoute(["trusted", "untrusted", "skip", "wrongname", "noca", "mtls"])}${policy("trusted", "{ caCertificateRefs: [{ name: example-ca }], sni: example.com }")}${policy("untrusted", "{ sni: example.com }")}${policy("skip", "{ insecureSkipVerify: All, sni: example.com }")}${policy("wrongname", "{ caCertificateRefs: [{ name: example-ca }], sni: example.com, verifySubjectAltNames: [other.example.com] }")}${policy("noca", "{ caCertificateRefs: [{ name: nowhere }], sni: example.com }")}${policy("mtls", "{ caCertificateRefs: [{ name: example-ca }], sni: example.com, mtlsCertificateRef: [{ name: client-cert }] }")}`;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return (server.address() as AddressInfo).port;
}

describe("backend.tls: Envoy originates TLS to the backend", { timeout: 60_000 }, () => {
  const plain = createServer({ cert: tlsFixture("example.com.crt"), key: tlsFixture("example.com.key") }, (req, res) =>
    res.end(`tls ${(req.socket as TLSSocket).getProtocol()}`),
  );
  const mtls = createServer(
    {
      cert: tlsFixture("example.com.crt"),
      key: tlsFixture("example.com.key"),
      requestCert: true,
      rejectUnauthorized: true,
      ca: [tlsFixture("foo.example.com.crt")],
    },
    (req, res) => {
      const cn = (req.socket as TLSSocket).getPeerCertificate().subject?.CN;
      res.end(`client ${cn}`);
    },
  );
  let gw: TestGateway;

  before(async () => {
    const [p, m] = [await listen(plain), await listen(mtls)];
    gw = await startTestGateway(
      () => resources(p, m),
      "/trusted",
      (s) => s === 200,
    );
  });
  after(async () => {
    await gw?.stop();
    plain.close();
    mtls.close();
  });

  test("a CA from a ConfigMap and the SNI name: served over TLS", async () => {
    const r = await request(gw.port, "/trusted");
    assert.equal(r.status, 200);
    assert.match(r.body, /^tls TLSv1\.[23]$/);
  });

  test("a certificate the system CAs do not trust, or without the names required: refused", async () => {
    assert.equal((await request(gw.port, "/untrusted")).status, 503);
    assert.equal((await request(gw.port, "/wrongname")).status, 503);
  });

  test("insecureSkipVerify All: trusted anyway", async () => {
    assert.equal((await request(gw.port, "/skip")).status, 200);
  });

  test("mTLS: the backend sees the client certificate of the Secret", async () => {
    const r = await request(gw.port, "/mtls");
    assert.equal(r.status, 200, r.body);
    assert.equal(r.body, "client foo.example.com");
  });

  test("a CA ConfigMap that does not exist: 503 without calling the backend", async () => {
    const r = await request(gw.port, "/noca");
    assert.equal(r.status, 503);
    assert.equal(r.body, "backend credentials, TLS or tunnel settings are not available");
  });
});
