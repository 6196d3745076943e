// The backend section of policies (BackendFull, Document 1) and its flavours reused elsewhere (BackendSimple,
// BackendWithAI, guard-service policies), with the AI request policies, prompt guards and MCP policies of Document 2.

import { parseDurationMs } from "../translate/duration.js";
import { BackendAuth, CloudAAuth, CloudBAuth, ExtAuth, MCPAuthentication } from "./auth.js";
import {
  Authorization,
  AuthorizationLocation,
  BackendObjectReference,
  CELExpression,
  ConfigMapRef,
  Duration,
  DurationDefault,
  HeaderName,
  HTTPHeaderMatch,
  LocalSecretKeyRef,
  LocalSecretObjectRef,
  ShortString,
  TinyString,
  Transformation,
} from "./common.js";
import {
  Arr,
  atMostOne,
  Bool,
  Enum,
  exactlyOne,
  has,
  Int,
  Json,
  MapOf,
  Obj,
  Opt,
  rule,
  type Static,
  Str,
  withDoc,
} from "./schema-kit.js";

export const KEY_EXCHANGE_GROUPS = ["X25519", "P-256", "P-384", "X25519_MLKEM768"] as const;
export const ROUTE_TYPES = [
  "Completions",
  "Messages",
  "Models",
  "Passthrough",
  "Detect",
  "Responses",
  "MessagesTokenCount",
  "Embeddings",
  "Realtime",
  "Rerank",
] as const;

export const Keepalive = Obj(
  {
    retries: Opt(Int({ min: 1, max: 64, default: 9, description: "Unanswered probes before the connection drops." })),
    time: Opt(DurationDefault("180s", "Idle time before probes start.")),
    interval: Opt(DurationDefault("180s", "Time between probes.")),
  },
  {
    description: "TCP keepalive.",
    // Linux refuses a longer TCP_KEEPIDLE or TCP_KEEPINTVL (EINVAL): Envoy's socket option, or Node's setKeepAlive,
    // would fail on every connection (issue 22).
    rules: [keepaliveAtMost("time", "TCP_KEEPIDLE"), keepaliveAtMost("interval", "TCP_KEEPINTVL")],
  },
);

function keepaliveAtMost(field: "time" | "interval", option: string) {
  return rule({
    rule: `!has(self.${field}) || duration(self.${field}) <= duration('32767s')`,
    message: `${field} must be at most 32767s (9h6m7s): the longest ${option} Linux accepts`,
    fieldPath: `.${field}`,
    check: (s) => !has(s, field) || (parseDurationMs(String(s[field])) ?? 0) <= 32_767_000,
  });
}

export const BackendTCP = Obj({ keepalive: Opt(Keepalive), connectTimeout: Opt(Duration) }, "TCP settings.");

export const ALPN = Arr(TinyString, { min: 1, max: 16, default: ["h2", "http/1.1"], description: "ALPN protocols." });

export const BackendTLS = Obj(
  {
    mtlsCertificateRef: Opt(
      Arr(LocalSecretObjectRef, {
        max: 1,
        description: "Client certificate: keys tls.key, tls.crt, optional ca.cert.",
      }),
    ),
    caCertificateRefs: Opt(Arr(ConfigMapRef, { max: 1, description: "CA bundle; takes priority over ca.cert." })),
    insecureSkipVerify: Opt(
      Enum(["All", "Hostname"], { description: "All disables verification; Hostname skips SAN checks only." }),
    ),
    sni: Opt(
      Str({
        min: 1,
        max: 253,
        pattern: "^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$",
        patternMessage: "must be a DNS name",
      }),
    ),
    verifySubjectAltNames: Opt(
      Arr(ShortString, { min: 1, max: 16, description: "Default: the destination hostname." }),
    ),
    alpnProtocols: Opt(ALPN),
    keyExchangeGroups: Opt(Arr(Enum(KEY_EXCHANGE_GROUPS), { max: 4, description: "In order of preference." })),
  },
  {
    description: "Originate TLS to the backend (system CAs and SNI from the destination unless set).",
    rules: [
      atMostOne(["verifySubjectAltNames", "insecureSkipVerify"]),
      // `All` accepts any certificate: a CA given beside it would be read by nobody (issue 22).
      rule({
        rule: "!has(self.caCertificateRefs) || size(self.caCertificateRefs) == 0 || !has(self.insecureSkipVerify) || self.insecureSkipVerify != 'All'",
        message: "caCertificateRefs is not used with insecureSkipVerify All, which accepts any certificate",
        fieldPath: ".caCertificateRefs",
        check: (s) =>
          !Array.isArray(s?.caCertificateRefs) || s.caCertificateRefs.length === 0 || s?.insecureSkipVerify !== "All",
      }),
    ],
  },
);

export const BackendHTTP = Obj(
  {
    version: Opt(Enum(["HTTP1", "HTTP2"], { description: "Inferred when unset." })),
    requestTimeout: Opt(Duration),
  },
  "HTTP settings toward the backend.",
);

export const Tunnel = Obj(
  { backendRef: withDoc(BackendObjectReference, "The proxy: a Service or a GwBackend.") },
  "Reach the backend through a proxy.",
);

export const Health = Obj(
  {
    unhealthyCondition: Opt(withDoc(CELExpression, "CEL over the response; default any 5xx or connection failure.")),
    eviction: Opt(
      Obj({
        duration: Opt(DurationDefault("3s", "Base eviction time, multiplied by the number of evictions.")),
        restoreHealth: Opt(Int({ min: 0, max: 100, description: "Health after return." })),
        consecutiveFailures: Opt(Int({ min: 0 })),
        healthThreshold: Opt(Int({ min: 0, max: 100, description: "EWMA health threshold." })),
      }),
    ),
  },
  "Health-based eviction of endpoints.",
);

const connection = {
  tcp: Opt(BackendTCP),
  tls: Opt(BackendTLS),
  http: Opt(BackendHTTP),
  tunnel: Opt(Tunnel),
};

export const BackendSimple = Obj({ ...connection, auth: Opt(BackendAuth) }, "Connection and credential policies.");

function guardPolicies<A extends Parameters<typeof Obj>[0]>(auth: A, rules: Parameters<typeof exactlyOne>[0] | null) {
  return Obj(
    {
      ...connection,
      auth: Opt(
        Obj(auth, {
          description: "Credentials for the guard service.",
          ...(rules !== null ? { rules: [exactlyOne(rules)] } : {}),
        }),
      ),
    },
    "Policies toward the guard service.",
  );
}

// ---- prompt guards ----

/**
 * Pattern matching. On a response guard `action` has the one value Mask: the spec's action applies to request matches
 * only (response matches are always masked), so a Reject there is refused at the field instead of silently masking.
 */
function Regex(direction: "request" | "response") {
  return Obj(
    {
      matches: Opt(
        Arr(Str({ min: 1, max: 1024, format: "regex" }), {
          description: "Regular expressions (the linear-time subset: no lookaround, no backreferences).",
        }),
      ),
      builtins: Opt(Arr(Enum(["Ssn", "CreditCard", "PhoneNumber", "Email", "CaSin"]))),
      action: Opt(
        direction === "request"
          ? Enum(["Mask", "Reject"], { default: "Mask" })
          : Enum(["Mask"], {
              default: "Mask",
              description: "Response matches are always masked (Reject is for requests).",
            }),
      ),
    },
    {
      description: "Pattern matching; matches and builtins are additive.",
      rules: [
        // Neither would match nothing: an entry that looks like a guard and guards nothing.
        rule({
          rule: "(has(self.matches) && size(self.matches) > 0) || (has(self.builtins) && size(self.builtins) > 0)",
          message: "a regex guard needs at least one pattern in matches or builtins",
          check: (s) =>
            (Array.isArray(s?.matches) && s.matches.length > 0) ||
            (Array.isArray(s?.builtins) && s.builtins.length > 0),
        }),
      ],
    },
  );
}

function CustomResponse(direction: "request" | "response") {
  return Obj(
    {
      message: Opt(
        Str({
          min: 1,
          max: 4096,
          default: `The ${direction} was rejected due to inappropriate content`,
        }),
      ),
      statusCode: Opt(Int({ min: 200, max: 599, default: 403 })),
    },
    "The response returned when the guard rejects.",
  );
}

export const Webhook = Obj(
  {
    backendRef: BackendObjectReference,
    headers: Opt(MapOf(CELExpression, { description: "Headers sent to the webhook, each a CEL value." })),
    forwardHeaderMatches: Opt(Arr(HTTPHeaderMatch, { description: "Request headers forwarded to the webhook." })),
    failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
  },
  "A webhook that receives the request or response for guarding.",
);

const ModerationA = Obj({
  model: Opt(Str({ min: 1, max: 256 })),
  policies: Opt(
    guardPolicies(
      {
        key: Opt(Str({ min: 1, max: 2048 })),
        secretRef: Opt(LocalSecretKeyRef("Authorization")),
        location: Opt(AuthorizationLocation),
      },
      ["key", "secretRef"],
    ),
  ),
});

const GuardrailsA = Obj({
  identifier: ShortString,
  version: ShortString,
  region: ShortString,
  policies: Opt(
    guardPolicies(
      {
        cloudA: Opt(CloudAAuth),
        key: Opt(Str({ min: 1, max: 2048 })),
        secretRef: Opt(LocalSecretKeyRef("Authorization")),
        location: Opt(AuthorizationLocation),
      },
      ["cloudA", "key", "secretRef"],
    ),
  ),
});

const GuardrailsB = Obj({
  templateId: ShortString,
  projectId: ShortString,
  location: Opt(Str({ min: 1, max: 256, default: "us-central1" })),
  policies: Opt(guardPolicies({ cloudB: CloudBAuth }, null)),
});

const RequestGuard = Obj(
  {
    regex: Opt(Regex("request")),
    webhook: Opt(Webhook),
    moderationA: Opt(ModerationA),
    guardrailsA: Opt(GuardrailsA),
    guardrailsB: Opt(GuardrailsB),
    response: Opt(CustomResponse("request")),
  },
  { rules: [exactlyOne(["regex", "webhook", "moderationA", "guardrailsA", "guardrailsB"])] },
);

const ResponseGuard = Obj(
  {
    regex: Opt(Regex("response")),
    webhook: Opt(Webhook),
    guardrailsA: Opt(GuardrailsA),
    guardrailsB: Opt(GuardrailsB),
    response: Opt(CustomResponse("response")),
  },
  { rules: [exactlyOne(["regex", "webhook", "guardrailsA", "guardrailsB"])] },
);

export const AIPromptGuard = Obj(
  {
    streaming: Opt(Enum(["Enabled"], { description: "Also guard streaming responses and realtime messages." })),
    request: Opt(Arr(RequestGuard, { min: 1, max: 8 })),
    response: Opt(Arr(ResponseGuard, { min: 1, max: 8 })),
  },
  "Request and response guards.",
);

// ---- AI request policies ----

const Message = Obj({ role: Str({ min: 1, max: 64 }), content: Str({ min: 1 }) });
const FieldValue = Obj({ field: ShortString, value: Json("Any JSON value.") });
export const FieldTransformation = Obj({ field: ShortString, expression: CELExpression });
export function FieldTransformations(description: string) {
  return Arr(FieldTransformation, { min: 1, max: 64, mapKeys: ["field"], description });
}

export const BackendAI = Obj(
  {
    prompt: Opt(
      Obj({ prepend: Opt(Arr(Message)), append: Opt(Arr(Message)) }, "Static enrichment of every chat request."),
    ),
    promptGuard: Opt(AIPromptGuard),
    // One entry per field in each list (issue 22): a second entry for a field left one of the two unused.
    defaults: Opt(
      Arr(FieldValue, {
        min: 1,
        max: 64,
        mapKeys: ["field"],
        description: "Body fields set unless the client set them.",
      }),
    ),
    overrides: Opt(Arr(FieldValue, { min: 1, max: 64, mapKeys: ["field"], description: "Body fields overwritten." })),
    transformations: Opt(FieldTransformations("Body fields computed by CEL; win over overrides.")),
    modelAliases: Opt(MapOf(Str({ min: 1, max: 256 }), { max: 64, description: "Friendly name to provider model." })),
    promptCaching: Opt(
      Obj(
        {
          cacheSystem: Opt(Bool({ default: true })),
          cacheMessages: Opt(Bool({ default: true })),
          cacheTools: Opt(Bool({ default: false })),
          minTokens: Opt(Int({ min: 0, default: 1024, description: "Estimated as words times 1.3." })),
          cacheMessageOffset: Opt(Int({ min: 0, default: 0, description: "0 = the second-to-last message." })),
        },
        "Prompt caching (providerG with Claude 3+ and Nova models).",
      ),
    ),
    routes: Opt(MapOf(Enum(ROUTE_TYPES), { description: "Path suffix (or *) to route type; default Completions." })),
  },
  "AI request policies.",
);

// ---- MCP policies ----

const METHOD_PATTERN = "^([*]|[^*]+|[^*]+[*]|[*][^*]+)$";
const METHOD_RE = new RegExp(METHOD_PATTERN);
export const BackendMCP = Obj(
  {
    authorization: Opt(withDoc(Authorization, "Per-item authorization of MCP tools, prompts and resources.")),
    authentication: Opt(MCPAuthentication),
    guardrails: Opt(
      Obj({
        processors: Arr(
          Obj({
            remote: Obj({
              backendRef: BackendObjectReference,
              failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
              metadata: Opt(MapOf(CELExpression, { max: 64 })),
              allowedRequestHeaders: Opt(
                Arr(HeaderName, { max: 64, description: "Empty forwards everything, including pseudo-headers." }),
              ),
              disallowedRequestHeaders: Opt(
                Arr(HeaderName, { max: 64, description: "Wins over allowed; case-insensitive." }),
              ),
            }),
            methods: MapOf(Enum(["Off", "Request", "Response", "Full"]), {
              min: 1,
              max: 64,
              description: "JSON-RPC method pattern (exact, tools/*, */list or *) to phase.",
              rules: [
                rule({
                  rule: `self.all(k, k.matches('${METHOD_PATTERN}'))`,
                  message:
                    "method patterns must be exact, a prefix wildcard (tools/*), a suffix wildcard (*/list) or *",
                  check: (s) => typeof s !== "object" || s === null || Object.keys(s).every((k) => METHOD_RE.test(k)),
                }),
              ],
            }),
          }),
          { min: 1, max: 16, description: "Run in order; the first rejection ends the chain." },
        ),
      }),
    ),
  },
  "MCP policies.",
);

export const BackendWithAI = Obj(
  {
    ...connection,
    auth: Opt(BackendAuth),
    ai: Opt(BackendAI),
    transformation: Opt(Transformation),
    health: Opt(Health),
  },
  "Backend policies of an LLM provider.",
);

export const BackendFull = Obj(
  {
    ...connection,
    auth: Opt(BackendAuth),
    ai: Opt(withDoc(BackendAI, "Only for backends of type ai.")),
    mcp: Opt(withDoc(BackendMCP, "Only for backends of type mcp.")),
    transformation: Opt(Transformation),
    health: Opt(Health),
    extAuth: Opt(ExtAuth),
  },
  "Backend policies: how the gateway connects to and authenticates with backends.",
);
export type BackendFull = Static<typeof BackendFull>;
