// Wire formats by the name of the protocol they speak (spec/README.md: code is named after wire formats, the API
// keeps the neutral provider identifiers).

/** What a client may speak to Sluice. */
export type ClientFormat =
  | "chat-completions"
  | "messages"
  | "responses"
  | "generate-content"
  | "generate-content-count-tokens"
  | "embed-content"
  | "batch-embed-contents"
  | "embeddings"
  | "count-tokens"
  | "rerank";

/** What Sluice may speak to a provider. */
export type ProviderFormat =
  | "chat-completions"
  | "messages"
  | "vertex-messages"
  | "responses"
  | "converse"
  | "generate-content"
  | "embeddings"
  | "gemini-embed"
  | "gemini-embed-content"
  | "titan-embed"
  | "vertex-embed"
  | "count-tokens"
  | "converse-count-tokens"
  | "gemini-count-tokens"
  | "vertex-count-tokens"
  | "vertex-messages-count-tokens"
  | "rerank"
  | "bedrock-rerank"
  | "vertex-rank";

/** How a provider frames a streamed response. */
export type StreamFraming = "sse" | "aws-eventstream";
