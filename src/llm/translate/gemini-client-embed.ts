// A generateContent client's embeddings (`models/{model}:embedContent`, `:batchEmbedContents`; Google's SDKs use the
// batch form) to the OpenAI embeddings API, Vertex AI's predict and Bedrock's Titan, through the OpenAI embeddings
// form, and the answers back as Google's (`{embedding: {values}}`, `{embeddings: [{values}]}`). To Gemini both go as
// the client wrote them (gemini-client-directions.ts). The field table is EMBED_FIELDS (docs/llm.md).

import { invalidRequest, type LlmError } from "../errors.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import { usageFromChat } from "../usage.js";
import type { RequestMeta, RequestResult, ResponseResult } from "./context.js";

/** One content to embed, as read from the client's request (`requests[i]` of a batch, or the request itself). */
interface EmbedInput {
  readonly text: string;
  readonly taskType?: string;
  readonly title?: string;
  readonly dimensions?: number;
}

/** How each field of an embedContent request reaches the providers (docs/llm.md keeps this table). */
export const EMBED_FIELDS: readonly (readonly [field: string, openai: string, vertex: string, titan: string])[] = [
  [
    "`content.parts[].text`",
    "one `input` string per content (its parts' texts joined by a new line)",
    "`instances[].content`",
    "`inputText` (one content per call: a batch of more is refused)",
  ],
  [
    "`content.parts[]` other than text (`inlineData`, `fileData` ...)",
    "refused, naming the part",
    "refused, naming the part",
    "refused, naming the part",
  ],
  [
    "`outputDimensionality`",
    "`dimensions` (one value for the whole batch: different ones are refused)",
    "`parameters.outputDimensionality`",
    "`dimensions`",
  ],
  [
    "`taskType`",
    "ignored (OpenAI's embedding models have no task types)",
    "`instances[].task_type`",
    "ignored (Titan has no task types)",
  ],
  ["`title`", "ignored (no such field)", "`instances[].title`", "ignored (no such field)"],
  [
    "`requests[].model`",
    "the model of the URL is asked for (Gemini refuses a request naming another)",
    "the same",
    "the same",
  ],
];

/** EMBED_FIELDS as docs/llm.md shows it (test/unit/llm-gemini-embed.test.ts keeps them equal). */
export function embedMarkdown(): string {
  const lines = [
    "| embedContent field | OpenAI embeddings (OpenAI-compatible, Azure, custom) | Vertex AI predict | Bedrock Titan |",
    "|---|---|---|---|",
    ...EMBED_FIELDS.map((r) => `| ${r.join(" | ")} |`),
  ];
  return `${lines.join("\n")}\n`;
}

function fail(e: LlmError): RequestResult {
  return { ok: false, error: e };
}

/** One content of the request at `at` (`requests[2]` or `` for embedContent's own). */
function readInput(v: unknown, at: string): EmbedInput | LlmError {
  const p = (field: string) => (at === "" ? field : `${at}.${field}`);
  if (!isObject(v)) return invalidRequest(`${at || "request"}: must be an object`, at || undefined);
  const content = v.content;
  if (!isObject(content) || !Array.isArray(content.parts) || content.parts.length === 0)
    return invalidRequest(`${p("content.parts")}: at least one part is required`, p("content.parts"));
  const texts: string[] = [];
  for (const [i, part] of content.parts.entries()) {
    const text = isObject(part) ? str(part.text) : undefined;
    if (text === undefined) {
      const field = p(`content.parts[${i}]`);
      return invalidRequest(`${field}: only text parts can be embedded by this provider`, field);
    }
    texts.push(text);
  }
  const out: { -readonly [K in keyof EmbedInput]: EmbedInput[K] } = { text: texts.join("\n") };
  const taskType = str(v.taskType);
  if (taskType !== undefined) out.taskType = taskType;
  const title = str(v.title);
  if (title !== undefined) out.title = title;
  const dims = num(v.outputDimensionality);
  if (dims !== undefined) out.dimensions = dims;
  return out;
}

/** The contents of an embedContent (`batch` false) or batchEmbedContents request. */
function readInputs(body: unknown, batch: boolean): EmbedInput[] | LlmError {
  if (!isObject(body)) return invalidRequest("request body must be a JSON object");
  if (!batch) {
    const one = readInput(body, "");
    return "kind" in one ? one : [one];
  }
  if (!Array.isArray(body.requests) || body.requests.length === 0)
    return invalidRequest("requests: at least one request is required", "requests");
  const out: EmbedInput[] = [];
  for (const [i, r] of body.requests.entries()) {
    const one = readInput(r, `requests[${i}]`);
    if ("kind" in one) return one;
    out.push(one);
  }
  return out;
}

function modelOf(body: unknown, providerModel: string | undefined): string | LlmError {
  const asked = providerModel ?? (isObject(body) ? str(body.model) : undefined);
  if (asked === undefined || asked === "")
    return invalidRequest("the request names no model (models/{model} in the path)", "model");
  return asked.replace(/^models\//, "");
}

/**
 * The OpenAI embeddings body of a Google client's request: `input` one string per content, `dimensions` from
 * `outputDimensionality` (one for the whole batch). The contents' task types and titles come along for Vertex AI.
 */
function toEmbeddings(
  body: unknown,
  providerModel: string | undefined,
  batch: boolean,
): { readonly body: JsonObject; readonly inputs: EmbedInput[]; readonly meta: RequestMeta } | LlmError {
  const model = modelOf(body, providerModel);
  if (typeof model !== "string") return model;
  const inputs = readInputs(body, batch);
  if ("kind" in inputs) return inputs;
  const dims = inputs[0]?.dimensions;
  const other = inputs.findIndex((x) => x.dimensions !== dims);
  if (other >= 0) {
    const field = `requests[${other}].outputDimensionality`;
    return invalidRequest(`${field}: every request of a batch must ask for the same dimensionality here`, field);
  }
  const out: JsonObject = { model, input: inputs.map((x) => x.text), encoding_format: "float" };
  if (dims !== undefined) out.dimensions = dims;
  return { body: out, inputs, meta: { model, stream: false, includeUsage: false } };
}

export function embedToOpenAiRequest(body: unknown, providerModel: string | undefined, batch: boolean): RequestResult {
  const r = toEmbeddings(body, providerModel, batch);
  return "kind" in r ? fail(r) : { ok: true, body: r.body, meta: r.meta };
}

/** Vertex AI's predict: an instance per content, with its task type and title (Vertex's text embedding models read them). */
export function embedToVertexRequest(body: unknown, providerModel: string | undefined, batch: boolean): RequestResult {
  const r = toEmbeddings(body, providerModel, batch);
  if ("kind" in r) return fail(r);
  const instances = r.inputs.map((x) => {
    const i: JsonObject = { content: x.text };
    if (x.taskType !== undefined) i.task_type = x.taskType;
    if (x.title !== undefined) i.title = x.title;
    return i;
  });
  const out: JsonObject = { instances };
  const dims = r.inputs[0]?.dimensions;
  if (dims !== undefined) out.parameters = { outputDimensionality: dims };
  return { ok: true, body: out, meta: r.meta };
}

/** Bedrock's Titan text embeddings: one content per call. */
export function embedToTitanRequest(body: unknown, providerModel: string | undefined, batch: boolean): RequestResult {
  const r = toEmbeddings(body, providerModel, batch);
  if ("kind" in r) return fail(r);
  const [only, ...more] = r.inputs;
  if (only === undefined || more.length > 0)
    return fail(invalidRequest("requests: this provider embeds one content per request", "requests"));
  const out: JsonObject = { inputText: only.text };
  if (only.dimensions !== undefined) out.dimensions = only.dimensions;
  return { ok: true, body: out, meta: r.meta };
}

const malformed = (what: string): ResponseResult => ({
  ok: false,
  error: { status: 502, kind: "server", message: `malformed ${what} response from upstream` },
});

const floats = (v: unknown): number[] => arr(v).filter((x): x is number => typeof x === "number");

/** Google's answer: `{embedding: {values}}` for embedContent, `{embeddings: [{values}]}` for a batch. */
function googleAnswer(vectors: number[][], batch: boolean): JsonObject {
  return batch ? { embeddings: vectors.map((values) => ({ values })) } : { embedding: { values: vectors[0] ?? [] } };
}

/** OpenAI's `data[].embedding` (floats, as asked) in `index` order; `usage.prompt_tokens` is the request's usage. */
export function openAiToEmbedResponse(body: unknown, batch: boolean): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.data)) return malformed("embeddings");
  const data = body.data.filter(isObject);
  data.sort((a, b) => (num(a.index) ?? 0) - (num(b.index) ?? 0));
  const out = googleAnswer(
    data.map((d) => floats(d.embedding)),
    batch,
  );
  const usage = usageFromChat(body.usage);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}

/** Vertex AI's `predictions[i].embeddings.values`; each prediction's `statistics.token_count` adds up to the usage. */
export function vertexToEmbedResponse(body: unknown, batch: boolean): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.predictions)) return malformed("Vertex AI predict");
  let tokens = 0;
  const vectors = body.predictions.map((p) => {
    const e = isObject(p) && isObject(p.embeddings) ? p.embeddings : {};
    tokens += (isObject(e.statistics) ? num(e.statistics.token_count) : undefined) ?? 0;
    return floats(e.values);
  });
  const usage = usageFromChat({ prompt_tokens: tokens, total_tokens: tokens });
  const out = googleAnswer(vectors, batch);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}

/** Titan's `embedding`, `inputTextTokenCount` the usage. */
export function titanToEmbedResponse(body: unknown, batch: boolean): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.embedding)) return malformed("Titan embeddings");
  const tokens = num(body.inputTextTokenCount) ?? 0;
  const usage = usageFromChat({ prompt_tokens: tokens, total_tokens: tokens });
  const out = googleAnswer([floats(body.embedding)], batch);
  return usage === undefined ? { ok: true, body: out } : { ok: true, body: out, usage };
}
