// The model provider enumeration of GwModel (`Provider01`..`Provider19`, `Custom`) → the LLMProvider a GwBackend `ai`
// provider would be written as, so a concrete model reaches its provider through the same description
// (backend/ai.ts translateProvider) and the same ext_proc path. One row per value; spec/README.md names the services.

import type { AiBackendRefs } from "../backend/ai.js";
import { translateProvider } from "../backend/ai.js";
import type { LlmProviderIR } from "../ir.js";

type Rec = Readonly<Record<string, unknown>>;
const isRec = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v);

interface ProviderRow {
  /** The service behind the neutral name. */
  readonly service: string;
  /** The LLMProvider variant of a GwBackend with its settings, from the GwModel's spec. */
  readonly variant: (spec: Rec) => { readonly variant: string; readonly settings: Rec } | { readonly error: string };
  /**
   * OpenAI-compatible services: their host and API prefix (the chat completions API is `<prefix>/chat/completions`).
   * Absent host = no public address: `baseURL` is required.
   */
  readonly openaiCompatible?: { readonly host?: string; readonly pathPrefix: string };
}

const openai = (service: string, host: string | undefined, pathPrefix: string): ProviderRow => ({
  service,
  variant: () => ({ variant: "providerA", settings: {} }),
  openaiCompatible: { ...(host !== undefined ? { host } : {}), pathPrefix },
});

const settingsOf = (spec: Rec, field: string): Rec => (isRec(spec[field]) ? (spec[field] as Rec) : {});

/** By enumeration value. Services that speak the OpenAI chat completions API are reached through it. */
export const MODEL_PROVIDER_ROWS: Readonly<Record<string, ProviderRow>> = {
  Provider01: { service: "OpenAI", variant: () => ({ variant: "providerA", settings: {} }) },
  Provider02: {
    service: "Azure",
    variant: (spec) =>
      isRec(spec.cloudC) ? { variant: "cloudC", settings: spec.cloudC } : { error: "spec.cloudC is required" },
  },
  Provider03: { service: "Anthropic", variant: () => ({ variant: "providerD", settings: {} }) },
  Provider04: { service: "Gemini", variant: () => ({ variant: "providerE", settings: {} }) },
  Provider05: {
    service: "VertexAI",
    variant: (spec) =>
      typeof settingsOf(spec, "providerF").projectId === "string"
        ? { variant: "providerF", settings: settingsOf(spec, "providerF") }
        : { error: "spec.providerF.projectId is required (Vertex AI puts the project in every path)" },
  },
  Provider06: {
    service: "Bedrock",
    variant: (spec) => ({ variant: "providerG", settings: settingsOf(spec, "providerG") }),
  },
  Provider07: openai("Cohere", "api.cohere.ai", "/compatibility/v1"),
  Provider08: openai("Ollama", undefined, "/v1"),
  Provider09: openai("Baseten", "inference.baseten.co", "/v1"),
  Provider10: openai("Cerebras", "api.cerebras.ai", "/v1"),
  Provider11: openai("Deepinfra", "api.deepinfra.com", "/v1/openai"),
  Provider12: openai("Deepseek", "api.deepseek.com", "/v1"),
  Provider13: openai("Groq", "api.groq.com", "/openai/v1"),
  Provider14: openai("Huggingface", "router.huggingface.co", "/v1"),
  Provider15: openai("Mistral", "api.mistral.ai", "/v1"),
  Provider16: openai("Openrouter", "openrouter.ai", "/api/v1"),
  Provider17: openai("TogetherAI", "api.together.xyz", "/v1"),
  Provider18: openai("XAI", "api.x.ai", "/v1"),
  Provider19: openai("Fireworks", "api.fireworks.ai", "/inference/v1"),
  Custom: {
    service: "a custom provider",
    variant: (spec) =>
      isRec(spec.custom) ? { variant: "custom", settings: spec.custom } : { error: "spec.custom is required" },
  },
};

/**
 * Provider variants whose `baseURL` path replaces their API prefix (`/v1`; llm/providers.ts `pathPrefix`), as the
 * OpenAI SDKs take a base URL ending in `/v1`. The others keep their own path, API version included, after the
 * `baseURL` path (`basePath`), as their SDKs do with a custom base URL: Anthropic's (`https://api.anthropic.com` +
 * `/v1/messages`), Google's (+ `/v1beta/...`, `/v1/projects/...`), AWS's (+ `/model/...`), Azure's (+ `/openai/...`).
 */
const PREFIXABLE: ReadonlySet<string> = new Set(["providerA"]);

/**
 * Whether a `baseURL` path replaces the variant's API prefix. Also Anthropic's when it ends in `/v1`: written as an
 * OpenAI base URL is (`https://proxy/anthropic/v1`), it names where `/messages` lives, never a `/v1/v1` API.
 */
const replacesPrefix = (variant: string, path: string) =>
  PREFIXABLE.has(variant) || (variant === "providerD" && /\/v1$/.test(path));

export type ModelProviderResult =
  | { readonly ok: true; readonly provider: LlmProviderIR }
  /** `field`: the spec field to name in status; `notYetSupported`: valid, but Sluice cannot serve it yet. */
  | { readonly ok: false; readonly field: string; readonly message: string; readonly notYetSupported: boolean };

/** The parts of a `baseURL` (validated by the schema: http or https, no query, fragment or user info). */
function parseBaseURL(url: string): { host: string; port: number; tls: boolean; path: string } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const tls = u.protocol === "https:";
  const port = u.port === "" ? (tls ? 443 : 80) : Number(u.port);
  return { host: u.hostname.replace(/^\[|\]$/g, ""), port, tls, path: u.pathname.replace(/\/+$/, "") };
}

/**
 * The provider of a concrete GwModel, named `name` (its `namespace/name`), as backend/ai.ts describes GwBackend `ai`
 * providers. `tlsPolicy`: the model has `policies.tls`.
 */
export function translateModelProvider(
  name: string,
  spec: Rec,
  tlsPolicy: boolean,
  ns: string,
  refs: AiBackendRefs,
): ModelProviderResult {
  const provider = typeof spec.provider === "string" ? spec.provider : "";
  const row = MODEL_PROVIDER_ROWS[provider];
  if (row === undefined) {
    return { ok: false, field: "spec.provider", message: `${provider} is not served yet`, notYetSupported: true };
  }
  const v = row.variant(spec);
  if ("error" in v)
    return { ok: false, field: "spec.provider", message: `${provider}: ${v.error}`, notYetSupported: false };
  const llmProvider: Record<string, unknown> = { [v.variant]: v.settings };
  let tls = tlsPolicy;
  const base = typeof spec.baseURL === "string" ? parseBaseURL(spec.baseURL) : undefined;
  if (typeof spec.baseURL === "string" && base === undefined) {
    return { ok: false, field: "spec.baseURL", message: "is not a valid URL", notYetSupported: false };
  }
  if (row.openaiCompatible !== undefined) {
    if (row.openaiCompatible.host === undefined && base === undefined) {
      return {
        ok: false,
        field: "spec.baseURL",
        message: `is required with ${provider} (${row.service} has no public address; write where it runs)`,
        notYetSupported: false,
      };
    }
    if (row.openaiCompatible.host !== undefined) llmProvider.host = row.openaiCompatible.host;
    llmProvider.pathPrefix = row.openaiCompatible.pathPrefix;
  }
  if (base !== undefined) {
    // The base URL as the provider's own SDKs take it: its path is the whole prefix of the OpenAI-style ones
    // (`http://ollama:11434/v1`), and goes before the others' own paths (`https://proxy.corp/google` + `/v1beta/...`).
    llmProvider.host = base.host;
    llmProvider.port = base.port;
    if (replacesPrefix(v.variant, base.path)) llmProvider.pathPrefix = base.path;
    tls = tls || base.tls;
  }
  const r = translateProvider(name, llmProvider, tls, ns, refs);
  if (!r.ok) {
    const field =
      v.variant === "custom" && r.message.startsWith("custom.") ? "spec.custom.backendRef" : "spec.provider";
    return { ok: false, field, message: r.message, notYetSupported: false };
  }
  const basePath =
    base !== undefined && base.path !== "" && !replacesPrefix(v.variant, base.path) ? base.path : undefined;
  const out = basePath !== undefined ? { ...r.provider, basePath } : r.provider;
  // An http baseURL is plain HTTP even on port 443 (translateProvider assumes TLS there), unless policies.tls says so.
  if (base !== undefined && !base.tls && !tlsPolicy && out.tls !== undefined) {
    const { tls: _tls, ...plain } = out;
    return { ok: true, provider: plain };
  }
  return { ok: true, provider: out };
}
