// A generateContent client (Google's SDKs pointed at Sluice) → a chat-completions request, from which the chat
// translators reach Messages, Converse and Responses. Every field the client may send is a row of GEMINI_FIELDS: the
// reader dispatches on the rows, so a key without a row is refused as Google refuses it ("Unknown name"), and
// docs/llm.md shows `geminiFieldsMarkdown()` (a unit test keeps the two equal).
//
// The model and the stream flag are in the client's URL (`models/{model}:generateContent` or
// `:streamGenerateContent`); the ext_proc puts them in the body as `model` and `stream` before translating, as every
// other format has them, so AI policies, CEL and GwModels read them alike.
import { invalidRequest, type LlmError } from "../errors.js";
import type { ChatContentPart, ChatMessage, ChatRequest, ChatTool, ChatToolCall } from "../formats/chat-completions.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { RequestMeta, RequestResult } from "./context.js";
import { effortOfBudget } from "./reasoning.js";

type Obj = Record<string, unknown>;

/** What the reader builds besides the chat request: the tool choice's allowed names (ANY + several names). */
interface Reading {
  readonly out: ChatRequest;
  allowed?: readonly string[];
}

interface GeminiFieldRow {
  /** The field as docs/llm.md names it. */
  readonly field: string;
  /** The body keys the row reads (`generationConfig.` for the keys inside it). */
  readonly keys: readonly string[];
  /** What it becomes on the way to a chat-completions provider (and through it to Messages, Converse, Responses). */
  readonly chat: string;
  readonly read?: (v: unknown, r: Reading, key: string) => LlmError | undefined;
}

const refuse =
  (why: string) =>
  (_v: unknown, _r: Reading, key: string): LlmError =>
    invalidRequest(`${key}: ${why}`, key);

const OPENAPI_TYPES = new Set(["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"]);

/** Gemini's `Schema` (an OpenAPI subset with upper-case types) as JSON Schema: the types lower-cased, the rest kept. */
export function jsonSchemaOfOpenApi(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(jsonSchemaOfOpenApi);
  if (!isObject(s)) return s;
  const out: Obj = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === "type" && typeof v === "string" && OPENAPI_TYPES.has(v)) out[k] = v.toLowerCase();
    else if (k === "nullable" && v === true) continue;
    else if (k === "propertyOrdering") continue;
    else out[k] = jsonSchemaOfOpenApi(v);
  }
  if (s.nullable === true && typeof out.type === "string") out.type = [out.type, "null"];
  return out;
}

const num0 = (v: unknown, key: string): number | LlmError =>
  typeof v === "number" && Number.isFinite(v) ? v : invalidRequest(`${key}: a number is expected`, key);

function setNumber(field: keyof ChatRequest & string) {
  return (v: unknown, r: Reading, key: string): LlmError | undefined => {
    const n = num0(v, key);
    if (typeof n !== "number") return n;
    r.out[field] = n;
    return undefined;
  };
}

function readTools(v: unknown, r: Reading, key: string): LlmError | undefined {
  const tools: ChatTool[] = [];
  for (const [i, t] of arr(v).entries()) {
    if (!isObject(t)) return invalidRequest(`${key}[${i}]: an object is expected`, `${key}[${i}]`);
    for (const [k, value] of Object.entries(t)) {
      const path = `${key}[${i}].${k}`;
      if (k === "functionDeclarations") {
        for (const [j, d] of arr(value).entries()) {
          if (!isObject(d) || typeof d.name !== "string")
            return invalidRequest(`${path}[${j}].name is required`, `${path}[${j}].name`);
          const f: ChatTool["function"] = { name: d.name };
          const desc = str(d.description);
          if (desc !== undefined) f.description = desc;
          const params = isObject(d.parametersJsonSchema)
            ? d.parametersJsonSchema
            : isObject(d.parameters)
              ? (jsonSchemaOfOpenApi(d.parameters) as Obj)
              : undefined;
          if (params !== undefined) f.parameters = params;
          // A declared result schema (`response`) or `behavior` has no chat form; neither changes what is asked.
          tools.push({ type: "function", function: f });
        }
      } else if (k === "googleSearch" || k === "google_search") {
        // The same server tool where the target has it (OpenAI's search, Responses' web_search); else refused there.
        r.out.web_search_options = {};
      } else {
        return invalidRequest(`${path}: this tool is not available from this provider`, path);
      }
    }
  }
  if (tools.length > 0) r.out.tools = tools;
  return undefined;
}

function readToolConfig(v: unknown, r: Reading, key: string): LlmError | undefined {
  if (!isObject(v)) return invalidRequest(`${key}: an object is expected`, key);
  for (const k of Object.keys(v)) {
    if (k !== "functionCallingConfig")
      return invalidRequest(`${key}.${k}: not available from this provider`, `${key}.${k}`);
  }
  const fc = isObject(v.functionCallingConfig) ? v.functionCallingConfig : {};
  const names = arr(fc.allowedFunctionNames).filter((n): n is string => typeof n === "string");
  switch (fc.mode ?? "AUTO") {
    case "AUTO":
    case "MODE_UNSPECIFIED":
      r.out.tool_choice = "auto";
      break;
    case "NONE":
      r.out.tool_choice = "none";
      break;
    case "ANY":
      if (names.length === 1 && names[0] !== undefined)
        r.out.tool_choice = { type: "function", function: { name: names[0] } };
      else {
        r.out.tool_choice = "required";
        if (names.length > 1) r.allowed = names;
      }
      break;
    default:
      return invalidRequest(
        `${key}.functionCallingConfig.mode: ${String(fc.mode)} is not available from this provider`,
        `${key}.functionCallingConfig.mode`,
      );
  }
  return undefined;
}

function readResponseFormat(g: Obj, r: Reading): LlmError | undefined {
  const mime = str(g.responseMimeType);
  const schema = isObject(g.responseJsonSchema)
    ? g.responseJsonSchema
    : isObject(g.responseSchema)
      ? (jsonSchemaOfOpenApi(g.responseSchema) as Obj)
      : undefined;
  if (mime === undefined || mime === "text/plain") {
    if (schema !== undefined)
      return invalidRequest(
        "generationConfig.responseMimeType: a response schema needs application/json",
        "generationConfig.responseMimeType",
      );
    return undefined;
  }
  if (mime !== "application/json")
    return invalidRequest(
      `generationConfig.responseMimeType: ${mime} is not available from this provider`,
      "generationConfig.responseMimeType",
    );
  r.out.response_format =
    schema === undefined
      ? { type: "json_object" }
      : { type: "json_schema", json_schema: { name: "response", schema, strict: true } };
  return undefined;
}

const LEVELS = new Set(["minimal", "low", "medium", "high"]);

function readThinking(v: unknown, r: Reading, key: string): LlmError | undefined {
  if (!isObject(v)) return invalidRequest(`${key}: an object is expected`, key);
  const level = str(v.thinkingLevel)?.toLowerCase();
  const budget = num(v.thinkingBudget);
  if (level !== undefined && budget !== undefined)
    return invalidRequest(`${key}: thinkingLevel and thinkingBudget cannot both be set`, key);
  if (level !== undefined && level !== "thinking_level_unspecified") {
    if (!LEVELS.has(level))
      return invalidRequest(`${key}.thinkingLevel: ${level} is not a level`, `${key}.thinkingLevel`);
    r.out.reasoning_effort = level;
  } else if (budget === 0) r.out.reasoning_effort = "none";
  // -1 asks Gemini to pick its own budget: the provider's default applies.
  else if (budget !== undefined && budget > 0) r.out.reasoning_effort = effortOfBudget(budget);
  return undefined;
}

function readModalities(v: unknown, _r: Reading, key: string): LlmError | undefined {
  const m = arr(v);
  return m.every((x) => x === "TEXT")
    ? undefined
    : invalidRequest(`${key}: only TEXT output is available from this provider`, key);
}

/** The content, parts and history rules are in readContents; the table names what they become. */
export const GEMINI_FIELDS: readonly GeminiFieldRow[] = [
  {
    field: "`contents` (`role` `user`, `model`)",
    keys: ["contents"],
    chat: "`messages` with role `user`, `assistant` (parts below); another role is refused, as Gemini refuses it",
  },
  {
    field: "`contents[].parts[].text`",
    keys: [],
    chat: "text content; a `thought: true` part (a model's reasoning sent back) is left out: its signature is Gemini's",
  },
  {
    field: "`contents[].parts[].inlineData`",
    keys: [],
    chat: "an image (`image/*`) → `image_url` with a data URL; other media types → a `file` part (data URL), which each provider reads as its documents (table above)",
  },
  {
    field: "`contents[].parts[].functionCall`",
    keys: [],
    chat: "the assistant's `tool_calls` (`args` as JSON text, `id` kept, else `call_<n>`; a `thoughtSignature` → `extra_content.google.thought_signature`)",
  },
  {
    field: "`contents[].parts[].functionResponse`",
    keys: [],
    chat: "a `tool` message answering the call of the same `id`, else the earliest unanswered call of that `name`; `response` as JSON text",
  },
  {
    field: "`contents[].parts[].fileData`, `executableCode`, `codeExecutionResult`, `videoMetadata`",
    keys: [],
    chat: "refused, naming the part (a Files API URI or a Gemini tool's output no other provider reads)",
  },
  {
    field: "`systemInstruction`",
    keys: ["systemInstruction"],
    chat: "a `system` message (its parts' text)",
  },
  {
    field: "`tools[].functionDeclarations`",
    keys: ["tools"],
    chat: "`tools` (`function`; `parametersJsonSchema` as it is, `parameters` with its OpenAPI types lower-cased)",
    read: readTools,
  },
  {
    field: "`tools[].googleSearch`",
    keys: [],
    chat: "`web_search_options` (OpenAI's search, Responses' `web_search`; refused by Messages and Converse, naming it)",
  },
  {
    field: "other `tools[]` (`codeExecution`, `urlContext`, `fileSearch`, `googleMaps` ...)",
    keys: [],
    chat: "refused, naming the tool",
  },
  {
    field: "`toolConfig.functionCallingConfig`",
    keys: ["toolConfig"],
    chat: "`tool_choice`: `AUTO` → `auto`, `NONE` → `none`, `ANY` → `required` (one `allowedFunctionNames` → that function; several → only those tools are sent); `VALIDATED` refused",
    read: readToolConfig,
  },
  {
    field: "`generationConfig.temperature`, `topP`",
    keys: ["generationConfig.temperature", "generationConfig.topP"],
    chat: "`temperature`, `top_p`",
    read: (v, r, key) => setNumber(key.endsWith("topP") ? "top_p" : "temperature")(v, r, key),
  },
  {
    field: "`generationConfig.topK`",
    keys: ["generationConfig.topK"],
    chat: "`top_k` (OpenAI-compatible servers take it, OpenAI refuses it); to Messages `top_k`, to Converse `additionalModelRequestFields.top_k`; refused for Responses",
    read: setNumber("top_k"),
  },
  {
    field: "`generationConfig.maxOutputTokens`",
    keys: ["generationConfig.maxOutputTokens"],
    chat: "`max_completion_tokens`",
    read: setNumber("max_completion_tokens"),
  },
  {
    field: "`generationConfig.stopSequences`",
    keys: ["generationConfig.stopSequences"],
    chat: "`stop`",
    read: (v, r) => {
      const s = arr(v).filter((x): x is string => typeof x === "string");
      if (s.length > 0) r.out.stop = s;
      return undefined;
    },
  },
  {
    field: "`generationConfig.candidateCount`",
    keys: ["generationConfig.candidateCount"],
    chat: "`n` (each choice a candidate)",
    read: setNumber("n"),
  },
  {
    field: "`generationConfig.seed`, `presencePenalty`, `frequencyPenalty`",
    keys: ["generationConfig.seed", "generationConfig.presencePenalty", "generationConfig.frequencyPenalty"],
    chat: "`seed`, `presence_penalty`, `frequency_penalty`",
    read: (v, r, key) =>
      setNumber(
        key.endsWith("seed") ? "seed" : key.endsWith("presencePenalty") ? "presence_penalty" : "frequency_penalty",
      )(v, r, key),
  },
  {
    field: "`generationConfig.responseMimeType`, `responseJsonSchema`, `responseSchema`",
    keys: [
      "generationConfig.responseMimeType",
      "generationConfig.responseJsonSchema",
      "generationConfig.responseSchema",
    ],
    chat: "`application/json` with a schema → `response_format` `json_schema` (strict, named `response`; `responseSchema`'s OpenAPI types lower-cased), without → `json_object`; `text/plain` → nothing; other types refused",
  },
  {
    field: "`generationConfig.responseLogprobs`, `logprobs`",
    keys: ["generationConfig.responseLogprobs", "generationConfig.logprobs"],
    chat: "`logprobs`, `top_logprobs`; the answer's `logprobs.content` → `logprobsResult`",
    read: (v, r, key) => {
      if (key.endsWith("responseLogprobs")) {
        if (v === true) r.out.logprobs = true;
        return undefined;
      }
      return setNumber("top_logprobs")(v, r, key);
    },
  },
  {
    field: "`generationConfig.thinkingConfig`",
    keys: ["generationConfig.thinkingConfig"],
    chat: "`reasoning_effort`: `thinkingLevel` as it is, `thinkingBudget` 0 → `none`, else the budget's band (reasoning table below); -1 (dynamic) sends nothing; `includeThoughts` ignored (a provider's reasoning always comes back as `thought` parts)",
    read: readThinking,
  },
  {
    field: "`generationConfig.responseModalities`",
    keys: ["generationConfig.responseModalities"],
    chat: "refused unless `TEXT` only",
    read: readModalities,
  },
  {
    field: "`generationConfig.mediaResolution`",
    keys: ["generationConfig.mediaResolution"],
    chat: "ignored (how Gemini tokenizes media; other providers have their own)",
  },
  {
    field: "`generationConfig.speechConfig`, `imageConfig`, `audioTimestamp`, `enableAffectiveDialog`, `routingConfig`",
    keys: [
      "generationConfig.speechConfig",
      "generationConfig.imageConfig",
      "generationConfig.audioTimestamp",
      "generationConfig.enableAffectiveDialog",
      "generationConfig.routingConfig",
    ],
    chat: "refused (Gemini's audio, image and model routing settings)",
    read: refuse("not available from this provider"),
  },
  {
    field: "`safetySettings`",
    keys: ["safetySettings"],
    chat: "ignored (each provider applies its own safety filters; a block comes back as `finishReason: SAFETY`)",
  },
  {
    field: "`cachedContent`",
    keys: ["cachedContent"],
    chat: "refused (a Gemini context cache no other provider holds)",
    read: refuse("a Gemini context cache is not available from this provider"),
  },
  {
    field: "`labels`",
    keys: ["labels"],
    chat: "ignored (Vertex AI billing labels)",
  },
];

const ROWS = new Map<string, GeminiFieldRow>(GEMINI_FIELDS.flatMap((r) => r.keys.map((k) => [k, r] as const)));

/** The table as docs/llm.md shows it. */
export function geminiFieldsMarkdown(): string {
  const lines = [
    "| generateContent field | to chat completions providers (and through them Messages, Converse, Responses) |",
    "|---|---|",
    ...GEMINI_FIELDS.map((r) => `| ${r.field} | ${r.chat} |`),
  ];
  return `${lines.join("\n")}\n`;
}

const unknownName = (key: string): LlmError =>
  invalidRequest(`Invalid JSON payload received. Unknown name "${key.split(".").pop() ?? key}" at '${key}'`, key);

function textOfParts(c: unknown): string {
  return arr(isObject(c) ? c.parts : undefined)
    .map((p) => (isObject(p) ? (str(p.text) ?? "") : ""))
    .filter((t) => t !== "")
    .join("\n");
}

/** `contents` → chat messages; a function response answers the call of its id, else the earliest open one of its name. */
function readContents(contents: unknown): ChatMessage[] | LlmError {
  const messages: ChatMessage[] = [];
  const open: { id: string; name: string }[] = [];
  let calls = 0;
  for (const [i, c] of arr(contents).entries()) {
    const at = `contents[${i}]`;
    if (!isObject(c)) return invalidRequest(`${at}: an object is expected`, at);
    const role = c.role ?? "user";
    if (role !== "user" && role !== "model")
      return invalidRequest(`${at}.role: Please use a valid role: user, model.`, `${at}.role`);
    const parts: ChatContentPart[] = [];
    const toolCalls: ChatToolCall[] = [];
    let text = "";
    for (const [j, p] of arr(c.parts).entries()) {
      const pat = `${at}.parts[${j}]`;
      if (!isObject(p)) return invalidRequest(`${pat}: an object is expected`, pat);
      if (typeof p.text === "string") {
        if (p.thought === true) continue;
        parts.push({ type: "text", text: p.text });
        text += p.text;
      } else if (isObject(p.inlineData)) {
        const mime = str(p.inlineData.mimeType) ?? "application/octet-stream";
        const url = `data:${mime};base64,${str(p.inlineData.data) ?? ""}`;
        parts.push(
          mime.startsWith("image/")
            ? { type: "image_url", image_url: { url } }
            : { type: "file", file: { file_data: url, filename: str(p.inlineData.displayName) ?? fileName(mime, j) } },
        );
      } else if (isObject(p.functionCall)) {
        if (role !== "model")
          return invalidRequest(`${pat}.functionCall: only a model turn calls functions`, `${pat}.functionCall`);
        const name = str(p.functionCall.name) ?? "";
        const id = str(p.functionCall.id) ?? `call_${calls}`;
        calls++;
        const call: ChatToolCall = {
          id,
          type: "function",
          function: { name, arguments: JSON.stringify(isObject(p.functionCall.args) ? p.functionCall.args : {}) },
        };
        const sig = str(p.thoughtSignature);
        if (sig !== undefined) call.extra_content = { google: { thought_signature: sig } };
        toolCalls.push(call);
        open.push({ id, name });
      } else if (isObject(p.functionResponse)) {
        const name = str(p.functionResponse.name) ?? "";
        const wanted = str(p.functionResponse.id);
        const k = open.findIndex((o) => (wanted !== undefined ? o.id === wanted : o.name === name));
        if (k < 0)
          return invalidRequest(
            `${pat}.functionResponse: no earlier functionCall ${wanted !== undefined ? `with id ${wanted}` : `named ${name}`} to answer`,
            `${pat}.functionResponse`,
          );
        const [call] = open.splice(k, 1);
        const response = p.functionResponse.response;
        messages.push({
          role: "tool",
          tool_call_id: call?.id ?? "",
          content: typeof response === "string" ? response : JSON.stringify(response ?? {}),
        });
      } else {
        const kind = Object.keys(p).find((k) => k !== "thoughtSignature" && k !== "thought") ?? "part";
        return invalidRequest(`${pat}.${kind}: this part is not available from this provider`, `${pat}.${kind}`);
      }
    }
    if (role === "model") {
      if (text === "" && toolCalls.length === 0) continue;
      const m: ChatMessage = { role: "assistant", content: text === "" ? null : text };
      if (toolCalls.length > 0) m.tool_calls = toolCalls;
      messages.push(m);
    } else if (parts.length > 0) {
      const onlyText = parts.every((p) => p.type === "text");
      messages.push({ role: "user", content: onlyText ? text : parts });
    }
  }
  return messages;
}

const EXT: Record<string, string> = {
  "application/pdf": "pdf",
  "text/plain": "txt",
  "text/csv": "csv",
  "text/html": "html",
  "text/markdown": "md",
};
const fileName = (mime: string, j: number): string => `document-${j + 1}.${EXT[mime] ?? "bin"}`;

/** A generateContent client's request as chat completions. */
export function geminiClientToChatRequest(body: unknown, providerModel: string | undefined): RequestResult {
  if (!isObject(body))
    return {
      ok: false,
      error: { status: 400, kind: "invalid_request", message: "request body must be a JSON object" },
    };
  const model = providerModel ?? str(body.model);
  if (model === undefined || model === "")
    return { ok: false, error: invalidRequest("the request names no model (models/{model} in the path)", "model") };
  const stream = body.stream === true;
  const r: Reading = { out: { model, messages: [] } };
  for (const [k, v] of Object.entries(body)) {
    if (k === "model" || k === "stream" || v === undefined || v === null) continue;
    if (k === "generationConfig") {
      if (!isObject(v)) return { ok: false, error: invalidRequest("generationConfig: an object is expected", k) };
      for (const [gk, gv] of Object.entries(v)) {
        if (gv === undefined || gv === null) continue;
        const key = `generationConfig.${gk}`;
        const row = ROWS.get(key);
        if (row === undefined) return { ok: false, error: unknownName(key) };
        const e = row.read?.(gv, r, key);
        if (e !== undefined) return { ok: false, error: e };
      }
      const so = readResponseFormat(v, r);
      if (so !== undefined) return { ok: false, error: so };
      continue;
    }
    const row = ROWS.get(k);
    if (row === undefined) return { ok: false, error: unknownName(k) };
    const e = row.read?.(v, r, k);
    if (e !== undefined) return { ok: false, error: e };
  }
  const messages = readContents(body.contents);
  if (!Array.isArray(messages)) return { ok: false, error: messages };
  const system = textOfParts(body.systemInstruction);
  r.out.messages = system === "" ? messages : [{ role: "system", content: system }, ...messages];
  if (r.allowed !== undefined && r.out.tools !== undefined) {
    const allowed = r.allowed;
    r.out.tools = r.out.tools.filter((t) => allowed.includes(t.function.name));
  }
  if (stream) {
    r.out.stream = true;
    // Gemini ends a stream with its usage; a chat-completions upstream sends it only when asked.
    r.out.stream_options = { include_usage: true };
  }
  const meta: RequestMeta = { model, stream, includeUsage: stream };
  const n = num(r.out.n);
  if (n !== undefined && n > 1) meta.choices = n;
  return { ok: true, body: r.out as unknown as JsonObject, meta };
}

/** The body a generateContent provider gets from a generateContent client: the client's, without Sluice's fields. */
export function geminiPassthroughRequest(body: unknown, providerModel: string | undefined): RequestResult {
  if (!isObject(body))
    return {
      ok: false,
      error: { status: 400, kind: "invalid_request", message: "request body must be a JSON object" },
    };
  const { model: asked, stream: s, ...rest } = body;
  const model = providerModel ?? str(asked);
  if (model === undefined || model === "")
    return { ok: false, error: invalidRequest("the request names no model (models/{model} in the path)", "model") };
  const stream = s === true;
  const meta: RequestMeta = { model, stream, includeUsage: stream };
  const gc = isObject(rest.generationConfig) ? rest.generationConfig : {};
  const n = num(gc.candidateCount);
  if (n !== undefined && n > 1) meta.choices = n;
  return { ok: true, body: rest as JsonObject, meta };
}
