// Authentication objects of Document 1: JWT, API key, basic, the deprecated MCP form, backend credentials
// (BackendAuth and the model flavour without crossAppAccess/jwtSign) and external authorization.

import { parseDurationMs } from "../translate/duration.js";
import {
  AuthorizationLocation,
  BackendObjectReference,
  ByteSize,
  byteSizeWithin,
  CELExpression,
  DurationDefault,
  ExtractionLocation,
  HTTPHeaderName,
  LocalSecretKeyRef,
  LocalSecretObjectRef,
  LongString,
  ShortString,
  UINT32_MAX,
} from "./common.js";
import {
  Arr,
  atMostOne,
  Empty,
  Enum,
  exactlyOne,
  has,
  Int,
  Json,
  JsonMapWithout,
  MapOf,
  Obj,
  Opt,
  rule,
  type Static,
  Str,
  type TSchema,
  withDoc,
} from "./schema-kit.js";

export const IDENTITY_PROVIDERS = ["Idp1", "Idp2", "Idp3", "Idp4", "Idp5", "Idp6"] as const;
export const SIGNING_ALGS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"] as const;

// ---- JWT ----

export const RemoteJWKS = Obj(
  {
    jwksPath: Str({ min: 1, max: 2000, description: "Path of the key set on the backend, relative to its root." }),
    cacheDuration: Opt(DurationDefault("5m", "How long fetched keys are cached.")),
    backendRef: withDoc(BackendObjectReference, "The key server: a Service or a static GwBackend."),
  },
  "A JSON Web Key Set fetched from a backend. TLS to it is set by a backend policy on that Service or GwBackend.",
);

export const JWKS = Obj(
  {
    inline: Opt(Str({ min: 2, max: 65536, format: "jwks", description: "A JSON Web Key Set, as a string." })),
    remote: Opt(RemoteJWKS),
  },
  { description: "The keys that verify tokens.", rules: [exactlyOne(["inline", "remote"])] },
);

export const JWTProvider = Obj({
  issuer: withDoc(ShortString, "Matches the iss claim."),
  audiences: Opt(Arr(ShortString, { min: 1, max: 64, description: "Matches the aud claim; unset allows any." })),
  jwks: JWKS,
});

export const JWTMCP = Obj(
  {
    resourceMetadata: Opt(MapOf(Json(), { description: "Protected resource metadata fields." })),
    provider: Opt(Enum(IDENTITY_PROVIDERS, { description: "The identity provider, for provider-specific handling." })),
    clientId: Opt(Str({ min: 1, max: 256, description: "Answer client registration with this client id." })),
  },
  "Enables the MCP OAuth metadata endpoints.",
);

export const JWTAuthentication = Obj(
  {
    mode: Opt(
      Enum(["Strict", "Optional", "Permissive"], {
        default: "Strict",
        description: "Strict: a valid token is required. Optional: absence allowed. Permissive: never rejects.",
      }),
    ),
    providers: Arr(JWTProvider, { min: 1, max: 64, description: "Accepted issuers." }),
    location: Opt(ExtractionLocation("Bearer")),
    mcp: Opt(JWTMCP),
  },
  "Validates JSON Web Tokens; the claims are then available to CEL as jwt.<claim>.",
);

// ---- API key and basic ----

// At least one label: an empty selector would select every Secret (or ConfigMap) of the namespace, making TLS keys and
// passwords API keys (issue 22).
const KeyStoreLabels = MapOf(Str({ max: 63 }), {
  min: 1,
  max: 64,
  description: "Labels the key stores carry; at least one (an empty selector would select every object).",
});

export const APIKeyAuthentication = Obj(
  {
    secretRef: Opt(withDoc(LocalSecretObjectRef, "A Secret whose entries are keys.")),
    secretSelector: Opt(Obj({ matchLabels: KeyStoreLabels }, "Secrets selected by label.")),
    configMapSelector: Opt(
      Obj({ matchLabels: KeyStoreLabels }, "ConfigMaps selected by label; entries must use keyHash."),
    ),
    mode: Opt(
      Enum(["Strict", "Optional", "Permissive"], {
        default: "Strict",
        description: "Optional and Permissive allow requests without a key.",
      }),
    ),
    location: Opt(ExtractionLocation("Bearer")),
  },
  {
    description: "API key authentication; key metadata is available to CEL as apiKey.<field>.",
    rules: [exactlyOne(["secretRef", "secretSelector", "configMapSelector"])],
  },
);

// The hash forms extauthz/basic-auth.ts verifies (its hashKind); any other value, a raw password above all, would never
// match, so the schema refuses it at the line instead of the translator reporting it later.
const HTPASSWD_LINE =
  "^[^:\\s]+:(\\$2[aby]\\$[0-9]{2}\\$[./A-Za-z0-9]{53}|\\$(apr1|1)\\$[^$]{0,8}\\$[./A-Za-z0-9]{22}|" +
  "\\{SHA\\}[A-Za-z0-9+/]{27}=|[./A-Za-z0-9]{13})$";

export const BasicAuthentication = Obj(
  {
    users: Opt(
      Arr(
        Str({
          min: 3,
          max: 1024,
          pattern: HTPASSWD_LINE,
          patternMessage:
            "must be an htpasswd line <user>:<password_hash> with an MD5 ($apr1$ or $1$), bcrypt ($2a$, $2b$, $2y$), " +
            "crypt (13 characters) or SHA-1 ({SHA}) hash, never a raw password",
        }),
        { min: 1, max: 256, description: "htpasswd lines (MD5, bcrypt, crypt or SHA-1 hashes, never raw passwords)." },
      ),
    ),
    secretRef: Opt(
      LocalSecretKeyRef(".htaccess", "A Secret holding the complete htpasswd file (default key .htaccess)."),
    ),
    mode: Opt(Enum(["Strict", "Optional"], { default: "Strict" })),
    realm: Opt(Str({ min: 1, max: 256, default: "Restricted", description: "Realm of WWW-Authenticate on failure." })),
    location: Opt(ExtractionLocation("Basic")),
  },
  { description: "HTTP basic authentication.", rules: [exactlyOne(["users", "secretRef"])] },
);

export const MCPAuthentication = Obj(
  {
    resourceMetadata: Opt(MapOf(Json())),
    provider: Opt(Enum(IDENTITY_PROVIDERS)),
    issuer: Opt(ShortString),
    audiences: Opt(Arr(ShortString, { min: 1, max: 64 })),
    jwks: RemoteJWKS,
    mode: Opt(Enum(["Strict", "Optional", "Permissive"], { default: "Strict" })),
    clientId: Opt(Str({ min: 1, max: 256 })),
    clientSecretRef: Opt(LocalSecretKeyRef("clientSecret")),
  },
  {
    description: "Deprecated: use traffic.jwtAuthentication.mcp, which runs before transformation and rate limiting.",
    deprecated: "traffic.jwtAuthentication.mcp",
  },
);

// ---- backend credentials ----

const TOKEN_TYPE = Str({
  min: 1,
  max: 2048,
  pattern: "^(AccessToken|Jwt|IdToken|IdJag|[a-zA-Z][a-zA-Z0-9+.-]*:.+)$",
  patternMessage: "must be AccessToken, Jwt, IdToken, IdJag or an absolute URI",
  default: "AccessToken",
});

export const ClientAuth = Obj(
  {
    clientId: Str({ min: 1, max: 256 }),
    secretRef: Opt(LocalSecretKeyRef("clientSecret")),
    method: Opt(Enum(["ClientSecretBasic", "ClientSecretPost", "PrivateKeyJwt"], { default: "ClientSecretBasic" })),
    privateKeyJwt: Opt(
      Obj(
        {
          signingKeyRef: LocalSecretKeyRef("signingKey", "PEM RSA or EC private key (default key signingKey)."),
          certificateRef: Opt(
            LocalSecretKeyRef("certificate", "Certificate chain, leaf first (default key certificate)."),
          ),
          certificateHeader: Opt(Enum(["x5c", "x5t#S256"])),
          alg: Opt(Enum(SIGNING_ALGS, { default: "RS256" })),
          kid: Opt(Str({ min: 1, max: 256 })),
          assertionAudience: Str({ min: 1, max: 1024 }),
        },
        {
          rules: [
            rule({
              rule: "has(self.certificateRef) == has(self.certificateHeader)",
              message: "certificateRef and certificateHeader must be set together",
              fieldPath: ".certificateRef",
              check: (s) => has(s, "certificateRef") === has(s, "certificateHeader"),
            }),
          ],
        },
      ),
    ),
  },
  {
    description: "How the client authenticates to the token endpoint.",
    rules: [
      rule({
        rule: "!has(self.method) || self.method != 'PrivateKeyJwt' || has(self.privateKeyJwt)",
        message: "method PrivateKeyJwt requires privateKeyJwt",
        fieldPath: ".privateKeyJwt",
        check: (s) => s?.method !== "PrivateKeyJwt" || has(s, "privateKeyJwt"),
      }),
      // With another method the signing key would be read by nobody: refused rather than silently unused.
      rule({
        rule: "!has(self.privateKeyJwt) || (has(self.method) && self.method == 'PrivateKeyJwt')",
        message: "privateKeyJwt is only valid with method PrivateKeyJwt",
        fieldPath: ".privateKeyJwt",
        check: (s) => !has(s, "privateKeyJwt") || s?.method === "PrivateKeyJwt",
      }),
      rule({
        rule: "has(self.secretRef) || (has(self.method) && self.method != 'ClientSecretBasic')",
        message: "without secretRef only ClientSecretPost (or PrivateKeyJwt) is valid; set secretRef or method",
        fieldPath: ".method",
        check: (s) => has(s, "secretRef") || (has(s, "method") && s.method !== "ClientSecretBasic"),
      }),
    ],
  },
);

const TokenCache = Obj(
  {
    inMemory: Opt(
      Obj({
        maxEntries: Opt(Int({ min: 0, default: 8192, description: "0 disables the cache." })),
        defaultTtl: Opt(DurationDefault("300s", "Used when the endpoint gives no expires_in.")),
      }),
    ),
  },
  "Token cache.",
);

const tokenList = (d: string) => Opt(Arr(ShortString, { min: 1, max: 64, description: d }));

export const OAuthTokenExchange = Obj(
  {
    backendRef: withDoc(BackendObjectReference, "The token endpoint."),
    path: Opt(Str({ min: 1, max: 1024, pattern: "^/", patternMessage: "must start with /", default: "/" })),
    grantType: Opt(Enum(["TokenExchange", "JwtBearer"], { default: "TokenExchange" })),
    subjectToken: Opt(Obj({ source: Opt(ExtractionLocation("Bearer")), tokenType: Opt(TOKEN_TYPE) })),
    actorToken: Opt(
      Obj(
        {
          source: ExtractionLocation(),
          tokenType: Opt(TOKEN_TYPE),
          mayAct: Opt(Enum(["Required"])),
        },
        "The actor token (TokenExchange only).",
      ),
    ),
    audiences: tokenList("audience parameters"),
    scopes: tokenList("scope parameters"),
    resources: tokenList("resource parameters"),
    requestedTokenType: Opt(Enum(["AccessToken", "Jwt", "IdToken", "IdJag"])),
    additionalParams: Opt(MapOf(CELExpression, { max: 64, description: "Extra form parameters, each a CEL value." })),
    clientAuth: Opt(ClientAuth),
    location: Opt(AuthorizationLocation),
    cache: Opt(TokenCache),
  },
  {
    description: "Exchanges the client's token for one the backend accepts (RFC 8693 or JWT bearer grant).",
    rules: [
      rule({
        rule: "!has(self.actorToken) || !has(self.grantType) || self.grantType == 'TokenExchange'",
        message: "actorToken is only valid with grantType TokenExchange",
        fieldPath: ".actorToken",
        check: (s) => !has(s, "actorToken") || !has(s, "grantType") || s.grantType === "TokenExchange",
      }),
    ],
  },
);

const AuthorizationServer = Obj({
  backendRef: BackendObjectReference,
  path: Opt(Str({ min: 1, max: 1024, pattern: "^/", patternMessage: "must start with /", default: "/" })),
  clientAuth: ClientAuth,
});

export const CrossAppAccess = Obj(
  {
    identityProvider: AuthorizationServer,
    resourceAuthorizationServer: AuthorizationServer,
    audience: ShortString,
    resources: tokenList("resource parameters"),
    scopes: tokenList("scope parameters"),
    subjectToken: Opt(
      Obj({ source: Opt(ExtractionLocation("Bearer")) }, "Default: the ID token in the Authorization Bearer header."),
    ),
    cache: Opt(TokenCache),
  },
  "Cross-app access: an ID-JAG from the identity provider exchanged at the resource authorization server.",
);

export const JwtSign = Obj(
  {
    signingKeyRef: LocalSecretKeyRef("signingKey", "PEM RSA or EC private key (default key signingKey)."),
    alg: Opt(Enum(SIGNING_ALGS, { default: "RS256" })),
    kid: Opt(Str({ min: 1, max: 256 })),
    claims: JsonMapWithout(["iat", "exp", "nbf"], {
      min: 1,
      description: "Static claims; iat, exp and nbf are set by the gateway.",
      message: "claims must not contain iat, exp or nbf: the gateway sets them",
      reservedDescription: "Reserved: set by the gateway, refused here.",
    }),
    ttl: Opt(DurationDefault("300s", "Lifetime of each signed token; at least 1s (JWT times are whole seconds).")),
    location: Opt(AuthorizationLocation),
  },
  {
    description: "Signs a short-lived JWT per request.",
    rules: [
      rule({
        rule: "!has(self.ttl) || duration(self.ttl) >= duration('1s')",
        message: "ttl must be at least 1s: a token's exp is in whole seconds, so a shorter one expires as it is signed",
        fieldPath: ".ttl",
        check: (s) => !has(s, "ttl") || (parseDurationMs(String(s.ttl)) ?? 0) >= 1000,
      }),
    ],
  },
);

const AssumeRoleTag = Obj(
  {
    key: Str({ min: 1, max: 128 }),
    value: Opt(Str({ max: 256 })),
    expression: Opt(CELExpression),
  },
  { rules: [exactlyOne(["value", "expression"])] },
);

export const CloudAAuth = Obj(
  {
    secretRef: Opt(withDoc(LocalSecretObjectRef, "Keys accessKey, secretKey and optional sessionToken.")),
    assumeRole: Opt(
      Obj(
        {
          roleArn: Str({
            min: 1,
            max: 2048,
            pattern: "^arn:[a-z0-9-]+:iam::[0-9]{12}:role/[\\w+=,.@/-]+$",
            patternMessage: "must be an IAM role ARN such as arn:aws:iam::123456789012:role/name",
          }),
          sessionName: Opt(
            Str({
              min: 2,
              max: 64,
              pattern: "^[\\w+=,.@-]+$",
              patternMessage: "must be 2 to 64 word characters or +=,.@-",
            }),
          ),
          sessionNameExpression: Opt(CELExpression),
          tags: Opt(Arr(AssumeRoleTag, { max: 50 })),
        },
        { rules: [atMostOne(["sessionName", "sessionNameExpression"])] },
      ),
    ),
    serviceName: Opt(withDoc(ShortString, "Signing service name.")),
    region: Opt(withDoc(ShortString, "Signing region.")),
  },
  "Cloud A credentials (request signing); default SDK credential discovery when omitted.",
);

export const CloudBAuth = Obj(
  {
    type: Opt(Enum(["AccessToken", "IdToken"])),
    secretRef: Opt(LocalSecretKeyRef("credentials.json", "JSON credentials; omitted means ambient credentials.")),
    audience: Opt(withDoc(ShortString, "ID token audience; default derived from the backend hostname.")),
  },
  {
    description: "Cloud B credentials.",
    rules: [
      rule({
        rule: "!has(self.audience) || (has(self.type) && self.type == 'IdToken')",
        message: "audience is only valid with type IdToken",
        fieldPath: ".audience",
        check: (s) => !has(s, "audience") || s.type === "IdToken",
      }),
    ],
  },
);

export const CloudCAuth = Obj(
  {
    secretRef: Opt(withDoc(LocalSecretObjectRef, "Keys clientID, tenantID and clientSecret.")),
    managedIdentity: Opt(Obj({ clientId: ShortString, objectId: ShortString, resourceId: LongString })),
    workloadIdentity: Opt(Empty("Workload identity from the environment.")),
  },
  {
    description: "Cloud C credentials; with none set the method is detected from the environment.",
    rules: [atMostOne(["secretRef", "managedIdentity", "workloadIdentity"])],
  },
);

const BackendCredential = Obj({
  location: AuthorizationLocation,
  secretRef: LocalSecretKeyRef("Authorization"),
});

/**
 * The location without its schema default: a defaulted location would count as written next to every mechanism. Unset,
 * the translators use the same default (Authorization: Bearer, or an LLM provider's own header).
 */
function withoutDefault<T extends TSchema>(schema: T): T {
  const copy = { ...(schema as unknown as Record<string | symbol, unknown>) };
  delete copy["default"];
  return copy as unknown as T;
}

const MODEL_MECHANISMS = ["key", "secretRef", "passthrough", "cloudA", "cloudC", "cloudB", "oauthTokenExchange"];
const MECHANISMS = [...MODEL_MECHANISMS, "crossAppAccess", "jwtSign"];

const authCommon = {
  key: Opt(Str({ min: 1, max: 2048, description: "Inline Authorization value; prefer secretRef." })),
  secretRef: Opt(
    LocalSecretKeyRef("Authorization", "A Bearer prefix is stripped only from the default key Authorization."),
  ),
  passthrough: Opt(Empty("Re-adds the client token validated by another policy.")),
  cloudA: Opt(CloudAAuth),
  cloudC: Opt(CloudCAuth),
  cloudB: Opt(CloudBAuth),
  oauthTokenExchange: Opt(OAuthTokenExchange),
  location: Opt(withoutDefault(withDoc(AuthorizationLocation, "Applies to key, secretRef and passthrough."))),
  credentials: Opt(
    Arr(BackendCredential, { min: 1, max: 8, description: "Additional credentials, independent of the mechanism." }),
  ),
};

// location says where key, secretRef and passthrough write their value; the other mechanisms have their own location
// or none (cloud signatures and tokens go where their protocol puts them), so a location there would be ignored.
const locationNeedsItsMechanism = rule({
  rule: "!has(self.location) || has(self.key) || has(self.secretRef) || has(self.passthrough)",
  message:
    "location applies only to key, secretRef and passthrough (oauthTokenExchange and jwtSign have their own location)",
  fieldPath: ".location",
  check: (s) => !has(s, "location") || has(s, "key") || has(s, "secretRef") || has(s, "passthrough"),
});

export const BackendAuth = Obj(
  { ...authCommon, crossAppAccess: Opt(CrossAppAccess), jwtSign: Opt(JwtSign) },
  {
    description: "Credentials added to requests to the backend.",
    rules: [atMostOne(MECHANISMS), locationNeedsItsMechanism],
  },
);
export type BackendAuth = Static<typeof BackendAuth>;

export const ModelBackendAuth = Obj(authCommon, {
  description: "Credentials added to requests to the model's provider.",
  rules: [atMostOne(MODEL_MECHANISMS), locationNeedsItsMechanism],
});

// ---- external authorization ----

export const ExtAuth = Obj(
  {
    backendRef: withDoc(BackendObjectReference, "The authorization service: a Service or a GwBackend."),
    failureMode: Opt(Enum(["FailClosed", "FailOpen"], { default: "FailClosed" })),
    grpc: Opt(
      Obj(
        {
          contextExtensions: Opt(MapOf(Str({ max: 4096 }), { max: 64 })),
          requestMetadata: Opt(MapOf(CELExpression, { max: 64 })),
        },
        "Use the gRPC protocol.",
      ),
    ),
    http: Opt(
      Obj(
        {
          path: Opt(withDoc(CELExpression, "Default: the original path.")),
          redirect: Opt(withDoc(CELExpression, "Redirect path on failure.")),
          body: Opt(CELExpression),
          allowedRequestHeaders: Opt(
            Arr(HTTPHeaderName, { max: 64, description: "Default: only Authorization is sent." }),
          ),
          addRequestHeaders: Opt(MapOf(CELExpression, { max: 64 })),
          allowedResponseHeaders: Opt(Arr(HTTPHeaderName, { max: 64 })),
          responseMetadata: Opt(MapOf(CELExpression, { description: "Exposed to later steps as extauthz." })),
        },
        "Use HTTP; anything but 200 is an authorization failure.",
      ),
    ),
    forwardBody: Opt(
      Obj(
        { maxSize: ByteSize() },
        {
          description: "Buffer the body and send it; larger bodies are rejected.",
          rules: [byteSizeWithin("maxSize", 1, UINT32_MAX, "Envoy holds it in 32 bits")],
        },
      ),
    ),
    cache: Opt(
      Obj({
        key: Arr(CELExpression, { min: 1, max: 16, description: "Everything the decision depends on." }),
        ttl: Str({
          min: 1,
          max: 16384,
          format: "cel-duration-or-timestamp",
          description: "CEL, a duration string or a timestamp.",
        }),
        maxEntries: Opt(Int({ min: 1, default: 10000 })),
      }),
    ),
  },
  { description: "External authorization.", rules: [atMostOne(["grpc", "http"])] },
);
