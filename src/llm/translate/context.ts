// What every translator gets and returns. Ids and clocks come from the context so golden output is deterministic.
import type { LlmError } from "../errors.js";
import type { JsonObject } from "../json.js";
import type { TokenUsage } from "../usage.js";

export interface TranslateContext {
  /** A fresh id with the given prefix (`chatcmpl-`, `msg_`, `call_` ...). */
  id(prefix: string): string;
  /** Unix time in seconds. */
  now(): number;
}

let counter = 0;
export const defaultContext: TranslateContext = {
  id: (prefix) => `${prefix}${Date.now().toString(36)}${(counter++).toString(36).padStart(4, "0")}`,
  now: () => Math.floor(Date.now() / 1000),
};

/** Facts about the client's request that the response side needs (the response does not repeat them). */
export interface RequestMeta {
  /** The model name the provider is asked for (it goes into the URL for converse and generate-content). */
  model: string;
  stream: boolean;
  /** The client asked for a usage chunk at the end of a chat-completions stream. */
  includeUsage: boolean;
  /** Choices asked for (chat-completions `n`, where the provider can answer several); 1 when absent. */
  choices?: number;
  /** Tool names the provider was given in place of the client's (provider name → client name). */
  toolNames?: Readonly<Record<string, string>>;
}

export type RequestResult = { ok: true; body: JsonObject; meta: RequestMeta } | { ok: false; error: LlmError };

export type ResponseResult = { ok: true; body: JsonObject; usage?: TokenUsage } | { ok: false; error: LlmError };

/** The request translator of a direction: client body (parsed JSON, untrusted) → provider body. */
export type RequestTranslator = (
  body: unknown,
  providerModel: string | undefined,
  ctx: TranslateContext,
) => RequestResult;

/** The response translator of a direction: provider body (parsed JSON, untrusted) → client body. */
export type ResponseTranslator = (body: unknown, meta: RequestMeta, ctx: TranslateContext) => ResponseResult;
