// The LLM policy table: per route (through one Gateway) that sends to AI backends, one immutable, content-addressed
// entry (id = hash of its content) holding what the Sluice ext_proc needs: route types, token limits and, per AI
// cluster and provider, how to reach and authenticate with it and the AI request policies that apply, and, for a route
// served in one stage (stages.ts), its one provider. Envoy names the entry in the router-level ext_proc's per-route
// gRPC metadata; the upstream ext_proc finds the provider by the endpoint metadata of the host Envoy picked.

import { createHash } from "node:crypto";
import { type Secret, secretValue } from "../../api/core.js";
import { namespaceOf } from "../../api/resource.js";
import { compileExpression } from "../../cel/index.js";
import type { CredentialLocation, CredentialPlan } from "../../credentials/plan.js";
import { resolveProviderMint } from "../../credentials/resolve.js";
import type { TranslationInput } from "../input.js";
import type {
  BackendPolicyIR,
  EffectivePolicyIR,
  GatewayIR,
  LlmClusterIR,
  LlmProviderIR,
  PolicyFieldIR,
  PolicySourceIR,
  RouteIR,
} from "../ir.js";
import type { ModelRouteEntry } from "../model/ir.js";
import { clusterVariantBase } from "../names.js";
import { compilePromptGuard, type GuardNote, type PromptGuardEntry } from "./guards.js";
import { compileProviderExtAuth, type ProviderExtAuthConfig } from "./provider-ext-auth.js";
import { type RealtimeTokenLimit, realtimeTokenLimits } from "./realtime-tokens.js";
import type { LlmStagePlan, SingleStage } from "./stages.js";

/** Envoy endpoint metadata namespace naming the provider, and the dynamic metadata namespace of token counts. */
export const LLM_METADATA_NAMESPACE = "sluice.dev/llm";
/** Request header the router-level ext_proc sets so the upstream ext_proc finds the request (removed upstream). */
export const LLM_REQUEST_ID_HEADER = "x-sluice-llm-id";
/** gRPC initial metadata: which table entry (router level) and which stage a stream belongs to. */
export const LLM_ENTRY_METADATA = "x-sluice-llm-entry";
export const LLM_STAGE_METADATA = "x-sluice-llm-stage";
export const LLM_PROVIDER_ATTRIBUTE = `xds.upstream_host_metadata.filter_metadata['${LLM_METADATA_NAMESPACE}']['provider']`;
export const LLM_CLUSTER_ATTRIBUTE = "xds.cluster_name";
/**
 * Cluster metadata key present on an AI cluster without the upstream ext_proc (every route to it is served in one
 * stage): the name of its one provider. The router-level stage reads it from the cluster Envoy actually routes to, so
 * a request whose route still names a two-stage entry while Envoy already has the cluster without the upstream stage
 * (CDS is applied before RDS) is served in one stage instead of reaching the provider untranslated.
 */
export const LLM_SINGLE_PROVIDER_KEY = "single_provider";
export const LLM_SINGLE_PROVIDER_ATTRIBUTE = `xds.cluster_metadata.filter_metadata['${LLM_METADATA_NAMESPACE}']['${LLM_SINGLE_PROVIDER_KEY}']`;

export type RouteType =
  | "Completions"
  | "Messages"
  | "Models"
  | "Passthrough"
  | "Detect"
  | "Responses"
  | "MessagesTokenCount"
  | "Embeddings"
  | "Realtime"
  | "Rerank";

export interface TokenLimit {
  /** Bucket key, stable across translations of the same route (buckets survive config updates). */
  readonly key: string;
  readonly tokens: number;
  readonly burst: number;
  readonly unitMs: number;
}

export interface ProviderAuth {
  /** Headers to set on the provider request (secrets resolved). */
  readonly headers: Readonly<Record<string, string>>;
  /** Query parameters to add. */
  readonly query: Readonly<Record<string, string>>;
  /** SigV4 signing (cloudA): where the credentials come from, and what they are signed for. */
  readonly aws?: AwsAuth;
  /**
   * Google credentials (cloudB): the Sluice ext_proc mints an access or ID token from them (or from the ambient
   * credentials when `credentials` is absent) and sends it as `Authorization: Bearer`.
   */
  readonly google?: {
    readonly type: "AccessToken" | "IdToken";
    /** The parsed credentials JSON of the Secret (service account or authorized user). */
    readonly credentials?: Readonly<Record<string, unknown>>;
    /** ID tokens only: the audience (default `https://` + the provider's host). */
    readonly audience?: string;
  };
  /**
   * `passthrough`: the client's own credential (its Bearer token, else its x-api-key, api-key or x-goog-api-key) is
   * written here on the provider request.
   */
  readonly passthrough?: CredentialLocation;
  /**
   * `jwtSign`, `oauthTokenExchange`, `crossAppAccess`, `cloudC`: the plan the LLM ext_proc mints the provider's token
   * from (src/credentials/, the credential service's minter) once the provider of an attempt is chosen.
   */
  readonly minted?: CredentialPlan;
  /**
   * Why credentials could not be resolved (a missing Secret ...), each with its kind (for the GwBackend's status); the
   * request fails rather than going out bare.
   */
  readonly problems?: readonly AuthProblem[];
}

/** A credential problem: a Secret (missing, malformed) or an expression the LLM ext_proc cannot evaluate. */
export interface AuthProblem {
  /** `invalid`: a minted form's configuration (a bad key, a token endpoint that does not resolve ...). */
  readonly kind: "secret" | "expression" | "invalid";
  readonly message: string;
}

/**
 * cloudA as the Sluice ext_proc applies it. Discovered credentials are never part of the entry: without `keys` the
 * ext_proc finds them at request time (the AWS SDK's default chain), so the entry stays a pure function of the input.
 */
export interface AwsAuth {
  /** Keys of the policy's Secret; absent = the default credential discovery of the Sluice process. */
  readonly keys?: {
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    readonly sessionToken?: string;
  };
  /** STS AssumeRole with the keys (or the discovered credentials); the role's credentials sign. */
  readonly assumeRole?: AwsAssumeRole;
  /** Signing region; "" = the provider's region. */
  readonly region: string;
  readonly service: string;
}

export interface AwsAssumeRole {
  readonly roleArn: string;
  /** Exactly one of the two; the translator writes the default session name when the policy gives neither. */
  readonly sessionName?: string;
  /** CEL, evaluated per request (`request`, `llm`). */
  readonly sessionNameExpression?: string;
  /** Session tags in the policy's order, each a static value or a CEL expression evaluated per request. */
  readonly tags: readonly { readonly key: string; readonly value?: string; readonly expression?: string }[];
}

/** AI request policies (Document 2, `backend.ai`) as written, minus `routes`; `promptGuard` compiled (guards.ts). */
export interface AiPolicy {
  readonly promptGuard?: PromptGuardEntry;
  readonly prompt?: {
    readonly prepend?: readonly { role: string; content: string }[];
    readonly append?: readonly { role: string; content: string }[];
  };
  readonly defaults?: readonly { field: string; value: unknown }[];
  readonly overrides?: readonly { field: string; value: unknown }[];
  readonly transformations?: readonly { field: string; expression: string }[];
  readonly modelAliases?: Readonly<Record<string, string>>;
  /** Cache points for providerG (Bedrock Converse); ignored for other variants. */
  readonly promptCaching?: {
    readonly cacheSystem?: boolean;
    readonly cacheMessages?: boolean;
    readonly cacheTools?: boolean;
    readonly minTokens?: number;
    readonly cacheMessageOffset?: number;
  };
}

export interface LlmProviderEntry {
  readonly name: string;
  readonly kind: LlmProviderIR["kind"];
  readonly authority: string;
  readonly settings: Readonly<Record<string, unknown>>;
  readonly path?: string;
  readonly pathPrefix?: string;
  /** Put before every path the provider is sent (LlmProviderIR `basePath`; extproc/llm/provider.ts providerPath). */
  readonly basePath?: string;
  readonly auth: ProviderAuth;
  readonly ai: AiPolicy;
  /** A GwPolicy's `backend.extAuth` targeting this provider: checked per attempt (provider-ext-auth.ts). */
  readonly extAuth?: ProviderExtAuthConfig;
}

export interface LlmBackendEntry {
  readonly backend: string;
  readonly providers: Readonly<Record<string, LlmProviderEntry>>;
  /**
   * An InferencePool with FailOpen behind the backend's one provider (`namespace/name`): the router-level stage leaves
   * one of its ready Pods (LlmTable `pools`) where the picker writes its choice, which the picker's answer replaces.
   */
  readonly failOpenPool?: string;
}

/**
 * A `cost` CEL expression of a global `Tokens` rate limit descriptor: evaluated by the router-level ext_proc when the
 * response is complete, its value written to dynamic metadata `costs.<key>`, where Envoy's rate limit filter reads
 * the hits to add (`tokenCostFormat`).
 */
export interface TokenCost {
  readonly key: string;
  readonly expression: string;
}

export interface LlmRouteEntry {
  readonly id: string;
  /** `routes` of the AI policy: path suffix (or `*`) → route type; empty means everything is Completions. */
  readonly routes: readonly (readonly [string, RouteType])[];
  readonly tokenLimits: readonly TokenLimit[];
  readonly tokenCosts: readonly TokenCost[];
  /** By cluster name. */
  readonly backends: Readonly<Record<string, LlmBackendEntry>>;
  /** Every request reaches this provider: the router-level stage does the provider work (stages.ts). */
  readonly single?: SingleStage;
  /** The GwModels of the listener (model/serve.ts): the model a request names selects the cluster. */
  readonly models?: ModelRouteEntry;
  /** On a route serving Realtime: its global `Tokens` descriptors, which Sluice's relay sends per response. */
  readonly realtimeTokens?: readonly RealtimeTokenLimit[];
}

export interface LlmTable {
  readonly entries: ReadonlyMap<string, LlmRouteEntry>;
  /** What the entries cannot serve as written (prompt guards), for the status of the policies it came from. */
  readonly notes: readonly GuardNote[];
  /** Entry id per `gatewayKey|routeName`. */
  readonly routes: ReadonlyMap<string, string>;
  /**
   * The ready Pods (`ip:port`) of each InferencePool with FailOpen, by `namespace/name`: apart from the entries, so a
   * Pod that comes or goes changes no entry id, hence no route.
   */
  readonly pools: ReadonlyMap<string, readonly string[]>;
}

/** The FailOpen pools of the Gateways' AI clusters and their ready Pods (LlmTable `pools`). */
export function failOpenPools(gateways: readonly GatewayIR[]): ReadonlyMap<string, readonly string[]> {
  const out = new Map<string, readonly string[]>();
  for (const gw of gateways) {
    for (const c of gw.clusters) {
      const pool = c.kind === "llm" ? c.groups.flat()[0]?.pool : undefined;
      if (pool?.failOpen === true) out.set(pool.name, pool.fallback ?? []);
    }
  }
  return out;
}

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

function value(
  policy: EffectivePolicyIR | undefined,
  name: string,
): { value: unknown; ns: string; from: PolicySourceIR } | undefined {
  const f: PolicyFieldIR | undefined = policy?.[name];
  if (f === undefined || "combined" in f) return undefined;
  return { value: f.value, ns: f.from.name.split("/")[0] ?? "", from: f.from };
}

const UNIT_MS: Readonly<Record<string, number>> = { Seconds: 1000, Minutes: 60_000, Hours: 3_600_000 };

/** Native credential header of each provider family, when the policy names no location. */
const NATIVE_HEADER: Readonly<Record<LlmProviderIR["kind"], { name: string; prefix?: string }>> = {
  openai: { name: "authorization", prefix: "Bearer" },
  custom: { name: "authorization", prefix: "Bearer" },
  "azure-openai": { name: "api-key" },
  "azure-foundry": { name: "api-key" },
  anthropic: { name: "x-api-key" },
  gemini: { name: "x-goog-api-key" },
  // An API key for Vertex AI (express mode) goes in the same header as Gemini's; cloudB credentials give a Bearer.
  vertex: { name: "x-goog-api-key" },
  bedrock: { name: "authorization", prefix: "Bearer" },
};

function isDefaultLocation(l: Rec): boolean {
  const h = l.header;
  return (
    isRec(h) && String(h.name).toLowerCase() === "authorization" && h.prefix === "Bearer" && Object.keys(l).length === 1
  );
}

function findSecret(secrets: readonly Secret[], ns: string, name: string): Secret | undefined {
  return secrets.find((s) => namespaceOf(s) === ns && s.metadata.name === name);
}

/**
 * The CEL variables the LLM ext_proc's expressions see (service.ts): `request`, `llm`, and the identity the route
 * forwards to it where it has one (extproc/llm/cel.ts identityVariables).
 */
export const LLM_CEL_VARIABLES: readonly string[] = ["request", "llm", "jwt", "apiKey", "basicAuth", "extauthz"];

export { ROLE_SESSION_NAME } from "../../credentials/plan.js";

/** The role session name when the policy gives none: `sluice-<namespace>.<backend>`, what CloudTrail then shows. */
export function defaultSessionName(backend: string): string {
  return `sluice-${backend.replace("/", ".")}`.replace(/[^\w+=,.@-]/g, "-").slice(0, 64);
}

/** cloudA.assumeRole as the ext_proc needs it; its CEL expressions are compiled here, so a bad one is named now. */
function assumeRole(r: Rec, sessionDefault: string, problems: AuthProblem[]): AwsAssumeRole | undefined {
  if (typeof r.roleArn !== "string") return undefined;
  const at = "auth.cloudA.assumeRole";
  const expression = (path: string, text: unknown): string | undefined => {
    if (typeof text !== "string") return undefined;
    const c = compileExpression(text);
    if ("errors" in c) {
      problems.push({
        kind: "expression",
        message: `${at}.${path}: invalid CEL expression: ${c.errors.map((e) => e.message).join("; ")}`,
      });
      return text;
    }
    const missing = [...c.ok.variables].filter((v) => !LLM_CEL_VARIABLES.includes(v));
    if (missing.length > 0) {
      problems.push({
        kind: "expression",
        message: `${at}.${path}: reads ${missing.join(", ")}, which the LLM ext_proc does not have (only ${LLM_CEL_VARIABLES.join(", ")})`,
      });
    }
    return text;
  };
  const sessionNameExpression = expression("sessionNameExpression", r.sessionNameExpression);
  const tags: AwsAssumeRole["tags"][number][] = [];
  (Array.isArray(r.tags) ? r.tags : []).forEach((t: unknown, i) => {
    if (!isRec(t) || typeof t.key !== "string") return;
    const e = expression(`tags[${i}].expression`, t.expression);
    if (e !== undefined) tags.push({ key: t.key, expression: e });
    else if (typeof t.value === "string") tags.push({ key: t.key, value: t.value });
  });
  return {
    roleArn: r.roleArn,
    ...(sessionNameExpression !== undefined
      ? { sessionNameExpression }
      : { sessionName: typeof r.sessionName === "string" ? r.sessionName : sessionDefault }),
    tags,
  };
}

/** A guard's `policies.auth` with its Secrets read (compileGuardAuth). */
export interface GuardAuth {
  /** `key`, or the value of `secretRef` (a Bearer prefix stripped from the default key), not yet written anywhere. */
  readonly key?: string;
  /** The `location` written beside the key, as written. */
  readonly location?: unknown;
  readonly aws?: AwsAuth;
  readonly google?: ProviderAuth["google"];
  readonly problems: readonly AuthProblem[];
}

/** A `policies.auth` with its Secrets read: the key and the extra credentials unwritten, each with its location. */
interface ResolvedAuth extends GuardAuth {
  readonly credentials: readonly { readonly value: string; readonly location: unknown }[];
}

function resolveAuth(
  host: string,
  auth: Rec,
  ns: string,
  secrets: readonly Secret[],
  sessionDefault: string,
): ResolvedAuth {
  const problems: AuthProblem[] = [];
  const secretKey = (ref: unknown, defaultKey: string): { value: string; key: string } | undefined => {
    if (!isRec(ref) || typeof ref.name !== "string") return undefined;
    const key = typeof ref.key === "string" ? ref.key : defaultKey;
    const secret = findSecret(secrets, ns, ref.name);
    const v = secret === undefined ? undefined : secretValue(secret, key);
    if (v === undefined) problems.push({ kind: "secret", message: `Secret ${ns}/${ref.name} key ${key} not found` });
    return v === undefined ? undefined : { value: v.trim(), key };
  };
  let key: string | undefined;
  if (typeof auth.key === "string") key = auth.key;
  else if (auth.secretRef !== undefined) {
    const s = secretKey(auth.secretRef, "Authorization");
    // A Bearer prefix is stripped only from the default key (spec, BackendAuth.secretRef).
    if (s !== undefined) key = s.key === "Authorization" ? s.value.replace(/^Bearer\s+/i, "") : s.value;
  }
  const credentials: { value: string; location: unknown }[] = [];
  for (const c of Array.isArray(auth.credentials) ? auth.credentials : []) {
    if (!isRec(c)) continue;
    const s = secretKey(c.secretRef, "Authorization");
    if (s !== undefined) credentials.push({ value: s.value, location: c.location });
  }
  let aws: ProviderAuth["aws"];
  if (isRec(auth.cloudA)) {
    const a = auth.cloudA;
    const ref = a.secretRef;
    let keys: AwsAuth["keys"];
    if (isRec(ref)) {
      const id = secretKey({ ...ref, key: "accessKey" }, "accessKey");
      const secret = secretKey({ ...ref, key: "secretKey" }, "secretKey");
      const sec = findSecret(secrets, ns, String(ref.name));
      const token = sec === undefined ? undefined : secretValue(sec, "sessionToken");
      if (id !== undefined && secret !== undefined) {
        keys = {
          accessKeyId: id.value,
          secretAccessKey: secret.value,
          ...(token !== undefined ? { sessionToken: token.trim() } : {}),
        };
      }
    }
    const role = isRec(a.assumeRole) ? assumeRole(a.assumeRole, sessionDefault, problems) : undefined;
    // A secretRef whose keys are missing is a problem above; it never falls back to discovered credentials.
    if (!isRec(ref) || keys !== undefined) {
      aws = {
        ...(keys !== undefined ? { keys } : {}),
        ...(role !== undefined ? { assumeRole: role } : {}),
        region: typeof a.region === "string" ? a.region : "",
        service: typeof a.serviceName === "string" ? a.serviceName : "bedrock",
      };
    }
  }
  let google: ProviderAuth["google"];
  if (isRec(auth.cloudB)) {
    const b = auth.cloudB;
    const type = b.type === "IdToken" ? "IdToken" : "AccessToken";
    let credentials: Record<string, unknown> | undefined;
    if (b.secretRef !== undefined) {
      const s = secretKey(b.secretRef, "credentials.json");
      if (s !== undefined) {
        try {
          const parsed: unknown = JSON.parse(s.value);
          if (isRec(parsed)) credentials = { ...parsed };
          else {
            problems.push({
              kind: "secret",
              message: `Secret ${ns}/${String((b.secretRef as Rec).name)} key ${s.key} is not a JSON object`,
            });
          }
        } catch {
          problems.push({
            kind: "secret",
            message: `Secret ${ns}/${String((b.secretRef as Rec).name)} key ${s.key} is not valid JSON`,
          });
        }
      }
    }
    google = {
      type,
      ...(credentials !== undefined ? { credentials } : {}),
      ...(type === "IdToken" ? { audience: typeof b.audience === "string" ? b.audience : `https://${host}` } : {}),
    };
  }
  return {
    ...(key !== undefined ? { key, location: auth.location } : {}),
    credentials,
    ...(aws !== undefined ? { aws } : {}),
    ...(google !== undefined ? { google } : {}),
    problems,
  };
}

/** Where a provider's credential goes: `location` as written, else (the schema's default) its own header form. */
function providerLocation(kind: LlmProviderIR["kind"], location: unknown): CredentialLocation {
  if (isRec(location) && isRec(location.queryParameter) && typeof location.queryParameter.name === "string") {
    return { kind: "query", name: location.queryParameter.name };
  }
  if (isRec(location) && isRec(location.cookie) && typeof location.cookie.name === "string") {
    return { kind: "cookie", name: location.cookie.name };
  }
  // The schema fills in `Authorization: Bearer` when no location is written; for an LLM provider that default means
  // "the provider's own header form" (x-api-key, api-key, x-goog-api-key ...).
  const h =
    isRec(location) &&
    isRec(location.header) &&
    typeof location.header.name === "string" &&
    !isDefaultLocation(location)
      ? {
          name: location.header.name.toLowerCase(),
          ...(typeof location.header.prefix === "string" ? { prefix: location.header.prefix } : {}),
        }
      : NATIVE_HEADER[kind];
  return { kind: "header", name: h.name, prefix: h.prefix ?? "" };
}

/** Where a provider's credential comes from: its policy's owner, for messages and minted plans' ids. */
interface AuthOwner {
  /** `namespace/name` of the GwBackend (or GwModel) the provider belongs to. */
  readonly backend: string;
  /** Where the policy is configured, and the provider (minted plans are cached per provider). */
  readonly source: string;
  /** The path of `auth` where it is written (`backend.auth`, `spec.policies.auth` ...), for problems' field paths. */
  readonly at: string;
}

function compileAuth(
  kind: LlmProviderIR["kind"],
  host: string,
  auth: unknown,
  ns: string,
  input: TranslationInput,
  owner: AuthOwner,
): ProviderAuth {
  const headers: Record<string, string> = {};
  const query: Record<string, string> = {};
  if (!isRec(auth)) return { headers, query };
  const r = resolveAuth(host, auth, ns, input.secrets, defaultSessionName(owner.backend));
  const write = (location: unknown, v: string) => {
    const l = providerLocation(kind, location);
    if (l.kind === "query") query[l.name] = v;
    else if (l.kind === "cookie") headers.cookie = `${l.name}=${v}`;
    else headers[l.name] = l.prefix !== "" ? `${l.prefix} ${v}` : v;
  };
  if (r.key !== undefined) write(r.location, r.key);
  for (const c of r.credentials) write(c.location, c.value);
  const problems = [...r.problems];
  // Tokens minted per request after the provider is chosen (extproc/llm/service.ts), with the credential service's
  // resolution and minter (src/credentials/): every problem fails the provider's requests rather than send them bare.
  const mint = resolveProviderMint(auth, { input, ns, backend: owner.backend, source: owner.source, minter: "llm" });
  for (const p of mint?.problems ?? []) {
    if (!p.fatal) continue;
    problems.push({
      kind: /^Secret .* not found/.test(p.message) ? "secret" : "invalid",
      message: `${p.field.replace(/^backend\.auth/, owner.at)}: ${p.message}`,
    });
  }
  return {
    headers,
    query,
    ...(r.aws !== undefined ? { aws: r.aws } : {}),
    ...(r.google !== undefined ? { google: r.google } : {}),
    ...(auth.passthrough !== undefined ? { passthrough: providerLocation(kind, auth.location) } : {}),
    ...(mint?.plan !== undefined ? { minted: mint.plan } : {}),
    ...(problems.length > 0 ? { problems } : {}),
  };
}

/**
 * A prompt guard's `policies.auth` (guards.ts), by the same rules and Secret lookups as a provider's: the key (`key`
 * or `secretRef`) unwritten, as the guard client writes it where `location` says; cloudA and cloudB as for providers.
 * `host` is the guard service's (the default ID token audience); `owner` is the policy's `namespace/name` (the default
 * role session name).
 */
export function compileGuardAuth(
  auth: unknown,
  host: string,
  ns: string,
  secrets: readonly Secret[],
  owner: string,
): GuardAuth {
  if (!isRec(auth)) return { problems: [] };
  const { credentials: _, ...r } = resolveAuth(host, auth, ns, secrets, defaultSessionName(owner));
  return r;
}

/** A GwModel's `policies.auth` (model/entry.ts), by the rules and Secret lookups of a GwBackend provider's. */
export function compileProviderAuth(
  kind: LlmProviderIR["kind"],
  host: string,
  auth: unknown,
  ns: string,
  input: TranslationInput,
  owner: string,
): ProviderAuth {
  return compileAuth(kind, host, auth, ns, input, {
    backend: owner,
    source: `GwModel ${owner}`,
    at: "spec.policies.auth",
  });
}

/** A GwModel's `policies.promptGuard` (model/serve.ts), compiled as a GwBackend's `ai.promptGuard` is. */
export function compileModelPromptGuard(
  v: unknown,
  ns: string,
  input: TranslationInput,
  from: PolicySourceIR,
  at: string,
): { entry?: PromptGuardEntry; notes: GuardNote[] } {
  return compilePromptGuard(v, ns, input, from, at, compileGuardAuth);
}

/**
 * Route types whose requests are forwarded unread: no guard can read their text. (Realtime sessions of guarded
 * providers go through Sluice's relay, extproc/llm/realtime/, which guards their text events.)
 */
const UNGUARDED_ROUTE_TYPES: readonly RouteType[] = ["Passthrough", "Detect"];

function aiPolicy(
  ai: { value: unknown; ns: string; from: PolicySourceIR } | undefined,
  input: TranslationInput,
  notes: GuardNote[],
): AiPolicy {
  const v = ai?.value;
  if (ai === undefined || !isRec(v)) return {};
  const { routes, promptGuard, ...rest } = v;
  if (promptGuard === undefined) return rest as AiPolicy;
  const at = "backend.ai.promptGuard";
  const g = compilePromptGuard(promptGuard, ai.ns, input, ai.from, at, compileGuardAuth);
  notes.push(...g.notes);
  const unread = isRec(routes)
    ? [...new Set(Object.values(routes).filter((t): t is RouteType => UNGUARDED_ROUTE_TYPES.includes(t as RouteType)))]
    : [];
  if (unread.length > 0) {
    notes.push({
      from: ai.from,
      field: at,
      message: `requests of route types ${unread.sort().join(", ")} are forwarded unread: prompt guards do not apply to them`,
    });
  }
  if (isRec(routes) && Object.values(routes).includes("Realtime") && g.entry !== undefined) {
    const responses = g.entry.response.length > 0 && !g.entry.streaming;
    notes.push({
      from: ai.from,
      field: at,
      message: `Realtime sessions are guarded on their text events only: audio (and the provider's transcription of the user's audio) is not read${responses ? "; response guards apply to them with streaming: Enabled, as to streamed responses" : ""}`,
    });
  }
  return { ...(rest as AiPolicy), ...(g.entry !== undefined ? { promptGuard: g.entry } : {}) };
}

function routeTypes(v: unknown): (readonly [string, RouteType])[] {
  if (!isRec(v) || !isRec(v.routes)) return [];
  return Object.entries(v.routes)
    .filter((e): e is [string, RouteType] => typeof e[1] === "string")
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/** What a provider entry takes from the provider itself (a GwBackend `ai` provider's, or a GwModel's). */
export function providerEntryBase(
  p: LlmProviderIR,
): Pick<LlmProviderEntry, "name" | "kind" | "authority" | "settings" | "path" | "pathPrefix" | "basePath"> {
  return {
    name: p.name,
    kind: p.kind,
    authority: p.authority,
    settings: p.settings,
    ...(p.path !== undefined ? { path: p.path } : {}),
    ...(p.pathPrefix !== undefined ? { pathPrefix: p.pathPrefix } : {}),
    ...(p.basePath !== undefined ? { basePath: p.basePath } : {}),
  };
}

/** The path of a provider's `auth` where its policy writes it: a GwPolicy's, the GwBackend's, or the provider's own. */
function authPath(from: PolicySourceIR | undefined, provider: string): string {
  if (from?.kind !== "GwBackend") return "backend.auth";
  return from.level === "subBackend" ? `spec.ai.groups[].providers[${provider}].policies.auth` : "spec.policies.auth";
}

function providerEntry(
  p: LlmProviderIR,
  bp: BackendPolicyIR | undefined,
  input: TranslationInput,
  backend: string,
  notes: GuardNote[],
  extAuth?: ProviderExtAuthConfig,
): LlmProviderEntry {
  const backendNs = backend.split("/")[0] ?? "";
  const sub = bp?.subBackends?.find((s) => s.name === p.name)?.policy ?? bp?.policy;
  const auth = value(sub, "auth");
  const ai = value(sub, "ai");
  // Route types are chosen per route, before a provider is: a provider's own `ai.routes` cannot apply.
  if (ai !== undefined && ai.from.level === "subBackend" && isRec(ai.value) && ai.value.routes !== undefined) {
    notes.push({
      from: ai.from,
      field: "backend.ai.routes",
      message: `not applied per provider (route types are chosen for the route before a provider is); set them in the GwBackend's spec.policies.ai or a GwPolicy`,
      reason: "Ignored",
    });
  }
  // Cache points exist in Converse alone (the providerG family): on any other provider the setting does nothing, which
  // the GwBackend's own schema refuses but a GwPolicy over a mixed GwBackend cannot see.
  if (ai !== undefined && isRec(ai.value) && ai.value.promptCaching !== undefined && p.kind !== "bedrock") {
    notes.push({
      from: ai.from,
      field: "backend.ai.promptCaching",
      message: `not applied to provider ${p.name} of ${backend} (cache points are written for providerG providers only)`,
      reason: "Ignored",
    });
  }
  return {
    ...providerEntryBase(p),
    auth: compileAuth(p.kind, p.address, auth?.value, auth?.ns ?? backendNs, input, {
      backend,
      source: `${auth?.from.kind ?? ""} ${auth?.from.name ?? ""} provider ${p.name}`,
      at: authPath(auth?.from, p.name),
    }),
    ai: aiPolicy(ai, input, notes),
    ...(extAuth !== undefined ? { extAuth } : {}),
  };
}

function tokenLimits(route: RouteIR, gatewayKey: string): TokenLimit[] {
  const rl = value(route.policy?.traffic, "rateLimit");
  if (rl === undefined || !isRec(rl.value) || !Array.isArray(rl.value.local)) return [];
  const out: TokenLimit[] = [];
  rl.value.local.forEach((l: unknown, i) => {
    if (!isRec(l) || typeof l.tokens !== "number") return;
    const unitMs = UNIT_MS[String(l.unit)] ?? 1000;
    const burst = typeof l.burst === "number" && l.burst > 0 ? l.burst : l.tokens;
    out.push({ key: `${gatewayKey}|${route.name}|${i}`, tokens: l.tokens, burst, unitMs });
  });
  return out;
}

/** Dynamic metadata keys (namespace LLM_METADATA_NAMESPACE) the router-level ext_proc writes. */
export const LLM_METADATA_KEYS = {
  requestModel: "request_model",
  streaming: "streaming",
  totalTokens: "total_tokens",
  costs: "costs",
} as const;

/** Key of a token cost expression: the same text gives the same key in the LLM table and in the rate limit config. */
export function tokenCostKey(expression: string): string {
  return `c${createHash("sha256").update(expression).digest("hex").slice(0, 12)}`;
}

/** Envoy substitution format of the hits a completed LLM request adds to a `Tokens` descriptor. */
export function tokenCostFormat(cost: string | undefined): string {
  const key = cost === undefined ? LLM_METADATA_KEYS.totalTokens : `${LLM_METADATA_KEYS.costs}:${tokenCostKey(cost)}`;
  return `%DYNAMIC_METADATA(${LLM_METADATA_NAMESPACE}:${key})%`;
}

function tokenCosts(route: RouteIR): TokenCost[] {
  const out = new Map<string, TokenCost>();
  for (const phase of [route.policy?.preRouting, route.policy?.traffic]) {
    const rl = value(phase, "rateLimit");
    const g = isRec(rl?.value) && isRec(rl.value.global) ? rl.value.global : undefined;
    for (const d of Array.isArray(g?.descriptors) ? g.descriptors : []) {
      if (!isRec(d) || d.unit !== "Tokens" || typeof d.cost !== "string") continue;
      const key = tokenCostKey(d.cost);
      out.set(key, { key, expression: d.cost });
    }
  }
  return [...out.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/**
 * The `tokens` limits and token costs of a route's policy, which the LLM ext_proc applies (model/serve.ts: the model
 * routes of a listener, with one route standing for all of them so they share the buckets).
 */
export function tokenPolicy(route: RouteIR, gatewayKey: string): Pick<LlmRouteEntry, "tokenLimits" | "tokenCosts"> {
  return { tokenLimits: tokenLimits(route, gatewayKey), tokenCosts: tokenCosts(route) };
}

export function entryId(content: unknown): string {
  return createHash("sha256").update(JSON.stringify(content)).digest("hex").slice(0, 16);
}

/** The entries of every route of the given Gateways that forwards to an AI backend. */
export function compileLlmTable(
  gateways: readonly GatewayIR[],
  input: TranslationInput,
  stages: LlmStagePlan,
): LlmTable {
  const entries = new Map<string, LlmRouteEntry>();
  const routes = new Map<string, string>();
  const notes: GuardNote[] = [];
  for (const gw of gateways) {
    const llm = new Map(
      gw.clusters.filter((c): c is LlmClusterIR => c.kind === "llm").map((c) => [c.name, c] as const),
    );
    if (llm.size === 0) continue;
    const clusters = new Map(gw.clusters.map((c) => [c.name, c] as const));
    for (const rc of gw.routeConfigs) {
      for (const vh of rc.virtualHosts) {
        for (const route of vh.routes) {
          if (route.action.kind !== "forward") continue;
          const backends: Record<string, LlmBackendEntry> = {};
          let types: (readonly [string, RouteType])[] | undefined;
          for (const b of route.action.backends) {
            // A variant (a route-level GwPolicy's TLS, xds/llm-passes.ts) has the route's providers; the entry and the
            // route's policies name the cluster it was made from.
            const c = llm.get(b.cluster);
            if (c === undefined) continue;
            const name = clusterVariantBase(c.name);
            const bp = route.policy?.backends?.find((x) => x.cluster === name);
            const providers: Record<string, LlmProviderEntry> = {};
            for (const p of c.groups.flat()) {
              const ea = compileProviderExtAuth(route, bp, p.name, clusters, notes, entryId);
              providers[p.name] = providerEntry(p, bp, input, c.backend, notes, ea);
            }
            const pool = c.groups.flat()[0]?.pool;
            backends[name] = {
              backend: c.backend,
              providers,
              ...(pool?.failOpen === true ? { failOpenPool: pool.name } : {}),
            };
            // Route types come from the backend-wide AI policy (the first AI backend of the rule).
            types ??= routeTypes(value(bp?.policy, "ai")?.value);
          }
          if (Object.keys(backends).length === 0) continue;
          const single = stages.single.get(`${gw.key}|${route.name}`);
          const realtime = (types ?? []).some(([, t]) => t === "Realtime") ? realtimeTokenLimits(route, clusters) : [];
          const content = {
            routes: types ?? [],
            tokenLimits: tokenLimits(route, gw.key),
            tokenCosts: tokenCosts(route),
            backends,
            ...(single !== undefined ? { single } : {}),
            ...(realtime.length > 0 ? { realtimeTokens: realtime } : {}),
          };
          const id = entryId(content);
          entries.set(id, { id, ...content });
          routes.set(`${gw.key}|${route.name}`, id);
        }
      }
    }
  }
  return { entries, routes, notes, pools: failOpenPools(gateways) };
}

/**
 * The credential problems of each AI backend's providers (a missing Secret, an expression the LLM ext_proc cannot
 * evaluate), by backend `namespace/name`, for its status: requests to such a provider fail (500, logged), so the
 * status must say why before the first request does.
 */
export function llmBackendProblems(table: LlmTable): ReadonlyMap<string, readonly AuthProblem[]> {
  const out = new Map<string, Map<string, AuthProblem>>();
  for (const entry of table.entries.values()) {
    for (const b of Object.values(entry.backends)) {
      for (const p of Object.values(b.providers)) {
        for (const problem of p.auth.problems ?? []) {
          const seen = out.get(b.backend) ?? new Map<string, AuthProblem>();
          const message = `provider ${p.name}: ${problem.message}`;
          seen.set(`${problem.kind}|${message}`, { kind: problem.kind, message });
          out.set(b.backend, seen);
        }
      }
    }
  }
  return new Map(
    [...out].map(([k, v]) => [
      k,
      [...v.values()].sort((a, b) => (a.message < b.message ? -1 : a.message > b.message ? 1 : 0)),
    ]),
  );
}
