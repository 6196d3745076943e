// MCP targets reached under their connection policies, through a real Envoy to Sluice's MCP service: a target served
// over HTTPS with a test CA (the ConfigMap's CA, SNI and the name checked), which also asks for a client certificate
// (mTLS from a Secret) and an API key (the policy's static `auth`); the same target with the wrong CA fails as the
// backend's failureMode says (FailOpen: skipped, the others serve; FailClosed: the session is refused); skip-verify
// trusts it without a CA; and `http.requestTimeout` fails one slow call without failing the session.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type JWTPayload, jwtVerify } from "jose";
import { prefixRoute } from "../helpers/gateway.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { caConfigMapYaml, tlsFixture, tlsSecretYaml } from "../helpers/tls.js";

function text(r: unknown): string {
  const c = (r as { content?: { type: string; text?: string }[] }).content ?? [];
  return c.map((x) => x.text ?? "").join("");
}

const API_KEY = "k-3f9a";
const signer = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const signingKey = JSON.stringify(signer.privateKey.export({ type: "pkcs8", format: "pem" }).toString());

function yaml(securePort: number, plainPort: number, signedPort: number): string {
  const target = (name: string, port: number, policies?: string) =>
    `      - { name: ${name}, static: { host: 127.0.0.1, port: ${port}${policies !== undefined ? `, policies: ${policies}` : ""} } }`;
  const trusted = `{ tls: { caCertificateRefs: [{ name: example-ca }], sni: example.com, mtlsCertificateRef: [{ name: client-cert }] }, auth: { key: ${API_KEY}, location: { header: { name: x-api-key } } } }`;
  const wrongCa = `{ tls: { caCertificateRefs: [{ name: other-ca }], sni: example.com, mtlsCertificateRef: [{ name: client-cert }] }, auth: { key: ${API_KEY}, location: { header: { name: x-api-key } } } }`;
  const backend = (name: string, failureMode: string, targets: string[]) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  mcp:
    failureMode: ${failureMode}
    targets:
${targets.join("\n")}
`;
  const names = ["trusted", "failopen", "failclosed", "timeout", "signed"];
  return `${caConfigMapYaml()}${caConfigMapYaml("other-ca", "wildcard.example.org.crt")}${tlsSecretYaml()}${backend("trusted", "FailClosed", [target("secure", securePort, trusted), target("plain", plainPort)])}${backend("failopen", "FailOpen", [target("secure", securePort, wrongCa), target("plain", plainPort)])}${backend("failclosed", "FailClosed", [target("secure", securePort, wrongCa), target("plain", plainPort)])}${backend("timeout", "FailClosed", [target("plain", plainPort, "{ http: { requestTimeout: 400ms } }")])}${backend("signed", "FailClosed", [target("signed", signedPort, "{ auth: { jwtSign: { signingKeyRef: { name: signer }, alg: ES256, claims: { iss: sluice, aud: tools, sub: mcp-gateway } } } }")])}---
apiVersion: v1
kind: Secret
metadata: { name: signer, namespace: default }
stringData: { signingKey: ${signingKey} }
${prefixRoute(names, { name: "mcp", to: "GwBackend" })}`;
}

describe("MCP targets over TLS, with credentials and timeouts", { timeout: 90_000 }, () => {
  let secure: SdkTarget;
  let plain: SdkTarget;
  let signed: SdkTarget;
  /** The claims of each JWT the signed target verified. */
  const verified: JWTPayload[] = [];
  let env: LlmEnv;
  const clients: Client[] = [];
  const connect = async (backend: string) => {
    const c = await mcpClient(env.baseUrl, backend);
    clients.push(c.client);
    return c.client;
  };

  before(async () => {
    [secure, plain, signed] = await Promise.all([
      startSdkTarget("secure", {
        tls: {
          cert: tlsFixture("example.com.crt"),
          key: tlsFixture("example.com.key"),
          requestCert: true,
          rejectUnauthorized: true,
          ca: [tlsFixture("foo.example.com.crt")],
        },
        requireHeader: { name: "x-api-key", value: API_KEY },
      }),
      startSdkTarget("plain"),
      startSdkTarget("signed", {
        // The minted credential: an ES256 JWT Sluice signs per request with the Secret's key.
        authorize: async (req) => {
          const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? "")?.[1];
          if (token === undefined) return false;
          try {
            const { payload } = await jwtVerify(token, signer.publicKey, { issuer: "sluice", audience: "tools" });
            verified.push(payload);
            return true;
          } catch {
            return false;
          }
        },
      }),
    ]);
    env = await startLlmEnv(yaml(secure.port, plain.port, signed.port), "/trusted/mcp");
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await secure?.kill();
    await plain?.kill();
    await signed?.kill();
  });

  test("a minted credential (jwtSign): each request to the target carries a JWT it verifies", async () => {
    const before = verified.length;
    const c = await connect("signed");
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "signed" } })), "signed: signed");
    // initialize, notifications/initialized, the call (and the GET stream it opens): each one verified.
    assert.ok(verified.length - before >= 3, `${verified.length - before} verified`);
    const last = verified.at(-1);
    assert.equal(last?.sub, "mcp-gateway");
    assert.ok((last?.exp ?? 0) > Date.now() / 1000);
  });

  test("the HTTPS target is reached with the policy's CA, SNI, client certificate and API key", async () => {
    const before = secure.seen.initialized;
    const c = await connect("trusted");
    const names = (await c.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("secure_echo") && names.includes("plain_echo"), names.join(", "));
    assert.equal(text(await c.callTool({ name: "secure_echo", arguments: { text: "over tls" } })), "secure: over tls");
    assert.equal(text(await c.callTool({ name: "plain_echo", arguments: { text: "plain" } })), "plain: plain");
    // One session for the client; a second may be the spare set Sluice starts after answering (docs/mcp.md).
    assert.ok([before + 1, before + 2].includes(secure.seen.initialized), String(secure.seen.initialized - before));
  });

  test("the wrong CA, FailOpen: that target is skipped, the other serves", async () => {
    // The spare set Sluice starts after the previous test's session (startDelayMs later) reaches this target too: wait
    // until its count has stopped moving, so only this test's sessions are compared.
    let last = -1;
    while (secure.seen.initialized !== last) {
      last = secure.seen.initialized;
      await new Promise((r) => setTimeout(r, 400));
    }
    const before = secure.seen.initialized;
    const c = await connect("failopen");
    const names = (await c.listTools()).tools.map((t) => t.name);
    assert.ok(names.includes("plain_echo"), names.join(", "));
    assert.ok(!names.some((n) => n.startsWith("secure_")), names.join(", "));
    await assert.rejects(
      c.callTool({ name: "secure_echo", arguments: { text: "x" } }),
      /target secure is not available|not found/,
    );
    assert.equal(text(await c.callTool({ name: "plain_echo", arguments: { text: "still" } })), "plain: still");
    // The handshake failed before any MCP message reached the target.
    assert.equal(secure.seen.initialized, before);
  });

  test("the wrong CA, FailClosed: the session is refused, naming the certificate problem", async () => {
    await assert.rejects(connect("failclosed"), (e: Error) => {
      assert.match(e.message, /cannot start the session: target secure: .*(certificate|self.signed|issuer)/i);
      return true;
    });
  });

  test("http.requestTimeout fails the slow call alone; the session keeps serving", async () => {
    const c = await connect("timeout");
    const started = Date.now();
    await assert.rejects(
      c.callTool({ name: "slow", arguments: { steps: 10, ms: 200 } }),
      /did not answer tools\/call within 400 ms \(http\.requestTimeout\)/,
    );
    assert.ok(Date.now() - started < 1900, `answered after ${Date.now() - started} ms`);
    assert.equal(text(await c.callTool({ name: "echo", arguments: { text: "after" } })), "plain: after");
  });
});
