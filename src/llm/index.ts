// Public surface of the LLM format library, for the ext_proc service and tests.

export type { EventStreamMessage, HeaderValue } from "./codec/eventstream.js";
export {
  EventStreamDecoder,
  encodeEventStreamMessage,
  encodeJsonEvent,
  encodeJsonException,
} from "./codec/eventstream.js";
export {
  type AwsCredentials,
  type SigV4Options,
  type SigV4Request,
  type SigV4Result,
  signSigV4,
} from "./codec/sigv4.js";
export { type SseEvent, SseParser, serializeSse } from "./codec/sse.js";
export { type ErrorKind, errorBody, type LlmError, parseProviderError } from "./errors.js";
export type { ClientFormat, ProviderFormat, StreamFraming } from "./formats/names.js";
export {
  ANTHROPIC_VERSION,
  modelsTarget,
  type ProviderSettings,
  resolveModel,
  type UpstreamTarget,
  upstreamTarget,
} from "./providers.js";
export { allDirections, clientError, type Direction, findDirection, translateError } from "./registry.js";
export type { StreamTranslator } from "./stream.js";
export { defaultContext, type RequestMeta, type TranslateContext } from "./translate/context.js";
export { addConverseCachePoints, type PromptCaching, supportsPromptCaching } from "./translate/converse-cache.js";
export { extractUsage, type TokenUsage } from "./usage.js";
