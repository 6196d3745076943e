// Rerank in the Cohere v2 shape (POST /v2/rerank), which Cohere, Jina, Voyage-style and vLLM servers share. Sluice
// passes it through; only usage is read from it.

export interface RerankRequest {
  model: string;
  query: string;
  documents: (string | { text: string })[];
  top_n?: number;
  max_tokens_per_doc?: number;
}

export interface RerankResponse {
  id?: string;
  results: { index: number; relevance_score: number }[];
  meta?: {
    billed_units?: { search_units?: number; input_tokens?: number; output_tokens?: number };
    tokens?: { input_tokens?: number; output_tokens?: number };
  };
}
