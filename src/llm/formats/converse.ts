// AWS Bedrock Converse / ConverseStream (POST /model/{modelId}/converse, /converse-stream). The model is in the path,
// never in the body; streams use the AWS binary event-stream framing with one JSON event per message.

export type ConverseImageFormat = "png" | "jpeg" | "gif" | "webp";

export type ConverseToolResultContent = { text: string } | { json: unknown } | { image: ConverseBlockImage["image"] };

export interface ConverseBlockImage {
  image: { format: ConverseImageFormat; source: { bytes: string } };
}

/** format: pdf, csv, doc, docx, xls, xlsx, html, txt or md; name: letters, digits, single spaces, -()[] only. */
export interface ConverseBlockDocument {
  document: { format: string; name: string; source: { bytes: string } };
}

export type ConverseBlock =
  | { text: string }
  | ConverseBlockImage
  | ConverseBlockDocument
  | { toolUse: { toolUseId: string; name: string; input: unknown } }
  | { toolResult: { toolUseId: string; content: ConverseToolResultContent[]; status?: "success" | "error" } }
  | { reasoningContent: { reasoningText?: { text: string; signature?: string }; redactedContent?: string } }
  | { cachePoint: { type: "default" } };

export interface ConverseMessage {
  role: "user" | "assistant";
  content: ConverseBlock[];
}

export type ConverseSystemBlock = { text: string } | { cachePoint: { type: "default" } };

export interface ConverseTool {
  toolSpec: { name: string; description?: string; inputSchema: { json: unknown } };
}

export type ConverseToolChoice =
  | { auto: Record<string, never> }
  | { any: Record<string, never> }
  | { tool: { name: string } };

export interface ConverseRequest {
  messages: ConverseMessage[];
  system?: ConverseSystemBlock[];
  inferenceConfig?: { maxTokens?: number; temperature?: number; topP?: number; stopSequences?: string[] };
  toolConfig?: { tools: (ConverseTool | { cachePoint: { type: "default" } })[]; toolChoice?: ConverseToolChoice };
  additionalModelRequestFields?: Record<string, unknown>;
  /** Structured output: `{textFormat: {type: "json_schema", structure: {jsonSchema: {schema: "<JSON text>", name}}}}`. */
  outputConfig?: Record<string, unknown>;
  serviceTier?: { type: "default" | "priority" | "flex" };
  guardrailConfig?: { guardrailIdentifier: string; guardrailVersion: string; trace?: "enabled" | "disabled" };
}

export type ConverseStopReason =
  | "end_turn"
  | "tool_use"
  | "max_tokens"
  | "stop_sequence"
  | "guardrail_intervened"
  | "content_filtered";

export interface ConverseUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cacheReadInputTokens?: number;
  cacheWriteInputTokens?: number;
}

export interface ConverseResponse {
  output: { message: ConverseMessage };
  stopReason: ConverseStopReason;
  usage: ConverseUsage;
  metrics?: { latencyMs: number };
  additionalModelResponseFields?: Record<string, unknown>;
}

/** One ConverseStream event: the `:event-type` header names it and the payload is its body. */
export type ConverseStreamEvent =
  | { type: "messageStart"; body: { role: "assistant" } }
  | {
      type: "contentBlockStart";
      body: { contentBlockIndex: number; start: { toolUse?: { toolUseId: string; name: string } } };
    }
  | {
      type: "contentBlockDelta";
      body: {
        contentBlockIndex: number;
        delta: {
          text?: string;
          toolUse?: { input: string };
          reasoningContent?: { text?: string; signature?: string; redactedContent?: string };
        };
      };
    }
  | { type: "contentBlockStop"; body: { contentBlockIndex: number } }
  | { type: "messageStop"; body: { stopReason: ConverseStopReason; additionalModelResponseFields?: unknown } }
  | { type: "metadata"; body: { usage: ConverseUsage; metrics?: { latencyMs: number } } };

/** Bedrock CountTokens (POST /model/{modelId}/count-tokens). */
export interface ConverseCountTokensRequest {
  input: {
    converse: {
      messages: ConverseMessage[];
      system?: ConverseSystemBlock[];
      toolConfig?: ConverseRequest["toolConfig"];
    };
  };
}
export interface ConverseCountTokensResponse {
  inputTokens: number;
}
