// The validation issue 22 asked for: rules the spec implies (and combinations users expect refused where it is
// silent) that Sluice did not enforce. Each invalid case carries the exact field path and the exact message
// `sluice validate` gives; test/unit/validate-rules.test.ts checks them through the validator, the CRDs' CEL rules
// and the `sluice validate` command, and test/e2e/kube-crds.test.ts submits them to a real kube-apiserver.

import { ACCESS_LOG_FIELDS } from "../../src/api/policy.js";
import {
  B,
  backendPol,
  type Case,
  G,
  GW,
  gateway,
  type Json,
  M,
  model,
  P,
  pol,
  service,
  svcRef,
  traffic,
} from "./api-cases.js";

const sluiceBackend = { group: "sluice.dev", kind: "GwBackend", name: "b" };
const specBackend = { group: "sluice.dev", kind: "Backend", name: "b" };
const frontend = (http: Json): Json => pol({ frontend: { http } });
const provider = (p: Json): Json => ({ ai: { provider: { providerA: {}, ...p } } });
const jwtSign = (extra: Json): Json => ({ jwtSign: { signingKeyRef: { name: "k" }, claims: { sub: "gw" }, ...extra } });

const MATCH = "must be an exact name, one * as the last character (gpt-*), one * as the first (*-latest), or *";
const GROUP =
  "group does not match kind: Gateway and routes are in gateway.networking.k8s.io, ListenerSet in " +
  'gateway.networking.k8s.io or gateway.networking.x-k8s.io, Service in the core group (""), GwBackend ' +
  "(the spec's Backend) in sluice.dev";
const PORT =
  "port is only valid on frontend policies that target a Gateway, in a policy with no traffic or backend section";
const AI_ON_SERVICE =
  "backend.ai and backend.mcp apply only to backends of that type (a GwBackend with ai or mcp), not to a Service";
const LOCATION =
  "location applies only to key, secretRef and passthrough (oauthTokenExchange and jwtSign have their own location)";
const PATHS =
  "at most one of path and pathPrefix may be set: path replaces the whole upstream path, pathPrefix its prefix";
const BUFFER = (f: string) =>
  `${f} must be between 1 and 4294967295 bytes: Envoy holds it in 32 bits and reads 0 as no limit`;
const WINDOW = (f: string) => `${f} must be between 65535 and 2147483647 bytes: the HTTP/2 window bounds Envoy accepts`;
const slash = (got: string) => `must start with / (got ${JSON.stringify(got)})`;
const APR1 = "$apr1$h64NueI9$cRWhNJg91n2mOhMj7Sy/D/";
const HTPASSWD =
  "must be an htpasswd line <user>:<password_hash> with an MD5 ($apr1$ or $1$), bcrypt ($2a$, $2b$, $2y$), " +
  "crypt (13 characters) or SHA-1 ({SHA}) hash, never a raw password";
const CUSTOM_GROUP = "group must be empty for a Service and inference.networking.k8s.io for an InferencePool";
const LINEAR = "(patterns use the RE2-like subset: no lookaround, no backreferences, small counted repetitions)";
const guards = (g: Json): Json => ({ ai: { provider: { providerA: {} } }, policies: { ai: { promptGuard: g } } });
const tokenExchange = (clientAuth: Json): Json =>
  backendPol({ auth: { oauthTokenExchange: { backendRef: svcRef, clientAuth } } });
const pkjwt = { signingKeyRef: { name: "k" }, assertionAudience: "https://idp/token" };
const gwModel = (m: Json): Json => ({ parentRefs: [{ name: "gw" }], ...m });
const HOST = "must be a host name or IP address, without scheme, path or spaces";
const host = (got: string) => `${HOST} (got ${JSON.stringify(got)})`;
const unique = (what: string, first: number) => `must be unique: ${what} is already at [${first}]`;
const tls = (t: Json): Json => pol({ frontend: { tls: t } });
const ONLY_TLS13 = "cipherSuites has only TLS 1.3 suites, which cannot be used with maxProtocolVersion 1.2";
const jwks = (inline: string): Json =>
  traffic({ jwtAuthentication: { providers: [{ issuer: "https://idp", jwks: { inline } }] } });

export const VALIDATE_CASES: Case[] = [
  // GwModel spec.match.model: no *, exactly *, or one * first or last.
  ...["gpt-4o", "gpt-*", "*-latest", "*"].map((m) => M(`match.model ${m}`, model({ match: { model: m } }))),
  ...["gpt*4o", "**", "*gpt*", "gpt-**"].map((m) =>
    M(`match.model ${m}`, model({ match: { model: m } }), ["spec.match.model", `${MATCH} (got ${JSON.stringify(m)})`]),
  ),

  // backend.ai / backend.mcp only for backends of that type: never a core Service.
  P("backend.ai on a GwBackend", { targetRefs: [sluiceBackend], backend: { ai: { modelAliases: { a: "b" } } } }),
  P("backend.ai on a Gateway", pol({ backend: { ai: { modelAliases: { a: "b" } } } })),
  P("backend.ai on a Service", backendPol({ ai: { modelAliases: { a: "b" } } }), [
    "spec.targetRefs[0].kind",
    AI_ON_SERVICE,
  ]),
  P(
    "backend.mcp on a selected Service",
    {
      targetSelectors: [{ group: "", kind: "Service", matchLabels: { a: "b" } }],
      backend: { mcp: { authorization: { policy: { matchExpressions: ["true"] } } } },
    },
    ["spec.targetSelectors[0].kind", AI_ON_SERVICE],
  ),

  // port: only on a Gateway target of a frontend-only policy.
  P("port on a frontend-only policy", { targetRefs: [{ ...gateway, port: 8080 }], frontend: { http: {} } }),
  P("port with frontend and traffic", { targetRefs: [{ ...gateway, port: 8080 }], frontend: {}, traffic: {} }, [
    "spec.targetRefs[0].port",
    PORT,
  ]),
  P("port with frontend and backend", { targetRefs: [{ ...gateway, port: 8080 }], frontend: {}, backend: {} }, [
    "spec.targetRefs[0].port",
    PORT,
  ]),

  // caCertificateRefs name ConfigMaps.
  P("caCertificateRefs ConfigMap", backendPol({ tls: { caCertificateRefs: [{ name: "ca", kind: "ConfigMap" }] } })),
  P("caCertificateRefs Secret", backendPol({ tls: { caCertificateRefs: [{ name: "ca", kind: "Secret" }] } }), [
    "spec.backend.tls.caCertificateRefs[0].kind",
    'must be one of ConfigMap (got "Secret")',
  ]),

  // The spec's `Backend` target kind.
  P("Backend target of a backend policy", { targetRefs: [specBackend], backend: { tcp: { connectTimeout: "1s" } } }),
  P("Backend target of a traffic policy", { targetRefs: [specBackend], traffic: {} }, [
    "spec.targetRefs[0].kind",
    "traffic policies may target Gateway, ListenerSet, XListenerSet, HTTPRoute, GRPCRoute, TCPRoute, TLSRoute",
  ]),
  P("Backend target in the core group", { targetRefs: [{ ...specBackend, group: "" }], backend: {} }, [
    "spec.targetRefs[0].group",
    GROUP,
  ]),

  // A target's group matches its kind.
  P("ListenerSet in the experimental group", {
    targetRefs: [{ group: "gateway.networking.x-k8s.io", kind: "ListenerSet", name: "ls" }],
    traffic: {},
  }),
  P("Gateway in the core group", { targetRefs: [{ ...gateway, group: "" }], traffic: {} }, [
    "spec.targetRefs[0].group",
    GROUP,
  ]),
  P("Service in the Gateway API group", { targetRefs: [{ ...service, group: GW }], backend: {} }, [
    "spec.targetRefs[0].group",
    GROUP,
  ]),
  P(
    "HTTPRoute selected in sluice.dev",
    { targetSelectors: [{ group: "sluice.dev", kind: "HTTPRoute", matchLabels: { a: "b" } }], traffic: {} },
    ["spec.targetSelectors[0].group", GROUP],
  ),
  P("GwBackend in the Gateway API group", { targetRefs: [{ ...sluiceBackend, group: GW }], backend: {} }, [
    "spec.targetRefs[0].group",
    GROUP,
  ]),

  // Mutually exclusive path fields of an LLM provider; upstream paths start with /.
  B("provider path", provider({ path: "/v1/chat/completions" })),
  B("provider path and pathPrefix", provider({ path: "/v1/chat/completions", pathPrefix: "/v2" }), [
    "spec.ai.provider",
    PATHS,
  ]),
  B(
    "grouped provider path and pathPrefix",
    { ai: { groups: [{ providers: [{ name: "a", providerA: {}, path: "/x", pathPrefix: "/y" }] }] } },
    ["spec.ai.groups[0].providers[0]", PATHS],
  ),
  B("provider path without /", provider({ path: "v1/chat/completions" }), [
    "spec.ai.provider.path",
    slash("v1/chat/completions"),
  ]),
  B("provider pathPrefix without /", provider({ pathPrefix: "v2" }), ["spec.ai.provider.pathPrefix", slash("v2")]),
  B(
    "custom format path without /",
    { ai: { provider: { custom: { formats: [{ type: "Completions", path: "chat" }] }, host: "h", port: 80 } } },
    ["spec.ai.provider.custom.formats[0].path", slash("chat")],
  ),
  B("MCP target path without /", { mcp: { targets: [{ name: "t", static: { host: "h", port: 80, path: "mcp" } }] } }, [
    "spec.mcp.targets[0].static.path",
    slash("mcp"),
  ]),
  P(
    "OTLP log path without /",
    pol({ frontend: { accessLog: { otlp: { backendRef: svcRef, protocol: "HTTP", path: "v1/logs" } } } }),
    ["spec.frontend.accessLog.otlp.path", slash("v1/logs")],
  ),
  P(
    "OTLP trace path without /",
    pol({ frontend: { tracing: { backendRef: svcRef, protocol: "HTTP", path: "v1/traces" } } }),
    ["spec.frontend.tracing.path", slash("v1/traces")],
  ),

  // References to credentials name a Secret; a backendRef names a Service or GwBackend.
  P("secretRef naming a ConfigMap", backendPol({ auth: { secretRef: { name: "s", kind: "ConfigMap" } } }), [
    "spec.backend.auth.secretRef.kind",
    'must be one of Secret (got "ConfigMap")',
  ]),
  P("mTLS certificate in another group", backendPol({ tls: { mtlsCertificateRef: [{ name: "c", group: "apps" }] } }), [
    "spec.backend.tls.mtlsCertificateRef[0].group",
    'must be one of "" (got "apps")',
  ]),
  P(
    "jwtSign key naming a ConfigMap",
    backendPol({ auth: jwtSign({ signingKeyRef: { name: "k", kind: "ConfigMap" } }) }),
    ["spec.backend.auth.jwtSign.signingKeyRef.kind", 'must be one of Secret (got "ConfigMap")'],
  ),
  P(
    "extAuth backendRef to an InferencePool",
    traffic({ extAuth: { backendRef: { kind: "InferencePool", group: "inference.networking.k8s.io", name: "p" } } }),
    ["spec.traffic.extAuth.backendRef.kind", "kind must be Service or GwBackend (the spec's Backend)"],
  ),

  // Sizes Envoy cannot hold: 0 (read as no limit) and 4 GiB or more (past 32 bits).
  P("maxBufferSize 1", frontend({ maxBufferSize: 1 })),
  P("maxBufferSize 4294967295", frontend({ maxBufferSize: "4294967295" })),
  P("maxBufferSize 0", frontend({ maxBufferSize: 0 }), ["spec.frontend.http.maxBufferSize", BUFFER("maxBufferSize")]),
  P("maxBufferSize 4Gi", frontend({ maxBufferSize: "4Gi" }), [
    "spec.frontend.http.maxBufferSize",
    BUFFER("maxBufferSize"),
  ]),
  P("buffer request 0", traffic({ buffer: { request: { maxBytes: "0" } } }), [
    "spec.traffic.buffer.request.maxBytes",
    BUFFER("maxBytes"),
  ]),
  P("buffer response 5G", traffic({ buffer: { response: { maxBytes: "5G" } } }), [
    "spec.traffic.buffer.response.maxBytes",
    BUFFER("maxBytes"),
  ]),
  P("extAuth forwardBody 4Gi", traffic({ extAuth: { backendRef: svcRef, forwardBody: { maxSize: "4Gi" } } }), [
    "spec.traffic.extAuth.forwardBody.maxSize",
    "maxSize must be between 1 and 4294967295 bytes: Envoy holds it in 32 bits",
  ]),
  P("http2WindowSize 64Ki", frontend({ http2WindowSize: "64Ki" })),
  P("http2WindowSize 1Ki", frontend({ http2WindowSize: "1Ki" }), [
    "spec.frontend.http.http2WindowSize",
    WINDOW("http2WindowSize"),
  ]),
  P("http2ConnectionWindowSize 2Gi", frontend({ http2ConnectionWindowSize: "2Gi" }), [
    "spec.frontend.http.http2ConnectionWindowSize",
    WINDOW("http2ConnectionWindowSize"),
  ]),
  P("http2FrameSize 8Ki", frontend({ http2FrameSize: "8Ki" }), [
    "spec.frontend.http.http2FrameSize",
    "http2FrameSize must be between 16384 and 16777215 bytes: the frame sizes HTTP/2 allows (RFC 9113)",
  ]),
  P("http2MaxHeaderSize 16Mi", frontend({ http2MaxHeaderSize: "16Mi" }), [
    "spec.frontend.http.http2MaxHeaderSize",
    "http2MaxHeaderSize must be between 1024 and 8388608 bytes: Envoy's header limit is 1 to 8192 KiB",
  ]),

  // promptCaching: providerG only.
  B("promptCaching on providerG", { ai: { provider: { providerG: {} } }, policies: { ai: { promptCaching: {} } } }),
  B("promptCaching on groups with a providerG", {
    ai: {
      groups: [
        {
          providers: [
            { name: "a", providerA: {} },
            { name: "g", providerG: {} },
          ],
        },
      ],
    },
    policies: { ai: { promptCaching: {} } },
  }),
  B("promptCaching on providerA", { ai: { provider: { providerA: {} } }, policies: { ai: { promptCaching: {} } } }, [
    "spec.policies.ai.promptCaching",
    "promptCaching applies only to providerG providers (Claude 3+ and Nova models); this backend has none",
  ]),
  B(
    "promptCaching on a providerD of a group",
    { ai: { groups: [{ providers: [{ name: "d", providerD: {}, policies: { ai: { promptCaching: {} } } }] }] } },
    [
      "spec.ai.groups[0].providers[0].policies.ai.promptCaching",
      "promptCaching applies only to providerG providers (Claude 3+ and Nova models)",
    ],
  ),

  // A policy with nothing to apply.
  P("policy with no section", pol({}), ["spec", "a policy needs at least one of frontend, traffic and backend"]),
  P(
    "policy with only targetSelectors",
    { targetSelectors: [{ group: GW, kind: "HTTPRoute", matchLabels: { a: "b" } }] },
    ["spec", "a policy needs at least one of frontend, traffic and backend"],
  ),

  // jwtSign.ttl: JWT times are whole seconds.
  P("jwtSign ttl 1s", backendPol({ auth: jwtSign({ ttl: "1s" }) })),
  P("jwtSign ttl 999ms", backendPol({ auth: jwtSign({ ttl: "999ms" }) }), [
    "spec.backend.auth.jwtSign.ttl",
    "ttl must be at least 1s: a token's exp is in whole seconds, so a shorter one expires as it is signed",
  ]),

  // auth.location only beside key, secretRef and passthrough.
  P("location with key", backendPol({ auth: { key: "k", location: { header: { name: "X-Key" } } } })),
  P(
    "location with passthrough",
    backendPol({ auth: { passthrough: {}, location: { queryParameter: { name: "k" } } } }),
  ),
  P("location with cloudA", backendPol({ auth: { cloudA: {}, location: { header: { name: "X-Key" } } } }), [
    "spec.backend.auth.location",
    LOCATION,
  ]),
  P("location with jwtSign", backendPol({ auth: { ...jwtSign({}), location: { header: { name: "X-Jwt" } } } }), [
    "spec.backend.auth.location",
    LOCATION,
  ]),
  M(
    "model auth location with cloudB",
    model({ policies: { auth: { cloudB: {}, location: { cookie: { name: "t" } } } } }),
    ["spec.policies.auth.location", LOCATION],
  ),

  // Basic authentication lines carry a hash of a supported kind: the spec allows hashes only, never raw passwords.
  ...[
    `alice:${APR1}`,
    "bob:$2y$05$c4WoMPo3SXsafkva.HHa6uXQZWr7oboPiC2bT/r7q1BB8I2s0BRqC",
    "carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=",
    "dave:rqXexS6ZhobKA",
  ].map((u) => P(`basic user ${u.split(":")[0]}`, traffic({ basicAuthentication: { users: [u] } }))),
  ...["alice:secret", "bob:$apr1$short", "carol:{SHA}abc"].map((u) =>
    P(`basic user ${u}`, traffic({ basicAuthentication: { users: [u] } }), [
      "spec.traffic.basicAuthentication.users[0]",
      HTPASSWD,
    ]),
  ),

  // privateKeyJwt is read only by method PrivateKeyJwt.
  P(
    "privateKeyJwt with PrivateKeyJwt",
    tokenExchange({ clientId: "c", method: "PrivateKeyJwt", privateKeyJwt: pkjwt }),
  ),
  P(
    "privateKeyJwt with ClientSecretBasic",
    tokenExchange({ clientId: "c", secretRef: { name: "s" }, privateKeyJwt: pkjwt }),
    [
      "spec.backend.auth.oauthTokenExchange.clientAuth.privateKeyJwt",
      "privateKeyJwt is only valid with method PrivateKeyJwt",
    ],
  ),

  // Regex guards: something to match; Reject on requests only; patterns the linear-time engine runs.
  B("request regex Reject", guards({ request: [{ regex: { builtins: ["Email"], action: "Reject" } }] })),
  B("response regex Mask", guards({ response: [{ regex: { matches: ["secret-[0-9]+"], action: "Mask" } }] })),
  B("response regex Reject", guards({ response: [{ regex: { builtins: ["Email"], action: "Reject" } }] }), [
    "spec.policies.ai.promptGuard.response[0].regex.action",
    'must be one of Mask (got "Reject")',
  ]),
  B("regex with nothing to match", guards({ request: [{ regex: { action: "Reject" } }] }), [
    "spec.policies.ai.promptGuard.request[0].regex",
    "a regex guard needs at least one pattern in matches or builtins",
  ]),
  B("regex with empty lists", guards({ request: [{ regex: { matches: [], builtins: [] } }] }), [
    "spec.policies.ai.promptGuard.request[0].regex",
    "a regex guard needs at least one pattern in matches or builtins",
  ]),
  B("regex unterminated group", guards({ request: [{ regex: { matches: ["(secret"] } }] }), [
    "spec.policies.ai.promptGuard.request[0].regex.matches[0]",
    `invalid pattern: Unterminated group ${LINEAR}`,
  ]),
  B("regex lookbehind", guards({ response: [{ regex: { matches: ["(?<=key=)[a-z]+"] } }] }), [
    "spec.policies.ai.promptGuard.response[0].regex.matches[0]",
    `invalid pattern: Cannot be executed in linear time ${LINEAR}`,
  ]),

  // delay.duration and extAuth.cache.ttl: a duration (or timestamp), else CEL that parses.
  P("delay 250ms", traffic({ delay: { duration: "250ms" } })),
  P("delay CEL", traffic({ delay: { duration: "request.headers['x-delay']" } })),
  P("delay neither", traffic({ delay: { duration: "2 seconds" } }), [
    "spec.traffic.delay.duration",
    "must be a duration such as 500ms or 2s, or a CEL expression",
  ]),
  P(
    "extAuth cache ttl timestamp",
    traffic({ extAuth: { backendRef: svcRef, cache: { key: ["jwt.sub"], ttl: "2030-01-01T00:00:00Z" } } }),
  ),
  P("extAuth cache ttl CEL", traffic({ extAuth: { backendRef: svcRef, cache: { key: ["jwt.sub"], ttl: "jwt.exp" } } })),
  P(
    "extAuth cache ttl neither",
    traffic({ extAuth: { backendRef: svcRef, cache: { key: ["jwt.sub"], ttl: "5 minutes" } } }),
    ["spec.traffic.extAuth.cache.ttl", "must be a duration such as 5m, an RFC 3339 timestamp, or a CEL expression"],
  ),

  // A custom provider's backendRef: group matches kind; the port is the Service's.
  B(
    "custom Service backendRef in another group",
    {
      ai: {
        provider: {
          custom: { backendRef: { group: "apps", name: "v", port: 80 }, formats: [{ type: "Completions" }] },
        },
      },
    },
    ["spec.ai.provider.custom.backendRef.group", CUSTOM_GROUP],
  ),
  B(
    "custom InferencePool in the core group",
    {
      ai: {
        provider: { custom: { backendRef: { kind: "InferencePool", name: "p" }, formats: [{ type: "Messages" }] } },
      },
    },
    ["spec.ai.provider.custom.backendRef.group", CUSTOM_GROUP],
  ),
  M(
    "model custom InferencePool in the core group",
    gwModel({
      provider: "Custom",
      custom: { backendRef: { kind: "InferencePool", group: "", name: "p" }, formats: [{ type: "Completions" }] },
    }),
    ["spec.custom.backendRef.group", CUSTOM_GROUP],
  ),
  B("custom backendRef with host", {
    ai: {
      provider: { custom: { backendRef: { name: "v", port: 80 }, formats: [{ type: "Completions" }] }, host: "llm" },
    },
  }),
  B(
    "custom backendRef with port",
    {
      ai: {
        provider: { custom: { backendRef: { name: "v", port: 80 }, formats: [{ type: "Completions" }] }, port: 8080 },
      },
    },
    ["spec.ai.provider.port", "port is not used with custom.backendRef: the Service's port is backendRef.port"],
  ),

  // GwModel parentRefs name Gateways.
  M("model on a listener", gwModel({ provider: "Provider01", parentRefs: [{ name: "gw", sectionName: "http" }] })),
  M("model on an HTTPRoute", gwModel({ provider: "Provider01", parentRefs: [{ name: "r", kind: "HTTPRoute" }] }), [
    "spec.parentRefs[0].kind",
    'must be one of Gateway (got "HTTPRoute")',
  ]),
  M(
    "model on a Gateway of the core group",
    gwModel({ provider: "Provider01", parentRefs: [{ name: "gw", group: "" }] }),
    ["spec.parentRefs[0].group", 'must be one of gateway.networking.k8s.io (got "")'],
  ),

  // What each GwModel provider family cannot be reached without.
  M("Provider02 without cloudC", gwModel({ provider: "Provider02" }), [
    "spec.cloudC",
    "provider Provider02 requires cloudC: its resourceName and resourceType form the host",
  ]),
  M("Provider05 with projectId", gwModel({ provider: "Provider05", providerF: { projectId: "p" } })),
  M("Provider05 without providerF", gwModel({ provider: "Provider05" }), [
    "spec.providerF",
    "provider Provider05 requires providerF: its projectId is part of every request path",
  ]),
  M("Provider05 without projectId", gwModel({ provider: "Provider05", providerF: { region: "us-central1" } }), [
    "spec.providerF.projectId",
    "required field is missing",
  ]),
  M("Provider08 with baseURL", gwModel({ provider: "Provider08", baseURL: "http://ollama:11434/v1" })),
  M("Provider08 without baseURL", gwModel({ provider: "Provider08" }), [
    "spec.baseURL",
    "provider Provider08 requires baseURL: it has no public address, so write where it runs",
  ]),
  M("Custom without custom", gwModel({ provider: "Custom", baseURL: "http://vllm:8000" }), [
    "spec.custom",
    "provider Custom requires custom: the formats it speaks",
  ]),
  M(
    "Custom with baseURL",
    gwModel({ provider: "Custom", custom: { formats: [{ type: "Completions" }] }, baseURL: "http://vllm:8000" }),
  ),
  M(
    "Custom without backendRef or baseURL",
    gwModel({ provider: "Custom", custom: { formats: [{ type: "Completions" }] } }),
    ["spec.baseURL", "provider Custom without custom.backendRef requires baseURL: where the provider runs"],
  ),
  // Second pass of issue 22's audit (docs/validation.md, "Second pass").
  // Hosts are names or addresses: a URL was looked up as a name and never resolved.
  B("static host name", { static: { host: "api.example.com", port: 443 } }),
  B("static host IPv6", { static: { host: "::1", port: 8080 } }),
  B("static host URL", { static: { host: "https://api.example.com", port: 443 } }, [
    "spec.static.host",
    host("https://api.example.com"),
  ]),
  B("a2a host with a path", { a2a: { host: "agent.local/a2a", port: 80 } }, ["spec.a2a.host", host("agent.local/a2a")]),
  B(
    "provider host URL",
    { ai: { provider: { custom: { formats: [{ type: "Completions" }] }, host: "http://vllm:8000/v1", port: 8000 } } },
    ["spec.ai.provider.host", host("http://vllm:8000/v1")],
  ),
  B("MCP target host with a space", { mcp: { targets: [{ name: "t", static: { host: "mcp host", port: 80 } }] } }, [
    "spec.mcp.targets[0].static.host",
    host("mcp host"),
  ]),

  // One entry per custom format type: the provider is asked at that format's one path.
  B(
    "custom formats of one type",
    {
      ai: {
        provider: {
          custom: {
            formats: [
              { type: "Completions", path: "/v1/chat/completions" },
              { type: "Completions", path: "/chat" },
            ],
          },
          host: "vllm",
          port: 8000,
        },
      },
    },
    ["spec.ai.provider.custom.formats[1]", unique('type "Completions"', 0)],
  ),

  // projectName is Foundry's: the OpenAI resource type has none.
  B("cloudC Foundry with projectName", {
    ai: { provider: { cloudC: { resourceName: "r", resourceType: "Foundry", projectName: "p" } } },
  }),
  B(
    "cloudC OpenAI with projectName",
    { ai: { provider: { cloudC: { resourceName: "r", resourceType: "OpenAI", projectName: "p" } } } },
    [
      "spec.ai.provider.cloudC.projectName",
      "projectName is only valid with resourceType Foundry (the OpenAI resource type has no project)",
    ],
  ),
  M(
    "model cloudC OpenAI with projectName",
    gwModel({ provider: "Provider02", cloudC: { resourceName: "r", resourceType: "OpenAI", projectName: "p" } }),
    [
      "spec.cloudC.projectName",
      "projectName is only valid with resourceType Foundry (the OpenAI resource type has no project)",
    ],
  ),

  // One entry per body field in defaults, overrides and transformations (the same field in two lists is the spec's).
  B("one field in overrides and transformations", {
    ai: { provider: { providerA: {} } },
    policies: {
      ai: {
        overrides: [{ field: "temperature", value: 0.2 }],
        transformations: [{ field: "temperature", expression: "0.3" }],
      },
    },
  }),
  B(
    "defaults with one field twice",
    {
      ai: { provider: { providerA: {} } },
      policies: {
        ai: {
          defaults: [
            { field: "temperature", value: 0.2 },
            { field: "max_tokens", value: 100 },
            { field: "temperature", value: 0.7 },
          ],
        },
      },
    },
    ["spec.policies.ai.defaults[2]", unique('field "temperature"', 0)],
  ),
  P(
    "overrides with one field twice",
    {
      targetRefs: [sluiceBackend],
      backend: {
        ai: {
          overrides: [
            { field: "model", value: "a" },
            { field: "model", value: "b" },
          ],
        },
      },
    },
    ["spec.backend.ai.overrides[1]", unique('field "model"', 0)],
  ),
  M(
    "model transformations with one field twice",
    model({
      policies: {
        transformations: [
          { field: "user", expression: "jwt.sub" },
          { field: "user", expression: "'x'" },
        ],
      },
    }),
    ["spec.policies.transformations[1]", unique('field "user"', 0)],
  ),

  // A CA beside insecureSkipVerify All would be read by nobody.
  P(
    "caCertificateRefs with insecureSkipVerify Hostname",
    backendPol({ tls: { caCertificateRefs: [{ name: "ca" }], insecureSkipVerify: "Hostname" } }),
  ),
  P(
    "caCertificateRefs with insecureSkipVerify All",
    backendPol({ tls: { caCertificateRefs: [{ name: "ca" }], insecureSkipVerify: "All" } }),
    [
      "spec.backend.tls.caCertificateRefs",
      "caCertificateRefs is not used with insecureSkipVerify All, which accepts any certificate",
    ],
  ),

  // Only TLS 1.3 suites up to TLS 1.2: no suite could be negotiated.
  P("TLS 1.3 suites up to 1.3", tls({ cipherSuites: ["TLS13_AES_128_GCM_SHA256"], maxProtocolVersion: "1.3" })),
  P(
    "TLS 1.3 and 1.2 suites up to 1.2",
    tls({
      cipherSuites: ["TLS13_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"],
      maxProtocolVersion: "1.2",
    }),
  ),
  P(
    "TLS 1.3 suites only up to 1.2",
    tls({ cipherSuites: ["TLS13_AES_128_GCM_SHA256", "TLS13_AES_256_GCM_SHA384"], maxProtocolVersion: "1.2" }),
    ["spec.frontend.tls.cipherSuites", ONLY_TLS13],
  ),

  // An HTTP/2 keepalive timeout waits for the answer to a PING sent at the interval.
  P("http2 keepalive interval and timeout", frontend({ http2KeepaliveInterval: "30s", http2KeepaliveTimeout: "5s" })),
  P("http2 keepalive interval alone", frontend({ http2KeepaliveInterval: "30s" })),
  P("http2 keepalive timeout alone", frontend({ http2KeepaliveTimeout: "5s" }), [
    "spec.frontend.http.http2KeepaliveTimeout",
    "http2KeepaliveTimeout requires http2KeepaliveInterval: PINGs, whose answer it waits for, are sent only at an interval",
  ]),

  // attributes.remove of an access log names its default fields; a span's are open-ended.
  P("access log removes user_agent", pol({ frontend: { accessLog: { attributes: { remove: ["user_agent"] } } } })),
  P(
    "span removes http.url",
    pol({ frontend: { tracing: { backendRef: svcRef, attributes: { remove: ["http.url"] } } } }),
  ),
  P("access log removes user-agent", pol({ frontend: { accessLog: { attributes: { remove: ["user-agent"] } } } }), [
    "spec.frontend.accessLog.attributes.remove[0]",
    `must be one of ${ACCESS_LOG_FIELDS.join(", ")}`,
  ]),
  P(
    "OTLP log removes a header",
    pol({ frontend: { accessLog: { otlp: { backendRef: svcRef, attributes: { remove: ["x-secret"] } } } } }),
    ["spec.frontend.accessLog.otlp.attributes.remove[0]", `must be one of ${ACCESS_LOG_FIELDS.join(", ")}`],
  ),

  // An inline JWKS is a JSON object whose keys is a list (Sluice reads it; a string to the CRD).
  P("inline JWKS {}", jwks("{}")),
  P("inline JWKS not JSON", jwks("keys: []"), [
    "spec.traffic.jwtAuthentication.providers[0].jwks.inline",
    "invalid JSON Web Key Set: not JSON",
  ]),
  P("inline JWKS keys not a list", jwks('{"keys":{"kty":"RSA"}}'), [
    "spec.traffic.jwtAuthentication.providers[0].jwks.inline",
    'invalid JSON Web Key Set: "keys" must be a list',
  ]),
  // providerB's endpoint is a host; a scheme and a trailing / are stripped, a path is not.
  B("providerB endpoint with scheme", {
    ai: { provider: { providerB: { endpoint: "https://res.openai.azure.com/", deploymentName: "d" } } },
  }),
  B(
    "providerB endpoint with a path",
    { ai: { provider: { providerB: { endpoint: "https://res.openai.azure.com/openai/deployments/d" } } } },
    [
      "spec.ai.provider.providerB.endpoint",
      "must be a host such as <name>.openai.azure.com (a scheme is allowed and stripped), without path",
    ],
  ),

  // GwParameters: what Kubernetes would refuse only when the workload is created.
  G("env value", { env: [{ name: "A", value: "1" }] }),
  G("env value and valueFrom", { env: [{ name: "A", value: "1", valueFrom: { fieldRef: { fieldPath: "x" } } }] }, [
    "spec.env[0]",
    "at most one of value and valueFrom may be set",
  ]),
  G("image tag and digest", {
    image: { tag: "v1.40.0", digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" },
  }),
  G("image tag with a digest in it", { image: { tag: "v1@sha256:abc" } }, [
    "spec.image.tag",
    "must be an image tag: letters, digits, _, . and -, not starting with . or -",
  ]),
  G("image digest without algorithm", { image: { digest: "0123456789abcdef" } }, [
    "spec.image.digest",
    "must be an image digest <algorithm>:<encoded>, such as sha256:<64 hex digits>",
  ]),
  G("model catalog ConfigMap name", { modelCatalog: { sources: [{ configMap: { name: "Costs_2025" } }] } }, [
    "spec.modelCatalog.sources[0].configMap.name",
    "must be a lowercase DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit",
  ]),
  // Rules that had no bad input of their own (test/unit/validate-rules.test.ts now checks that every rule has one).
  P(
    "extAuth backendRef to a GwBackend in the core group",
    traffic({ extAuth: { backendRef: { group: "", kind: "GwBackend", name: "b" } } }),
    ["spec.traffic.extAuth.backendRef.group", "group must be empty for a Service and sluice.dev for a GwBackend"],
  ),
  P(
    "extProc backendRef beside conditional",
    traffic({ extProc: { backendRef: svcRef, conditional: [{ policy: { backendRef: svcRef } }] } }),
    ["spec.traffic.extProc.conditional", "either conditional or the extProc fields may be set, not both"],
  ),
  P(
    "auth location with header and cookie",
    backendPol({ auth: { key: "k", location: { header: { name: "X-Key" }, cookie: { name: "k" } } } }),
    ["spec.backend.auth.location", "exactly one of header, queryParameter and cookie must be set"],
  ),
  B(
    "guardrailsA with key and secretRef",
    guards({
      request: [
        {
          guardrailsA: {
            identifier: "g",
            version: "1",
            region: "us-east-1",
            policies: { auth: { key: "k", secretRef: { name: "s" } } },
          },
        },
      ],
    }),
    [
      "spec.policies.ai.promptGuard.request[0].guardrailsA.policies.auth",
      "exactly one of cloudA, key and secretRef must be set",
    ],
  ),
  B("response guard with no variant", guards({ response: [{ response: { statusCode: 451 } }] }), [
    "spec.policies.ai.promptGuard.response[0]",
    "exactly one of regex, webhook, guardrailsA and guardrailsB must be set",
  ]),
  M("providerF with Provider01", gwModel({ provider: "Provider01", providerF: { projectId: "p" } }), [
    "spec.providerF",
    "providerF is only valid with provider Provider05",
  ]),
  M("providerG with Provider01", gwModel({ provider: "Provider01", providerG: {} }), [
    "spec.providerG",
    "providerG is only valid with provider Provider06",
  ]),
  // One entry per header in a header filter (as Gateway API's own CRD keys them) and in a transformation's set; one per
  // name in the attributes a log entry, span, resource or metric gets.
  P(
    "header filter set twice",
    traffic({
      headerModifiers: {
        request: {
          set: [
            { name: "x-a", value: "1" },
            { name: "x-a", value: "2" },
          ],
        },
      },
    }),
    ["spec.traffic.headerModifiers.request.set[1]", unique('name "x-a"', 0)],
  ),
  P(
    "header filter removes one header twice",
    traffic({ headerModifiers: { response: { remove: ["server", "server"] } } }),
    ["spec.traffic.headerModifiers.response.remove[1]", unique('"server"', 0)],
  ),
  P(
    "transformation adds one header twice",
    traffic({
      transformation: {
        request: {
          add: [
            { name: "x-a", value: "'1'" },
            { name: "x-a", value: "'2'" },
          ],
        },
      },
    }),
  ),
  P(
    "transformation sets one header twice",
    traffic({
      transformation: {
        request: {
          set: [
            { name: "x-a", value: "'1'" },
            { name: "x-a", value: "'2'" },
          ],
        },
      },
    }),
    ["spec.traffic.transformation.request.set[1]", unique('name "x-a"', 0)],
  ),
  P(
    "metric label twice",
    pol({
      frontend: {
        metrics: {
          attributes: {
            add: [
              { name: "tenant", expression: "request.headers['x-tenant']" },
              { name: "tenant", expression: "'x'" },
            ],
          },
        },
      },
    }),
    ["spec.frontend.metrics.attributes.add[1]", unique('name "tenant"', 0)],
  ),
  P(
    "access log attribute twice",
    pol({
      frontend: {
        accessLog: {
          attributes: {
            add: [
              { name: "status", expression: "response.code" },
              { name: "status", expression: "'x'" },
            ],
          },
        },
      },
    }),
    ["spec.frontend.accessLog.attributes.add[1]", unique('name "status"', 0)],
  ),
  P(
    "span resource twice",
    pol({
      frontend: {
        tracing: {
          backendRef: svcRef,
          resources: [
            { name: "region", expression: "'a'" },
            { name: "region", expression: "'b'" },
          ],
        },
      },
    }),
    ["spec.frontend.tracing.resources[1]", unique('name "region"', 0)],
  ),
  // GwParameters logging.level: Envoy's levels, as the provisioner passes them on (Envoy would not start otherwise).
  ...["info", "warn,upstream:debug", "off, http:trace", "info,http=debug"].map((level) =>
    G(`log level ${level}`, { logging: { level } }),
  ),
  ...["verbose", "upstream=loud", "Upstream:debug"].map((level) =>
    G(`log level ${level}`, { logging: { level } }, [
      "spec.logging.level",
      "must be an Envoy log level (trace, debug, info, warning, warn, error, critical, off) and component:level " +
        "(or component=level) entries, comma separated, such as warn,upstream:debug",
    ]),
  ),
  // TCP keepalive times Linux accepts (TCP_KEEPIDLE, TCP_KEEPINTVL: 1..32767 s).
  P("keepalive time 9h6m7s", pol({ frontend: { tcp: { keepalive: { time: "9h6m7s" } } } })),
  P("keepalive time 10h", pol({ frontend: { tcp: { keepalive: { time: "10h" } } } }), [
    "spec.frontend.tcp.keepalive.time",
    "time must be at most 32767s (9h6m7s): the longest TCP_KEEPIDLE Linux accepts",
  ]),
  P("backend keepalive interval 32768s", backendPol({ tcp: { keepalive: { interval: "32768s" } } }), [
    "spec.backend.tcp.keepalive.interval",
    "interval must be at most 32767s (9h6m7s): the longest TCP_KEEPINTVL Linux accepts",
  ]),
  // An API key store selector names at least one label: an empty one selected every Secret of the namespace.
  P(
    "API keys from labelled Secrets",
    traffic({ apiKeyAuthentication: { secretSelector: { matchLabels: { a: "b" } } } }),
  ),
  P("API keys from every Secret", traffic({ apiKeyAuthentication: { secretSelector: { matchLabels: {} } } }), [
    "spec.traffic.apiKeyAuthentication.secretSelector.matchLabels",
    "must not be empty",
  ]),
  P("API keys from every ConfigMap", traffic({ apiKeyAuthentication: { configMapSelector: { matchLabels: {} } } }), [
    "spec.traffic.apiKeyAuthentication.configMapSelector.matchLabels",
    "must not be empty",
  ]),
  // One target named once: the same target twice attached the policy twice.
  P("two listeners of one Gateway", {
    targetRefs: [
      { ...gateway, sectionName: "http" },
      { ...gateway, sectionName: "https" },
    ],
    traffic: {},
  }),
  P("a Gateway and one of its listeners", { targetRefs: [gateway, { ...gateway, sectionName: "http" }], traffic: {} }),
  P("one Gateway twice", { targetRefs: [gateway, { ...gateway }], traffic: {} }, [
    "spec.targetRefs",
    "targetRefs must be unique: two entries name the same group, kind, name, sectionName and port",
  ]),
];
