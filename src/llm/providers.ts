// Where and how to reach each provider: host, path (per wire format), query, and credential headers. SigV4 for
// Bedrock is separate (codec/sigv4.ts) because it must be computed on the final body.
import type { ProviderFormat } from "./formats/names.js";

export type ProviderSettings =
  | { kind: "openai"; host?: string; pathPrefix?: string; apiKey?: string }
  | { kind: "azure-openai"; endpoint: string; deploymentName?: string; apiVersion?: string; apiKey?: string }
  | { kind: "azure-foundry"; resourceName: string; projectName: string; apiVersion?: string; apiKey?: string }
  | { kind: "anthropic"; host?: string; pathPrefix?: string; apiKey?: string; version?: string }
  | { kind: "gemini"; host?: string; apiKey?: string }
  | { kind: "vertex"; projectId: string; region?: string; host?: string }
  | { kind: "bedrock"; region?: string; host?: string };

export interface UpstreamTarget {
  host: string;
  /** Path with the query string, as sent (`:path`). */
  path: string;
  headers: Record<string, string>;
}

const openaiOps: Partial<Record<ProviderFormat, string>> = {
  "chat-completions": "/chat/completions",
  responses: "/responses",
  embeddings: "/embeddings",
};

/** Strips a scheme and trailing slashes: the spec lets users write the Azure endpoint either way. */
function bareHost(h: string): string {
  return h.replace(/^[a-z]+:\/\//i, "").replace(/\/+$/, "");
}

/** The anthropic-version the Messages API is pinned to unless the client sends its own. */
export const ANTHROPIC_VERSION = "2023-06-01";

/**
 * The target for a request in `format` to a provider, for `model` (after override/alias) and streaming or not.
 * Undefined when the provider does not speak that format.
 */
/**
 * Where a provider lists its models (the `Models` route type), in its own API: OpenAI-compatible ones under their API
 * prefix (Azure's deployment form at `/openai/models`), Anthropic's `/v1/models`, Gemini's `/v1beta/models`. Vertex AI
 * and Bedrock have no such endpoint on the host Sluice calls: undefined.
 */
export function modelsTarget(p: ProviderSettings): UpstreamTarget | undefined {
  switch (p.kind) {
    case "openai":
    case "azure-openai":
    case "azure-foundry": {
      // Their chat completions URL with `/models` in place of the operation (and no deployment in Azure's).
      const t = upstreamTarget(
        p.kind === "azure-openai" ? { ...p, deploymentName: "_" } : p,
        "chat-completions",
        "",
        false,
      );
      if (t === undefined) return undefined;
      const path = t.path.replace(/\/deployments\/_\//, "/").replace("/chat/completions", "/models");
      return { ...t, path };
    }
    case "anthropic": {
      const t = upstreamTarget(p, "messages", "", false);
      return t === undefined ? undefined : { ...t, path: t.path.replace(/\/messages$/, "/models") };
    }
    case "gemini": {
      const t = upstreamTarget(p, "generate-content", "m", false);
      return t === undefined ? undefined : { ...t, path: "/v1beta/models" };
    }
    default:
      return undefined;
  }
}

export function upstreamTarget(
  p: ProviderSettings,
  format: ProviderFormat,
  model: string,
  stream: boolean,
): UpstreamTarget | undefined {
  switch (p.kind) {
    case "openai": {
      const op = openaiOps[format];
      if (op === undefined) return undefined;
      const headers: Record<string, string> = {};
      if (p.apiKey !== undefined) headers.authorization = `Bearer ${p.apiKey}`;
      return { host: p.host ?? "api.openai.com", path: `${p.pathPrefix ?? "/v1"}${op}`, headers };
    }
    case "azure-openai": {
      const op = openaiOps[format];
      if (op === undefined) return undefined;
      const headers: Record<string, string> = {};
      if (p.apiKey !== undefined) headers["api-key"] = p.apiKey;
      const host = bareHost(p.endpoint);
      const version = p.apiVersion ?? "v1";
      // The v1 API has no deployment in the path: the model field of the body picks the deployment.
      if (version === "v1") return { host, path: `/openai/v1${op}`, headers };
      const q = `?api-version=${encodeURIComponent(version)}`;
      if (format === "responses") return { host, path: `/openai/responses${q}`, headers };
      if (p.deploymentName === undefined) return undefined;
      return { host, path: `/openai/deployments/${encodeURIComponent(p.deploymentName)}${op}${q}`, headers };
    }
    case "azure-foundry": {
      const op = openaiOps[format];
      if (op === undefined) return undefined;
      const headers: Record<string, string> = {};
      if (p.apiKey !== undefined) headers["api-key"] = p.apiKey;
      const base = `/api/projects/${encodeURIComponent(p.projectName)}/openai`;
      const version = p.apiVersion ?? "v1";
      const path = version === "v1" ? `${base}/v1${op}` : `${base}${op}?api-version=${encodeURIComponent(version)}`;
      return { host: `${p.resourceName}.services.ai.azure.com`, path, headers };
    }
    case "anthropic": {
      const prefix = p.pathPrefix ?? "/v1";
      const path =
        format === "messages"
          ? `${prefix}/messages`
          : format === "count-tokens"
            ? `${prefix}/messages/count_tokens`
            : undefined;
      if (path === undefined) return undefined;
      const headers: Record<string, string> = { "anthropic-version": p.version ?? ANTHROPIC_VERSION };
      if (p.apiKey !== undefined) headers["x-api-key"] = p.apiKey;
      return { host: p.host ?? "api.anthropic.com", path, headers };
    }
    case "gemini": {
      const m = encodeURIComponent(model.replace(/^models\//, ""));
      const ops: Partial<Record<ProviderFormat, string>> = {
        "generate-content": stream ? `:streamGenerateContent?alt=sse` : `:generateContent`,
        "gemini-embed": ":batchEmbedContents",
        "gemini-embed-content": ":embedContent",
        "gemini-count-tokens": ":countTokens",
      };
      const op = ops[format];
      if (op === undefined) return undefined;
      const headers: Record<string, string> = {};
      if (p.apiKey !== undefined) headers["x-goog-api-key"] = p.apiKey;
      return { host: p.host ?? "generativelanguage.googleapis.com", path: `/v1beta/models/${m}${op}`, headers };
    }
    case "vertex": {
      // Vertex AI serves Gemini with the generate-content body on its own URL form (publisher models of a project and
      // location); the `global` location has no regional host prefix.
      const region = p.region ?? VERTEX_DEFAULT_REGION;
      const ops: Partial<Record<ProviderFormat, string>> = {
        "generate-content": stream ? `:streamGenerateContent?alt=sse` : `:generateContent`,
        "vertex-count-tokens": ":countTokens",
        "vertex-embed": ":predict",
        // Claude models are Anthropic's publisher models, called with their own body through rawPredict.
        "vertex-messages": stream ? ":streamRawPredict" : ":rawPredict",
        // Claude's token count is one endpoint for every model (the model stays in the body).
        "vertex-messages-count-tokens": ":rawPredict",
      };
      if (format === "vertex-rank") {
        // Google's ranking API (Discovery Engine): the default ranking config of the project and location.
        const loc = `/v1/projects/${encodeURIComponent(p.projectId)}/locations/${encodeURIComponent(region)}`;
        return {
          host: p.host ?? "discoveryengine.googleapis.com",
          path: `${loc}/rankingConfigs/default_ranking_config:rank`,
          headers: {},
        };
      }
      const op = ops[format];
      if (op === undefined) return undefined;
      const claude = format === "vertex-messages" || format === "vertex-messages-count-tokens";
      const publisher = claude ? "anthropic" : "google";
      // Claude versions are written `claude-sonnet-4@20250514`: the `@` stays as it is.
      const m =
        format === "vertex-messages-count-tokens"
          ? "count-tokens"
          : encodeURIComponent(model.replace(/^(publishers\/[a-z]+\/)?models\//, "")).replace(/%40/g, "@");
      const base = `/v1/projects/${encodeURIComponent(p.projectId)}/locations/${encodeURIComponent(region)}`;
      return {
        host: p.host ?? vertexHost(region),
        path: `${base}/publishers/${publisher}/models/${m}${op}`,
        headers: {},
      };
    }
    case "bedrock": {
      if (format === "bedrock-rerank") {
        // The agent runtime's Rerank: no model in the path (the body names its ARN).
        const region = p.region ?? "us-east-1";
        return {
          host: p.host ?? `bedrock-agent-runtime.${region}.amazonaws.com`,
          path: "/rerank",
          headers: { "content-type": "application/json", accept: "application/json" },
        };
      }
      const ops: Partial<Record<ProviderFormat, string>> = {
        converse: stream ? "/converse-stream" : "/converse",
        "titan-embed": "/invoke",
        "converse-count-tokens": "/count-tokens",
      };
      const op = ops[format];
      if (op === undefined) return undefined;
      const region = p.region ?? "us-east-1";
      // Model ids hold ':' (`anthropic.claude-3-haiku-20240307-v1:0`) and ARNs hold '/': both are encoded once here
      // and SigV4 encodes the path again, as AWS SDKs do.
      const headers: Record<string, string> = {
        "content-type": "application/json",
        accept: stream ? "application/vnd.amazon.eventstream" : "application/json",
      };
      return {
        host: p.host ?? `bedrock-runtime.${region}.amazonaws.com`,
        path: `/model/${encodeURIComponent(model)}${op}`,
        headers,
      };
    }
  }
}

/** Vertex AI location used when a providerF sets no region. */
export const VERTEX_DEFAULT_REGION = "global";

/** Host of Vertex AI's API in a location (`global` has no regional prefix). */
export function vertexHost(region: string): string {
  return region === "global" ? "aiplatform.googleapis.com" : `${region}-aiplatform.googleapis.com`;
}

/** The SigV4 scope of a Bedrock provider. */
export function bedrockSigningScope(p: ProviderSettings & { kind: "bedrock" }): { region: string; service: "bedrock" } {
  return { region: p.region ?? "us-east-1", service: "bedrock" };
}

/** Model for the upstream: a provider-level override wins, then the route's alias table, then the client's name. */
export function resolveModel(
  requested: string | undefined,
  opts: { override?: string; aliases?: Readonly<Record<string, string>> },
): string | undefined {
  if (opts.override !== undefined) return opts.override;
  if (requested === undefined) return undefined;
  return opts.aliases?.[requested] ?? requested;
}
