// OpenAI Responses (POST /v1/responses), the subset Sluice translates: messages, function calls and their outputs,
// text and image inputs. Built-in tools (web search, file search, computer use) only pass through to OpenAI itself.

export type ResponsesInputContent =
  | { type: "input_text"; text: string }
  | { type: "input_image"; image_url?: string; detail?: string; file_id?: string }
  | { type: "output_text"; text: string; annotations?: unknown[] }
  | { type: "refusal"; refusal: string };

export type ResponsesInputItem =
  | { type?: "message"; role: "user" | "assistant" | "system" | "developer"; content: string | ResponsesInputContent[] }
  | { type: "function_call"; call_id: string; name: string; arguments: string; id?: string; status?: string }
  | { type: "function_call_output"; call_id: string; output: string | ResponsesInputContent[] }
  | { type: "reasoning"; [k: string]: unknown };

export interface ResponsesTool {
  type: "function";
  name: string;
  description?: string | null;
  parameters?: Record<string, unknown> | null;
  strict?: boolean | null;
}

export interface ResponsesRequest {
  model: string;
  input: string | ResponsesInputItem[];
  instructions?: string | null;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stream?: boolean;
  tools?: (ResponsesTool | { type: string; [k: string]: unknown })[];
  tool_choice?: "none" | "auto" | "required" | { type: "function"; name: string };
  parallel_tool_calls?: boolean;
  text?: { format?: { type: "text" | "json_object" | "json_schema"; [k: string]: unknown } };
  user?: string;
  metadata?: Record<string, string>;
  store?: boolean;
  previous_response_id?: string;
  [k: string]: unknown;
}

export type ResponsesOutputItem =
  | {
      type: "message";
      id: string;
      status: "in_progress" | "completed" | "incomplete";
      role: "assistant";
      content: (
        | { type: "output_text"; text: string; annotations: unknown[]; logprobs?: unknown[] }
        | { type: "refusal"; refusal: string }
      )[];
    }
  | {
      type: "function_call";
      id: string;
      call_id: string;
      name: string;
      arguments: string;
      status: "in_progress" | "completed" | "incomplete";
    }
  | {
      type: "reasoning";
      id: string;
      summary: { type: "summary_text"; text: string }[];
      content?: { type: "reasoning_text"; text: string }[];
      /** Sluice puts a Claude thinking block's signature (or a redacted block's data) here. */
      encrypted_content?: string;
    };

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponsesResponse {
  id: string;
  object: "response";
  created_at: number;
  status: "completed" | "incomplete" | "in_progress" | "failed";
  model: string;
  output: ResponsesOutputItem[];
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  error: { code: string; message: string } | null;
  usage: ResponsesUsage | null;
  [k: string]: unknown;
}
