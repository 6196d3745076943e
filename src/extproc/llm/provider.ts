// Per provider: which wire format a client's request becomes, and where it goes (authority, path, headers), with the
// table's credentials. SigV4 is computed here too, on the final body.

import {
  type AwsCredentials,
  type ClientFormat,
  findDirection,
  modelsTarget,
  type ProviderFormat,
  type ProviderSettings,
  signSigV4,
  upstreamTarget,
} from "../../llm/index.js";
import { type ModelListCall, type ModelListFamily, readListPage } from "../../llm/translate/model-list.js";
import type { LlmProviderEntry, RouteType } from "../../translate/llm/table.js";

const CLIENT_OF_ROUTE: Partial<Record<RouteType, ClientFormat>> = {
  Completions: "chat-completions",
  Messages: "messages",
  Responses: "responses",
  Embeddings: "embeddings",
  MessagesTokenCount: "count-tokens",
  Rerank: "rerank",
};

/** A Google method in the path (`.../models/{model}:generateContent`): the model and whether it streams. */
const GOOGLE_METHOD =
  /\/models\/([^/:?]+):(generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)(?:\?|$)/;

/**
 * The client wire format of a request: its route type's, except that a `Completions` route (the default) serves
 * Google's own generateContent clients at `models/{model}:generateContent` / `:streamGenerateContent` (the spec's
 * route types have no name for them; they generate as Completions does), and their `:countTokens` there or on a
 * `MessagesTokenCount` route. Undefined for types forwarded as they are.
 */
export function clientFormatOf(t: RouteType, path = ""): ClientFormat | undefined {
  if (t === "Completions" || t === "Embeddings") {
    // Google's embeddings: on a Completions route as generateContent is, or on an Embeddings route a map names.
    const m = GOOGLE_METHOD.exec(path)?.[2];
    if (m === "embedContent") return "embed-content";
    if (m === "batchEmbedContents") return "batch-embed-contents";
  }
  if (t === "Completions" || t === "MessagesTokenCount") {
    const m = GOOGLE_METHOD.exec(path)?.[2];
    if (m === "countTokens") return "generate-content-count-tokens";
    if (m !== undefined && t === "Completions") return "generate-content";
  }
  return CLIENT_OF_ROUTE[t];
}

/** The model and stream flag a generateContent client puts in its URL; undefined when the path has no Google method. */
export function googleMethodOf(path: string): { model: string; stream: boolean } | undefined {
  const m = GOOGLE_METHOD.exec(path);
  if (m === null || m[1] === undefined) return undefined;
  let model = m[1];
  try {
    model = decodeURIComponent(model);
  } catch {
    // A malformed escape is kept as it was written: the provider refuses the name.
  }
  return { model, stream: m[2] === "streamGenerateContent" };
}

/** A model list request (the `Models` route type): the client's family and what it asks for. */
export interface ModelsRequest {
  readonly client: ModelListFamily;
  readonly call: ModelListCall;
}

/** `.../models` (a list) or `.../models/{id}` (one model; not a Google method such as `:generateContent`). */
const MODELS_PATH = /\/models(?:\/([^/:]+))?$/;

/**
 * A request for a model list: on a `Models` route, and a GET of `.../models` or `.../models/{id}` on a `Completions`
 * route (Google's SDKs list and get models under the same `/v1beta` base they generate with). The client's family as
 * discovery reads it: `anthropic-version` (the Anthropic SDKs always send it) → Anthropic; `x-goog-api-key` or the
 * `/v1beta/models` form → Google; else OpenAI.
 */
export function modelsRequestOf(t: RouteType, headers: Readonly<Record<string, string>>): ModelsRequest | undefined {
  const full = headers[":path"] ?? "/";
  const q = full.indexOf("?");
  const path = q < 0 ? full : full.slice(0, q);
  const m = MODELS_PATH.exec(path);
  const get = (headers[":method"] ?? "GET") === "GET";
  if (t !== "Models" && !(t === "Completions" && get && m !== null)) return undefined;
  const client: ModelListFamily =
    headers["anthropic-version"] !== undefined
      ? "anthropic"
      : headers["x-goog-api-key"] !== undefined || /\/v1beta\/models(\/[^/:]+)?$/.test(path)
        ? "gemini"
        : "openai";
  const id = m?.[1];
  if (id !== undefined) {
    let decoded = id;
    try {
      decoded = decodeURIComponent(id);
    } catch {
      // A malformed escape is kept as written: the provider does not know the name.
    }
    return { client, call: { op: "get", id: decoded } };
  }
  return { client, call: { op: "list", page: readListPage(new URLSearchParams(q < 0 ? "" : full.slice(q + 1))) } };
}

/** The shape of a provider's model list; undefined where the host Sluice calls has none (Vertex AI, Bedrock). */
export function modelListFamilyOf(p: LlmProviderEntry): ModelListFamily | undefined {
  switch (p.kind) {
    case "anthropic":
      return "anthropic";
    case "gemini":
      return "gemini";
    case "vertex":
    case "bedrock":
      return undefined;
    default:
      return "openai";
  }
}

/** Route type of a request path: the longest matching suffix wins, `*` matches anything; default Completions. */
export function routeTypeOf(routes: readonly (readonly [string, RouteType])[], path: string): RouteType {
  if (routes.length === 0) return "Completions";
  const q = path.indexOf("?");
  const p = q < 0 ? path : path.slice(0, q);
  let best: readonly [string, RouteType] | undefined;
  for (const r of routes) {
    if (r[0] === "*") {
      best ??= r;
      continue;
    }
    if (p.endsWith(r[0]) && (best === undefined || best[0] === "*" || r[0].length > best[0].length)) best = r;
  }
  return best?.[1] ?? "Completions";
}

type Family = Partial<Record<ClientFormat, ProviderFormat>>;
const OPENAI: Family = {
  "chat-completions": "chat-completions",
  messages: "chat-completions",
  "generate-content": "chat-completions",
  responses: "responses",
  embeddings: "embeddings",
  "embed-content": "embeddings",
  "batch-embed-contents": "embeddings",
};
const FAMILIES: Readonly<Record<Exclude<LlmProviderEntry["kind"], "custom">, Family>> = {
  openai: OPENAI,
  "azure-openai": OPENAI,
  "azure-foundry": OPENAI,
  anthropic: {
    "chat-completions": "messages",
    messages: "messages",
    "generate-content": "messages",
    "count-tokens": "count-tokens",
    "generate-content-count-tokens": "count-tokens",
  },
  gemini: {
    "chat-completions": "generate-content",
    "generate-content": "generate-content",
    embeddings: "gemini-embed",
    "embed-content": "gemini-embed-content",
    "batch-embed-contents": "gemini-embed",
    "count-tokens": "gemini-count-tokens",
    "generate-content-count-tokens": "gemini-count-tokens",
  },
  vertex: {
    "chat-completions": "generate-content",
    "generate-content": "generate-content",
    embeddings: "vertex-embed",
    "embed-content": "vertex-embed",
    "batch-embed-contents": "vertex-embed",
    "count-tokens": "vertex-count-tokens",
    "generate-content-count-tokens": "vertex-count-tokens",
    rerank: "vertex-rank",
  },
  bedrock: {
    "chat-completions": "converse",
    messages: "converse",
    responses: "converse",
    "generate-content": "converse",
    embeddings: "titan-embed",
    "embed-content": "titan-embed",
    "batch-embed-contents": "titan-embed",
    "count-tokens": "converse-count-tokens",
    "generate-content-count-tokens": "converse-count-tokens",
    rerank: "bedrock-rerank",
  },
};

const CUSTOM_FORMAT: Readonly<Record<string, ProviderFormat>> = {
  Completions: "chat-completions",
  Messages: "messages",
  Responses: "responses",
  Embeddings: "embeddings",
  MessagesTokenCount: "count-tokens",
  Rerank: "rerank",
};
const DEFAULT_PATH: Partial<Record<ProviderFormat, string>> = {
  "chat-completions": "/v1/chat/completions",
  messages: "/v1/messages",
  responses: "/v1/responses",
  embeddings: "/v1/embeddings",
  "count-tokens": "/v1/messages/count_tokens",
  rerank: "/v2/rerank",
};

function customFormats(p: LlmProviderEntry): { format: ProviderFormat; path?: string }[] {
  const list = Array.isArray(p.settings.formats) ? p.settings.formats : [];
  const out: { format: ProviderFormat; path?: string }[] = [];
  for (const f of list) {
    if (typeof f !== "object" || f === null) continue;
    const format = CUSTOM_FORMAT[String((f as { type?: unknown }).type)];
    const path = (f as { path?: unknown }).path;
    if (format !== undefined) out.push({ format, ...(typeof path === "string" ? { path } : {}) });
  }
  return out;
}

/** Vertex AI serves Claude models (Anthropic's publisher models) in the messages format. */
const VERTEX_CLAUDE: Family = {
  "chat-completions": "vertex-messages",
  messages: "vertex-messages",
  "generate-content": "vertex-messages",
  "count-tokens": "vertex-messages-count-tokens",
};
export const isClaudeModel = (model: string | undefined): boolean =>
  model !== undefined && /^(publishers\/anthropic\/models\/)?claude/.test(model);

/**
 * The provider format a client's request is translated to for this provider (for `model`, the model it will be asked
 * for); undefined when it cannot serve it.
 */
export function providerFormatFor(
  p: LlmProviderEntry,
  client: ClientFormat,
  model?: string,
): ProviderFormat | undefined {
  if (p.kind === "vertex" && isClaudeModel(model)) {
    const f = VERTEX_CLAUDE[client];
    return f !== undefined && findDirection(client, f) !== undefined ? f : undefined;
  }
  if (p.kind === "custom") {
    const formats = customFormats(p).map((f) => f.format);
    const candidates: ProviderFormat[] =
      client === "embed-content" || client === "batch-embed-contents"
        ? ["embeddings"]
        : [client as ProviderFormat, "chat-completions", "messages", "responses"];
    return candidates.find((f) => formats.includes(f) && findDirection(client, f) !== undefined);
  }
  const f = FAMILIES[p.kind][client];
  if (f !== undefined && RERANK_HOST[f]?.test(p.authority) === true) return undefined;
  return f !== undefined && findDirection(client, f) !== undefined ? f : undefined;
}

/**
 * The cloud rerank APIs live on hosts of their own (Bedrock's agent runtime, Google's Discovery Engine), not on the
 * host the provider's other requests go to: a provider at its default host cannot serve them (docs/llm.md, Rerank).
 */
const RERANK_HOST: Partial<Record<ProviderFormat, RegExp>> = {
  "bedrock-rerank": /^bedrock-runtime[.-]/,
  "vertex-rank": /aiplatform\.googleapis\.com$/,
};

/** The model a provider format is asked for: Bedrock's Rerank names a foundation model by its ARN, in its region. */
export function modelForFormat(
  p: LlmProviderEntry,
  format: ProviderFormat,
  model: string | undefined,
  requested: unknown,
): string | undefined {
  if (format !== "bedrock-rerank") return model;
  const m = model ?? (typeof requested === "string" ? requested : undefined);
  if (m === undefined || m.startsWith("arn:")) return m;
  return `arn:aws:bedrock:${awsRegion(p)}::foundation-model/${m}`;
}

const s = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

function settingsOf(p: LlmProviderEntry): ProviderSettings | undefined {
  const st = p.settings;
  switch (p.kind) {
    case "openai":
      return { kind: "openai", ...(p.pathPrefix !== undefined ? { pathPrefix: p.pathPrefix } : {}) };
    case "anthropic":
      return { kind: "anthropic", ...(p.pathPrefix !== undefined ? { pathPrefix: p.pathPrefix } : {}) };
    case "azure-openai": {
      const deploymentName = s(st.deploymentName);
      const apiVersion = s(st.apiVersion);
      return {
        kind: "azure-openai",
        endpoint: p.authority,
        ...(deploymentName !== undefined ? { deploymentName } : {}),
        ...(apiVersion !== undefined ? { apiVersion } : {}),
      };
    }
    case "azure-foundry": {
      const apiVersion = s(st.apiVersion);
      return {
        kind: "azure-foundry",
        resourceName: s(st.resourceName) ?? "",
        projectName: s(st.projectName) ?? "",
        ...(apiVersion !== undefined ? { apiVersion } : {}),
      };
    }
    case "gemini":
      return { kind: "gemini" };
    case "vertex": {
      const region = s(st.region);
      return {
        kind: "vertex",
        projectId: s(st.projectId) ?? "",
        ...(region !== undefined ? { region } : {}),
        host: p.authority,
      };
    }
    case "bedrock":
      return { kind: "bedrock", region: s(st.region) ?? "us-east-1" };
    case "custom":
      return undefined;
  }
}

export interface ProviderRequest {
  readonly authority: string;
  readonly path: string;
  readonly headers: Record<string, string>;
}

/** Credentials the caller obtained for a request: a token for Google credentials, AWS keys for SigV4. */
export interface ProviderCredentials {
  readonly bearer?: string;
  readonly aws?: AwsCredentials;
}

/** The region a provider's requests are signed for (cloudA `region`, else the provider's), and STS is asked in. */
export function awsRegion(p: LlmProviderEntry): string {
  const r = p.auth.aws?.region;
  return r !== undefined && r !== "" ? r : (s(p.settings.region) ?? "us-east-1");
}

/** The provider's credential headers (and query parameters, and a Google token) on a request's path and headers. */
function withCredentials(
  p: LlmProviderEntry,
  path: string,
  headers: Record<string, string>,
  creds: ProviderCredentials,
): { path: string; headers: Record<string, string> } {
  const out = { ...headers, ...p.auth.headers };
  if (creds.bearer !== undefined) out.authorization = `Bearer ${creds.bearer}`;
  const query = Object.entries(p.auth.query);
  if (query.length === 0) return { path, headers: out };
  const qs = query.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
  return { path: path + (path.includes("?") ? "&" : "?") + qs, headers: out };
}

/**
 * The path a provider is sent: `path` (its own, as its API writes it) after the provider's `basePath`, a GwModel
 * `baseURL`'s path for the families that keep their API version in their own path. Every request to a provider goes
 * through here (translated, model lists, forwarded as it is, Realtime), before credentials in the query and SigV4.
 */
export function providerPath(p: Pick<LlmProviderEntry, "basePath">, path: string): string {
  return p.basePath === undefined ? path : `${p.basePath}${path.startsWith("/") ? "" : "/"}${path}`;
}

/**
 * The `Models` route type: where the provider lists its models (its own API, its own answer), with its credentials;
 * undefined where there is no such endpoint (Vertex AI, Bedrock: the request then goes as it is). A custom provider
 * lists them next to its chat completions (`.../chat/completions` → `.../models`), else at `/v1/models`.
 */
export function modelsRequest(p: LlmProviderEntry, creds: ProviderCredentials = {}): ProviderRequest | undefined {
  if (p.auth.aws !== undefined) return undefined;
  let path: string;
  let headers: Record<string, string> = {};
  if (p.kind === "custom") {
    const completions = customFormats(p).find((f) => f.format === "chat-completions")?.path ?? p.path;
    path =
      completions !== undefined && /\/chat\/completions$/.test(completions)
        ? completions.replace(/\/chat\/completions$/, "/models")
        : "/v1/models";
  } else {
    const settings = settingsOf(p);
    const t = settings === undefined ? undefined : modelsTarget(settings);
    if (t === undefined) return undefined;
    path = t.path;
    headers = { ...t.headers };
  }
  return { authority: p.authority, ...withCredentials(p, providerPath(p, path), headers, creds) };
}

/**
 * Authority, path and headers (credentials and signature included) of the request to the provider, with the
 * credentials the caller obtained for it.
 */
export function providerRequest(
  p: LlmProviderEntry,
  format: ProviderFormat,
  model: string,
  stream: boolean,
  body: string,
  creds: ProviderCredentials = {},
): ProviderRequest | undefined {
  let path: string;
  let headers: Record<string, string> = {};
  if (p.kind === "custom") {
    const f = customFormats(p).find((x) => x.format === format);
    path = p.path ?? f?.path ?? DEFAULT_PATH[format] ?? "/";
  } else {
    const settings = settingsOf(p);
    const t = settings === undefined ? undefined : upstreamTarget(settings, format, model, stream);
    if (t === undefined) return undefined;
    path = p.path ?? t.path;
    headers = { ...t.headers };
  }
  ({ path, headers } = withCredentials(p, providerPath(p, path), headers, creds));
  if (p.auth.aws !== undefined) {
    const type = headers["content-type"] ?? "application/json";
    Object.assign(headers, sigV4Headers(p, "POST", path, { "content-type": type }, body, creds));
  }
  return { authority: p.authority, path, headers };
}

/**
 * SigV4 headers (authorization, x-amz-date, x-amz-security-token) of a request to a cloudA provider: `headers` are
 * signed besides host and x-amz-*. The payload hash is the body's: Bedrock, like AWS services other than S3, refuses
 * `UNSIGNED-PAYLOAD`, so a request forwarded as it is has its body read to be signed.
 */
export function sigV4Headers(
  p: LlmProviderEntry,
  method: string,
  path: string,
  headers: Readonly<Record<string, string>>,
  body: string | Uint8Array,
  creds: ProviderCredentials,
): Record<string, string> {
  const aws = p.auth.aws;
  // A bug: the caller obtains the credentials for every provider with cloudA.
  if (aws === undefined || creds.aws === undefined)
    throw new Error(`no AWS credentials were obtained for provider ${p.name}`);
  const q = path.indexOf("?");
  return signSigV4(
    {
      method,
      host: p.authority,
      path: q < 0 ? path : path.slice(0, q),
      query: q < 0 ? "" : path.slice(q + 1),
      headers,
      body,
    },
    { region: awsRegion(p), service: aws.service, credentials: creds.aws, date: new Date() },
  ).headers;
}
