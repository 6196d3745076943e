// The shared value types and reference types of the spec (Document 1, "Common value types"), defined once.

import { Type } from "@sinclair/typebox";
import {
  Arr,
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

// ---- strings ----

export const ShortString = Str({ min: 1, max: 256 });
export const TinyString = Str({ min: 1, max: 64 });
export const LongString = Str({ min: 1, max: 1024 });

export const CELExpression = Str({ min: 1, max: 16384, format: "cel" });

const GO_DURATION = "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";
export const Duration = Str({
  max: 32,
  pattern: GO_DURATION,
  patternMessage: "must be a duration: a number with a unit (ns, us, ms, s, m, h), e.g. 500ms, 3s, 5m or 1h30m",
});

/** Duration with a default, e.g. `durationDefault("5m")`. */
export function DurationDefault(def: string, description?: string) {
  return Str({
    max: 32,
    pattern: GO_DURATION,
    patternMessage: "must be a duration: a number with a unit (ns, us, ms, s, m, h), e.g. 500ms, 3s, 5m or 1h30m",
    default: def,
    ...(description !== undefined ? { description } : {}),
  });
}

/** The Kubernetes quantity grammar without a sign: binary Ki..Ei, decimal n u m k M G T P E, or an exponent. */
export const BYTE_SIZE_PATTERN =
  "^(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$";
const BYTE_SIZE_MESSAGE =
  "must be a byte quantity: an integer or a decimal number with an optional suffix Ki, Mi, Gi, Ti, Pi, Ei " +
  "(binary), n, u, m, k, M, G, T, P, E (decimal) or an exponent such as 1e6; for example 512Ki, 2Mi or 1000000";

export function ByteSize(o: { readonly default?: string; readonly description?: string } = {}) {
  return Type.Unsafe<string | number>({
    "x-kubernetes-int-or-string": true,
    anyOf: [{ type: "integer" }, { type: "string" }],
    maxLength: 32,
    minimum: 0,
    pattern: BYTE_SIZE_PATTERN,
    "x-sluice-pattern-message": BYTE_SIZE_MESSAGE,
    ...(o.default !== undefined ? { default: o.default } : {}),
    ...(o.description !== undefined ? { description: o.description } : {}),
  });
}
export type ByteSizeValue = string | number;

const TOKEN = "-!#$%&'*+.^_`|~0-9A-Za-z";
export const HTTPHeaderName = Str({
  min: 1,
  max: 256,
  pattern: `^[${TOKEN}]+$`,
  patternMessage: "must be an HTTP header name: token characters only (letters, digits, !#$%&'*+-.^_`|~), no ':'",
});
export const HeaderName = Str({
  min: 1,
  max: 256,
  pattern: `^:?[${TOKEN}]+$`,
  patternMessage:
    "must be a header name: token characters (letters, digits, !#$%&'*+-.^_`|~), optionally after one ':'",
});

const DNS_SUBDOMAIN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const DNS_MESSAGE =
  "must be a lowercase DNS subdomain: letters a-z, digits, '-' and '.', starting and ending with a letter or digit";
export const SectionName = Str({ min: 1, max: 253, pattern: DNS_SUBDOMAIN, patternMessage: DNS_MESSAGE });
export const ObjectName = Str({ min: 1, max: 253, pattern: DNS_SUBDOMAIN, patternMessage: DNS_MESSAGE });
export const Namespace = Str({
  min: 1,
  max: 63,
  pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
  patternMessage: "must be a namespace name: lowercase letters, digits and '-', at most 63 characters",
});
export const Group = Str({
  max: 253,
  pattern: "^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
  patternMessage:
    "must be an API group: empty for the core group, else a DNS subdomain such as gateway.networking.k8s.io",
});
export const Kind = Str({
  min: 1,
  max: 63,
  pattern: "^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
  patternMessage: "must be a kind name such as Gateway or HTTPRoute",
});
export const PortNumber = Int({ min: 1, max: 65535 });

/** A path sent upstream as written: it must start with `/` (one without it is not a request target). */
/**
 * A host name or IP address to connect to. The spec types these as ShortString; a URL (scheme, path, user info) or a
 * blank would be looked up as a name and never resolve, so it is refused here, naming the field.
 */
export function HostName(description: string, max = 256) {
  return Str({
    min: 1,
    max,
    pattern: "^[^/?#@\\s]+$",
    patternMessage: "must be a host name or IP address, without scheme, path or spaces",
    description,
  });
}

export function UpstreamPath(description: string) {
  return Str({ min: 1, max: 1024, pattern: "^/", patternMessage: "must start with /", description });
}

const QUANTITY_FACTOR: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The exact value of a ByteSize (not rounded, as the API server's quantity() compares it); undefined if malformed. */
export function byteQuantity(v: unknown): number | undefined {
  if (typeof v === "number") return Number.isFinite(v) ? v : undefined;
  if (typeof v !== "string") return undefined;
  const m = /^((?:[0-9]+(?:\.[0-9]*)?)|(?:\.[0-9]+))(?:([KMGTPE]i|[numkMGTPE])|[eE]([+-]?[0-9.]+))?$/.exec(v);
  if (m === null) return undefined;
  const factor = m[3] !== undefined ? 10 ** Number(m[3]) : (QUANTITY_FACTOR[m[2] ?? ""] ?? Number.NaN);
  const n = Number(m[1]) * factor;
  return Number.isFinite(n) ? n : undefined;
}

/**
 * A ByteSize `field` of the object carrying the rule must lie within min..max bytes: the sizes Envoy holds in a
 * 32-bit field, or where it reads 0 as "no limit", are refused at the field instead of wrapping or silently clamped.
 * The CEL side compares with the API server's quantity library, which reads the same grammar.
 */
export function byteSizeWithin(field: string, min: number, max: number, why: string) {
  const cel = (v: string) =>
    `(type(${v}) == string ? (isQuantity(${v}) && quantity(${v}).compareTo(quantity('${min}')) >= 0 && ` +
    `quantity(${v}).compareTo(quantity('${max}')) <= 0) : (${v} >= ${min} && ${v} <= ${max}))`;
  return rule({
    rule: `!has(self.${field}) || ${cel(`self.${field}`)}`,
    message: `${field} must be between ${min} and ${max} bytes: ${why}`,
    fieldPath: `.${field}`,
    check: (s) => {
      if (!has(s, field)) return true;
      const n = byteQuantity(s[field]);
      return n !== undefined && n >= min && n <= max;
    },
  });
}

/** Envoy carries these sizes in a uint32 where 0 means "no limit". */
export const UINT32_MAX = 4294967295;

// ---- references ----

const portForService = rule({
  rule: "(has(self.kind) && self.kind != 'Service') || has(self.port)",
  message: "port is required when the reference is to a Service",
  fieldPath: ".port",
  check: (s) => (has(s, "kind") && s.kind !== "Service") || has(s, "port"),
});

// The group of a Service is the core group and a GwBackend's is sluice.dev: another one is refused rather than
// ignored (issue 22). Other kinds are refused where the reference is resolved.
const groupOfKind = rule({
  rule:
    "!has(self.group) || ((!has(self.kind) || self.kind == 'Service') ? self.group == '' : " +
    "(self.kind == 'GwBackend' ? self.group == 'sluice.dev' : true))",
  message: "group must be empty for a Service and sluice.dev for a GwBackend",
  fieldPath: ".group",
  check: (s) => {
    if (!has(s, "group")) return true;
    const kind = has(s, "kind") ? s.kind : "Service";
    if (kind === "Service") return s.group === "";
    return kind === "GwBackend" ? s.group === "sluice.dev" : true;
  },
});

// The spec: "BackendObjectReference names a Service or a Backend" (Backend being its name for GwBackend).
const serviceOrBackend = rule({
  rule: "!has(self.kind) || self.kind in ['Service', 'GwBackend', 'Backend']",
  message: "kind must be Service or GwBackend (the spec's Backend)",
  fieldPath: ".kind",
  check: (s) => !has(s, "kind") || ["Service", "GwBackend", "Backend"].includes(s.kind),
});

export const LocalObjectReference = Obj({ name: ObjectName }, "A same-namespace object, by name.");

export const LocalBackendObjectReference = Obj(
  {
    group: Opt(Group),
    kind: Opt(withDoc(Str({ min: 1, max: 63, default: "Service" }), "Kind of the referent; default Service.")),
    name: withDoc(ObjectName, "Name of the referent."),
    port: Opt(withDoc(PortNumber, "Port of the referent; required for a Service.")),
  },
  { description: "A backend in the same namespace.", rules: [portForService] },
);

export const BackendObjectReference = Obj(
  {
    group: Opt(withDoc(Group, "API group of the referent; empty (the default) for Service, sluice.dev for GwBackend.")),
    kind: Opt(withDoc(Str({ min: 1, max: 63, default: "Service" }), "Service (default) or GwBackend.")),
    name: withDoc(ObjectName, "Name of the referent."),
    namespace: Opt(withDoc(Namespace, "Namespace of the referent; default the policy's namespace.")),
    port: Opt(withDoc(PortNumber, "Port of the referent; required for a Service.")),
  },
  { description: "A Service or a GwBackend.", rules: [portForService, groupOfKind, serviceOrBackend] },
);

// A Secret or ConfigMap reference names the core group and its one kind: anything else is refused at the field rather
// than read as a Secret whatever it says (issue 22).
const CoreGroup = Enum([""], { description: "Empty: the core group (the only one valid here)." });
const SecretKind = Enum(["Secret"], { default: "Secret", description: "Secret (the only kind valid here)." });

export const LocalSecretObjectRef = Obj(
  {
    name: ObjectName,
    group: Opt(CoreGroup),
    kind: Opt(SecretKind),
  },
  "A Secret in the same namespace.",
);

/** A secret key reference whose `key` defaults to what this location uses. */
export function LocalSecretKeyRef(defaultKey?: string, description?: string) {
  return Obj(
    {
      name: ObjectName,
      group: Opt(CoreGroup),
      kind: Opt(SecretKind),
      key: Opt(
        Str({
          min: 1,
          max: 253,
          ...(defaultKey !== undefined ? { default: defaultKey } : {}),
          description: "Key inside the Secret.",
        }),
      ),
    },
    description ??
      `A key of a Secret in the same namespace${defaultKey !== undefined ? ` (default key ${defaultKey})` : ""}.`,
  );
}

export const ConfigMapRef = Obj(
  {
    name: ObjectName,
    group: Opt(CoreGroup),
    kind: Opt(Enum(["ConfigMap"], { default: "ConfigMap", description: "ConfigMap (the only kind valid here)." })),
  },
  "A ConfigMap in the same namespace.",
);

export const LabelSelector = Obj(
  {
    matchLabels: Opt(MapOf(Str({ max: 63 }), { max: 64 })),
    matchExpressions: Opt(
      Arr(
        Obj({
          key: Str({ min: 1, max: 317 }),
          operator: Enum(["In", "NotIn", "Exists", "DoesNotExist"]),
          values: Opt(Arr(Str({ max: 63 }), { max: 64 })),
        }),
        { max: 16 },
      ),
    ),
  },
  "A Kubernetes label selector.",
);

export const MatchLabels = MapOf(Str({ max: 63 }), { max: 64, description: "Labels the selected objects must carry." });

export const ParentReference = Obj(
  {
    group: Opt(Str({ max: 253, default: "gateway.networking.k8s.io" })),
    kind: Opt(Str({ min: 1, max: 63, default: "Gateway" })),
    namespace: Opt(Namespace),
    name: ObjectName,
    sectionName: Opt(withDoc(SectionName, "A listener of the Gateway.")),
    port: Opt(PortNumber),
  },
  "A Gateway (or a listener of one) the resource attaches to.",
);

// ---- authorization ----

export const Authorization = Obj(
  {
    action: Opt(
      Enum(["Allow", "Deny", "Require"], {
        default: "Allow",
        description:
          "Allow: at least one expression matches (OR); Require: every expression is true (AND); Deny: any match denies.",
      }),
    ),
    policy: Obj(
      {
        matchExpressions: Arr(CELExpression, {
          min: 1,
          max: 256,
          description: "CEL expressions over the request (request, jwt, apiKey, source, ...).",
        }),
      },
      "The expressions of the rule.",
    ),
  },
  "One authorization rule. Deny rules run first, then Require, then Allow.",
);
export type Authorization = Static<typeof Authorization>;

// ---- credential locations ----

const headerLocation = Obj({
  name: withDoc(HTTPHeaderName, "Header name."),
  prefix: Opt(Str({ min: 1, max: 256, description: "Prefix stripped from (or added to) the value, e.g. Bearer." })),
});
const namedLocation = Obj({ name: ShortString });

/** Where a credential is read; `defaultPrefix` undefined means the field has no default. */
export function ExtractionLocation(defaultPrefix?: string) {
  return Obj(
    {
      header: Opt(headerLocation),
      queryParameter: Opt(namedLocation),
      cookie: Opt(namedLocation),
      expression: Opt(withDoc(CELExpression, "CEL returning the credential.")),
    },
    {
      description:
        defaultPrefix === undefined
          ? "Where the credential is read."
          : `Where the credential is read; default header Authorization with prefix ${defaultPrefix}.`,
      rules: [exactlyOne(["header", "queryParameter", "cookie", "expression"])],
      ...(defaultPrefix !== undefined ? { default: { header: { name: "Authorization", prefix: defaultPrefix } } } : {}),
    },
  );
}

export const AuthorizationLocation = Obj(
  { header: Opt(headerLocation), queryParameter: Opt(namedLocation), cookie: Opt(namedLocation) },
  {
    description: "Where the credential is written to the backend request; default header Authorization, prefix Bearer.",
    rules: [exactlyOne(["header", "queryParameter", "cookie"])],
    default: { header: { name: "Authorization", prefix: "Bearer" } },
  },
);

// ---- Gateway API shapes reused by the spec ----

const HTTPHeader = Obj({ name: HTTPHeaderName, value: Str({ min: 1, max: 4096 }) });
// Keyed as in Gateway API's own CRD (set and add a map by name, remove a set): one entry per header.
export const HTTPHeaderFilter = Obj(
  {
    set: Opt(Arr(HTTPHeader, { max: 16, mapKeys: ["name"] })),
    add: Opt(Arr(HTTPHeader, { max: 16, mapKeys: ["name"] })),
    remove: Opt(Arr(HTTPHeaderName, { max: 16, set: true })),
  },
  "Gateway API HTTPHeaderFilter: set, add and remove headers.",
);

export const HeaderModifiers = Obj(
  { request: Opt(HTTPHeaderFilter), response: Opt(HTTPHeaderFilter) },
  "Header changes on the request and the response.",
);

export const HTTPHeaderMatch = Obj(
  {
    type: Opt(Enum(["Exact", "RegularExpression"], { default: "Exact" })),
    name: HTTPHeaderName,
    value: Str({ min: 1, max: 4096 }),
  },
  "Gateway API HTTPHeaderMatch.",
);

const transformEntry = Obj({ name: HeaderName, value: withDoc(CELExpression, "CEL giving the header value.") });
export const Transform = Obj(
  {
    // Two values set for one header: one was lost. (Two added are two values of the header, as written.)
    set: Opt(Arr(transformEntry, { max: 16, mapKeys: ["name"] })),
    add: Opt(Arr(transformEntry, { max: 16 })),
    remove: Opt(Arr(HeaderName, { max: 16 })),
    body: Opt(withDoc(CELExpression, "CEL giving the new body.")),
    metadata: Opt(MapOf(CELExpression, { max: 64, description: "Dynamic metadata: key to CEL." })),
  },
  "Changes to one direction of traffic, each value a CEL expression.",
);
export const Transformation = Obj(
  { request: Opt(Transform), response: Opt(Transform) },
  "Request and response transformations.",
);

export const StatusCode = Int({ min: 200, max: 599 });

export { Bool, Json };
