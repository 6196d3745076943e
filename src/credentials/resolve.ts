// `backend.auth` of a Service or static backend → the CredentialPlan the credential ext_proc serves (plan.ts). Every
// problem names its field path; one that leaves the backend without its credential is fatal (the route answers 503
// rather than send the request without it). Secret values never reach a message.

import { createHash, createPrivateKey, type KeyObject } from "node:crypto";
import { secretValue } from "../api/core.js";
import { compileExpression } from "../cel/index.js";
import { serviceEndpoints } from "../translate/backend/resolve.js";
import { parseDurationMs } from "../translate/duration.js";
import type { TranslationInput } from "../translate/input.js";
import type { AwsAssumeRole } from "../translate/llm/table.js";
import { findNamed } from "../translate/lookup.js";
import {
  type ClientAuthPlan,
  type CredentialLocation,
  type CredentialPlan,
  type JwtAlg,
  type MintPlan,
  ROLE_SESSION_NAME,
  TOKEN_TYPE_URIS,
  type TokenEndpoint,
  type TokenExchangePlan,
  type TokenSource,
} from "./plan.js";

type Rec = Record<string, unknown>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

export interface CredentialProblem {
  readonly field: string;
  readonly message: string;
  /** The backend would get no credential: the route answers 503. */
  readonly fatal: boolean;
}

/** The forms the credential ext_proc mints; the others are reported. */
export const MINTED_FORMS = [
  "key",
  "secretRef",
  "cloudA",
  "cloudB",
  "jwtSign",
  "passthrough",
  "oauthTokenExchange",
  "crossAppAccess",
  "cloudC",
] as const;
const FORMS: readonly string[] = MINTED_FORMS;
/**
 * The scope of cloudC tokens. The spec gives none for a Service backend; cloudC is the spec's Azure-OpenAI-like
 * provider, whose scope this is.
 */
export const CLOUD_C_SCOPE = "https://cognitiveservices.azure.com/.default";
/**
 * Where a credential is minted, and so what its CEL expressions (a cloudA session name or tag, an exchange's
 * `additionalParams`, a token source's `expression`) can read besides the request as it leaves:
 * - `envoy`: Sluice's credential ext_proc on a Service's or static backend's cluster, to which Envoy forwards the
 *   identities' dynamic metadata and the client's address when a plan reads them (xds/backend-credential.ts);
 * - `llm`: the LLM ext_proc for an AI provider, which has the route's identities (it is not sent the client's address);
 * - `mcp`: the MCP service, per request to a target: `request` is that request (the client's Authorization header
 *   added), the client's identities are not carried to it.
 */
export const CREDENTIAL_VARIABLES = {
  envoy: ["request", "source", "jwt", "apiKey", "basicAuth", "extauthz"],
  llm: ["request", "jwt", "apiKey", "basicAuth", "extauthz"],
  mcp: ["request"],
} as const satisfies Record<string, readonly string[]>;
export type CredentialMinter = keyof typeof CREDENTIAL_VARIABLES;
const MINTER_NAMES: Readonly<Record<CredentialMinter, string>> = {
  envoy: "the credential ext_proc of a Service or static backend",
  llm: "the LLM ext_proc, for an AI provider",
  mcp: "the MCP service per request to an MCP target",
};
const RESERVED_CLAIMS = ["iat", "exp", "nbf"];
const ALGS: readonly JwtAlg[] = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"];
const TAG_KEY = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,128}$/u;
const ACCESS_TOKEN_TYPE = TOKEN_TYPE_URIS.AccessToken as string;

export interface ResolveContext {
  readonly input: TranslationInput | undefined;
  /** Namespace of the policy (Secrets and backendRefs are looked up there). */
  readonly ns: string;
  /** `namespace/name` of the backend. */
  readonly backend: string;
  /** Where the policy is configured (`GwPolicy ns/name`), for the plan's id. */
  readonly source: string;
  /** A plan even for what Envoy's injector could serve (the agent runtime's requests are rewritten by the plan). */
  readonly alwaysPlan?: boolean;
  /** Where the plan is minted (CREDENTIAL_VARIABLES); default `envoy`. */
  readonly minter?: CredentialMinter;
}

export type ResolvedAuth =
  /** Envoy's credential injector serves it (key or secretRef to a header, nothing else). */
  | { readonly native: true; readonly problems: readonly CredentialProblem[] }
  | { readonly native: false; readonly plan?: CredentialPlan; readonly problems: readonly CredentialProblem[] };

/** Whether `auth` is served by Envoy's credential injector alone (key or secretRef into a header). */
export function isNativeAuth(auth: Rec): boolean {
  const forms = Object.keys(auth).filter((k) => k !== "location" && k !== "credentials");
  const loc = auth.location;
  return (
    forms.length === 1 &&
    (forms[0] === "key" || forms[0] === "secretRef") &&
    auth.credentials === undefined &&
    (loc === undefined || (isRec(loc) && isRec(loc.header)))
  );
}

/** A `location` (AuthorizationLocation) or the default `Authorization: Bearer`. */
export function parseLocation(
  v: unknown,
  at: string,
  problems: CredentialProblem[],
  fallback: CredentialLocation = { kind: "header", name: "authorization", prefix: "Bearer" },
): CredentialLocation | undefined {
  if (v === undefined) return fallback;
  if (!isRec(v)) {
    problems.push({ field: at, message: "must be an object with one of header, queryParameter, cookie", fatal: true });
    return undefined;
  }
  const set = ["header", "queryParameter", "cookie"].filter((k) => v[k] !== undefined);
  if (set.length !== 1) {
    problems.push({
      field: at,
      message: `exactly one of header, queryParameter, cookie is required (found ${set.length === 0 ? "none" : set.join(", ")})`,
      fatal: true,
    });
    return undefined;
  }
  const which = set[0] as string;
  const inner = v[which];
  const name = isRec(inner) ? str(inner.name) : undefined;
  if (name === undefined) {
    problems.push({ field: `${at}.${which}.name`, message: "is required", fatal: true });
    return undefined;
  }
  if (which === "header") {
    const prefix = isRec(inner) ? str(inner.prefix) : undefined;
    return { kind: "header", name: name.toLowerCase(), prefix: prefix ?? "" };
  }
  return which === "queryParameter" ? { kind: "query", name } : { kind: "cookie", name };
}

/** The value of a Secret key in the policy's namespace, or a fatal problem naming the field. */
function readSecret(
  ref: unknown,
  defaultKey: string,
  at: string,
  ctx: ResolveContext,
  problems: CredentialProblem[],
): string | undefined {
  if (!isRec(ref) || str(ref.name) === undefined) {
    problems.push({ field: at, message: "must name a Secret (name)", fatal: true });
    return undefined;
  }
  const kind = str(ref.kind) ?? "Secret";
  if (kind !== "Secret" || (str(ref.group) ?? "") !== "") {
    problems.push({ field: at, message: `must refer to a core Secret, not ${kind}`, fatal: true });
    return undefined;
  }
  const key = str(ref.key) ?? defaultKey;
  const secret = ctx.input === undefined ? undefined : findNamed(ctx.input.secrets, ctx.ns, ref.name as string);
  const v = secret === undefined ? undefined : secretValue(secret, key);
  if (v === undefined) {
    problems.push({
      field: at,
      message: `Secret ${ctx.ns}/${String(ref.name)} key ${key} not found; requests to ${ctx.backend} are answered 503 until it is`,
      fatal: true,
    });
  }
  return v;
}

/** A PEM private key usable with `alg`, or a problem (never quoting the key). */
export function checkSigningKey(pem: string, alg: JwtAlg, at: string, problems: CredentialProblem[]): boolean {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    problems.push({ field: at, message: "is not a PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC)", fatal: true });
    return false;
  }
  const type = key.asymmetricKeyType;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  const fits = alg.startsWith("ES")
    ? type === "ec" && curve === (alg === "ES256" ? "prime256v1" : "secp384r1")
    : type === "rsa";
  if (!fits) {
    problems.push({
      field: at,
      message: `a ${type ?? "unknown"}${curve !== undefined ? ` ${curve}` : ""} key cannot sign ${alg} (RS*/PS* need RSA, ES256 P-256, ES384 P-384)`,
      fatal: true,
    });
  }
  return fits;
}

function alg(v: unknown, at: string, problems: CredentialProblem[]): JwtAlg {
  if (v === undefined) return "RS256";
  if (typeof v === "string" && (ALGS as readonly string[]).includes(v)) return v as JwtAlg;
  problems.push({ field: at, message: `must be one of ${ALGS.join(", ")}`, fatal: true });
  return "RS256";
}

function expression(
  text: unknown,
  at: string,
  problems: CredentialProblem[],
  ctx: Pick<ResolveContext, "minter">,
): string | undefined {
  if (typeof text !== "string") return undefined;
  const c = compileExpression(text);
  if ("errors" in c) {
    problems.push({
      field: at,
      message: `invalid CEL expression: ${c.errors.map((e) => e.message).join("; ")}`,
      fatal: true,
    });
    return undefined;
  }
  const minter = ctx.minter ?? "envoy";
  const known: readonly string[] = CREDENTIAL_VARIABLES[minter];
  const missing = [...c.ok.variables].filter((v) => !known.includes(v));
  if (missing.length > 0) {
    problems.push({
      field: at,
      message: `reads ${missing.join(", ")}; this credential is minted by ${MINTER_NAMES[minter]}, which has ${known.join(", ")}`,
      fatal: true,
    });
    return undefined;
  }
  return text;
}

const BEARER: TokenSource = { header: "authorization", prefix: "Bearer" };

/**
 * A subject or actor token's `source` (ExtractionLocation: exactly one of header, queryParameter, cookie, expression);
 * `fallback` when unset. Undefined, with the problem named, when it cannot be read.
 */
function tokenSource(
  v: unknown,
  at: string,
  problems: CredentialProblem[],
  ctx: Pick<ResolveContext, "minter">,
  fallback: TokenSource,
): TokenSource | undefined {
  if (v === undefined) return fallback;
  const set = isRec(v) ? ["header", "queryParameter", "cookie", "expression"].filter((k) => v[k] !== undefined) : [];
  if (!isRec(v) || set.length !== 1) {
    problems.push({
      field: at,
      message: `exactly one of header, queryParameter, cookie, expression is required (found ${set.length === 0 ? "none" : set.join(", ")})`,
      fatal: true,
    });
    return undefined;
  }
  const which = set[0] as string;
  const minter = ctx.minter ?? "envoy";
  const unread =
    minter === "mcp" &&
    !(which === "header" && isRec(v.header) && str(v.header.name)?.toLowerCase() === "authorization")
      ? "an MCP target's credential is minted by the MCP service per request to the target, which is given the client's Authorization header alone of its request"
      : minter === "llm" && which === "queryParameter"
        ? "an AI provider's credential is minted on the provider's request, whose path (and query) is the provider's, not the client's"
        : undefined;
  if (unread !== undefined) {
    problems.push({ field: `${at}.${which}`, message: `not read: ${unread}`, fatal: true });
    return undefined;
  }
  if (which === "expression") {
    const e = expression(v.expression, `${at}.expression`, problems, ctx);
    if (e === undefined && typeof v.expression !== "string") {
      problems.push({ field: `${at}.expression`, message: "must be a CEL expression", fatal: true });
    }
    return e === undefined ? undefined : { expression: e };
  }
  const inner = v[which];
  const name = isRec(inner) ? str(inner.name) : undefined;
  if (name === undefined) {
    problems.push({ field: `${at}.${which}.name`, message: "is required", fatal: true });
    return undefined;
  }
  if (which === "header") return { header: name.toLowerCase(), prefix: isRec(inner) ? (str(inner.prefix) ?? "") : "" };
  return which === "cookie" ? { cookie: name } : { query: name };
}

function resolveCloudA(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.cloudA";
  const before = problems.length;
  let keys: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined;
  if (v.secretRef !== undefined) {
    const accessKeyId = readSecret({ ...(v.secretRef as Rec), key: "accessKey" }, "", `${at}.secretRef`, ctx, problems);
    const secretAccessKey = readSecret(
      { ...(v.secretRef as Rec), key: "secretKey" },
      "",
      `${at}.secretRef`,
      ctx,
      problems,
    );
    const ref = v.secretRef as Rec;
    const secret = ctx.input === undefined ? undefined : findNamed(ctx.input.secrets, ctx.ns, String(ref.name));
    const sessionToken = secret === undefined ? undefined : secretValue(secret, "sessionToken");
    if (accessKeyId !== undefined && secretAccessKey !== undefined) {
      keys = {
        accessKeyId: accessKeyId.trim(),
        secretAccessKey: secretAccessKey.trim(),
        ...(sessionToken !== undefined ? { sessionToken: sessionToken.trim() } : {}),
      };
    }
  }
  let assumeRole: AwsAssumeRole | undefined;
  if (v.assumeRole !== undefined) {
    const r = isRec(v.assumeRole) ? v.assumeRole : {};
    const ra = `${at}.assumeRole`;
    const roleArn = str(r.roleArn);
    if (roleArn === undefined || !/^arn:[\w-]+:iam::\d{12}:role\/[\w+=,.@/-]+$/.test(roleArn)) {
      problems.push({
        field: `${ra}.roleArn`,
        message: "must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)",
        fatal: true,
      });
    }
    if (r.sessionName !== undefined && r.sessionNameExpression !== undefined) {
      problems.push({ field: ra, message: "at most one of sessionName and sessionNameExpression", fatal: true });
    }
    if (r.sessionName !== undefined && (typeof r.sessionName !== "string" || !ROLE_SESSION_NAME.test(r.sessionName))) {
      problems.push({
        field: `${ra}.sessionName`,
        message: "must be 2 to 64 letters, digits or _+=,.@-",
        fatal: true,
      });
    }
    const sessionNameExpression = expression(r.sessionNameExpression, `${ra}.sessionNameExpression`, problems, ctx);
    const tags: AwsAssumeRole["tags"][number][] = [];
    const rawTags = Array.isArray(r.tags) ? r.tags : [];
    if (rawTags.length > 50) problems.push({ field: `${ra}.tags`, message: "at most 50 tags", fatal: true });
    rawTags.forEach((t: unknown, i) => {
      const ta = `${ra}.tags[${i}]`;
      if (!isRec(t) || typeof t.key !== "string" || !TAG_KEY.test(t.key)) {
        problems.push({
          field: `${ta}.key`,
          message: "is required: 1 to 128 letters, digits, spaces or _.:/=+-@",
          fatal: true,
        });
        return;
      }
      if ((t.value === undefined) === (t.expression === undefined)) {
        problems.push({ field: ta, message: "exactly one of value and expression", fatal: true });
        return;
      }
      if (t.value !== undefined) {
        if (typeof t.value !== "string" || t.value.length > 256) {
          problems.push({ field: `${ta}.value`, message: "must be a string of at most 256 characters", fatal: true });
        } else tags.push({ key: t.key, value: t.value });
        return;
      }
      const e = expression(t.expression, `${ta}.expression`, problems, ctx);
      if (e !== undefined) tags.push({ key: t.key, expression: e });
    });
    if (roleArn !== undefined) {
      assumeRole = {
        roleArn,
        ...(sessionNameExpression !== undefined
          ? { sessionNameExpression }
          : {
              sessionName:
                typeof r.sessionName === "string"
                  ? r.sessionName
                  : `sluice-${ctx.backend.replace("/", ".")}`.replace(/[^\w+=,.@-]/g, "-").slice(0, 64),
            }),
        tags,
      };
    }
  }
  if (problems.length > before) return undefined;
  return {
    kind: "cloudA",
    ...(keys !== undefined ? { keys } : {}),
    ...(assumeRole !== undefined ? { assumeRole } : {}),
    ...(str(v.region) !== undefined ? { region: str(v.region) as string } : {}),
    ...(str(v.serviceName) !== undefined ? { service: str(v.serviceName) as string } : {}),
  };
}

function resolveCloudC(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.cloudC";
  const given = ["secretRef", "managedIdentity", "workloadIdentity"].filter((k) => v[k] !== undefined);
  if (given.length > 1) {
    problems.push({
      field: at,
      message: `at most one of secretRef, managedIdentity, workloadIdentity (found ${given.join(", ")})`,
      fatal: true,
    });
    return undefined;
  }
  if (v.secretRef !== undefined) {
    const ref = v.secretRef as Rec;
    const read = (key: string) =>
      readSecret({ ...(isRec(ref) ? ref : {}), key }, key, `${at}.secretRef`, ctx, problems);
    const clientId = read("clientID");
    const tenant = read("tenantID");
    const secret = read("clientSecret");
    if (clientId === undefined || tenant === undefined || secret === undefined) return undefined;
    return {
      kind: "cloudC",
      mode: "secretRef",
      secret: { clientId: clientId.trim(), tenant: tenant.trim(), secret: secret.trim() },
      scope: CLOUD_C_SCOPE,
    };
  }
  if (v.managedIdentity !== undefined) {
    const m = isRec(v.managedIdentity) ? v.managedIdentity : {};
    const id =
      str(m.clientId) !== undefined
        ? { param: "client_id" as const, value: str(m.clientId) as string }
        : str(m.objectId) !== undefined
          ? { param: "object_id" as const, value: str(m.objectId) as string }
          : str(m.resourceId) !== undefined
            ? { param: "msi_res_id" as const, value: str(m.resourceId) as string }
            : undefined;
    return {
      kind: "cloudC",
      mode: "managedIdentity",
      ...(id !== undefined ? { managedIdentity: id } : {}),
      scope: CLOUD_C_SCOPE,
    };
  }
  return {
    kind: "cloudC",
    mode: v.workloadIdentity !== undefined ? "workloadIdentity" : "environment",
    scope: CLOUD_C_SCOPE,
  };
}

function resolveCloudB(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.cloudB";
  const before = problems.length;
  const type = v.type ?? "AccessToken";
  if (type !== "AccessToken" && type !== "IdToken") {
    problems.push({ field: `${at}.type`, message: "must be AccessToken or IdToken", fatal: true });
  }
  if (v.audience !== undefined && type !== "IdToken") {
    problems.push({ field: `${at}.audience`, message: "is only valid with type IdToken", fatal: true });
  }
  let credentials: Rec | undefined;
  if (v.secretRef !== undefined) {
    const text = readSecret(v.secretRef, "credentials.json", `${at}.secretRef`, ctx, problems);
    if (text !== undefined) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      if (!isRec(json) || (json.type !== "service_account" && json.type !== "authorized_user")) {
        problems.push({
          field: `${at}.secretRef`,
          message: "is not a service account key or authorized user credentials JSON",
          fatal: true,
        });
      } else if (type === "IdToken" && json.type !== "service_account") {
        problems.push({
          field: `${at}.secretRef`,
          message: "ID tokens with a chosen audience need a service account key, not authorized user credentials",
          fatal: true,
        });
      } else credentials = json;
    }
  }
  if (problems.length > before) return undefined;
  return {
    kind: "cloudB",
    type: type as "AccessToken" | "IdToken",
    ...(credentials !== undefined ? { credentials } : {}),
    ...(str(v.audience) !== undefined ? { audience: str(v.audience) as string } : {}),
  };
}

function resolveJwtSign(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.jwtSign";
  const before = problems.length;
  const a = alg(v.alg, `${at}.alg`, problems);
  const key = readSecret(v.signingKeyRef, "signingKey", `${at}.signingKeyRef`, ctx, problems);
  if (key !== undefined) checkSigningKey(key, a, `${at}.signingKeyRef`, problems);
  const claims = isRec(v.claims) ? v.claims : undefined;
  if (claims === undefined || Object.keys(claims).length === 0) {
    problems.push({ field: `${at}.claims`, message: "is required: a map of at least one static claim", fatal: true });
  } else {
    for (const c of RESERVED_CLAIMS) {
      if (c in claims) {
        problems.push({
          field: `${at}.claims.${c}`,
          message: "is reserved: Sluice sets iat, exp and nbf from ttl",
          fatal: true,
        });
      }
    }
  }
  let ttlMs = 300_000;
  if (v.ttl !== undefined) {
    const t = typeof v.ttl === "string" ? parseDurationMs(v.ttl) : undefined;
    if (t === undefined || t < 1000) {
      problems.push({ field: `${at}.ttl`, message: "must be a duration of at least 1s", fatal: true });
    } else ttlMs = t;
  }
  const location = parseLocation(v.location, `${at}.location`, problems);
  if (problems.length > before || key === undefined || claims === undefined || location === undefined) return undefined;
  return {
    kind: "jwtSign",
    signingKey: key,
    alg: a,
    ...(str(v.kid) !== undefined ? { kid: str(v.kid) as string } : {}),
    claims,
    ttlMs,
    location,
  };
}

/** A token endpoint's backendRef: a Service's ready endpoints, or a static GwBackend's host. */
function tokenEndpoint(
  v: Rec,
  at: string,
  ctx: ResolveContext,
  problems: CredentialProblem[],
): TokenEndpoint | undefined {
  const ref = v.backendRef;
  const path = v.path === undefined ? "/" : v.path;
  if (typeof path !== "string" || !path.startsWith("/")) {
    problems.push({ field: `${at}.path`, message: "must start with /", fatal: true });
    return undefined;
  }
  if (!isRec(ref) || str(ref.name) === undefined) {
    problems.push({ field: `${at}.backendRef`, message: "is required (the token endpoint)", fatal: true });
    return undefined;
  }
  const kind = str(ref.kind) ?? "Service";
  const name = ref.name as string;
  const ns = str(ref.namespace) ?? ctx.ns;
  if (ns !== ctx.ns) {
    problems.push({ field: `${at}.backendRef.namespace`, message: "must be the policy's namespace", fatal: true });
    return undefined;
  }
  if (kind === "Service" && (str(ref.group) ?? "") === "") {
    const port = typeof ref.port === "number" ? ref.port : undefined;
    const r = ctx.input === undefined ? undefined : serviceEndpoints(ctx.input, ns, name, port);
    if (r === undefined || !r.ok) {
      problems.push({
        field: `${at}.backendRef`,
        message: `${r?.message ?? "not found"}; requests to ${ctx.backend} are answered 503 until it resolves`,
        fatal: true,
      });
      return undefined;
    }
    const targets = r.endpoints.filter((e) => e.ready).map((e) => ({ host: e.address, port: e.port }));
    if (targets.length === 0 && r.fqdn !== undefined) targets.push({ host: r.fqdn.host, port: r.fqdn.port });
    return { targets, authority: `${name}.${ns}.svc`, path, tls: false };
  }
  if (kind === "GwBackend" || kind === "Backend") {
    const be = ctx.input === undefined ? undefined : findNamed(ctx.input.backends, ns, name);
    const s = be?.spec.static as Rec | undefined;
    const host = str(s?.host);
    const port = typeof s?.port === "number" ? s.port : undefined;
    if (host === undefined || port === undefined) {
      problems.push({
        field: `${at}.backendRef`,
        message: `GwBackend ${ns}/${name} ${be === undefined ? "not found" : "is not a static host and port"}; requests to ${ctx.backend} are answered 503 until it is`,
        fatal: true,
      });
      return undefined;
    }
    // A static GwBackend's own backend.tls is not read here: TLS when it listens on 443.
    return { targets: [{ host, port }], authority: host, path, tls: port === 443 };
  }
  problems.push({ field: `${at}.backendRef.kind`, message: `must be Service or GwBackend, not ${kind}`, fatal: true });
  return undefined;
}

function resolveClientAuth(
  v: unknown,
  at: string,
  ctx: ResolveContext,
  problems: CredentialProblem[],
): ClientAuthPlan | undefined {
  if (!isRec(v)) return undefined;
  const clientId = str(v.clientId);
  if (clientId === undefined) {
    problems.push({ field: `${at}.clientId`, message: "is required", fatal: true });
    return undefined;
  }
  const method = v.method ?? "ClientSecretBasic";
  if (method !== "ClientSecretBasic" && method !== "ClientSecretPost" && method !== "PrivateKeyJwt") {
    problems.push({
      field: `${at}.method`,
      message: "must be ClientSecretBasic, ClientSecretPost or PrivateKeyJwt",
      fatal: true,
    });
    return undefined;
  }
  if (method === "PrivateKeyJwt") {
    const p = v.privateKeyJwt;
    if (!isRec(p)) {
      problems.push({ field: `${at}.privateKeyJwt`, message: "is required for PrivateKeyJwt", fatal: true });
      return undefined;
    }
    const pa = `${at}.privateKeyJwt`;
    const a = alg(p.alg, `${pa}.alg`, problems);
    const signingKey = readSecret(p.signingKeyRef, "signingKey", `${pa}.signingKeyRef`, ctx, problems);
    if (signingKey !== undefined && !checkSigningKey(signingKey, a, `${pa}.signingKeyRef`, problems)) return undefined;
    const assertionAudience = str(p.assertionAudience);
    if (assertionAudience === undefined) {
      problems.push({ field: `${pa}.assertionAudience`, message: "is required", fatal: true });
      return undefined;
    }
    if ((p.certificateRef === undefined) !== (p.certificateHeader === undefined)) {
      problems.push({ field: pa, message: "certificateRef and certificateHeader go together", fatal: true });
      return undefined;
    }
    const certificate =
      p.certificateRef === undefined
        ? undefined
        : readSecret(p.certificateRef, "certificate", `${pa}.certificateRef`, ctx, problems);
    const header = p.certificateHeader;
    if (header !== undefined && header !== "x5c" && header !== "x5t#S256") {
      problems.push({ field: `${pa}.certificateHeader`, message: "must be x5c or x5t#S256", fatal: true });
      return undefined;
    }
    if (signingKey === undefined || (p.certificateRef !== undefined && certificate === undefined)) return undefined;
    return {
      clientId,
      method,
      privateKeyJwt: {
        signingKey,
        alg: a,
        ...(str(p.kid) !== undefined ? { kid: str(p.kid) as string } : {}),
        assertionAudience,
        ...(certificate !== undefined ? { certificate, certificateHeader: header as "x5c" | "x5t#S256" } : {}),
      },
    };
  }
  if (v.secretRef === undefined) {
    if (method !== "ClientSecretPost") {
      problems.push({
        field: `${at}.secretRef`,
        message: `is required for ${method} (without it only ClientSecretPost, a public client, is valid)`,
        fatal: true,
      });
      return undefined;
    }
    return { clientId, method };
  }
  const clientSecret = readSecret(v.secretRef, "clientSecret", `${at}.secretRef`, ctx, problems);
  return clientSecret === undefined ? undefined : { clientId, method, clientSecret: clientSecret.trim() };
}

function list(v: unknown, at: string, problems: CredentialProblem[]): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v) || v.length === 0 || v.length > 64 || !v.every((x) => typeof x === "string" && x !== "")) {
    problems.push({ field: at, message: "must be a list of 1 to 64 non-empty strings", fatal: true });
    return [];
  }
  return v as string[];
}

function tokenType(v: unknown, at: string, problems: CredentialProblem[], customAllowed: boolean): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === "string" && TOKEN_TYPE_URIS[v] !== undefined) return TOKEN_TYPE_URIS[v];
  if (customAllowed && typeof v === "string" && /^[a-z][a-z0-9+.-]*:\S+$/i.test(v)) return v;
  problems.push({
    field: at,
    message: `must be AccessToken, Jwt, IdToken or IdJag${customAllowed ? " or an absolute URI" : ""}`,
    fatal: true,
  });
  return undefined;
}

function resolveTokenExchange(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.oauthTokenExchange";
  const before = problems.length;
  const endpoint = tokenEndpoint(v, at, ctx, problems);
  const grantType = v.grantType ?? "TokenExchange";
  if (grantType !== "TokenExchange" && grantType !== "JwtBearer") {
    problems.push({ field: `${at}.grantType`, message: "must be TokenExchange or JwtBearer", fatal: true });
  }
  let actor: TokenExchangePlan["actor"];
  if (v.actorToken !== undefined) {
    const a = isRec(v.actorToken) ? v.actorToken : {};
    if (grantType !== "TokenExchange") {
      problems.push({ field: `${at}.actorToken`, message: "is only valid with grantType TokenExchange", fatal: true });
    }
    const source =
      a.source === undefined
        ? undefined
        : tokenSource(a.source, `${at}.actorToken.source`, problems, ctx, { header: "authorization", prefix: "" });
    if (a.source === undefined) {
      problems.push({ field: `${at}.actorToken.source`, message: "is required (no default)", fatal: true });
    }
    if (a.mayAct !== undefined && a.mayAct !== "Required") {
      problems.push({ field: `${at}.actorToken.mayAct`, message: "must be Required", fatal: true });
    }
    const type = tokenType(a.tokenType, `${at}.actorToken.tokenType`, problems, true) ?? ACCESS_TOKEN_TYPE;
    if (source !== undefined) {
      actor = {
        source,
        tokenType: type,
        mayActRequired: a.mayAct === "Required",
      };
    }
  }
  const additionalParams: (readonly [string, string])[] = [];
  if (v.additionalParams !== undefined) {
    const params = isRec(v.additionalParams) ? v.additionalParams : {};
    if (Object.keys(params).length > 64) {
      problems.push({ field: `${at}.additionalParams`, message: "at most 64 parameters", fatal: true });
    }
    for (const [name, text] of Object.entries(params)) {
      const e = expression(text, `${at}.additionalParams.${name}`, problems, ctx);
      if (e !== undefined) additionalParams.push([name, e]);
      else if (typeof text !== "string") {
        problems.push({ field: `${at}.additionalParams.${name}`, message: "must be a CEL expression", fatal: true });
      }
    }
  }
  const subject = isRec(v.subjectToken) ? v.subjectToken : {};
  const subjectSource = tokenSource(subject.source, `${at}.subjectToken.source`, problems, ctx, BEARER) ?? BEARER;
  const subjectTokenType =
    tokenType(subject.tokenType, `${at}.subjectToken.tokenType`, problems, true) ?? ACCESS_TOKEN_TYPE;
  const requested = tokenType(v.requestedTokenType, `${at}.requestedTokenType`, problems, false);
  const clientAuth = resolveClientAuth(v.clientAuth, `${at}.clientAuth`, ctx, problems);
  const location = parseLocation(v.location, `${at}.location`, problems);
  const cache = isRec(v.cache) && isRec(v.cache.inMemory) ? v.cache.inMemory : {};
  const maxEntries = typeof cache.maxEntries === "number" ? cache.maxEntries : 8192;
  const ttl = typeof cache.defaultTtl === "string" ? parseDurationMs(cache.defaultTtl) : 300_000;
  if (ttl === undefined)
    problems.push({ field: `${at}.cache.inMemory.defaultTtl`, message: "must be a duration", fatal: true });
  const audiences = list(v.audiences, `${at}.audiences`, problems);
  const scopes = list(v.scopes, `${at}.scopes`, problems);
  const resources = list(v.resources, `${at}.resources`, problems);
  if (problems.some((p, i) => i >= before && p.fatal) || endpoint === undefined || location === undefined)
    return undefined;
  return {
    kind: "oauthTokenExchange",
    endpoint,
    ...(actor !== undefined ? { actor } : {}),
    ...(additionalParams.length > 0 ? { additionalParams } : {}),
    grantType: grantType as "TokenExchange" | "JwtBearer",
    subjectSource,
    subjectTokenType,
    audiences,
    scopes,
    resources,
    ...(requested !== undefined ? { requestedTokenType: requested } : {}),
    ...(clientAuth !== undefined ? { clientAuth } : {}),
    location,
    cache: { maxEntries, defaultTtlMs: ttl ?? 300_000 },
  };
}

function resolveCrossApp(v: Rec, ctx: ResolveContext, problems: CredentialProblem[]): MintPlan | undefined {
  const at = "backend.auth.crossAppAccess";
  const before = problems.length;
  const side = (name: "identityProvider" | "resourceAuthorizationServer") => {
    const s = v[name];
    if (!isRec(s)) {
      problems.push({ field: `${at}.${name}`, message: "is required ({backendRef, path, clientAuth})", fatal: true });
      return undefined;
    }
    const endpoint = tokenEndpoint(s, `${at}.${name}`, ctx, problems);
    if (!isRec(s.clientAuth)) {
      problems.push({ field: `${at}.${name}.clientAuth`, message: "is required", fatal: true });
      return undefined;
    }
    const clientAuth = resolveClientAuth(s.clientAuth, `${at}.${name}.clientAuth`, ctx, problems);
    return endpoint === undefined || clientAuth === undefined ? undefined : { endpoint, clientAuth };
  };
  const idp = side("identityProvider");
  const ras = side("resourceAuthorizationServer");
  const audience = str(v.audience);
  if (audience === undefined) problems.push({ field: `${at}.audience`, message: "is required", fatal: true });
  const scopes = list(v.scopes, `${at}.scopes`, problems);
  const resources = list(v.resources, `${at}.resources`, problems);
  const subject = isRec(v.subjectToken) ? v.subjectToken : {};
  const subjectSource = tokenSource(subject.source, `${at}.subjectToken.source`, problems, ctx, BEARER) ?? BEARER;
  const cache = isRec(v.cache) && isRec(v.cache.inMemory) ? v.cache.inMemory : {};
  const maxEntries = typeof cache.maxEntries === "number" ? cache.maxEntries : 8192;
  const ttl = typeof cache.defaultTtl === "string" ? parseDurationMs(cache.defaultTtl) : 300_000;
  if (ttl === undefined)
    problems.push({ field: `${at}.cache.inMemory.defaultTtl`, message: "must be a duration", fatal: true });
  if (problems.length > before || idp === undefined || ras === undefined || audience === undefined) return undefined;
  const common = {
    kind: "oauthTokenExchange" as const,
    subjectSource,
    resources: [] as string[],
    location: { kind: "header" as const, name: "authorization", prefix: "Bearer" },
    cache: { maxEntries, defaultTtlMs: ttl ?? 300_000 },
  };
  return {
    kind: "crossAppAccess",
    identityProvider: {
      ...common,
      endpoint: idp.endpoint,
      clientAuth: idp.clientAuth,
      grantType: "TokenExchange",
      subjectTokenType: TOKEN_TYPE_URIS.IdToken as string,
      requestedTokenType: TOKEN_TYPE_URIS.IdJag as string,
      audiences: [audience],
      scopes,
      resources,
    },
    resourceServer: {
      ...common,
      endpoint: ras.endpoint,
      clientAuth: ras.clientAuth,
      grantType: "JwtBearer",
      subjectTokenType: TOKEN_TYPE_URIS.IdJag as string,
      audiences: [],
      scopes: [],
    },
  };
}

/** `backend.auth` of a Service or static backend: served by Envoy natively, a plan for Sluice, or problems. */
export function resolveBackendAuth(auth: Rec, ctx: ResolveContext): ResolvedAuth {
  const problems: CredentialProblem[] = [];
  const forms = Object.keys(auth).filter((k) => k !== "location" && k !== "credentials");
  const unknown = forms.filter((k) => !FORMS.includes(k));
  for (const k of unknown)
    problems.push({ field: `backend.auth.${k}`, message: "is not a BackendAuth field", fatal: true });
  if (forms.length > 1) {
    problems.push({
      field: "backend.auth",
      message: `at most one of ${FORMS.join(", ")} (found ${forms.join(", ")})`,
      fatal: true,
    });
    return { native: false, problems };
  }
  const form = forms[0];
  if (form !== undefined && !(MINTED_FORMS as readonly string[]).includes(form)) {
    return {
      native: false,
      problems: [
        {
          field: `backend.auth.${form}`,
          message: `not applied to ${ctx.backend} yet: no ${form} token is minted for Service and static backends (docs/credentials.md)`,
          fatal: false,
        },
      ],
    };
  }
  if (isNativeAuth(auth) && ctx.alwaysPlan !== true) return { native: true, problems };
  if (auth.location !== undefined && form !== "key" && form !== "secretRef" && form !== "passthrough") {
    problems.push({
      field: "backend.auth.location",
      message: `applies to key, secretRef and passthrough only; ${form ?? "credentials"} has its own`,
      fatal: false,
    });
  }
  let primary: MintPlan | undefined;
  const value = form === undefined ? undefined : auth[form];
  switch (form) {
    case "key":
    case "secretRef": {
      const keyOk = form !== "key" || (typeof value === "string" && value.length <= 2048);
      if (!keyOk) {
        problems.push({
          field: "backend.auth.key",
          message: "must be a string of at most 2048 characters",
          fatal: true,
        });
      }
      const v =
        form === "key"
          ? keyOk
            ? (value as string)
            : undefined
          : readSecret(value, "Authorization", "backend.auth.secretRef", ctx, problems);
      const loc = parseLocation(auth.location, "backend.auth.location", problems);
      if (v !== undefined && loc !== undefined) {
        const key = isRec(value) ? (str(value.key) ?? "Authorization") : "";
        // A Bearer prefix is stripped only from a Secret's default key.
        const clean = form === "secretRef" && key === "Authorization" ? v.trim().replace(/^Bearer\s+/i, "") : v.trim();
        primary = { kind: "static", value: clean, location: loc };
      }
      break;
    }
    case "passthrough": {
      const loc = parseLocation(auth.location, "backend.auth.location", problems);
      if (loc !== undefined) primary = { kind: "passthrough", location: loc };
      break;
    }
    case "cloudA":
      primary = resolveCloudA(isRec(value) ? value : {}, ctx, problems);
      break;
    case "cloudB":
      primary = resolveCloudB(isRec(value) ? value : {}, ctx, problems);
      break;
    case "cloudC":
      primary = resolveCloudC(isRec(value) ? value : {}, ctx, problems);
      break;
    case "jwtSign":
      primary = resolveJwtSign(isRec(value) ? value : {}, ctx, problems);
      break;
    case "oauthTokenExchange":
      primary = resolveTokenExchange(isRec(value) ? value : {}, ctx, problems);
      break;
    case "crossAppAccess":
      primary = resolveCrossApp(isRec(value) ? value : {}, ctx, problems);
      break;
  }
  const extra: { value: string; location: CredentialLocation }[] = [];
  if (auth.credentials !== undefined) {
    const list = Array.isArray(auth.credentials) ? auth.credentials : [];
    if (list.length < 1 || list.length > 8) {
      problems.push({ field: "backend.auth.credentials", message: "must list 1 to 8 credentials", fatal: true });
    }
    list.forEach((c: unknown, i) => {
      const at = `backend.auth.credentials[${i}]`;
      const entry = isRec(c) ? c : {};
      if (entry.location === undefined) {
        problems.push({ field: `${at}.location`, message: "is required", fatal: true });
        return;
      }
      const loc = parseLocation(entry.location, `${at}.location`, problems);
      const v = readSecret(entry.secretRef, "Authorization", `${at}.secretRef`, ctx, problems);
      if (loc !== undefined && v !== undefined) extra.push({ value: v.trim(), location: loc });
    });
  }
  if (problems.some((p) => p.fatal) || (primary === undefined && extra.length === 0)) {
    if (!problems.some((p) => p.fatal)) {
      problems.push({ field: "backend.auth", message: `no credential for ${ctx.backend}`, fatal: true });
    }
    return { native: false, problems };
  }
  // Named from where it is configured and what it says, minus inline keys (a hash of a short key could be guessed).
  const visible = { ...auth, key: undefined };
  const id = createHash("sha256")
    .update(JSON.stringify([ctx.source, ctx.backend, visible]))
    .digest("hex")
    .slice(0, 20);
  const field = form === undefined ? "backend.auth.credentials" : `backend.auth.${form}`;
  return {
    native: false,
    plan: { id, backend: ctx.backend, field, ...(primary !== undefined ? { primary } : {}), extra },
    problems,
  };
}

/**
 * The `backend.auth` forms of an AI provider the LLM ext_proc mints with this module's plans (docs/llm.md): the LLM
 * table writes key, secretRef, credentials[], passthrough, cloudA and cloudB itself.
 */
export const AI_MINTED_FORMS = ["jwtSign", "oauthTokenExchange", "crossAppAccess", "cloudC"] as const;

/**
 * `backend.auth` of one AI provider, when it uses one of AI_MINTED_FORMS: the plan the LLM ext_proc mints from after
 * choosing the provider, or the problems (each fatal: the provider's requests then fail rather than go out bare).
 * Undefined when the policy uses none of them.
 */
export function resolveProviderMint(
  auth: Rec,
  ctx: ResolveContext,
): { readonly plan?: CredentialPlan; readonly problems: readonly CredentialProblem[] } | undefined {
  const form = AI_MINTED_FORMS.find((f) => auth[f] !== undefined);
  if (form === undefined) return undefined;
  const problems: CredentialProblem[] = [];
  const v = isRec(auth[form]) ? (auth[form] as Rec) : {};
  const primary =
    form === "jwtSign"
      ? resolveJwtSign(v, ctx, problems)
      : form === "oauthTokenExchange"
        ? resolveTokenExchange(v, ctx, problems)
        : form === "crossAppAccess"
          ? resolveCrossApp(v, ctx, problems)
          : resolveCloudC(v, ctx, problems);
  if (primary === undefined || problems.some((p) => p.fatal)) {
    if (!problems.some((p) => p.fatal)) {
      problems.push({ field: `backend.auth.${form}`, message: `no credential for ${ctx.backend}`, fatal: true });
    }
    return { problems };
  }
  const id = createHash("sha256")
    .update(JSON.stringify([ctx.source, ctx.backend, form, v]))
    .digest("hex")
    .slice(0, 20);
  return { plan: { id, backend: ctx.backend, field: `backend.auth.${form}`, primary, extra: [] }, problems };
}
