// Sluice's CA and the certificates it issues for authenticated xDS (src/security/): the identity format, what a
// certificate names, the checks a controller runs over stored certificates, and real TLS handshakes (node:tls, the
// same OpenSSL checks Sluice's servers make) refusing a client of another CA, an expired one, one with no certificate.

import assert from "node:assert/strict";
import { createPrivateKey, X509Certificate } from "node:crypto";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import { connect, createServer, type TLSSocket } from "node:tls";
import {
  CA_NAME,
  checkGatewayCertificate,
  createCa,
  gatewayOfCertificate,
  issueGatewayCertificate,
  issueServerCertificate,
} from "../../src/security/certificates.js";
import { gatewayIdentity, gatewayOfIdentity, TRUST_DOMAIN } from "../../src/security/identity.js";
import { mutualTlsServerOptions } from "../../src/security/tls.js";

const DAY = 86_400_000;

describe("Gateway identity", () => {
  it("is a SPIFFE URI naming namespace and Gateway, and reads back", () => {
    assert.equal(TRUST_DOMAIN, "sluice.dev");
    assert.equal(gatewayIdentity("team-a/gw.1"), "spiffe://sluice.dev/ns/team-a/gateway/gw.1");
    assert.equal(gatewayOfIdentity("spiffe://sluice.dev/ns/team-a/gateway/gw.1"), "team-a/gw.1");
  });

  it("refuses keys that are not <namespace>/<name> of SPIFFE path characters", () => {
    for (const key of ["gw", "a/b/c", "/gw", "ns/", "ns/g w", "ns/..", "ns/a%2Fb", "ns/é"]) {
      assert.throws(() => gatewayIdentity(key), /not a Gateway key/, key);
    }
  });

  it("reads no Gateway from other URIs", () => {
    for (const uri of [
      "spiffe://other.dev/ns/a/gateway/b",
      "spiffe://sluice.dev/ns/a/sa/b",
      "spiffe://sluice.dev/ns/a/gateway/b/c",
      "spiffe://sluice.dev/ns/a/gateway/",
      "spiffe://sluice.dev/ns//gateway/b",
      "https://sluice.dev/ns/a/gateway/b",
      "SPIFFE://sluice.dev/ns/a/gateway/b",
      "spiffe://sluice.dev/ns/a/gateway/b?x",
    ]) {
      assert.equal(gatewayOfIdentity(uri), undefined, uri);
    }
  });
});

describe("certificates", async () => {
  const ca = await createCa();
  const otherCa = await createCa({ name: "CN=Not Sluice's CA" });
  const client = await issueGatewayCertificate(ca, "team-a/gw");
  const server = await issueServerCertificate(ca, {
    dnsNames: ["sluice.sluice-system.svc"],
    ipAddresses: ["127.0.0.1"],
  });

  it("makes a CA: ECDSA P-256, about ten years, clearly named, that can sign certificates only", () => {
    const c = new X509Certificate(ca.cert);
    assert.equal(c.subject, "CN=Sluice xDS and services CA\nO=sluice.dev");
    assert.equal(CA_NAME, "CN=Sluice xDS and services CA,O=sluice.dev");
    assert.ok(c.ca);
    assert.equal(c.publicKey.asymmetricKeyType, "ec");
    assert.equal(c.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
    const years = (Date.parse(c.validTo) - Date.parse(c.validFrom)) / (365 * DAY);
    assert.ok(years > 9.9 && years < 10.1, `${years} years`);
    assert.match(ca.key, /^-----BEGIN PRIVATE KEY-----\n/);
    assert.ok(c.checkPrivateKey(createPrivateKey(ca.key)));
  });

  it("issues a Gateway client certificate: one URI SAN, clientAuth only, about a year, signed by the CA", () => {
    const c = new X509Certificate(client.cert);
    assert.equal(c.subjectAltName, "URI:spiffe://sluice.dev/ns/team-a/gateway/gw");
    assert.deepEqual(c.keyUsage, ["1.3.6.1.5.5.7.3.2"]);
    assert.ok(!c.ca);
    assert.ok(c.verify(new X509Certificate(ca.cert).publicKey));
    assert.ok(!c.verify(new X509Certificate(otherCa.cert).publicKey));
    const days = (client.notAfter.getTime() - Date.now()) / DAY;
    assert.ok(days > 364 && days <= 365, `${days} days`);
    assert.equal(client.ca, ca.cert);
    assert.ok(c.checkPrivateKey(createPrivateKey(client.key)));
  });

  it("issues a server certificate with the DNS and IP SANs given, serverAuth only", () => {
    const c = new X509Certificate(server.cert);
    assert.equal(c.subjectAltName, "DNS:sluice.sluice-system.svc, IP Address:127.0.0.1");
    assert.deepEqual(c.keyUsage, ["1.3.6.1.5.5.7.3.1"]);
    assert.ok(c.checkHost("sluice.sluice-system.svc"));
    assert.ok(c.checkIP("127.0.0.1"));
  });

  it("reads the Gateway back from PEM or DER, and none from other certificates or garbage", () => {
    assert.equal(gatewayOfCertificate(client.cert), "team-a/gw");
    assert.equal(gatewayOfCertificate(new X509Certificate(client.cert).raw), "team-a/gw");
    assert.equal(gatewayOfCertificate(server.cert), undefined);
    assert.equal(gatewayOfCertificate(ca.cert), undefined);
    assert.equal(gatewayOfCertificate("not a certificate"), undefined);
    assert.equal(gatewayOfCertificate(new Uint8Array([0x30, 0x03, 0x02, 0x01])), undefined);
  });

  it("checks a stored certificate: the CA's, valid now, a client certificate, of the Gateway expected", async () => {
    const ok = await checkGatewayCertificate(ca.cert, client.cert, { gateway: "team-a/gw" });
    assert.deepEqual(ok, { ok: true, gateway: "team-a/gw", notAfter: client.notAfter, renewalDue: false });
    const problem = async (caCert: string, cert: string, o: { gateway?: string; now?: Date } = {}) => {
      const r = await checkGatewayCertificate(caCert, cert, o);
      return r.ok ? "ok" : r.problem;
    };
    assert.equal(await problem(otherCa.cert, client.cert), "other-ca");
    const foreign = await issueGatewayCertificate(otherCa, "team-a/gw");
    assert.equal(await problem(ca.cert, foreign.cert), "other-ca");
    assert.equal(await problem(ca.cert, client.cert, { gateway: "team-b/gw" }), "wrong-gateway");
    assert.equal(await problem(ca.cert, server.cert), "not-a-client-certificate");
    assert.equal(await problem(ca.cert, "garbage"), "malformed");
    assert.equal(await problem(ca.cert, client.cert, { now: new Date(Date.now() + 366 * DAY) }), "expired");
    assert.equal(await problem(ca.cert, client.cert, { now: new Date(Date.now() - DAY) }), "not-yet-valid");
    // A bundle of the old and the new CA (while the CA is replaced) accepts certificates of both.
    assert.equal(await problem(`${otherCa.cert}${ca.cert}`, client.cert), "ok");
  });

  it("issues from a bundle of two CAs (a CA being replaced) with the one its key belongs to", async () => {
    for (const bundle of [`${ca.cert}${otherCa.cert}`, `${otherCa.cert}${ca.cert}`]) {
      const issued = await issueGatewayCertificate({ cert: bundle, key: ca.key }, "team-a/gw");
      assert.equal(new X509Certificate(issued.cert).issuer, new X509Certificate(ca.cert).subject);
      assert.deepEqual(await checkGatewayCertificate(ca.cert, issued.cert).then((r) => r.ok), true);
      assert.equal(issued.ca, bundle);
    }
    await assert.rejects(issueGatewayCertificate({ cert: otherCa.cert, key: ca.key }, "team-a/gw"), /belongs to none/);
  });

  it("says when to re-issue: once less than a third of the lifetime is left", async () => {
    const at = async (days: number) => {
      const r = await checkGatewayCertificate(ca.cert, client.cert, { now: new Date(Date.now() + days * DAY) });
      assert.ok(r.ok);
      return r.renewalDue;
    };
    assert.equal(await at(200), false);
    assert.equal(await at(250), true);
  });

  describe("in a TLS handshake (what Sluice's servers accept)", () => {
    /**
     * Connects to a mutual-TLS server like Sluice's. Resolves with the Gateway of the client it accepted, or with
     * why the server refused it in the handshake.
     */
    async function handshake(
      clientCert: { cert: string; key: string } | undefined,
    ): Promise<{ accepted: string | undefined } | { refused: string }> {
      const srv = createServer(mutualTlsServerOptions({ cert: server.cert, key: server.key, ca: ca.cert }, ["h2"]));
      const outcome = new Promise<{ accepted: string | undefined } | { refused: string }>((resolve) => {
        srv.on("secureConnection", (s: TLSSocket) => {
          resolve({ accepted: gatewayOfCertificate(s.getPeerCertificate().raw) });
          s.end("hello");
        });
        // Node ends a connection whose certificate fails verification without an alert ("socket hang up"); the
        // reason is on the socket.
        srv.on("tlsClientError", (e: Error, s: TLSSocket) =>
          resolve({ refused: s.authorizationError?.toString() ?? e.message }),
        );
      });
      await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
      try {
        const socket = connect({
          host: "127.0.0.1",
          port: (srv.address() as AddressInfo).port,
          ca: ca.cert,
          ALPNProtocols: ["h2"],
          ...(clientCert !== undefined ? { cert: clientCert.cert, key: clientCert.key } : {}),
        });
        // TLS 1.3: the client's handshake completes before the server has judged its certificate; the server's
        // verdict is an alert, or the data it sends.
        const data = await new Promise<string>((resolve) => {
          let text = "";
          socket.on("data", (d: Buffer) => (text += d.toString()));
          socket.on("end", () => resolve(text));
          socket.on("error", () => resolve(text));
        });
        const result = await outcome;
        assert.equal(data === "hello", "accepted" in result);
        return result;
      } finally {
        srv.close();
      }
    }

    it("accepts a client certificate of the CA, and the server reads its Gateway", async () => {
      assert.deepEqual(await handshake(client), { accepted: "team-a/gw" });
    });

    it("refuses no certificate, another CA's, an expired one, one not valid yet, and a server certificate", async () => {
      const expired = await issueGatewayCertificate(ca, "team-a/gw", { now: new Date(Date.now() - 2 * DAY), days: 1 });
      const early = await issueGatewayCertificate(ca, "team-a/gw", { now: new Date(Date.now() + 2 * DAY) });
      const foreign = await issueGatewayCertificate(otherCa, "team-a/gw");
      const cases: [string, { cert: string; key: string } | undefined, RegExp][] = [
        ["no certificate", undefined, /peer did not return a certificate/],
        ["another CA", foreign, /^UNABLE_TO_VERIFY_LEAF_SIGNATURE$|^UNABLE_TO_GET_ISSUER_CERT/],
        ["expired", expired, /^CERT_HAS_EXPIRED$/],
        ["not yet valid", early, /^CERT_NOT_YET_VALID$/],
        ["server certificate", server, /^UNSUPPORTED_CERTIFICATE_PURPOSE$|^INVALID_PURPOSE$/],
      ];
      for (const [what, cert, reason] of cases) {
        const r = await handshake(cert);
        assert.ok("refused" in r, `${what}: accepted`);
        assert.match(r.refused, reason, what);
      }
    });
  });
});
