// What becomes of each field of a Messages or Responses client's request on the way to a provider of another format.
// Each row carries an example and the outcome it claims per target (carried, ignored, refused); a unit test runs the
// translators with and without the example and checks the claim, and docs/llm.md shows `clientFieldsMarkdown()`
// (the same test keeps the two equal), so the table and the code cannot part.
import type { ClientFormat, ProviderFormat } from "../formats/names.js";

export type Outcome = "carried" | "ignored" | "refused";

export interface ClientFieldRow {
  readonly field: string;
  /** Merged into a minimal request of the client's format; one per field where a row names several. */
  readonly example: Readonly<Record<string, unknown>> | readonly Readonly<Record<string, unknown>>[];
  /** Per target: the outcome the test checks, and the text docs/llm.md shows. */
  readonly to: Readonly<Partial<Record<ProviderFormat, readonly [Outcome, string]>>>;
}

export interface ClientFieldTable {
  readonly client: ClientFormat;
  readonly title: string;
  /** A minimal valid request of the client's format. */
  readonly base: Readonly<Record<string, unknown>>;
  /** The model the translators are given (Converse picks reasoning fields by model family). */
  readonly model: string;
  readonly targets: readonly (readonly [ProviderFormat, string])[];
  readonly rows: readonly ClientFieldRow[];
}

const fn = { name: "f", input_schema: { type: "object" } };
const schema = { type: "object", properties: { a: { type: "string" } } };

export const MESSAGES_FIELDS: ClientFieldTable = {
  client: "messages",
  title: "messages field",
  base: { model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] },
  model: "anthropic.claude-sonnet-4-5-v1:0",
  targets: [
    ["chat-completions", "to chat completions"],
    ["converse", "to Converse"],
    ["responses", "to Responses"],
  ],
  rows: [
    {
      field: "`system`",
      example: { system: "be brief" },
      to: {
        "chat-completions": ["carried", "a `system` message"],
        converse: ["carried", "`system` blocks"],
        responses: ["carried", "a `system` input message"],
      },
    },
    {
      field: "`max_tokens`",
      example: { max_tokens: 77 },
      to: {
        "chat-completions": ["carried", "`max_completion_tokens`"],
        converse: ["carried", "`inferenceConfig.maxTokens`"],
        responses: ["carried", "`max_output_tokens`"],
      },
    },
    {
      field: "`temperature`, `top_p`",
      example: [{ temperature: 0.5 }, { top_p: 0.9 }],
      to: {
        "chat-completions": ["carried", "`temperature`, `top_p`"],
        converse: ["carried", "`inferenceConfig.temperature`, `topP`"],
        responses: ["carried", "`temperature`, `top_p`"],
      },
    },
    {
      field: "`top_k`",
      example: { top_k: 5 },
      to: {
        "chat-completions": ["carried", "`top_k` (OpenAI-compatible servers take it, OpenAI refuses it)"],
        converse: ["carried", "`additionalModelRequestFields.top_k`"],
        responses: ["refused", "refused (no top-k sampling)"],
      },
    },
    {
      field: "`stop_sequences`",
      example: { stop_sequences: ["END"] },
      to: {
        "chat-completions": ["carried", "`stop`"],
        converse: ["carried", "`inferenceConfig.stopSequences`"],
        responses: ["refused", "refused (Responses has no stop sequences)"],
      },
    },
    {
      field: "`stream`",
      example: { stream: true },
      to: {
        "chat-completions": ["carried", "`stream` with `stream_options.include_usage`"],
        converse: ["carried", "ConverseStream"],
        responses: ["carried", "`stream`"],
      },
    },
    {
      field: "`metadata.user_id`",
      example: { metadata: { user_id: "u1" } },
      to: {
        "chat-completions": ["carried", "`user`"],
        converse: ["ignored", "ignored (no such field)"],
        responses: ["carried", "`user`"],
      },
    },
    {
      field: "`tools` (client tools)",
      example: { tools: [fn] },
      to: {
        "chat-completions": ["carried", "`tools` (`function`, `parameters` = `input_schema`)"],
        converse: ["carried", "`toolConfig.tools[].toolSpec`"],
        responses: ["carried", "flat function `tools`"],
      },
    },
    {
      field: "`tools` with a `type` (server and built-in tools: `web_search_*`, `code_execution_*`, `bash_*` ...)",
      example: { tools: [{ type: "web_search_20250305", name: "web_search" }] },
      to: {
        "chat-completions": ["refused", "refused, naming the tool"],
        converse: ["refused", "refused, naming the tool"],
        responses: ["refused", "refused, naming the tool"],
      },
    },
    {
      field: "`tool_choice`",
      example: [
        { tools: [fn], tool_choice: { type: "any" } },
        { tools: [fn], tool_choice: { type: "auto", disable_parallel_tool_use: true } },
      ],
      to: {
        "chat-completions": [
          "carried",
          "`auto`, `any` → `required`, `none`, `tool` → a function; `disable_parallel_tool_use` → `parallel_tool_calls: false`",
        ],
        converse: ["carried", "`toolConfig.toolChoice` (`auto`, `any`, `tool`)"],
        responses: ["carried", "`tool_choice` (as for chat), `parallel_tool_calls`"],
      },
    },
    {
      field: "`thinking`, `output_config.effort`",
      example: [
        { max_tokens: 20000, thinking: { type: "enabled", budget_tokens: 4096 } },
        { output_config: { effort: "low" } },
      ],
      to: {
        "chat-completions": ["carried", "`reasoning_effort` (the budget's band; reasoning table below)"],
        converse: ["carried", "`additionalModelRequestFields.thinking` (Claude reads it there)"],
        responses: ["carried", "`reasoning.effort`"],
      },
    },
    {
      field: "`output_config.format` (and the beta's `output_format`)",
      example: [
        { output_config: { format: { type: "json_schema", schema } } },
        { output_format: { type: "json_schema", schema } },
      ],
      to: {
        "chat-completions": ["carried", "`response_format` `json_schema` (strict, named `response`)"],
        converse: ["carried", "`outputConfig.textFormat`"],
        responses: ["carried", "`text.format`"],
      },
    },
    {
      field: "`service_tier`",
      example: { service_tier: "standard_only" },
      to: {
        "chat-completions": ["carried", "`auto` → `auto`, `standard_only` → `default`"],
        converse: ["carried", "`standard_only` → `serviceTier: default`"],
        responses: ["carried", "`service_tier` (as for chat)"],
      },
    },
    {
      field: "`mcp_servers`, `container`",
      example: [{ mcp_servers: [{ type: "url", url: "https://mcp.example", name: "x" }] }, { container: "c1" }],
      to: {
        "chat-completions": ["refused", "refused (Anthropic's own)"],
        converse: ["refused", "refused (Anthropic's own)"],
        responses: ["refused", "refused (Anthropic's own)"],
      },
    },
    {
      field: "`cache_control` on blocks",
      example: {
        messages: [{ role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] }],
      },
      to: {
        "chat-completions": ["ignored", "ignored (OpenAI caches prefixes by itself)"],
        converse: ["carried", "a `cachePoint` after the block"],
        responses: ["ignored", "ignored (as for chat)"],
      },
    },
    {
      field: "`image` blocks",
      example: {
        messages: [
          {
            role: "user",
            content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AA" } }],
          },
        ],
      },
      to: {
        "chat-completions": ["carried", "`image_url` parts (a data URL, or the URL)"],
        converse: ["carried", "`image` blocks"],
        responses: ["carried", "`input_image` parts"],
      },
    },
    {
      field: "`document` blocks",
      example: {
        messages: [
          {
            role: "user",
            content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: "AA" } }],
          },
        ],
      },
      to: {
        "chat-completions": ["refused", "refused, naming the block"],
        converse: ["carried", "`document` blocks"],
        responses: ["refused", "refused, naming the block"],
      },
    },
    {
      field: "`context_management`, `inference_geo`",
      example: { context_management: { edits: [] }, inference_geo: "us" },
      to: {
        "chat-completions": ["ignored", "ignored (Anthropic's context editing and data residency settings)"],
        converse: ["ignored", "ignored (as for chat)"],
        responses: ["ignored", "ignored (as for chat)"],
      },
    },
  ],
};

const fnR = { type: "function", name: "f", parameters: { type: "object" } };

export const RESPONSES_FIELDS: ClientFieldTable = {
  client: "responses",
  title: "responses field",
  base: { model: "m", input: "hi" },
  model: "anthropic.claude-sonnet-4-5-v1:0",
  targets: [
    ["chat-completions", "to chat completions"],
    ["converse", "to Converse (through the chat form)"],
  ],
  rows: [
    {
      field: "`instructions`",
      example: { instructions: "be brief" },
      to: { "chat-completions": ["carried", "a `system` message"], converse: ["carried", "`system` blocks"] },
    },
    {
      field: "`max_output_tokens`",
      example: { max_output_tokens: 50 },
      to: {
        "chat-completions": ["carried", "`max_completion_tokens`"],
        converse: ["carried", "`inferenceConfig.maxTokens`"],
      },
    },
    {
      field: "`temperature`, `top_p`",
      example: { temperature: 0.5, top_p: 0.9 },
      to: {
        "chat-completions": ["carried", "`temperature`, `top_p`"],
        converse: ["carried", "`inferenceConfig.temperature`, `topP`"],
      },
    },
    {
      field: "`stream`",
      example: { stream: true },
      to: { "chat-completions": ["carried", "`stream` with usage"], converse: ["carried", "ConverseStream"] },
    },
    {
      field: "`tools` (`function`)",
      example: { tools: [fnR] },
      to: {
        "chat-completions": ["carried", "`tools` (nested `function`)"],
        converse: ["carried", "`toolConfig.tools[].toolSpec`"],
      },
    },
    {
      field: "built-in `tools` (`web_search`, `file_search`, `code_interpreter` ...), a built-in `tool_choice`",
      example: [{ tools: [{ type: "web_search" }] }, { tools: [fnR], tool_choice: { type: "file_search" } }],
      to: {
        "chat-completions": ["refused", "refused, naming the tool"],
        converse: ["refused", "refused, naming the tool"],
      },
    },
    {
      field: "`tool_choice`, `parallel_tool_calls`",
      example: [
        { tools: [fnR], tool_choice: "required" },
        { tools: [fnR], parallel_tool_calls: false },
      ],
      to: {
        "chat-completions": ["carried", "`tool_choice`, `parallel_tool_calls`"],
        converse: ["carried", "`toolConfig.toolChoice` (`parallel_tool_calls` has no Converse form)"],
      },
    },
    {
      field: "`text.format`",
      example: { text: { format: { type: "json_schema", name: "x", schema } } },
      to: { "chat-completions": ["carried", "`response_format`"], converse: ["carried", "`outputConfig.textFormat`"] },
    },
    {
      field: "`text.verbosity`",
      example: { text: { verbosity: "low" } },
      to: { "chat-completions": ["carried", "`verbosity`"], converse: ["refused", "refused unless `medium`"] },
    },
    {
      field: "`reasoning.effort`",
      example: { reasoning: { effort: "low" } },
      to: {
        "chat-completions": ["carried", "`reasoning_effort`"],
        converse: ["carried", "by model family (reasoning table below)"],
      },
    },
    {
      field: "`service_tier`",
      example: { service_tier: "flex" },
      to: { "chat-completions": ["carried", "`service_tier`"], converse: ["carried", "`serviceTier`"] },
    },
    {
      field: "`user`, `safety_identifier`, `prompt_cache_key`",
      example: [{ user: "u" }, { safety_identifier: "s" }, { prompt_cache_key: "k" }],
      to: {
        "chat-completions": ["carried", "the same names"],
        converse: ["ignored", "ignored (no such fields)"],
      },
    },
    {
      field:
        "`reasoning.summary`, `store`, `metadata`, `include` (but `message.output_text.logprobs`: refused as `top_logprobs`), `truncation`",
      example: { reasoning: { summary: "auto" }, store: true, metadata: { a: "b" }, include: [], truncation: "auto" },
      to: {
        "chat-completions": ["ignored", "ignored (nothing of them in a chat answer)"],
        converse: ["ignored", "ignored"],
      },
    },
    {
      field: "`previous_response_id`, `conversation`",
      example: [{ previous_response_id: "resp_1" }, { conversation: "conv_1" }],
      to: {
        "chat-completions": ["refused", "refused (OpenAI's stored state; send the whole conversation)"],
        converse: ["refused", "refused (as for chat)"],
      },
    },
    {
      field: "`background`, `prompt`, `max_tool_calls`, `top_logprobs`",
      example: [{ background: true }, { prompt: { id: "p1" } }, { max_tool_calls: 2 }, { top_logprobs: 2 }],
      to: { "chat-completions": ["refused", "refused, naming the field"], converse: ["refused", "refused"] },
    },
  ],
};

export const CLIENT_FIELD_TABLES: readonly ClientFieldTable[] = [MESSAGES_FIELDS, RESPONSES_FIELDS];

/** A table as docs/llm.md shows it. */
export function clientFieldsMarkdown(t: ClientFieldTable): string {
  const lines = [
    `| ${t.title} | ${t.targets.map(([, title]) => title).join(" | ")} |`,
    `|---|${t.targets.map(() => "---").join("|")}|`,
    ...t.rows.map((r) => `| ${r.field} | ${t.targets.map(([f]) => r.to[f]?.[1] ?? "").join(" | ")} |`),
  ];
  return `${lines.join("\n")}\n`;
}
