// The `llm` CEL variable as the LLM ext_proc leaves it in Envoy dynamic metadata (completion.ts, service.ts): each
// field and its key in the namespace. A leaf module (it imports nothing), so Sluice's context stages and the
// translator can both read it without an import cycle through the LLM table; test/unit/llm-context.test.ts checks it
// against the table's constants.

/** = LLM_METADATA_NAMESPACE of src/translate/llm/table.ts. */
export const LLM_NAMESPACE = "sluice.dev/llm";

/** `llm.<field>` → its key in LLM_NAMESPACE. The request's model and streaming are there once the request body is read. */
export const LLM_METADATA_FIELDS: Readonly<Record<string, string>> = {
  requestModel: "request_model",
  streaming: "streaming",
  responseModel: "model",
  provider: "provider",
  inputTokens: "input_tokens",
  outputTokens: "output_tokens",
  totalTokens: "total_tokens",
  cachedInputTokens: "cached_input_tokens",
  cacheCreationInputTokens: "cache_creation_input_tokens",
  countTokens: "count_tokens",
};
