// What becomes of each chat-completions request field on the way to a provider of another format: carried, carried
// approximately, ignored (it cannot change the answer), or refused with a 400 naming it (dropping it would). The
// table is the code: the translators ask `refusedChatField` before translating, and docs/llm.md shows
// `chatFieldsMarkdown()` (a unit test keeps the two equal).
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatRequest } from "../formats/chat-completions.js";
import { isObject } from "../json.js";

export type ChatTarget = "messages" | "converse" | "generate-content" | "responses";

interface FieldRow {
  readonly field: string;
  readonly to: Readonly<Record<ChatTarget, string>>;
  /** When the request's value is refused for a target: the message (the field path is the row's first field). */
  readonly refuse?: (req: ChatRequest, target: ChatTarget) => { path: string; message: string } | undefined;
}

const set = (v: unknown): boolean => v !== undefined && v !== null;
const nonZero = (v: unknown): boolean => typeof v === "number" && v !== 0;

export const CHAT_FIELDS: readonly FieldRow[] = [
  {
    field: "`max_completion_tokens`, `max_tokens`",
    to: {
      messages: "`max_tokens` (4096 when absent: Messages requires it)",
      converse: "`inferenceConfig.maxTokens`",
      "generate-content": "`generationConfig.maxOutputTokens`",
      responses: "`max_output_tokens`",
    },
  },
  {
    field: "`temperature`, `top_p`",
    to: {
      messages: "`temperature`, `top_p` (Messages takes a temperature up to 1)",
      converse: "`inferenceConfig.temperature`, `topP`",
      "generate-content": "`temperature`, `topP`",
      responses: "`temperature`, `top_p`",
    },
  },
  {
    field: "`stop`",
    to: {
      messages: "`stop_sequences`",
      converse: "`inferenceConfig.stopSequences`",
      "generate-content": "`stopSequences`",
      responses: "refused (Responses has no stop sequences)",
    },
    refuse: (req, target) =>
      target === "responses" && (typeof req.stop === "string" || (Array.isArray(req.stop) && req.stop.length > 0))
        ? { path: "stop", message: "stop sequences are not supported by this provider" }
        : undefined,
  },
  {
    field: "`n`",
    to: {
      messages: "refused unless 1",
      converse: "refused unless 1",
      "generate-content": "`candidateCount`",
      responses: "refused unless 1",
    },
  },
  {
    field: "`seed`",
    to: {
      messages: "ignored (no such setting; best effort in OpenAI too)",
      converse: "ignored (as for Messages)",
      "generate-content": "`seed`",
      responses: "ignored (no such field in Responses)",
    },
  },
  {
    field: "`presence_penalty`, `frequency_penalty`",
    to: {
      messages: "refused unless 0",
      converse: "refused unless 0",
      "generate-content": "`presencePenalty`, `frequencyPenalty`",
      responses: "refused unless 0",
    },
    refuse: (req, target) => {
      if (target === "generate-content") return undefined;
      for (const f of ["presence_penalty", "frequency_penalty"] as const)
        if (nonZero(req[f])) return { path: f, message: `${f} other than 0 is not supported by this provider` };
      return undefined;
    },
  },
  {
    field: "`logprobs`, `top_logprobs`",
    to: {
      messages: "refused when asked",
      converse: "refused when asked",
      "generate-content":
        "`responseLogprobs`, `logprobs`; the answer's `logprobsResult` → `choices[].logprobs.content`",
      responses: "refused when asked",
    },
    refuse: (req, target) =>
      target !== "generate-content" && (req.logprobs === true || set(req.top_logprobs))
        ? {
            path: req.logprobs === true ? "logprobs" : "top_logprobs",
            message: "log probabilities are not returned by this provider",
          }
        : undefined,
  },
  {
    field: "`logit_bias`",
    to: {
      messages: "refused unless empty",
      converse: "refused unless empty",
      "generate-content": "refused unless empty",
      responses: "refused unless empty",
    },
    refuse: (req) =>
      isObject(req.logit_bias) && Object.keys(req.logit_bias).length > 0
        ? { path: "logit_bias", message: "logit_bias is not supported by this provider" }
        : undefined,
  },
  {
    field: "`user`, `safety_identifier`",
    to: {
      messages: "`metadata.user_id` (`user` first)",
      converse: "ignored (no such field)",
      "generate-content": "ignored (no such field)",
      responses: "`user`, `safety_identifier` as they are",
    },
  },
  {
    field: "`metadata`, `store`, `prompt_cache_key`, `prediction`",
    to: {
      messages: "ignored (OpenAI's stored completions, cache routing and predicted outputs: nothing in the answer)",
      converse: "ignored",
      "generate-content": "ignored",
      responses:
        "`metadata`, `prompt_cache_key` as they are; `store` false unless `true` (Responses stores by default); `prediction` ignored",
    },
  },
  {
    field: "`parallel_tool_calls`",
    to: {
      messages: "`false` → `tool_choice.disable_parallel_tool_use`",
      converse: "ignored (no such setting: an answer may hold several calls, each still valid)",
      "generate-content": "ignored (as for Converse)",
      responses: "`parallel_tool_calls`",
    },
  },
  {
    field: "`tools` (`function`)",
    to: {
      messages: "`tools` (`input_schema`)",
      converse: "`toolConfig.tools[].toolSpec`",
      "generate-content": "`functionDeclarations` (`parametersJsonSchema`)",
      responses: "`tools[]` flattened (`name`, `parameters`; `strict` false unless set, Responses' default being true)",
    },
  },
  {
    field: "`tools` of another type, `web_search_options`",
    to: {
      messages: "refused, naming the tool",
      converse: "refused, naming the tool",
      "generate-content": "`web_search_options` → the `google_search` tool; other types refused",
      responses:
        "`web_search_options` → the `web_search` tool (`search_context_size`, `user_location`); other types refused",
    },
    refuse: (req, target) => {
      for (const [i, t] of (Array.isArray(req.tools) ? req.tools : []).entries())
        if (isObject(t) && t.type !== undefined && t.type !== "function")
          return {
            path: `tools[${i}].type`,
            message: `tools[${i}]: the ${String(t.type)} tool is not available from this provider (only function tools are)`,
          };
      if (target !== "generate-content" && target !== "responses" && set(req.web_search_options))
        return { path: "web_search_options", message: "web search is not available from this provider" };
      return undefined;
    },
  },
  {
    field: "`tool_choice`",
    to: {
      messages: "`none`, `auto`, `required` → `any`, a function → `tool`",
      converse:
        "`auto`, `required` → `any`, a function → `tool`; `none` leaves the tools out (kept when the history uses them)",
      "generate-content": "`NONE`, `AUTO`, `ANY`, a function → `ANY` + `allowedFunctionNames`",
      responses: "`none`, `auto`, `required` as they are, a function → `{type: function, name}`",
    },
  },
  {
    field: "`response_format`",
    to: {
      messages: "`json_schema` → `output_config.format`; `json_object` → a system instruction (approximate)",
      converse: "`json_schema` → `outputConfig.textFormat`; `json_object` → a system instruction (approximate)",
      "generate-content": "`responseMimeType: application/json` (+ `responseJsonSchema`)",
      responses: "`text.format` (`json_schema` flattened: `name`, `schema`, `strict`, `description`; `json_object`)",
    },
  },
  {
    field: "`reasoning_effort`",
    to: {
      messages: "`thinking` (budget table below)",
      converse: "by model family (below)",
      "generate-content": "`thinkingConfig` (below)",
      responses: "`reasoning.effort`",
    },
  },
  {
    field: "`service_tier`",
    to: {
      messages:
        "`auto`, `priority` → `auto` (priority capacity when the organization has it), `default` → `standard_only`; `flex` refused",
      converse: "`default`, `priority`, `flex` → `serviceTier.type`; `auto` not sent",
      "generate-content": "refused unless `auto` or `default`",
      responses: "`service_tier` as it is",
    },
    refuse: (req, target) => {
      const t = req.service_tier;
      if (t === undefined || t === null || t === "auto" || t === "default" || target === "responses") return undefined;
      if (target === "converse" && (t === "priority" || t === "flex")) return undefined;
      if (target === "messages" && t === "priority") return undefined;
      return { path: "service_tier", message: `service_tier ${String(t)} is not offered by this provider` };
    },
  },
  {
    field: "`modalities`, `audio`",
    to: {
      messages: "refused unless text only",
      converse: "refused unless text only",
      "generate-content": "refused unless text only",
      responses: "refused unless text only",
    },
    refuse: (req) => {
      const m = req.modalities;
      if (set(req.audio)) return { path: "audio", message: "audio output is not available from this provider" };
      if (Array.isArray(m) && m.some((x) => x !== "text"))
        return { path: "modalities", message: "only text output is available from this provider" };
      return undefined;
    },
  },
  {
    field: "`verbosity`",
    to: {
      messages: "refused unless `medium`",
      converse: "refused unless `medium`",
      "generate-content": "refused unless `medium`",
      responses: "`text.verbosity`",
    },
    refuse: (req, target) =>
      target !== "responses" && set(req.verbosity) && req.verbosity !== "medium"
        ? { path: "verbosity", message: "verbosity is not supported by this provider" }
        : undefined,
  },
  {
    field: "`functions`, `function_call` (deprecated)",
    to: {
      messages: "refused (use `tools`)",
      converse: "refused (use `tools`)",
      "generate-content": "refused (use `tools`)",
      responses: "refused (use `tools`)",
    },
    refuse: (req) =>
      set(req.functions) || set(req.function_call)
        ? {
            path: set(req.functions) ? "functions" : "function_call",
            message: "functions and function_call are not supported by this provider; use tools and tool_choice",
          }
        : undefined,
  },
];

/** The first refused field of a request for a target, as a 400 naming it. */
export function refusedChatField(req: ChatRequest, target: ChatTarget): LlmError | undefined {
  for (const row of CHAT_FIELDS) {
    const r = row.refuse?.(req, target);
    if (r !== undefined) return invalidRequest(r.message, r.path);
  }
  return undefined;
}

/** The table as docs/llm.md shows it. */
export function chatFieldsMarkdown(): string {
  const lines = [
    "| chat completions field | to Messages | to Converse | to generateContent | to Responses |",
    "|---|---|---|---|---|",
    ...CHAT_FIELDS.map(
      (r) => `| ${r.field} | ${r.to.messages} | ${r.to.converse} | ${r.to["generate-content"]} | ${r.to.responses} |`,
    ),
  ];
  return `${lines.join("\n")}\n`;
}
