// GwPolicy (Document 1): targets, frontend, traffic and backend sections.

import { APIKeyAuthentication, BasicAuthentication, ExtAuth, JWTAuthentication } from "./auth.js";
import { BackendFull, KEY_EXCHANGE_GROUPS, Keepalive } from "./backend-policy.js";
import {
  Authorization,
  BackendObjectReference,
  ByteSize,
  byteSizeWithin,
  CELExpression,
  Duration,
  DurationDefault,
  Group,
  HeaderModifiers,
  HTTPHeaderName,
  Kind,
  MatchLabels,
  ObjectName,
  PortNumber,
  SectionName,
  ShortString,
  StatusCode,
  TinyString,
  Transformation,
  UINT32_MAX,
  UpstreamPath,
} from "./common.js";
import { GATEWAY_API_GROUP, GATEWAY_API_X_GROUP } from "./gateway-api.js";
import {
  Arr,
  atMostOne,
  Bool,
  Enum,
  exactlyOne,
  has,
  Int,
  MapOf,
  Obj,
  Opt,
  type Rule,
  requires,
  rule,
  type Static,
  Str,
  type TSchema,
  withDoc,
} from "./schema-kit.js";

// ---- targets ----

function celList(xs: readonly string[]): string {
  return `[${xs.map((x) => `'${x}'`).join(", ")}]`;
}

// The group each target kind lives in, as the translator reads them (a Gateway named with group "" or a Service with
// the Gateway API group matched nothing and said so only in status). Kinds not listed are judged by the section rules.
const KIND_GROUPS: readonly (readonly [readonly string[], readonly string[]])[] = [
  [["Gateway", "HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"], [GATEWAY_API_GROUP]],
  [
    ["ListenerSet", "XListenerSet"],
    [GATEWAY_API_GROUP, GATEWAY_API_X_GROUP],
  ],
  [["Service"], ["", "core"]],
  [["GwBackend", "Backend"], ["sluice.dev"]],
];
const targetGroupMatchesKind: Rule = rule({
  rule: `!(${KIND_GROUPS.map(([k, g]) => `(self.kind in ${celList(k)} && !(self.group in ${celList(g)}))`).join(" || ")})`,
  message:
    `group does not match kind: Gateway and routes are in ${GATEWAY_API_GROUP}, ListenerSet in ${GATEWAY_API_GROUP} ` +
    `or ${GATEWAY_API_X_GROUP}, Service in the core group (""), GwBackend (the spec's Backend) in sluice.dev`,
  fieldPath: ".group",
  check: (t) => !KIND_GROUPS.some(([k, g]) => k.includes(t?.kind) && !g.includes(t?.group)),
});

export const TargetReference = Obj(
  {
    group: withDoc(Group, "API group of the target (empty for core Service)."),
    kind: withDoc(Kind, "Gateway, ListenerSet, HTTPRoute, Service, GwBackend, ..."),
    name: withDoc(ObjectName, "Name of the target, in the policy's namespace."),
    sectionName: Opt(
      withDoc(SectionName, "Listener of a Gateway, rule of a Route, port of a Service or sub-backend of a GwBackend."),
    ),
    port: Opt(withDoc(PortNumber, "Port of a Gateway; only on frontend policies.")),
  },
  {
    description: "An object in the policy's namespace.",
    rules: [atMostOne(["sectionName", "port"]), targetGroupMatchesKind],
  },
);

export const TargetSelector = Obj(
  {
    group: Group,
    kind: Kind,
    matchLabels: MatchLabels,
    sectionName: Opt(SectionName),
    port: Opt(PortNumber),
  },
  {
    description: "Objects of a kind selected by label (slower to reconcile than references).",
    rules: [atMostOne(["sectionName", "port"]), targetGroupMatchesKind],
  },
);

// ---- frontend ----

const Attribute = Obj({ name: ShortString, expression: CELExpression });
/** The fields of an access log entry before `attributes.remove` (translate/xds/frontend.ts writes them). */
export const ACCESS_LOG_FIELDS = [
  "start_time",
  "method",
  "path",
  "protocol",
  "authority",
  "status",
  "response_flags",
  "duration_ms",
  "bytes_received",
  "bytes_sent",
  "upstream_host",
  "source_address",
  "user_agent",
  "request_id",
  "route_name",
] as const;
// One entry per name: a second one replaced the first in the entry, span or metric (two labels of one name are not
// even valid Prometheus exposition).
const attributesAdd = Opt(
  Arr(Attribute, { mapKeys: ["name"], description: "Fields to add; a pair whose expression fails is omitted." }),
);
// The spec: `remove` names "default fields". A log entry's are the ones above, so another name (a typo) is refused
// rather than removing nothing (issue 22); a span's default attributes are OpenTelemetry's, open-ended.
const LogAttributes = Obj(
  {
    remove: Opt(Arr(Enum(ACCESS_LOG_FIELDS), { min: 1, max: 32, description: "Default fields to drop." })),
    add: attributesAdd,
  },
  "Fields of each log entry.",
);
const SpanAttributes = Obj(
  {
    remove: Opt(Arr(TinyString, { min: 1, max: 32, description: "Default attributes to drop." })),
    add: attributesAdd,
  },
  "Attributes of each span.",
);
const pathOnlyForHTTP: Rule = rule({
  rule: "!has(self.path) || (has(self.protocol) && self.protocol == 'HTTP')",
  message: "path is only valid with protocol HTTP",
  fieldPath: ".path",
  check: (s) => !has(s, "path") || s.protocol === "HTTP",
});
const OTLP_PROTOCOL = Enum(["HTTP", "GRPC"], { default: "GRPC" });

export const AccessLog = Obj(
  {
    filter: Opt(withDoc(CELExpression, "The entry is emitted only when true.")),
    attributes: Opt(LogAttributes),
    otlp: Opt(
      Obj(
        {
          backendRef: withDoc(BackendObjectReference, "The collector: a Service or a GwBackend."),
          filter: Opt(withDoc(CELExpression, "Default: the parent filter.")),
          attributes: Opt(withDoc(LogAttributes, "Default: the parent attributes.")),
          protocol: Opt(OTLP_PROTOCOL),
          path: Opt(UpstreamPath("HTTP only; default /v1/logs.")),
        },
        { description: "Export logs over OTLP.", rules: [pathOnlyForHTTP] },
      ),
    ),
  },
  "Access logging.",
);

export const Tracing = Obj(
  {
    backendRef: withDoc(BackendObjectReference, "The collector: a Service or a GwBackend."),
    protocol: Opt(OTLP_PROTOCOL),
    path: Opt(UpstreamPath("HTTP only; default /v1/traces.")),
    attributes: Opt(SpanAttributes),
    resources: Opt(Arr(Attribute, { mapKeys: ["name"], description: "Resource attributes." })),
    randomSampling: Opt(withDoc(CELExpression, "Float 0.0..1.0 or boolean; starts a new trace; unset disables.")),
    clientSampling: Opt(withDoc(CELExpression, "Applies when the request has a trace; unset means 100%.")),
    filter: Opt(withDoc(CELExpression, "A span is exported only when true.")),
  },
  { description: "Tracing over OTLP.", rules: [pathOnlyForHTTP] },
);

export const TLS_VERSIONS = ["1.2", "1.3"] as const;
export const CIPHER_SUITES = [
  "TLS13_AES_256_GCM_SHA384",
  "TLS13_AES_128_GCM_SHA256",
  "TLS13_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
  "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
  "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
] as const;

export const FrontendTLS = Obj(
  {
    handshakeTimeout: Opt(DurationDefault("15s")),
    alpnProtocols: Opt(Arr(TinyString, { min: 1, max: 16, default: ["h2", "http/1.1"] })),
    minProtocolVersion: Opt(Enum(TLS_VERSIONS)),
    maxProtocolVersion: Opt(Enum(TLS_VERSIONS)),
    cipherSuites: Opt(Arr(Enum(CIPHER_SUITES), { max: 9 })),
    keyExchangeGroups: Opt(Arr(Enum(KEY_EXCHANGE_GROUPS), { max: 4, description: "In order of preference." })),
  },
  {
    description: "TLS of downstream connections.",
    rules: [
      // BoringSSL negotiates TLS 1.3 with its own suites, so a list of TLS 1.3 suites alone allows TLS 1.3 only.
      rule({
        rule:
          "!has(self.maxProtocolVersion) || self.maxProtocolVersion != '1.2' || !has(self.cipherSuites) || " +
          "size(self.cipherSuites) == 0 || self.cipherSuites.exists(c, !c.startsWith('TLS13_'))",
        message: "cipherSuites has only TLS 1.3 suites, which cannot be used with maxProtocolVersion 1.2",
        fieldPath: ".cipherSuites",
        check: (s) =>
          s?.maxProtocolVersion !== "1.2" ||
          !Array.isArray(s?.cipherSuites) ||
          s.cipherSuites.length === 0 ||
          s.cipherSuites.some((c: unknown) => !String(c).startsWith("TLS13_")),
      }),
      rule({
        rule: "!has(self.minProtocolVersion) || !has(self.maxProtocolVersion) || self.minProtocolVersion <= self.maxProtocolVersion",
        message: "minProtocolVersion must not be above maxProtocolVersion",
        fieldPath: ".minProtocolVersion",
        check: (s) =>
          !has(s, "minProtocolVersion") ||
          !has(s, "maxProtocolVersion") ||
          s.minProtocolVersion <= s.maxProtocolVersion,
      }),
    ],
  },
);

export const FrontendHTTP = Obj(
  {
    maxBufferSize: Opt(
      ByteSize({
        default: "2Mi",
        description: "Body size buffered for policies that need buffering. (The spec writes the default as 2mb.)",
      }),
    ),
    http1MaxHeaders: Opt(Int({ min: 1, max: 4096, default: 100 })),
    http1IdleTimeout: Opt(DurationDefault("10m")),
    http1HeaderCase: Opt(Enum(["Lowercase", "Preserve"], { description: "HTTP/1 only." })),
    http2WindowSize: Opt(ByteSize()),
    http2ConnectionWindowSize: Opt(ByteSize()),
    http2FrameSize: Opt(ByteSize({ default: "16Ki" })),
    http2MaxHeaderSize: Opt(ByteSize({ default: "16Ki" })),
    http2KeepaliveInterval: Opt(Duration),
    http2KeepaliveTimeout: Opt(Duration),
    maxConnectionDuration: Opt(withDoc(Duration, "Closed gracefully after the in-flight request.")),
  },
  {
    description: "HTTP settings of downstream connections.",
    rules: [
      byteSizeWithin("maxBufferSize", 1, UINT32_MAX, "Envoy holds it in 32 bits and reads 0 as no limit"),
      byteSizeWithin("http2WindowSize", 65535, 2147483647, "the HTTP/2 window bounds Envoy accepts"),
      byteSizeWithin("http2ConnectionWindowSize", 65535, 2147483647, "the HTTP/2 window bounds Envoy accepts"),
      byteSizeWithin("http2FrameSize", 16384, 16777215, "the frame sizes HTTP/2 allows (RFC 9113)"),
      byteSizeWithin("http2MaxHeaderSize", 1024, 8192 * 1024, "Envoy's header limit is 1 to 8192 KiB"),
      // The timeout bounds the answer to a keepalive PING, and PINGs are sent only at an interval (issue 22).
      requires(
        "http2KeepaliveTimeout",
        "http2KeepaliveInterval",
        "http2KeepaliveTimeout requires http2KeepaliveInterval: PINGs, whose answer it waits for, are sent only at an interval",
      ),
    ],
  },
);

export const Frontend = Obj(
  {
    tcp: Opt(Obj({ keepalive: Opt(Keepalive) }, "TCP settings.")),
    networkAuthorization: Opt(withDoc(Authorization, "Layer-4 check on downstream connections (source.address).")),
    tls: Opt(FrontendTLS),
    http: Opt(FrontendHTTP),
    proxyProtocol: Opt(
      Obj(
        {
          version: Opt(Enum(["V1", "V2", "All"], { default: "V2" })),
          mode: Opt(
            Enum(["Strict", "Optional"], { default: "Strict", description: "Optional accepts plain traffic." }),
          ),
        },
        "PROXY protocol.",
      ),
    ),
    connect: Opt(
      Obj(
        { mode: Enum(["Deny", "Route", "Tunnel"]) },
        "CONNECT handling; unset rejects CONNECT with 405 Method Not Allowed.",
      ),
    ),
    accessLog: Opt(AccessLog),
    tracing: Opt(Tracing),
    metrics: Opt(
      Obj(
        {
          attributes: Obj({
            add: Opt(
              Arr(Attribute, {
                min: 1,
                max: 16,
                mapKeys: ["name"],
                description: "Metric labels; a failed expression gives unknown.",
              }),
            ),
          }),
        },
        "Metric labels.",
      ),
    ),
  },
  "Frontend policies (Gateway targets only): downstream connections, TLS, HTTP, logging, tracing, metrics.",
);

// ---- traffic ----

/** `X or conditional list`: either X's own fields or `conditional`, whose only fallback entry is last. */
function orConditional<P extends Record<string, TSchema>>(
  name: string,
  props: P,
  policy: TSchema,
  required: readonly string[],
) {
  const fields = Object.keys(props);
  const rules: Rule[] = [
    rule({
      rule: `!has(self.conditional) || !(${fields.map((f) => `has(self.${f})`).join(" || ")})`,
      message: `either conditional or the ${name} fields may be set, not both`,
      fieldPath: ".conditional",
      check: (s) => !has(s, "conditional") || !fields.some((f) => has(s, f)),
    }),
  ];
  for (const r of required) {
    rules.push(
      rule({
        rule: `has(self.conditional) || has(self.${r})`,
        message: `${r} is required unless conditional is set`,
        fieldPath: `.${r}`,
        check: (s) => has(s, "conditional") || has(s, r),
      }),
    );
  }
  // Defaults belong to the entries: a defaulted top-level field would count as "set" next to conditional.
  const topLevel: Record<string, TSchema> = {};
  for (const [k, v] of Object.entries(props)) {
    const copy: Record<string | symbol, unknown> = { ...v };
    delete copy["default"];
    topLevel[k] = copy as unknown as TSchema;
  }
  return Obj(
    {
      ...(topLevel as P),
      conditional: Opt(
        Arr(Obj({ condition: Opt(withDoc(CELExpression, "The first entry whose condition is true runs.")), policy }), {
          min: 1,
          max: 16,
          rules: [conditionalFallbackLast],
        }),
      ),
    },
    { description: `${name}, or a conditional list of them.`, rules },
  );
}

export const conditionalFallbackLast: Rule = rule({
  rule:
    "self.filter(e, !has(e.condition)).size() == 0 || " +
    "(self.filter(e, !has(e.condition)).size() == 1 && !has(self[size(self) - 1].condition))",
  message: "only one entry may omit condition, and it must be the last (the fallback)",
  check: (s) => {
    if (!Array.isArray(s)) return true;
    const without = s.map((e, i) => (has(e, "condition") ? -1 : i)).filter((i) => i >= 0);
    return without.length === 0 || (without.length === 1 && without[0] === s.length - 1);
  },
});

const BODY_MODE = Enum(["None", "Buffered", "BufferedPartial", "FullDuplexStreamed"], {
  default: "FullDuplexStreamed",
  description: "Buffered errors above 8KB; BufferedPartial sends the first 8KB.",
});
const SEND_SKIP = Enum(["Send", "Skip"], { default: "Send" });

const extProcProps = {
  backendRef: Opt(withDoc(BackendObjectReference, "The processor: a Service or a GwBackend.")),
  failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
  processingOptions: Opt(
    Obj({
      requestBodyMode: Opt(BODY_MODE),
      responseBodyMode: Opt(BODY_MODE),
      requestHeaderMode: Opt(SEND_SKIP),
      responseHeaderMode: Opt(SEND_SKIP),
      requestTrailerMode: Opt(SEND_SKIP),
      responseTrailerMode: Opt(SEND_SKIP),
      allowModeOverride: Opt(Bool({ default: false })),
    }),
  ),
  metadataContext: Opt(MapOf(MapOf(CELExpression), { max: 64, description: "Namespace to key to CEL." })),
  requestAttributes: Opt(MapOf(CELExpression, { max: 64 })),
  responseAttributes: Opt(MapOf(CELExpression, { max: 64 })),
};
export const ExtProc = Obj(
  { ...extProcProps, backendRef: withDoc(BackendObjectReference, "The processor: a Service or a GwBackend.") },
  "An external processor.",
);

const LocalRateLimit = Obj(
  {
    requests: Opt(Int({ min: 1, description: "Requests per unit." })),
    tokens: Opt(Int({ min: 1, description: "LLM tokens (input plus output) per unit." })),
    unit: Enum(["Seconds", "Minutes", "Hours"]),
    burst: Opt(Int({ min: 0 })),
  },
  { description: "A per-proxy limit.", rules: [exactlyOne(["requests", "tokens"])] },
);

const GlobalRateLimit = Obj(
  {
    backendRef: withDoc(BackendObjectReference, "The rate limit service."),
    failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
    domain: ShortString,
    descriptors: Arr(
      Obj({
        entries: Arr(Obj({ name: TinyString, expression: CELExpression }), { min: 1, max: 16 }),
        unit: Opt(Enum(["Tokens", "Requests"], { default: "Requests" })),
        cost: Opt(withDoc(CELExpression, "Default 1 for Requests, the total token count for Tokens.")),
      }),
      { min: 1, max: 16 },
    ),
  },
  "A limit shared through a rate limit service.",
);

const HTTP_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*"] as const;

export const CORS = Obj(
  {
    allowOrigins: Opt(Arr(Str({ min: 1, max: 253 }), { max: 64 })),
    allowMethods: Opt(Arr(Enum(HTTP_METHODS), { max: 9 })),
    allowHeaders: Opt(Arr(HTTPHeaderName, { max: 64 })),
    exposeHeaders: Opt(Arr(HTTPHeaderName, { max: 64 })),
    maxAge: Opt(Int({ min: 1, default: 5, description: "Seconds." })),
    allowCredentials: Opt(Bool()),
  },
  "Gateway API HTTPCORSFilter.",
);

export const Traffic = Obj(
  {
    phase: Opt(
      Enum(["PreRouting", "PostRouting"], {
        default: "PostRouting",
        description: "PreRouting needs a Gateway or Listener target; the two phases never merge.",
      }),
    ),
    authorization: Opt(Authorization),
    jwtAuthentication: Opt(JWTAuthentication),
    basicAuthentication: Opt(BasicAuthentication),
    apiKeyAuthentication: Opt(APIKeyAuthentication),
    extAuth: Opt(ExtAuth),
    transformation: Opt(
      orConditional(
        "transformation",
        { request: Transformation.properties.request, response: Transformation.properties.response },
        Transformation,
        [],
      ),
    ),
    extProc: Opt(orConditional("extProc", extProcProps, ExtProc, ["backendRef"])),
    rateLimit: Opt(
      Obj({ local: Opt(Arr(LocalRateLimit, { min: 1, max: 16 })), global: Opt(GlobalRateLimit) }, "Rate limits."),
    ),
    cors: Opt(CORS),
    csrf: Opt(
      Obj({
        additionalOrigins: Opt(
          Arr(
            Str({
              min: 1,
              max: 256,
              pattern: "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#\\s]+$",
              patternMessage: "must be an origin: scheme, host and optional port, e.g. https://app.example.com",
            }),
            { min: 1, max: 16 },
          ),
        ),
      }),
    ),
    headerModifiers: Opt(HeaderModifiers),
    hostRewrite: Opt(Obj({ mode: Enum(["Auto", "None"]) }, "Host header rewrite toward the backend.")),
    timeouts: Opt(Obj({ request: Opt(withDoc(Duration, "Gateway-to-backend request deadline.")) })),
    retry: Opt(
      Obj(
        {
          codes: Opt(Arr(Int({ min: 400, max: 599 }))),
          attempts: Opt(Int({ min: 0 })),
          backoff: Opt(Duration),
          precondition: Opt(withDoc(CELExpression, "Evaluated before any attempt; false disables retries.")),
          condition: Opt(withDoc(CELExpression, "Evaluated per response; retry when true.")),
        },
        "Gateway API HTTPRouteRetry plus CEL conditions.",
      ),
    ),
    directResponse: Opt(
      Obj(
        {
          status: StatusCode,
          body: Opt(Str({ min: 1, max: 4096 })),
          bodyExpression: Opt(withDoc(CELExpression, "Strings and bytes as-is, other values as JSON.")),
          headers: Opt(Arr(Obj({ name: HTTPHeaderName, value: CELExpression }), { min: 1, max: 16 })),
        },
        { description: "Answer without a backend.", rules: [atMostOne(["body", "bodyExpression"])] },
      ),
    ),
    buffer: Opt(
      Obj({
        request: Opt(BufferDirection()),
        response: Opt(BufferDirection()),
      }),
    ),
    delay: Opt(
      Obj(
        { duration: Str({ min: 1, max: 16384, format: "cel-or-duration", description: "CEL or a duration string." }) },
        "Fault injection.",
      ),
    ),
  },
  "Traffic policies: authentication, authorization, rate limits, transformations and more.",
);

function BufferDirection() {
  return Obj(
    {
      maxBytes: Opt(ByteSize({ default: "2Mi" })),
      failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
    },
    { rules: [byteSizeWithin("maxBytes", 1, UINT32_MAX, "Envoy holds it in 32 bits and reads 0 as no limit")] },
  );
}

// ---- spec ----

const same = (f: string) => `(has(b.${f}) ? (has(a.${f}) && a.${f} == b.${f}) : !has(a.${f}))`;
// One target named twice attached the policy twice (as Gateway API's own policies refuse, issue 22).
const uniqueTargets: Rule = rule({
  rule: `self.all(a, self.exists_one(b, b.group == a.group && b.kind == a.kind && b.name == a.name && ${same("sectionName")} && ${same("port")}))`,
  message: "targetRefs must be unique: two entries name the same group, kind, name, sectionName and port",
  check: (s) => {
    if (!Array.isArray(s)) return true;
    const key = (t: Obj) => JSON.stringify([t?.group, t?.kind, t?.name, t?.sectionName ?? null, t?.port ?? null]);
    return new Set(s.map(key)).size === s.length;
  },
});

const ROUTE_KINDS = ["HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"];
const LISTENER_SET_KINDS = ["ListenerSet", "XListenerSet"];
const TRAFFIC_KINDS = ["Gateway", ...LISTENER_SET_KINDS, ...ROUTE_KINDS];
// `Backend` is the spec's name for a GwBackend target (the translator reads both).
const BACKEND_KINDS = [...TRAFFIC_KINDS, "Service", "GwBackend", "Backend"];
const PRE_ROUTING_KINDS = ["Gateway", ...LISTENER_SET_KINDS];

/** A rule that every targetRef and targetSelector must satisfy when `when` holds for the spec. */
function everyTarget(
  o: {
    whenCel: string;
    when: (s: unknown) => boolean;
    predCel: string;
    pred: (t: unknown, s: unknown) => boolean;
    /** The field of the offending entry to point at. */
    at?: string;
  },
  message: string,
): Rule[] {
  return (["targetRefs", "targetSelectors"] as const).map((list) =>
    rule({
      rule: `!(${o.whenCel}) || !has(self.${list}) || self.${list}.all(t, ${o.predCel})`,
      message,
      fieldPath: `.${list}`,
      check: (s) => {
        if (!o.when(s)) return true;
        const ts = s?.[list];
        return !Array.isArray(ts) || ts.every((t) => o.pred(t, s));
      },
      locate: (s) => {
        const ts = s?.[list];
        const i = Array.isArray(ts) ? ts.findIndex((t) => !o.pred(t, s)) : -1;
        return i < 0 ? undefined : `.${list}[${i}]${o.at ?? ""}`;
      },
    }),
  );
}

const kindIn = (kinds: readonly string[]) => (t: unknown) => kinds.includes((t as { kind?: unknown })?.kind as string);

export const GwPolicySpec = Obj(
  {
    targetRefs: Opt(
      Arr(TargetReference, {
        min: 1,
        max: 16,
        description: "Objects in the policy's namespace.",
        rules: [uniqueTargets],
      }),
    ),
    targetSelectors: Opt(Arr(TargetSelector, { min: 1, max: 16, description: "Objects selected by label." })),
    strategy: Opt(
      Obj(
        {
          inheritance: Opt(
            Enum(["Default", "Override"], {
              description: "Override makes the policy authoritative over more specific traffic policies.",
            }),
          ),
        },
        "Merge strategy (traffic policies only).",
      ),
    ),
    frontend: Opt(Frontend),
    traffic: Opt(Traffic),
    backend: Opt(BackendFull),
  },
  {
    description: "A policy attached to gateway resources.",
    rules: [
      exactlyOne(["targetRefs", "targetSelectors"]),
      rule({
        rule: "has(self.frontend) || has(self.traffic) || has(self.backend)",
        message: "a policy needs at least one of frontend, traffic and backend",
        check: (s) => has(s, "frontend") || has(s, "traffic") || has(s, "backend"),
      }),
      requires("strategy", "traffic", "strategy is only valid on traffic policies"),
      ...everyTarget(
        {
          whenCel: "true",
          when: () => true,
          predCel:
            "!has(t.port) || (t.kind == 'Gateway' && has(self.frontend) && !has(self.traffic) && !has(self.backend))",
          pred: (t, s) =>
            !has(t, "port") ||
            ((t as { kind?: unknown })?.kind === "Gateway" &&
              has(s, "frontend") &&
              !has(s, "traffic") &&
              !has(s, "backend")),
          at: ".port",
        },
        "port is only valid on frontend policies that target a Gateway, in a policy with no traffic or backend section",
      ),
      ...everyTarget(
        {
          whenCel: "has(self.backend) && (has(self.backend.ai) || has(self.backend.mcp))",
          when: (s) =>
            has((s as { backend?: unknown })?.backend, "ai") || has((s as { backend?: unknown })?.backend, "mcp"),
          predCel: "t.kind != 'Service'",
          pred: (t) => (t as { kind?: unknown })?.kind !== "Service",
          at: ".kind",
        },
        "backend.ai and backend.mcp apply only to backends of that type (a GwBackend with ai or mcp), not to a Service",
      ),
      ...everyTarget(
        {
          whenCel: "has(self.frontend)",
          when: (s) => has(s, "frontend"),
          predCel: "t.kind == 'Gateway' && !has(t.sectionName)",
          pred: (t) => (t as { kind?: unknown })?.kind === "Gateway" && !has(t, "sectionName"),
        },
        "frontend policies may only target a Gateway (not a Listener or ListenerSet)",
      ),
      ...everyTarget(
        {
          whenCel: "has(self.traffic)",
          when: (s) => has(s, "traffic"),
          predCel: `t.kind in ${celList(TRAFFIC_KINDS)}`,
          pred: kindIn(TRAFFIC_KINDS),
          at: ".kind",
        },
        `traffic policies may target ${TRAFFIC_KINDS.join(", ")}`,
      ),
      ...everyTarget(
        {
          whenCel: "has(self.backend)",
          when: (s) => has(s, "backend"),
          predCel: `t.kind in ${celList(BACKEND_KINDS)}`,
          pred: kindIn(BACKEND_KINDS),
          at: ".kind",
        },
        `backend policies may target ${BACKEND_KINDS.join(", ")}`,
      ),
      ...everyTarget(
        {
          whenCel: "has(self.traffic) && has(self.traffic.phase) && self.traffic.phase == 'PreRouting'",
          when: (s) => (s as { traffic?: { phase?: unknown } })?.traffic?.phase === "PreRouting",
          predCel: `t.kind in ${celList(PRE_ROUTING_KINDS)}`,
          pred: kindIn(PRE_ROUTING_KINDS),
          at: ".kind",
        },
        "phase PreRouting requires Gateway or Listener targets",
      ),
    ],
  },
);
export type GwPolicySpec = Static<typeof GwPolicySpec>;
