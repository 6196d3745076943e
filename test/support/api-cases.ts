// The cases of test/unit/api-rules.test.ts: for every rule and limit of both spec documents (policy-api.md,
// backend-model-api.md), valid and invalid specs at the boundary, each invalid one with the field path and message
// `sluice validate` gives. Shared with test/e2e/kube-crds.test.ts, which submits them to a real API server.

import { PROVIDER_FORMATS } from "../../src/api/backend.js";
import { byteQuantity } from "../../src/api/common.js";
import { ACCESS_LOG_FIELDS } from "../../src/api/policy.js";

export type Json = Record<string, unknown>;
export type Kind = "GwPolicy" | "GwBackend" | "GwModel" | "GwParameters";

export interface Case {
  readonly name: string;
  readonly kind: Kind;
  readonly spec: unknown;
  /** [path, message fragment] for an invalid case; absent for a valid one. */
  readonly error?: readonly [string, string];
}

export const GW = "gateway.networking.k8s.io";
export const gateway = { group: GW, kind: "Gateway", name: "gw" };
export const route = { group: GW, kind: "HTTPRoute", name: "r" };
export const service = { group: "", kind: "Service", name: "svc" };
export const svcRef = { name: "svc", port: 80 };
export const times = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
export const str = (n: number) => "a".repeat(n);

export const pol = (spec: Json): Json => ({ targetRefs: [gateway], ...spec });
export const traffic = (t: Json): Json => pol({ traffic: t });
export const backendPol = (b: Json): Json => ({ targetRefs: [service], backend: b });
export const auth = (a: Json): Json => backendPol({ auth: a });
export const jwtProvider = (jwks: Json = { inline: '{"keys":[]}' }): Json => ({ issuer: "https://idp", jwks });
export const jwt = (j: Json): Json => traffic({ jwtAuthentication: { providers: [jwtProvider()], ...j } });
export const authz = (exprs: unknown[]): Json => traffic({ authorization: { policy: { matchExpressions: exprs } } });
export const provider = (name: string): Json => ({ name, providerA: {} });
export const ai = (a: Json): Json => ({ ai: a });
export const mcpTarget = (name: string): Json => ({ name, static: { host: "h", port: 80 } });
export const model = (m: Json): Json => ({ parentRefs: [{ name: "gw" }], provider: "Provider01", ...m });
export const virtual = (v: Json): Json => ({ parentRefs: [{ name: "gw" }], virtualModel: v });
export const ref = (i: number): Json => ({ modelRef: { name: `m${i}` } });
export const backendAI = (a: Json): Json => ({ ai: { provider: { providerA: {} } }, policies: { ai: a } });
export const guard = (g: Json): Json => backendAI({ promptGuard: g });
export const regexGuard = { regex: { builtins: ["Email"] } };
export const processors = (p: Json): Json => ({
  mcp: { targets: [mcpTarget("t")] },
  policies: { mcp: { guardrails: { processors: [p] } } },
});
export const processor = (remote: Json = {}, methods: Json = { "tools/*": "Full" }): Json => ({
  remote: { backendRef: svcRef, ...remote },
  methods,
});

export const P = (name: string, spec: unknown, error?: readonly [string, string]): Case => ({
  name,
  kind: "GwPolicy",
  spec,
  ...(error ? { error } : {}),
});
export const B = (name: string, spec: unknown, error?: readonly [string, string]): Case => ({
  name,
  kind: "GwBackend",
  spec,
  ...(error ? { error } : {}),
});
export const M = (name: string, spec: unknown, error?: readonly [string, string]): Case => ({
  name,
  kind: "GwModel",
  spec,
  ...(error ? { error } : {}),
});
export const G = (name: string, spec: unknown, error?: readonly [string, string]): Case => ({
  name,
  kind: "GwParameters",
  spec,
  ...(error ? { error } : {}),
});

export const ONE_TARGET = "exactly one of targetRefs and targetSelectors must be set";
export const sel = { group: GW, kind: "Gateway", matchLabels: { a: "b" } };

export const RULE_CASES: Case[] = [
  // targets
  P("targetRefs only", pol({ traffic: {} })),
  P("targetSelectors only", { targetSelectors: [sel], traffic: {} }),
  P("neither targetRefs nor targetSelectors", { traffic: {} }, ["spec", ONE_TARGET]),
  P("both targetRefs and targetSelectors", pol({ targetSelectors: [sel] }), ["spec", ONE_TARGET]),
  P("sectionName alone", pol({ targetRefs: [{ ...gateway, sectionName: "https" }], traffic: {} })),
  P("sectionName and port", pol({ targetRefs: [{ ...gateway, sectionName: "https", port: 443 }], frontend: {} }), [
    "spec.targetRefs[0]",
    "at most one of sectionName and port may be set",
  ]),
  P("selector sectionName and port", { targetSelectors: [{ ...sel, sectionName: "a", port: 1 }], frontend: {} }, [
    "spec.targetSelectors[0]",
    "at most one of sectionName and port may be set",
  ]),
  P("port on frontend policy for a Gateway", pol({ targetRefs: [{ ...gateway, port: 443 }], frontend: {} })),
  P("port on traffic policy", pol({ targetRefs: [{ ...gateway, port: 443 }], traffic: {} }), [
    "spec.targetRefs[0].port",
    "port is only valid on frontend policies that target a Gateway",
  ]),
  P("port on selector of traffic policy", { targetSelectors: [{ ...sel, port: 443 }], traffic: {} }, [
    "spec.targetSelectors[0].port",
    "port is only valid on frontend policies that target a Gateway",
  ]),
  P("strategy with traffic", pol({ strategy: { inheritance: "Override" }, traffic: {} })),
  P("strategy without traffic", pol({ strategy: { inheritance: "Override" }, frontend: {} }), [
    "spec.strategy",
    "strategy is only valid on traffic policies",
  ]),
  P("PreRouting on a Gateway", traffic({ phase: "PreRouting" })),
  P(
    "PreRouting on a listener",
    pol({ targetRefs: [{ ...gateway, sectionName: "http" }], traffic: { phase: "PreRouting" } }),
  ),
  P("PreRouting on a route", { targetRefs: [route], traffic: { phase: "PreRouting" } }, [
    "spec.targetRefs[0].kind",
    "phase PreRouting requires Gateway or Listener targets",
  ]),
  P("frontend on a Gateway", pol({ frontend: {} })),
  P("frontend on a listener", pol({ targetRefs: [{ ...gateway, sectionName: "http" }], frontend: {} }), [
    "spec.targetRefs[0]",
    "frontend policies may only target a Gateway",
  ]),
  P("frontend on a ListenerSet", { targetRefs: [{ ...gateway, kind: "ListenerSet" }], frontend: {} }, [
    "spec.targetRefs[0]",
    "frontend policies may only target a Gateway",
  ]),
  P("traffic on a route rule", { targetRefs: [{ ...route, sectionName: "rule-1" }], traffic: {} }),
  P("traffic on a Service", { targetRefs: [service], traffic: {} }, [
    "spec.targetRefs[0].kind",
    "traffic policies may target",
  ]),
  P("backend on a Service port", { targetRefs: [{ ...service, sectionName: "http" }], backend: {} }),
  P("backend on a GwBackend", { targetRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "b" }], backend: {} }),
  P("backend on a Secret", { targetRefs: [{ ...service, kind: "Secret" }], backend: {} }, [
    "spec.targetRefs[0].kind",
    "backend policies may target",
  ]),
  // conditional lists
  P(
    "conditional with fallback last",
    traffic({
      transformation: {
        conditional: [
          { condition: "request.path == '/a'", policy: { request: { body: "'a'" } } },
          { policy: { request: { body: "'b'" } } },
        ],
      },
    }),
  ),
  P(
    "conditional fallback not last",
    traffic({ transformation: { conditional: [{ policy: {} }, { condition: "true", policy: {} }] } }),
    ["spec.traffic.transformation.conditional", "only one entry may omit condition, and it must be the last"],
  ),
  P("conditional with two fallbacks", traffic({ transformation: { conditional: [{ policy: {} }, { policy: {} }] } }), [
    "spec.traffic.transformation.conditional",
    "only one entry may omit condition",
  ]),
  P(
    "conditional and fields",
    traffic({ transformation: { request: { body: "'x'" }, conditional: [{ policy: {} }] } }),
    ["spec.traffic.transformation.conditional", "either conditional or the transformation fields may be set"],
  ),
  P("extProc plain", traffic({ extProc: { backendRef: svcRef } })),
  P("extProc conditional", traffic({ extProc: { conditional: [{ policy: { backendRef: svcRef } }] } })),
  P("extProc without backendRef", traffic({ extProc: { failureMode: "FailOpen" } }), [
    "spec.traffic.extProc.backendRef",
    "backendRef is required unless conditional is set",
  ]),
  P("extProc conditional entry without backendRef", traffic({ extProc: { conditional: [{ policy: {} }] } }), [
    "spec.traffic.extProc.conditional[0].policy.backendRef",
    "required field is missing",
  ]),
  // JWT
  P("jwks inline", jwt({})),
  P(
    "jwks remote",
    traffic({ jwtAuthentication: { providers: [jwtProvider({ remote: { jwksPath: "/k", backendRef: svcRef } })] } }),
  ),
  P(
    "jwks inline and remote",
    traffic({
      jwtAuthentication: {
        providers: [jwtProvider({ inline: "{}", remote: { jwksPath: "/k", backendRef: svcRef } })],
      },
    }),
    ["spec.traffic.jwtAuthentication.providers[0].jwks", "exactly one of inline and remote must be set"],
  ),
  P("jwks neither", traffic({ jwtAuthentication: { providers: [jwtProvider({})] } }), [
    "spec.traffic.jwtAuthentication.providers[0].jwks",
    "exactly one of inline and remote must be set",
  ]),
  P(
    "remote jwks Service without port",
    traffic({
      jwtAuthentication: { providers: [jwtProvider({ remote: { jwksPath: "/k", backendRef: { name: "idp" } } })] },
    }),
    [
      "spec.traffic.jwtAuthentication.providers[0].jwks.remote.backendRef.port",
      "port is required when the reference is to a Service",
    ],
  ),
  P("jwt mode", jwt({ mode: "Permissive" })),
  P("jwt bad mode", jwt({ mode: "Lenient" }), [
    "spec.traffic.jwtAuthentication.mode",
    "must be one of Strict, Optional, Permissive",
  ]),
  P("jwt mcp", jwt({ mcp: { provider: "Idp3", clientId: "c", resourceMetadata: { scopes: ["a"] } } })),
  P("jwt mcp bad provider", jwt({ mcp: { provider: "Okta" } }), [
    "spec.traffic.jwtAuthentication.mcp.provider",
    "must be one of Idp1",
  ]),
  // locations
  P("location header", jwt({ location: { header: { name: "X-Token" } } })),
  P("location cookie", jwt({ location: { cookie: { name: "session" } } })),
  P("location two kinds", jwt({ location: { header: { name: "a" }, cookie: { name: "b" } } }), [
    "spec.traffic.jwtAuthentication.location",
    "exactly one of header, queryParameter, cookie and expression must be set",
  ]),
  P("location pseudo-header", jwt({ location: { header: { name: ":path" } } }), [
    "spec.traffic.jwtAuthentication.location.header.name",
    "must be an HTTP header name",
  ]),
  // API key and basic
  P("apiKey secretRef", traffic({ apiKeyAuthentication: { secretRef: { name: "keys" } } })),
  P("apiKey configMapSelector", traffic({ apiKeyAuthentication: { configMapSelector: { matchLabels: { a: "b" } } } })),
  P(
    "apiKey two sources",
    traffic({ apiKeyAuthentication: { secretRef: { name: "k" }, secretSelector: { matchLabels: { a: "b" } } } }),
    ["spec.traffic.apiKeyAuthentication", "exactly one of secretRef, secretSelector and configMapSelector must be set"],
  ),
  P("apiKey no source", traffic({ apiKeyAuthentication: { mode: "Optional" } }), [
    "spec.traffic.apiKeyAuthentication",
    "exactly one of secretRef, secretSelector and configMapSelector must be set",
  ]),
  P("basic users", traffic({ basicAuthentication: { users: ["alice:$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/"] } })),
  P("basic secretRef", traffic({ basicAuthentication: { secretRef: { name: "htpasswd" } } })),
  P(
    "basic users and secretRef",
    traffic({ basicAuthentication: { users: ["a:$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/"], secretRef: { name: "h" } } }),
    ["spec.traffic.basicAuthentication", "exactly one of users and secretRef must be set"],
  ),
  P("basic user without hash", traffic({ basicAuthentication: { users: ["alice"] } }), [
    "spec.traffic.basicAuthentication.users[0]",
    "must be an htpasswd line <user>:<password_hash>",
  ]),
  P("basic user line malformed", traffic({ basicAuthentication: { users: ["alice hash"] } }), [
    "spec.traffic.basicAuthentication.users[0]",
    "must be an htpasswd line",
  ]),
  // backend auth
  P("auth key", auth({ key: "Bearer x" })),
  P("auth location without a mechanism", auth({ location: { header: { name: "X-Api-Key" } } }), [
    "spec.backend.auth.location",
    "location applies only to key, secretRef and passthrough",
  ]),
  P("auth two mechanisms", auth({ key: "x", passthrough: {} }), [
    "spec.backend.auth",
    "at most one of key, secretRef, passthrough, cloudA, cloudC, cloudB, oauthTokenExchange, crossAppAccess and jwtSign may be set",
  ]),
  P("auth key too long", auth({ key: str(2049) }), ["spec.backend.auth.key", "must be at most 2048 characters"]),
  P("jwtSign", auth({ jwtSign: { signingKeyRef: { name: "k" }, claims: { sub: "gw" } } })),
  P("jwtSign exp claim", auth({ jwtSign: { signingKeyRef: { name: "k" }, claims: { sub: "gw", exp: 1 } } }), [
    "spec.backend.auth.jwtSign.claims",
    "claims must not contain iat, exp or nbf",
  ]),
  P("jwtSign no claims", auth({ jwtSign: { signingKeyRef: { name: "k" }, claims: {} } }), [
    "spec.backend.auth.jwtSign.claims",
    "must not be empty",
  ]),
  P(
    "assumeRole sessionName",
    auth({ cloudA: { assumeRole: { roleArn: "arn:aws:iam::123456789012:role/r", sessionName: "gw@x" } } }),
  ),
  P(
    "assumeRole both session names",
    auth({
      cloudA: {
        assumeRole: {
          roleArn: "arn:aws:iam::123456789012:role/r",
          sessionName: "ab",
          sessionNameExpression: "jwt.sub",
        },
      },
    }),
    ["spec.backend.auth.cloudA.assumeRole", "at most one of sessionName and sessionNameExpression may be set"],
  ),
  P(
    "assumeRole sessionName charset",
    auth({ cloudA: { assumeRole: { roleArn: "arn:aws:iam::123456789012:role/r", sessionName: "a b" } } }),
    ["spec.backend.auth.cloudA.assumeRole.sessionName", "must be 2 to 64 word characters"],
  ),
  P(
    "assumeRole sessionName 1 char",
    auth({ cloudA: { assumeRole: { roleArn: "arn:aws:iam::123456789012:role/r", sessionName: "a" } } }),
    ["spec.backend.auth.cloudA.assumeRole.sessionName", "must be at least 2 characters"],
  ),
  P("assumeRole bad ARN", auth({ cloudA: { assumeRole: { roleArn: "role/r" } } }), [
    "spec.backend.auth.cloudA.assumeRole.roleArn",
    "must be an IAM role ARN",
  ]),
  P(
    "tag value",
    auth({ cloudA: { assumeRole: { roleArn: "arn:aws:iam::123456789012:role/r", tags: [{ key: "k", value: "v" }] } } }),
  ),
  P(
    "tag value and expression",
    auth({
      cloudA: {
        assumeRole: {
          roleArn: "arn:aws:iam::123456789012:role/r",
          tags: [{ key: "k", value: "v", expression: "jwt.sub" }],
        },
      },
    }),
    ["spec.backend.auth.cloudA.assumeRole.tags[0]", "exactly one of value and expression must be set"],
  ),
  P(
    "tag neither",
    auth({ cloudA: { assumeRole: { roleArn: "arn:aws:iam::123456789012:role/r", tags: [{ key: "k" }] } } }),
    ["spec.backend.auth.cloudA.assumeRole.tags[0]", "exactly one of value and expression must be set"],
  ),
  P("cloudC empty (from environment)", auth({ cloudC: {} })),
  P("cloudC two options", auth({ cloudC: { secretRef: { name: "s" }, workloadIdentity: {} } }), [
    "spec.backend.auth.cloudC",
    "at most one of secretRef, managedIdentity and workloadIdentity may be set",
  ]),
  P("cloudB IdToken audience", auth({ cloudB: { type: "IdToken", audience: "https://svc" } })),
  P("cloudB AccessToken audience", auth({ cloudB: { type: "AccessToken", audience: "https://svc" } }), [
    "spec.backend.auth.cloudB.audience",
    "audience is only valid with type IdToken",
  ]),
  // token exchange and client auth
  P(
    "token exchange",
    auth({ oauthTokenExchange: { backendRef: svcRef, clientAuth: { clientId: "c", secretRef: { name: "s" } } } }),
  ),
  P(
    "PrivateKeyJwt",
    auth({
      oauthTokenExchange: {
        backendRef: svcRef,
        clientAuth: {
          clientId: "c",
          method: "PrivateKeyJwt",
          privateKeyJwt: { signingKeyRef: { name: "k" }, assertionAudience: "https://idp/token" },
        },
      },
    }),
  ),
  P(
    "PrivateKeyJwt without privateKeyJwt",
    auth({ oauthTokenExchange: { backendRef: svcRef, clientAuth: { clientId: "c", method: "PrivateKeyJwt" } } }),
    ["spec.backend.auth.oauthTokenExchange.clientAuth.privateKeyJwt", "method PrivateKeyJwt requires privateKeyJwt"],
  ),
  P(
    "certificateRef without certificateHeader",
    auth({
      oauthTokenExchange: {
        backendRef: svcRef,
        clientAuth: {
          clientId: "c",
          method: "PrivateKeyJwt",
          privateKeyJwt: { signingKeyRef: { name: "k" }, certificateRef: { name: "c" }, assertionAudience: "a" },
        },
      },
    }),
    [
      "spec.backend.auth.oauthTokenExchange.clientAuth.privateKeyJwt.certificateRef",
      "certificateRef and certificateHeader must be set together",
    ],
  ),
  P(
    "public client ClientSecretPost",
    auth({ oauthTokenExchange: { backendRef: svcRef, clientAuth: { clientId: "c", method: "ClientSecretPost" } } }),
  ),
  P(
    "no secretRef with ClientSecretBasic",
    auth({ oauthTokenExchange: { backendRef: svcRef, clientAuth: { clientId: "c" } } }),
    ["spec.backend.auth.oauthTokenExchange.clientAuth.method", "without secretRef only ClientSecretPost"],
  ),
  P(
    "actorToken with TokenExchange",
    auth({
      oauthTokenExchange: {
        backendRef: svcRef,
        actorToken: { source: { header: { name: "X-Actor" } }, mayAct: "Required" },
      },
    }),
  ),
  P(
    "actorToken with JwtBearer",
    auth({
      oauthTokenExchange: {
        backendRef: svcRef,
        grantType: "JwtBearer",
        actorToken: { source: { header: { name: "X-Actor" } } },
      },
    }),
    ["spec.backend.auth.oauthTokenExchange.actorToken", "actorToken is only valid with grantType TokenExchange"],
  ),
  P("actorToken without source", auth({ oauthTokenExchange: { backendRef: svcRef, actorToken: {} } }), [
    "spec.backend.auth.oauthTokenExchange.actorToken.source",
    "required field is missing",
  ]),
  P("requestedTokenType IdJag", auth({ oauthTokenExchange: { backendRef: svcRef, requestedTokenType: "IdJag" } })),
  P(
    "requestedTokenType URI",
    auth({ oauthTokenExchange: { backendRef: svcRef, requestedTokenType: "urn:ietf:params:oauth:token-type:jwt" } }),
    ["spec.backend.auth.oauthTokenExchange.requestedTokenType", "must be one of AccessToken, Jwt, IdToken, IdJag"],
  ),
  P(
    "subject token type URI",
    auth({
      oauthTokenExchange: {
        backendRef: svcRef,
        subjectToken: { tokenType: "urn:ietf:params:oauth:token-type:id_token" },
      },
    }),
  ),
  P(
    "subject token type bad",
    auth({ oauthTokenExchange: { backendRef: svcRef, subjectToken: { tokenType: "Opaque" } } }),
    [
      "spec.backend.auth.oauthTokenExchange.subjectToken.tokenType",
      "must be AccessToken, Jwt, IdToken, IdJag or an absolute URI",
    ],
  ),
  P("token exchange path", auth({ oauthTokenExchange: { backendRef: svcRef, path: "token" } }), [
    "spec.backend.auth.oauthTokenExchange.path",
    "must start with /",
  ]),
  // rate limits, ext auth, TLS, misc
  P("local requests", traffic({ rateLimit: { local: [{ requests: 10, unit: "Minutes" }] } })),
  P("local requests and tokens", traffic({ rateLimit: { local: [{ requests: 10, tokens: 5, unit: "Minutes" }] } }), [
    "spec.traffic.rateLimit.local[0]",
    "exactly one of requests and tokens must be set",
  ]),
  P("local requests 0", traffic({ rateLimit: { local: [{ requests: 0, unit: "Minutes" }] } }), [
    "spec.traffic.rateLimit.local[0].requests",
    "must be at least 1",
  ]),
  P("extAuth grpc", traffic({ extAuth: { backendRef: svcRef, grpc: {} } })),
  P("extAuth grpc and http", traffic({ extAuth: { backendRef: svcRef, grpc: {}, http: {} } }), [
    "spec.traffic.extAuth",
    "at most one of grpc and http may be set",
  ]),
  P(
    "extAuth cache maxEntries 0",
    traffic({ extAuth: { backendRef: svcRef, cache: { key: ["jwt.sub"], ttl: "5m", maxEntries: 0 } } }),
    ["spec.traffic.extAuth.cache.maxEntries", "must be at least 1"],
  ),
  P("backend TLS insecure", backendPol({ tls: { insecureSkipVerify: "Hostname" } })),
  P("backend TLS SANs and insecure", backendPol({ tls: { insecureSkipVerify: "All", verifySubjectAltNames: ["a"] } }), [
    "spec.backend.tls",
    "at most one of verifySubjectAltNames and insecureSkipVerify may be set",
  ]),
  P("backend TLS two client certs", backendPol({ tls: { mtlsCertificateRef: [{ name: "a" }, { name: "b" }] } }), [
    "spec.backend.tls.mtlsCertificateRef",
    "must have at most 1 entry (got 2)",
  ]),
  P("frontend TLS 1.3 only", pol({ frontend: { tls: { minProtocolVersion: "1.3", maxProtocolVersion: "1.3" } } })),
  P("frontend TLS 1.1", pol({ frontend: { tls: { minProtocolVersion: "1.1" } } }), [
    "spec.frontend.tls.minProtocolVersion",
    "must be one of 1.2, 1.3",
  ]),
  P(
    "frontend TLS min above max",
    pol({ frontend: { tls: { minProtocolVersion: "1.3", maxProtocolVersion: "1.2" } } }),
    ["spec.frontend.tls.minProtocolVersion", "minProtocolVersion must not be above maxProtocolVersion"],
  ),
  P("connect without mode", pol({ frontend: { connect: {} } }), [
    "spec.frontend.connect.mode",
    "required field is missing",
  ]),
  P(
    "otlp HTTP path",
    pol({ frontend: { accessLog: { otlp: { backendRef: svcRef, protocol: "HTTP", path: "/v1/logs" } } } }),
  ),
  P("otlp GRPC path", pol({ frontend: { accessLog: { otlp: { backendRef: svcRef, path: "/v1/logs" } } } }), [
    "spec.frontend.accessLog.otlp.path",
    "path is only valid with protocol HTTP",
  ]),
  P("directResponse", traffic({ directResponse: { status: 503, body: "down" } })),
  P("directResponse status 600", traffic({ directResponse: { status: 600 } }), [
    "spec.traffic.directResponse.status",
    "must be between 200 and 599 (got 600)",
  ]),
  P(
    "directResponse body and expression",
    traffic({ directResponse: { status: 200, body: "a", bodyExpression: "'b'" } }),
    ["spec.traffic.directResponse", "at most one of body and bodyExpression may be set"],
  ),
  P("csrf origin", traffic({ csrf: { additionalOrigins: ["https://a.example.com:8443"] } })),
  P("csrf origin with path", traffic({ csrf: { additionalOrigins: ["https://a.example.com/x"] } }), [
    "spec.traffic.csrf.additionalOrigins[0]",
    "must be an origin",
  ]),
  // value types
  P("Duration 1h30m", traffic({ timeouts: { request: "1h30m" } })),
  P("Duration 500ms", traffic({ timeouts: { request: "500ms" } })),
  P("Duration without unit", traffic({ timeouts: { request: "30" } }), [
    "spec.traffic.timeouts.request",
    "must be a duration",
  ]),
  P("Duration 33 chars", traffic({ timeouts: { request: `${"1".repeat(32)}s` } }), [
    "spec.traffic.timeouts.request",
    "must be at most 32 characters",
  ]),
  ...[
    "512",
    "512Ki",
    "2Mi",
    "1Gi",
    "1Ti",
    "1Pi",
    "1Ei",
    "1n",
    "1u",
    "1m",
    "2k",
    "2M",
    "2G",
    "2T",
    "2P",
    "2E",
    "1e6",
    "1.5E+3",
    ".5Mi",
    "1.5",
  ].map((v) => {
    // Every form is a ByteSize; those outside what Envoy can hold for maxBufferSize (1 byte .. 2^32-1) are refused.
    const n = byteQuantity(v) ?? 0;
    const inRange = n >= 1 && n <= 4294967295;
    return P(
      `ByteSize ${v}`,
      pol({ frontend: { http: { maxBufferSize: v } } }),
      inRange ? undefined : ["spec.frontend.http.maxBufferSize", "must be between 1 and 4294967295 bytes"],
    );
  }),
  P("ByteSize integer", pol({ frontend: { http: { maxBufferSize: 1048576 } } })),
  P("ByteSize 2mb", pol({ frontend: { http: { maxBufferSize: "2mb" } } }), [
    "spec.frontend.http.maxBufferSize",
    "must be a byte quantity",
  ]),
  P("ByteSize negative", pol({ frontend: { http: { maxBufferSize: -1 } } }), [
    "spec.frontend.http.maxBufferSize",
    "must be at least 0",
  ]),
  P("ByteSize 33 chars", pol({ frontend: { http: { maxBufferSize: "1".repeat(33) } } }), [
    "spec.frontend.http.maxBufferSize",
    "must be at most 32 characters",
  ]),
  P("ByteSize boolean", pol({ frontend: { http: { maxBufferSize: true } } }), [
    "spec.frontend.http.maxBufferSize",
    "must be an integer or a string",
  ]),
  P("CEL syntax error", authz(["jwt.sub == "]), [
    "spec.traffic.authorization.policy.matchExpressions[0]",
    "invalid CEL expression",
  ]),
  P("CEL empty", authz([""]), ["spec.traffic.authorization.policy.matchExpressions[0]", "must not be empty"]),
  P("TinyString 64", pol({ frontend: { tls: { alpnProtocols: [str(64)] } } })),
  P("TinyString 65", pol({ frontend: { tls: { alpnProtocols: [str(65)] } } }), [
    "spec.frontend.tls.alpnProtocols[0]",
    "must be at most 64 characters (got 65)",
  ]),
  P(
    "ShortString 256",
    traffic({
      rateLimit: {
        global: { backendRef: svcRef, domain: str(256), descriptors: [{ entries: [{ name: "a", expression: "1" }] }] },
      },
    }),
  ),
  P(
    "ShortString 257",
    traffic({
      rateLimit: {
        global: { backendRef: svcRef, domain: str(257), descriptors: [{ entries: [{ name: "a", expression: "1" }] }] },
      },
    }),
    ["spec.traffic.rateLimit.global.domain", "must be at most 256 characters (got 257)"],
  ),
  P("unknown field with suggestion", traffic({ jwtAuthentification: {} }), [
    "spec.traffic.jwtAuthentification",
    'unknown field "jwtAuthentification"; did you mean jwtAuthentication?',
  ]),
  P("wrong type", pol({ targetRefs: "gw" }), ["spec.targetRefs", 'must be a list, not the string "gw"']),
  P("deprecated mcp authentication is accepted", {
    targetRefs: [{ group: "sluice.dev", kind: "GwBackend", name: "tools" }],
    backend: { mcp: { authentication: { jwks: { jwksPath: "/k", backendRef: svcRef } } } },
  }),

  // GwBackend
  B("static host and port", { static: { host: "a", port: 80 } }),
  B("static unixPath", { static: { unixPath: "/s.sock" } }),
  B("static unixPath and host", { static: { unixPath: "/s.sock", host: "a" } }, [
    "spec.static.unixPath",
    "unixPath is exclusive with host and port",
  ]),
  B("static host without port", { static: { host: "a" } }, ["spec.static", "static needs host and port, or unixPath"]),
  B("dynamicForwardProxy", { dynamicForwardProxy: {} }),
  B("a2a", { a2a: { host: "agent", port: 9999 } }),
  B("cloudA agentCore", {
    cloudA: {
      agentCore: {
        agentRuntimeArn: "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x_1-Ab",
        qualifier: "prod",
      },
    },
  }),
  B(
    "cloudA agentCore: not an agent runtime ARN",
    { cloudA: { agentCore: { agentRuntimeArn: "arn:aws:bedrock-agentcore:us-east-1:1:runtime/x" } } },
    ["spec.cloudA.agentCore.agentRuntimeArn", "must be an agent runtime ARN"],
  ),
  B(
    "cloudA agentCore: a qualifier that would change the query",
    {
      cloudA: {
        agentCore: {
          agentRuntimeArn: "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/x",
          qualifier: "v1&x=y",
        },
      },
    },
    ["spec.cloudA.agentCore.qualifier", "must be an endpoint name or version"],
  ),
  B("no variant", { policies: {} }, [
    "spec",
    "exactly one of ai, static, dynamicForwardProxy, mcp, cloudA and a2a must be set",
  ]),
  B("two variants", { dynamicForwardProxy: {}, a2a: { host: "a", port: 1 } }, ["spec", "exactly one of ai, static"]),
  B("ai provider", ai({ provider: { providerA: { model: "gpt-4o" } } })),
  B("ai provider and groups", ai({ provider: { providerA: {} }, groups: [{ providers: [provider("a")] }] }), [
    "spec.ai",
    "exactly one of provider and groups must be set",
  ]),
  B("ai neither", ai({}), ["spec.ai", "exactly one of provider and groups must be set"]),
  B(
    "unique provider names",
    ai({ groups: [{ providers: [provider("a"), provider("b")] }, { providers: [provider("c")] }] }),
  ),
  B(
    "repeated provider name across groups",
    ai({ groups: [{ providers: [provider("a")] }, { providers: [provider("a")] }] }),
    ["spec.ai.groups", "provider names must be unique across all groups"],
  ),
  B("repeated provider name in a group", ai({ groups: [{ providers: [provider("a"), provider("a")] }] }), [
    "spec.ai.groups",
    "provider names must be unique across all groups",
  ]),
  B("provider two variants", ai({ provider: { providerA: {}, providerD: {} } }), [
    "spec.ai.provider",
    "exactly one of providerA, providerB, cloudC, providerD, providerE, providerF, providerG and custom must be set",
  ]),
  B("providerB v1 without deployment", ai({ provider: { providerB: { endpoint: "x.openai.azure.com" } } })),
  B(
    "providerB dated version with deployment",
    ai({ provider: { providerB: { endpoint: "x", deploymentName: "d", apiVersion: "2024-10-21" } } }),
  ),
  B(
    "providerB dated version without deployment",
    ai({ provider: { providerB: { endpoint: "x", apiVersion: "2024-10-21" } } }),
    ["spec.ai.provider.providerB.deploymentName", "deploymentName is required unless apiVersion is v1"],
  ),
  B(
    "cloudC Foundry with project",
    ai({ provider: { cloudC: { resourceName: "r", resourceType: "Foundry", projectName: "p" } } }),
  ),
  B("cloudC Foundry without project", ai({ provider: { cloudC: { resourceName: "r", resourceType: "Foundry" } } }), [
    "spec.ai.provider.cloudC.projectName",
    "projectName is required when resourceType is Foundry",
  ]),
  B(
    "providerG region",
    ai({ provider: { providerG: { region: "eu-west-1", guardrail: { identifier: "g", version: "1" } } } }),
  ),
  B("providerG region uppercase", ai({ provider: { providerG: { region: "EU-WEST-1" } } }), [
    "spec.ai.provider.providerG.region",
    "must be lowercase letters, digits and '-'",
  ]),
  B("pathPrefix on providerD", ai({ provider: { providerD: {}, pathPrefix: "/anthropic/v1" } })),
  B("pathPrefix on providerE", ai({ provider: { providerE: {}, pathPrefix: "/v1beta" } }), [
    "spec.ai.provider.pathPrefix",
    "pathPrefix is only supported for providerA and providerD",
  ]),
  B(
    "custom with host and port",
    ai({ provider: { custom: { formats: [{ type: "Completions" }] }, host: "vllm", port: 8000 } }),
  ),
  B(
    "custom with backendRef",
    ai({ provider: { custom: { backendRef: { name: "vllm", port: 8000 }, formats: [{ type: "Messages" }] } } }),
  ),
  B(
    "custom with InferencePool",
    ai({
      provider: {
        custom: {
          backendRef: { group: "inference.networking.k8s.io", kind: "InferencePool", name: "p" },
          formats: [{ type: "Completions" }],
        },
      },
    }),
  ),
  B("custom without target", ai({ provider: { custom: { formats: [{ type: "Completions" }] } } }), [
    "spec.ai.provider.custom",
    "custom without backendRef requires host and port",
  ]),
  B(
    "custom backendRef of another kind",
    ai({ provider: { custom: { backendRef: { kind: "GwBackend", name: "b" }, formats: [{ type: "Completions" }] } } }),
    ["spec.ai.provider.custom.backendRef", "backendRef must be a Service or an InferencePool"],
  ),
  B("mcp selector target", {
    mcp: { targets: [{ name: "s", selector: { services: { matchLabels: { mcp: "true" } } } }] },
  }),
  B(
    "mcp target selector and static",
    { mcp: { targets: [{ name: "s", selector: {}, static: { host: "h", port: 1 } }] } },
    ["spec.mcp.targets[0]", "exactly one of selector and static must be set"],
  ),
  B(
    "mcp static host and backendRef",
    { mcp: { targets: [{ name: "s", static: { host: "h", backendRef: { name: "s" }, port: 1 } }] } },
    ["spec.mcp.targets[0].static", "exactly one of host and backendRef must be set"],
  ),
  B("mcp policies on host target", {
    mcp: { targets: [{ name: "s", static: { host: "h", port: 1, policies: { tls: {} } } }] },
  }),
  B(
    "mcp policies on backendRef target",
    { mcp: { targets: [{ name: "s", static: { backendRef: { name: "s" }, port: 1, policies: { tls: {} } } }] } },
    ["spec.mcp.targets[0].static.policies", "policies are only valid on host-based targets"],
  ),
  B("mcp repeated target names", { mcp: { targets: [mcpTarget("a"), mcpTarget("a")] } }, [
    "spec.mcp.targets",
    "target names must be unique",
  ]),
  B(
    "mcp method patterns",
    processors(processor({}, { "tools/call": "Request", "tools/*": "Full", "*/list": "Response", "*": "Off" })),
  ),
  B("mcp method pattern with two wildcards", processors(processor({}, { "*/*": "Full" })), [
    "spec.policies.mcp.guardrails.processors[0].methods",
    "method patterns must be exact",
  ]),
  B("mcp method phase", processors(processor({}, { "tools/*": "Always" })), [
    'spec.policies.mcp.guardrails.processors[0].methods["tools/*"]',
    "must be one of Off, Request, Response, Full",
  ]),
  B("policies.ai on an mcp backend", { mcp: { targets: [mcpTarget("t")] }, policies: { ai: {} } }, [
    "spec.policies.ai",
    "policies.ai is only valid on ai backends",
  ]),
  B("policies.mcp on an ai backend", { ai: { provider: { providerA: {} } }, policies: { mcp: {} } }, [
    "spec.policies.mcp",
    "policies.mcp is only valid on mcp backends",
  ]),
  B("request guard regex", guard({ request: [regexGuard] })),
  B(
    "request guard moderationA",
    guard({ request: [{ moderationA: { policies: { auth: { secretRef: { name: "k" } } } } }] }),
  ),
  B("request guard two kinds", guard({ request: [{ ...regexGuard, moderationA: {} }] }), [
    "spec.policies.ai.promptGuard.request[0]",
    "exactly one of regex, webhook, moderationA, guardrailsA and guardrailsB must be set",
  ]),
  B("request guard no kind", guard({ request: [{ response: { statusCode: 400 } }] }), [
    "spec.policies.ai.promptGuard.request[0]",
    "exactly one of regex, webhook, moderationA, guardrailsA and guardrailsB must be set",
  ]),
  B("response guard moderationA", guard({ response: [{ moderationA: {} }] }), [
    "spec.policies.ai.promptGuard.response[0].moderationA",
    'unknown field "moderationA"',
  ]),
  B(
    "moderationA auth key and secretRef",
    guard({ request: [{ moderationA: { policies: { auth: { key: "k", secretRef: { name: "s" } } } } }] }),
    [
      "spec.policies.ai.promptGuard.request[0].moderationA.policies.auth",
      "exactly one of key and secretRef must be set",
    ],
  ),
  B(
    "guardrailsA with default cloudA",
    guard({
      response: [
        { guardrailsA: { identifier: "g", version: "1", region: "us-east-1", policies: { auth: { cloudA: {} } } } },
      ],
    }),
  ),
  B("guard custom status 700", guard({ request: [{ ...regexGuard, response: { statusCode: 700 } }] }), [
    "spec.policies.ai.promptGuard.request[0].response.statusCode",
    "must be between 200 and 599 (got 700)",
  ]),

  // GwModel
  M("provider", model({})),
  M("virtual model", virtual({ weighted: { targets: [ref(1)] } })),
  M("provider and virtualModel", model({ virtualModel: { weighted: { targets: [ref(1)] } } }), [
    "spec",
    "exactly one of provider and virtualModel must be set",
  ]),
  M("neither provider nor virtualModel", { parentRefs: [{ name: "gw" }] }, [
    "spec",
    "exactly one of provider and virtualModel must be set",
  ]),
  M(
    "virtual model two kinds",
    virtual({ weighted: { targets: [ref(1)] }, failover: { targets: [{ ...ref(1), priority: 1 }] } }),
    ["spec.virtualModel", "exactly one of weighted, failover and conditional must be set"],
  ),
  M("failover priority 0", virtual({ failover: { targets: [{ ...ref(1), priority: 0 }] } })),
  M("failover priority 1000000", virtual({ failover: { targets: [{ ...ref(1), priority: 1000000 }] } })),
  M("failover priority 1000001", virtual({ failover: { targets: [{ ...ref(1), priority: 1000001 }] } }), [
    "spec.virtualModel.failover.targets[0].priority",
    "must be between 0 and 1000000 (got 1000001)",
  ]),
  M("failover priority -1", virtual({ failover: { targets: [{ ...ref(1), priority: -1 }] } }), [
    "spec.virtualModel.failover.targets[0].priority",
    "must be between 0 and 1000000 (got -1)",
  ]),
  M("failover priority missing", virtual({ failover: { targets: [ref(1)] } }), [
    "spec.virtualModel.failover.targets[0].priority",
    "required field is missing",
  ]),
  M(
    "conditional fallback last",
    virtual({ conditional: { targets: [{ ...ref(1), when: "jwt.tier == 'pro'" }, ref(2)] } }),
  ),
  M("conditional fallback first", virtual({ conditional: { targets: [ref(2), { ...ref(1), when: "true" }] } }), [
    "spec.virtualModel.conditional.targets",
    "only one target may omit when, and it must be the last",
  ]),
  M("cloudC with Provider02", model({ provider: "Provider02", cloudC: { resourceName: "r", resourceType: "OpenAI" } })),
  M("cloudC with Provider01", model({ cloudC: { resourceName: "r", resourceType: "OpenAI" } }), [
    "spec.cloudC",
    "cloudC is only valid with provider Provider02",
  ]),
  M("providerG with Provider06", model({ provider: "Provider06", providerG: {} })),
  M(
    "custom with Custom",
    model({ provider: "Custom", custom: { formats: [{ type: "Completions" }] }, baseURL: "http://vllm:8000" }),
  ),
  M("custom with Provider03", model({ provider: "Provider03", custom: { formats: [{ type: "Completions" }] } }), [
    "spec.custom",
    "custom is only valid with provider Custom",
  ]),
  M("provider Provider20", model({ provider: "Provider20" }), ["spec.provider", "must be one of Provider01"]),
  M("baseURL https with path", model({ baseURL: "https://llm.example.com:8443/openai/v1" })),
  M("baseURL http", model({ baseURL: "http://vllm.ai.svc:8000" })),
  M("baseURL ftp", model({ baseURL: "ftp://x" }), [
    "spec.baseURL",
    "must be an http or https URL with no query, fragment or user info",
  ]),
  M("baseURL query", model({ baseURL: "https://x/v1?key=a" }), ["spec.baseURL", "must be an http or https URL"]),
  M("baseURL fragment", model({ baseURL: "https://x/v1#a" }), ["spec.baseURL", "must be an http or https URL"]),
  M("baseURL user info", model({ baseURL: "https://user:pw@x/v1" }), ["spec.baseURL", "must be an http or https URL"]),
  M("baseURL on a virtual model", { ...virtual({ weighted: { targets: [ref(1)] } }), baseURL: "https://x" }, [
    "spec.baseURL",
    "baseURL is only valid with provider",
  ]),
  M("model auth jwtSign", model({ policies: { auth: { jwtSign: {} } } }), [
    "spec.policies.auth.jwtSign",
    'unknown field "jwtSign"',
  ]),
  M("model auth two mechanisms", model({ policies: { auth: { key: "a", passthrough: {} } } }), [
    "spec.policies.auth",
    "at most one of key, secretRef, passthrough, cloudA, cloudC, cloudB and oauthTokenExchange may be set",
  ]),
  M("visibility", model({ visibility: "Private" }), ["spec.visibility", "must be one of Public, Internal"]),

  // GwParameters
  G("shutdown bounds", { shutdown: { min: 0, max: 31536000 } }),
  G("shutdown max above bound", { shutdown: { min: 0, max: 31536001 } }, [
    "spec.shutdown.max",
    "must be between 0 and 31536000 (got 31536001)",
  ]),
  G("shutdown min negative", { shutdown: { min: -1, max: 10 } }, [
    "spec.shutdown.min",
    "must be between 0 and 31536000 (got -1)",
  ]),
  G("shutdown min above max", { shutdown: { min: 30, max: 5 } }, ["spec.shutdown.min", "min must not be above max"]),
  G("shutdown without max", { shutdown: { min: 1 } }, ["spec.shutdown.max", "required field is missing"]),
  G("HPA on Deployment", { horizontalPodAutoscaler: { spec: { maxReplicas: 3 } } }),
  G("HPA on DaemonSet", { workload: { kind: "DaemonSet" }, horizontalPodAutoscaler: {} }, [
    "spec.horizontalPodAutoscaler",
    "horizontalPodAutoscaler is only valid for Deployment workloads",
  ]),
  G("logging format", { logging: { format: "yaml" } }, ["spec.logging.format", "must be one of json, text"]),
  G("overlay spec is free-form", {
    deployment: {
      metadata: { labels: { a: "b" } },
      spec: { template: { spec: { containers: [{ name: "proxy", $patch: "delete" }] } } },
    },
  }),
  G("modelCatalog", { modelCatalog: { sources: [{ configMap: { name: "costs" } }] } }),
];

/** `n` valid and `n + 1` invalid (and, for 1..N limits, 0 invalid), with the expected problem. */
/** A JSON object of exactly `n` characters (n = 2 or at least 18; shorter cut short), for the inline JWKS bounds. */
function jwksOfLength(n: number): string {
  return n < 18 ? "{}".slice(0, n) : `{"keys":[],"p":"${"k".repeat(n - 18)}"}`;
}

export function limit(
  kind: Kind,
  name: string,
  max: number,
  build: (n: number) => unknown,
  path: string,
  o: { min?: number; unit?: "entries" | "characters" } = {},
): Case[] {
  const unit = o.unit ?? "entries";
  const over =
    unit === "characters"
      ? `must be at most ${max} characters (got ${max + 1})`
      : `must have at most ${max === 1 ? "1 entry" : `${max} entries`} (got ${max + 1})`;
  const cases: Case[] = [
    { kind, name: `${name}: ${max}`, spec: build(max) },
    { kind, name: `${name}: ${max + 1}`, spec: build(max + 1), error: [path, over] },
  ];
  if (o.min !== undefined) {
    cases.push({ kind, name: `${name}: ${o.min}`, spec: build(o.min) });
    if (o.min > 0) {
      const under =
        unit === "characters"
          ? o.min === 1
            ? "must not be empty"
            : `must be at least ${o.min} characters`
          : "must not be empty";
      cases.push({ kind, name: `${name}: ${o.min - 1}`, spec: build(o.min - 1), error: [path, under] });
    }
  }
  return cases;
}

export const descriptor = (entries: number) => ({
  entries: times(entries, (i) => ({ name: `e${i}`, expression: "request.path" })),
});
export const globalRL = (descriptors: unknown[]) =>
  traffic({ rateLimit: { global: { backendRef: svcRef, domain: "d", descriptors } } });

export const LIMIT_CASES: Case[] = [
  // Document 1
  ...limit(
    "GwPolicy",
    "targetRefs",
    16,
    (n) => ({ targetRefs: times(n, (i) => ({ ...gateway, name: `gw${i}` })), traffic: {} }),
    "spec.targetRefs",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "targetSelectors",
    16,
    (n) => ({ targetSelectors: times(n, () => sel), traffic: {} }),
    "spec.targetSelectors",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "matchExpressions",
    256,
    (n) => authz(times(n, (i) => `request.path == '/${i}'`)),
    "spec.traffic.authorization.policy.matchExpressions",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "matchExpression length",
    16384,
    (n) => authz([`'${"x".repeat(n - 2)}'`]),
    "spec.traffic.authorization.policy.matchExpressions[0]",
    { unit: "characters" },
  ),
  ...limit(
    "GwPolicy",
    "JWT providers",
    64,
    (n) => traffic({ jwtAuthentication: { providers: times(n, () => jwtProvider()) } }),
    "spec.traffic.jwtAuthentication.providers",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "JWT audiences",
    64,
    (n) => traffic({ jwtAuthentication: { providers: [{ ...jwtProvider(), audiences: times(n, (i) => `a${i}`) }] } }),
    "spec.traffic.jwtAuthentication.providers[0].audiences",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "inline JWKS",
    65536,
    (n) => traffic({ jwtAuthentication: { providers: [jwtProvider({ inline: jwksOfLength(n) })] } }),
    "spec.traffic.jwtAuthentication.providers[0].jwks.inline",
    { min: 2, unit: "characters" },
  ),
  ...limit(
    "GwPolicy",
    "remote jwksPath",
    2000,
    (n) =>
      traffic({
        jwtAuthentication: { providers: [jwtProvider({ remote: { jwksPath: "/".repeat(n), backendRef: svcRef } })] },
      }),
    "spec.traffic.jwtAuthentication.providers[0].jwks.remote.jwksPath",
    { min: 1, unit: "characters" },
  ),
  ...limit(
    "GwPolicy",
    "basic users",
    256,
    (n) => traffic({ basicAuthentication: { users: times(n, (i) => `u${i}:$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/`) } }),
    "spec.traffic.basicAuthentication.users",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "conditional entries",
    16,
    (n) => traffic({ transformation: { conditional: times(n, () => ({ condition: "true", policy: {} })) } }),
    "spec.traffic.transformation.conditional",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "local rate limits",
    16,
    (n) => traffic({ rateLimit: { local: times(n, () => ({ requests: 1, unit: "Seconds" })) } }),
    "spec.traffic.rateLimit.local",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "global descriptors",
    16,
    (n) => globalRL(times(n, () => descriptor(1))),
    "spec.traffic.rateLimit.global.descriptors",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "global descriptor entries",
    16,
    (n) => globalRL([descriptor(n)]),
    "spec.traffic.rateLimit.global.descriptors[0].entries",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "backend credentials",
    8,
    (n) => auth({ credentials: times(n, () => ({ location: { header: { name: "X-K" } }, secretRef: { name: "s" } })) }),
    "spec.backend.auth.credentials",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "assume-role tags",
    50,
    (n) =>
      auth({
        cloudA: {
          assumeRole: {
            roleArn: "arn:aws:iam::123456789012:role/r",
            tags: times(n, (i) => ({ key: `k${i}`, value: "v" })),
          },
        },
      }),
    "spec.backend.auth.cloudA.assumeRole.tags",
  ),
  ...limit(
    "GwPolicy",
    "metric label additions",
    16,
    (n) =>
      pol({ frontend: { metrics: { attributes: { add: times(n, (i) => ({ name: `l${i}`, expression: "1" })) } } } }),
    "spec.frontend.metrics.attributes.add",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "keepalive retries",
    64,
    (n) => pol({ frontend: { tcp: { keepalive: { retries: n } } } }),
    "spec.frontend.tcp.keepalive.retries",
    { min: 1 },
  ).map(numeric(1, 64)),
  ...limit(
    "GwPolicy",
    "HTTP/1 headers",
    4096,
    (n) => pol({ frontend: { http: { http1MaxHeaders: n } } }),
    "spec.frontend.http.http1MaxHeaders",
    { min: 1 },
  ).map(numeric(1, 4096)),
  ...limit(
    "GwPolicy",
    "access log removals",
    32,
    (n) =>
      pol({
        frontend: {
          accessLog: { attributes: { remove: times(n, (i) => ACCESS_LOG_FIELDS[i % ACCESS_LOG_FIELDS.length]) } },
        },
      }),
    "spec.frontend.accessLog.attributes.remove",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "directResponse headers",
    16,
    (n) => traffic({ directResponse: { status: 200, headers: times(n, (i) => ({ name: `x-${i}`, value: "'v'" })) } }),
    "spec.traffic.directResponse.headers",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "directResponse body",
    4096,
    (n) => traffic({ directResponse: { status: 200, body: str(n) } }),
    "spec.traffic.directResponse.body",
    { min: 1, unit: "characters" },
  ),
  ...limit(
    "GwPolicy",
    "csrf origins",
    16,
    (n) => traffic({ csrf: { additionalOrigins: times(n, (i) => `https://a${i}.example.com`) } }),
    "spec.traffic.csrf.additionalOrigins",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "extAuth cache keys",
    16,
    (n) => traffic({ extAuth: { backendRef: svcRef, cache: { key: times(n, () => "jwt.sub"), ttl: "5m" } } }),
    "spec.traffic.extAuth.cache.key",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "extAuth context extensions",
    64,
    (n) =>
      traffic({
        extAuth: {
          backendRef: svcRef,
          grpc: { contextExtensions: Object.fromEntries(times(n, (i) => [`k${i}`, "v"])) },
        },
      }),
    "spec.traffic.extAuth.grpc.contextExtensions",
  ),
  ...limit(
    "GwPolicy",
    "token exchange scopes",
    64,
    (n) => auth({ oauthTokenExchange: { backendRef: svcRef, scopes: times(n, (i) => `s${i}`) } }),
    "spec.backend.auth.oauthTokenExchange.scopes",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "verifySubjectAltNames",
    16,
    (n) => backendPol({ tls: { verifySubjectAltNames: times(n, (i) => `s${i}`) } }),
    "spec.backend.tls.verifySubjectAltNames",
    { min: 1 },
  ),
  ...limit(
    "GwPolicy",
    "ALPN protocols",
    16,
    (n) => pol({ frontend: { tls: { alpnProtocols: times(n, (i) => `p${i}`) } } }),
    "spec.frontend.tls.alpnProtocols",
    { min: 1 },
  ),
  // Document 2
  ...limit(
    "GwBackend",
    "MCP targets",
    32,
    (n) => ({ mcp: { targets: times(n, (i) => mcpTarget(`t${i}`)) } }),
    "spec.mcp.targets",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "priority groups",
    8,
    (n) => ai({ groups: times(n, (i) => ({ providers: [provider(`p${i}`)] })) }),
    "spec.ai.groups",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "providers per group",
    16,
    (n) => ai({ groups: [{ providers: times(n, (i) => provider(`p${i}`)) }] }),
    "spec.ai.groups[0].providers",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "request guards",
    8,
    (n) => guard({ request: times(n, () => regexGuard) }),
    "spec.policies.ai.promptGuard.request",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "response guards",
    8,
    (n) => guard({ response: times(n, () => regexGuard) }),
    "spec.policies.ai.promptGuard.response",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "provider formats",
    6,
    (n) =>
      ai({
        provider: {
          custom: { formats: times(n, (i) => ({ type: PROVIDER_FORMATS[i % PROVIDER_FORMATS.length] })) },
          host: "h",
          port: 1,
        },
      }),
    "spec.ai.provider.custom.formats",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "defaults",
    64,
    (n) => backendAI({ defaults: times(n, (i) => ({ field: `f${i}`, value: i })) }),
    "spec.policies.ai.defaults",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "overrides",
    64,
    (n) => backendAI({ overrides: times(n, (i) => ({ field: `f${i}`, value: { a: [i] } })) }),
    "spec.policies.ai.overrides",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "transformations",
    64,
    (n) => backendAI({ transformations: times(n, (i) => ({ field: `f${i}`, expression: "1" })) }),
    "spec.policies.ai.transformations",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "model aliases",
    64,
    (n) => backendAI({ modelAliases: Object.fromEntries(times(n, (i) => [`a${i}`, "m"])) }),
    "spec.policies.ai.modelAliases",
  ),
  ...limit(
    "GwBackend",
    "guardrail processors",
    16,
    (n) => ({
      mcp: { targets: [mcpTarget("t")] },
      policies: { mcp: { guardrails: { processors: times(n, () => processor()) } } },
    }),
    "spec.policies.mcp.guardrails.processors",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "guardrail methods",
    64,
    (n) => processors(processor({}, Object.fromEntries(times(n, (i) => [`m${i}`, "Full"])))),
    "spec.policies.mcp.guardrails.processors[0].methods",
    { min: 1 },
  ),
  ...limit(
    "GwBackend",
    "allowed headers",
    64,
    (n) => processors(processor({ allowedRequestHeaders: times(n, (i) => `h${i}`) })),
    "spec.policies.mcp.guardrails.processors[0].remote.allowedRequestHeaders",
  ),
  ...limit(
    "GwBackend",
    "disallowed headers",
    64,
    (n) => processors(processor({ disallowedRequestHeaders: times(n, (i) => `h${i}`) })),
    "spec.policies.mcp.guardrails.processors[0].remote.disallowedRequestHeaders",
  ),
  ...limit(
    "GwBackend",
    "guardrail metadata",
    64,
    (n) => processors(processor({ metadata: Object.fromEntries(times(n, (i) => [`k${i}`, "1"])) })),
    "spec.policies.mcp.guardrails.processors[0].remote.metadata",
  ),
  ...limit(
    "GwModel",
    "parentRefs",
    16,
    (n) => ({ ...model({}), parentRefs: times(n, (i) => ({ name: `gw${i}` })) }),
    "spec.parentRefs",
    { min: 1 },
  ),
  ...limit(
    "GwModel",
    "failover targets",
    64,
    (n) => virtual({ failover: { targets: times(n, (i) => ({ ...ref(i), priority: i })) } }),
    "spec.virtualModel.failover.targets",
    { min: 1 },
  ),
  ...limit(
    "GwModel",
    "conditional targets",
    64,
    (n) => virtual({ conditional: { targets: times(n, (i) => ({ ...ref(i), when: "true" })) } }),
    "spec.virtualModel.conditional.targets",
    { min: 1 },
  ),
  ...limit(
    "GwModel",
    "weighted targets",
    64,
    (n) => virtual({ weighted: { targets: times(n, (i) => ref(i)) } }),
    "spec.virtualModel.weighted.targets",
    { min: 1 },
  ),
  ...limit(
    "GwModel",
    "model transformations",
    64,
    (n) => model({ policies: { transformations: times(n, (i) => ({ field: `f${i}`, expression: "1" })) } }),
    "spec.policies.transformations",
    { min: 1 },
  ),
  ...limit("GwModel", "baseURL", 1024, (n) => model({ baseURL: `https://x/${"a".repeat(n - 10)}` }), "spec.baseURL", {
    unit: "characters",
  }),
];

/** Turns an entries-limit case into a numeric-bound case (the value is the number itself). */
export function numeric(min: number, max: number) {
  return (c: Case): Case => {
    if (c.error === undefined) return c;
    const got = c.name.endsWith(`: ${max + 1}`) ? max + 1 : min - 1;
    return { ...c, error: [c.error[0], `must be between ${min} and ${max} (got ${got})`] };
  };
}

/** The whole resource of a case (namespace ns, name x). */
export function caseDocument(c: Case): Json {
  return { apiVersion: "sluice.dev/v1alpha1", kind: c.kind, metadata: { name: "x", namespace: "ns" }, spec: c.spec };
}
