// Google Gemini generateContent / streamGenerateContent?alt=sse (POST /v1beta/models/{model}:...). The model is in the
// path; the stream is SSE where every event is a whole GenerateContentResponse carrying only the new parts.

export type GeminiPart =
  | { text: string; thought?: boolean; thoughtSignature?: string }
  | { inlineData: { mimeType: string; data: string } }
  | { fileData: { mimeType?: string; fileUri: string } }
  | { functionCall: { name: string; args?: Record<string, unknown>; id?: string }; thoughtSignature?: string }
  | { functionResponse: { name: string; response: Record<string, unknown>; id?: string } };

export interface GeminiContent {
  role?: "user" | "model";
  parts: GeminiPart[];
}

export interface GeminiFunctionDeclaration {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  parametersJsonSchema?: Record<string, unknown>;
}

export interface GeminiRequest {
  contents: GeminiContent[];
  systemInstruction?: { parts: { text: string }[] };
  tools?: ({ functionDeclarations: GeminiFunctionDeclaration[] } | { google_search: Record<string, never> })[];
  toolConfig?: { functionCallingConfig: { mode: "AUTO" | "ANY" | "NONE"; allowedFunctionNames?: string[] } };
  generationConfig?: {
    temperature?: number;
    topP?: number;
    topK?: number;
    maxOutputTokens?: number;
    stopSequences?: string[];
    candidateCount?: number;
    seed?: number;
    presencePenalty?: number;
    frequencyPenalty?: number;
    responseMimeType?: string;
    responseJsonSchema?: unknown;
    thinkingConfig?: Record<string, unknown>;
    responseLogprobs?: boolean;
    logprobs?: number;
  };
}

export type GeminiFinishReason =
  | "STOP"
  | "MAX_TOKENS"
  | "SAFETY"
  | "RECITATION"
  | "LANGUAGE"
  | "OTHER"
  | "BLOCKLIST"
  | "PROHIBITED_CONTENT"
  | "SPII"
  | "MALFORMED_FUNCTION_CALL"
  | "FINISH_REASON_UNSPECIFIED";

export interface GeminiUsage {
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  totalTokenCount?: number;
  cachedContentTokenCount?: number;
  thoughtsTokenCount?: number;
  toolUsePromptTokenCount?: number;
}

export interface GeminiResponse {
  candidates?: { content?: GeminiContent; finishReason?: GeminiFinishReason; index?: number }[];
  usageMetadata?: GeminiUsage;
  modelVersion?: string;
  responseId?: string;
  promptFeedback?: { blockReason?: string };
}

/** countTokens (POST /v1beta/models/{model}:countTokens). */
export interface GeminiCountTokensRequest {
  contents?: GeminiContent[];
  generateContentRequest?: GeminiRequest & { model: string };
}
export interface GeminiCountTokensResponse {
  totalTokens: number;
  cachedContentTokenCount?: number;
}
