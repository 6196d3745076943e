// Structured output across formats. Each client format's way of asking for JSON is read into one neutral shape, and
// each provider format's way of constraining the answer is written from it:
//   chat `response_format`  ·  Responses `text.format` (through chat)  ·  Messages `output_config.format` (and the
//   beta's top-level `output_format`)  ·  generateContent `responseMimeType` + `responseJsonSchema`  ·  Converse
//   `outputConfig.textFormat` (its schema a JSON string).
// JSON mode without a schema (`json_object`) exists in chat and generateContent only: Messages and Converse take a
// schema or nothing, so there it becomes a system instruction (approximate: the answer is asked for, not enforced).
import { invalidRequest, type LlmError } from "../errors.js";
import { isObject, str } from "../json.js";

export type StructuredOutput =
  | { readonly mode: "json_object" }
  | {
      readonly mode: "json_schema";
      readonly name: string | undefined;
      readonly description: string | undefined;
      readonly schema: Record<string, unknown>;
      readonly strict: boolean | undefined;
    };

/** What a Messages or Converse request says in its system prompt for `json_object`, which it cannot enforce. */
export const JSON_OBJECT_INSTRUCTION = "Respond with a single valid JSON object and nothing else.";

/** A chat `response_format`: undefined for text (or absent), a 400 naming the field when malformed. */
export function readChatResponseFormat(rf: unknown): StructuredOutput | undefined | LlmError {
  if (rf === undefined || rf === null) return undefined;
  if (!isObject(rf)) return invalidRequest("response_format must be an object", "response_format");
  switch (rf.type) {
    case "text":
      return undefined;
    case "json_object":
      return { mode: "json_object" };
    case "json_schema": {
      const js = isObject(rf.json_schema) ? rf.json_schema : undefined;
      if (js === undefined || !isObject(js.schema))
        return invalidRequest(
          "response_format.json_schema.schema must be a JSON Schema object",
          "response_format.json_schema.schema",
        );
      return {
        mode: "json_schema",
        name: str(js.name),
        description: str(js.description),
        schema: js.schema,
        strict: typeof js.strict === "boolean" ? js.strict : undefined,
      };
    }
    default:
      return invalidRequest(
        `response_format.type must be text, json_object or json_schema, not ${String(rf.type)}`,
        "response_format.type",
      );
  }
}

/** A Messages request's `output_config.format` (GA) or `output_format` (the beta's name). */
export function readMessagesOutputFormat(req: Record<string, unknown>): StructuredOutput | undefined | LlmError {
  const oc = isObject(req.output_config) ? req.output_config : undefined;
  const [f, path] =
    oc?.format !== undefined && oc.format !== null
      ? [oc.format, "output_config.format"]
      : [req.output_format, "output_format"];
  if (f === undefined || f === null) return undefined;
  if (!isObject(f) || f.type !== "json_schema" || !isObject(f.schema))
    return invalidRequest(`${path}: Input should be {"type": "json_schema", "schema": {...}}`, path);
  return { mode: "json_schema", name: undefined, description: undefined, schema: f.schema, strict: true };
}

/** The chat `response_format` of a neutral structured output (Messages clients to chat providers). */
export function chatResponseFormat(so: StructuredOutput): Record<string, unknown> {
  if (so.mode === "json_object") return { type: "json_object" };
  const js: Record<string, unknown> = { name: so.name ?? "response", schema: so.schema };
  if (so.description !== undefined) js.description = so.description;
  // Anthropic's JSON outputs are always enforced, which is OpenAI's strict mode.
  js.strict = so.strict ?? true;
  return { type: "json_schema", json_schema: js };
}

/** Messages `output_config.format`; name, description and strict have no place there (Anthropic always enforces). */
export function messagesOutputFormat(so: StructuredOutput & { mode: "json_schema" }): Record<string, unknown> {
  return { type: "json_schema", schema: so.schema };
}

/** Converse `outputConfig.textFormat`: the schema goes as a JSON string. */
export function converseOutputConfig(so: StructuredOutput & { mode: "json_schema" }): Record<string, unknown> {
  const js: Record<string, unknown> = { schema: JSON.stringify(so.schema), name: converseSchemaName(so.name) };
  if (so.description !== undefined) js.description = so.description;
  return { textFormat: { type: "json_schema", structure: { jsonSchema: js } } };
}

/** The schema's name for Converse, kept to letters, digits, _ and - (as Bedrock's tool names are). */
function converseSchemaName(name: string | undefined): string {
  const n = (name ?? "").replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
  return n === "" ? "response" : n;
}

/** generateContent's fields: JSON mode is `responseMimeType`; `responseJsonSchema` takes full JSON Schema. */
export function geminiStructuredOutput(so: StructuredOutput): {
  responseMimeType: string;
  responseJsonSchema?: unknown;
} {
  return so.mode === "json_object"
    ? { responseMimeType: "application/json" }
    : { responseMimeType: "application/json", responseJsonSchema: so.schema };
}
