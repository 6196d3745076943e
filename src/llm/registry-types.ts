// What a translation direction is (registry.ts holds them), apart so that files adding directions need not import
// the registry.
import type { ClientFormat, ProviderFormat, StreamFraming } from "./formats/names.js";
import type { StreamTranslator } from "./stream.js";
import type { RequestMeta, RequestTranslator, ResponseTranslator, TranslateContext } from "./translate/context.js";
import type { TokenUsage } from "./usage.js";

export type StreamFactory = (
  meta: RequestMeta,
  ctx: TranslateContext,
  onUsage?: (u: TokenUsage | undefined) => void,
) => StreamTranslator;

export interface Direction {
  readonly client: ClientFormat;
  readonly provider: ProviderFormat;
  readonly request: RequestTranslator;
  readonly response: ResponseTranslator;
  /** Absent for formats that never stream (embeddings, token counting). */
  readonly stream?: StreamFactory;
  readonly framing?: StreamFraming;
}
