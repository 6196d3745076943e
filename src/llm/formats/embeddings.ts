// Embeddings: OpenAI (POST /v1/embeddings) as the client format; Gemini batchEmbedContents and Bedrock Titan text
// embeddings (InvokeModel) as provider formats.

export interface EmbeddingsRequest {
  model: string;
  input: string | string[] | number[] | number[][];
  encoding_format?: "float" | "base64";
  dimensions?: number;
  user?: string;
}

export interface EmbeddingsResponse {
  object: "list";
  data: { object: "embedding"; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** POST /v1beta/models/{model}:batchEmbedContents */
export interface GeminiBatchEmbedRequest {
  requests: { model: string; content: { parts: { text: string }[] }; outputDimensionality?: number }[];
}
export interface GeminiBatchEmbedResponse {
  embeddings: { values: number[] }[];
}

/** POST /model/amazon.titan-embed-text-v2:0/invoke: one text per call. */
export interface TitanEmbedRequest {
  inputText: string;
  dimensions?: number;
  normalize?: boolean;
}
export interface TitanEmbedResponse {
  embedding: number[];
  inputTextTokenCount: number;
}
