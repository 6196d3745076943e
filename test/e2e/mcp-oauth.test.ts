// MCP OAuth through Envoy (jwtAuthentication.mcp, and the deprecated backend.mcp.authentication): the SDK client's
// own OAuth flow (401 → protected resource metadata → authorization server metadata → client registration →
// authorization with PKCE → token → MCP) against a real authorization server protocol (helpers/mcp-oauth-server.ts),
// with every URL the SDK fetched checked against what Sluice serves.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpYaml } from "../helpers/mcp-env.js";
import { type FakeAuthServer, startFakeAuthServer } from "../helpers/mcp-oauth-server.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";

const REDIRECT = "http://127.0.0.1:1/callback";

/** An in-memory client of the SDK's OAuth flow; "redirecting the browser" records the URL. */
class TestProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  authorizationUrl: URL | undefined;
  get redirectUrl(): string {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "e2e",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(c: OAuthClientInformationMixed) {
    this.client = c;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** The SDK's full flow for `<base>/<backend>/mcp`; every URL it fetched, in order. */
async function sdkOAuthFlow(
  env: LlmEnv,
  backend: string,
  provider: TestProvider,
): Promise<{ fetched: string[]; client: Client }> {
  const fetched: string[] = [];
  // The SDK's discovery uses the global fetch, its transport the one given: both are logged.
  const global = globalThis.fetch;
  const logging = async (url: string | URL | Request, init?: RequestInit) => {
    fetched.push(`${init?.method ?? "GET"} ${(url instanceof Request ? url.url : String(url)).split("?")[0]}`);
    return global(url, init);
  };
  globalThis.fetch = logging as typeof fetch;
  try {
    return await flow(env, backend, provider, logging, fetched);
  } finally {
    globalThis.fetch = global;
  }
}

async function flow(
  env: LlmEnv,
  backend: string,
  provider: TestProvider,
  logging: (url: string | URL, init?: RequestInit) => Promise<Response>,
  fetched: string[],
): Promise<{ fetched: string[]; client: Client }> {
  const url = new URL(`${env.baseUrl}/${backend}/mcp`);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: logging });
  await assert.rejects(new Client({ name: "e2e", version: "1" }).connect(first), UnauthorizedError);
  assert.ok(provider.authorizationUrl !== undefined, "the SDK sent the user to authorize");
  // The user's browser: the authorization server redirects back with a code.
  const r = await fetch(provider.authorizationUrl, { redirect: "manual" });
  assert.equal(r.status, 302, await r.text());
  const code = new URL(r.headers.get("location") ?? "").searchParams.get("code");
  assert.ok(code !== null);
  await first.finishAuth(code);
  const client = new Client({ name: "e2e", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: logging }));
  return { fetched, client };
}

describe("MCP OAuth through Envoy with the SDK client's flow", { timeout: 90_000 }, () => {
  let as: FakeAuthServer;
  let target: SdkTarget;
  let env: LlmEnv;
  const clients: Client[] = [];

  before(async () => {
    [as, target] = await Promise.all([startFakeAuthServer(), startSdkTarget("alpha")]);
    as.preRegister("preset-client", [REDIRECT]);
    const jwt = (section: string, mcp: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: jwt-${section}, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: mcp, sectionName: ${section} }]
  traffic:
    jwtAuthentication:
      providers: [{ issuer: "${as.issuer}", jwks: { inline: '${as.jwks}' } }]
      mcp: ${mcp}
`;
    env = await startLlmEnv(
      `${mcpYaml(["dyn", "preset", "legacy"].map((name) => ({ name, targets: [{ name: "alpha", port: target.port }] })))}${jwt(
        "dyn",
        "{ provider: Idp1, resourceMetadata: { scopes_supported: [mcp] } }",
      )}${jwt("preset", "{ clientId: preset-client }")}---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: keys, namespace: default }
spec: { static: { host: 127.0.0.1, port: ${as.port} } }
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: legacy, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: legacy }]
  backend:
    mcp:
      authentication:
        issuer: "${as.issuer}"
        jwks: { jwksPath: /jwks, backendRef: { group: sluice.dev, kind: GwBackend, name: keys } }
`,
      "/dyn/mcp",
    );
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await env?.stop();
    await target?.kill();
    await as?.stop();
  });

  test("a request without a token is 401 with the resource metadata pointer; metadata is public", async () => {
    const r = await fetch(`${env.baseUrl}/dyn/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(r.status, 401);
    const prmUrl = `${env.baseUrl}/.well-known/oauth-protected-resource/dyn/mcp`;
    assert.equal(r.headers.get("www-authenticate"), `Bearer resource_metadata="${prmUrl}"`);
    // A token the provider did not sign: 401 with the same pointer.
    const bad = await fetch(`${env.baseUrl}/dyn/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer abc.def.ghi", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(bad.status, 401);
    assert.match(bad.headers.get("www-authenticate") ?? "", /resource_metadata="[^"]+\/dyn\/mcp"/);
    // Public for browser clients on any origin: CORS on the documents and a preflight for registration.
    const doc = await fetch(prmUrl, { headers: { origin: "https://app.example" } });
    assert.equal(doc.headers.get("access-control-allow-origin"), "*");
    const preflight = await fetch(`${env.baseUrl}/.well-known/oauth-authorization-server/dyn/mcp/register`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "POST" },
    });
    assert.equal(preflight.status, 204);
    assert.match(preflight.headers.get("access-control-allow-methods") ?? "", /POST/);
    assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /content-type/);
    const prm = (await doc.json()) as Record<string, unknown>;
    assert.deepEqual(prm, {
      resource: `${env.baseUrl}/dyn/mcp`,
      authorization_servers: [`${env.baseUrl}/dyn/mcp`],
      bearer_methods_supported: ["header"],
      scopes_supported: ["mcp"],
    });
    const asm = (await (await fetch(`${env.baseUrl}/.well-known/oauth-authorization-server/dyn/mcp`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(asm["issuer"], as.issuer);
    assert.equal(asm["authorization_endpoint"], `${as.issuer}/authorize`);
    assert.equal(asm["token_endpoint"], `${as.issuer}/token`);
    assert.equal(
      asm["registration_endpoint"],
      `${env.baseUrl}/.well-known/oauth-authorization-server/dyn/mcp/register`,
    );
  });

  test("the SDK's flow: discovery and registration through Sluice, the token accepted by Envoy", async () => {
    const provider = new TestProvider();
    const before = as.clients.size;
    const { fetched, client } = await sdkOAuthFlow(env, "dyn", provider);
    clients.push(client);
    const gw = env.baseUrl;
    // What the SDK asked for, in order, is what Sluice serves (and the authorization server's own endpoints).
    assert.deepEqual(fetched.slice(0, 5), [
      `POST ${gw}/dyn/mcp`,
      `GET ${gw}/.well-known/oauth-protected-resource/dyn/mcp`,
      `GET ${gw}/.well-known/oauth-authorization-server/dyn/mcp`,
      `POST ${gw}/.well-known/oauth-authorization-server/dyn/mcp/register`,
      `GET ${as.issuer}/authorize`,
    ]);
    // Metadata only ever from the gateway; the token from the authorization server; MCP with the token at the end.
    assert.ok(
      fetched.filter((f) => f.includes("/.well-known/")).every((f) => f.includes(gw)),
      fetched.join("\n"),
    );
    assert.ok(fetched.includes(`POST ${as.issuer}/token`), fetched.join("\n"));
    assert.ok(!fetched.includes(`POST ${as.issuer}/register`), fetched.join("\n"));
    assert.equal(fetched.filter((f) => f.startsWith("POST")).at(-1), `POST ${gw}/dyn/mcp`);
    // Registration was proxied: the authorization server registered a client, whose id the SDK holds.
    assert.equal(as.clients.size, before + 1);
    assert.match(String(provider.client?.client_id), /^dyn-/);
    assert.ok(as.clients.has(String(provider.client?.client_id)));
    // The token names the MCP endpoint as its resource (RFC 8707), as the protected resource metadata says.
    assert.equal(as.issued.at(-1), `${gw}/dyn/mcp`);
    assert.deepEqual(provider.authorizationUrl?.searchParams.get("resource"), `${gw}/dyn/mcp`);
    assert.equal(provider.authorizationUrl?.searchParams.get("scope"), "mcp");
    const tools = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(tools.includes("echo"), tools.join(","));
  });

  test("with clientId, registration is answered with it and the authorization server registers nobody", async () => {
    const provider = new TestProvider();
    const before = as.clients.size;
    const registrations = as.requests.filter((r) => r === "POST /register").length;
    const { client } = await sdkOAuthFlow(env, "preset", provider);
    clients.push(client);
    assert.equal(provider.client?.client_id, "preset-client");
    assert.equal(as.clients.size, before);
    assert.equal(as.requests.filter((r) => r === "POST /register").length, registrations);
    assert.ok((await client.listTools()).tools.length > 0);
  });

  test("the deprecated backend.mcp.authentication: Sluice verifies the token and serves the same flow", async () => {
    const r = await fetch(`${env.baseUrl}/legacy/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    assert.equal(r.status, 401);
    assert.equal(
      r.headers.get("www-authenticate"),
      `Bearer resource_metadata="${env.baseUrl}/.well-known/oauth-protected-resource/legacy/mcp"`,
    );
    const forged = await fetch(`${env.baseUrl}/legacy/mcp`, {
      method: "POST",
      headers: { authorization: "Bearer e30.e30.AAAA", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(forged.status, 401);
    const provider = new TestProvider();
    const { client } = await sdkOAuthFlow(env, "legacy", provider);
    clients.push(client);
    assert.ok((await client.listTools()).tools.length > 0);
  });
});
