// Rerank clients (the Cohere v2 shape, POST /v2/rerank) → the rerank APIs of the cloud providers:
// - Bedrock's agent runtime `Rerank` (POST /rerank on bedrock-agent-runtime.{region}.amazonaws.com): one TEXT query,
//   INLINE sources (TEXT, or JSON for a document object), the model as a foundation-model ARN; results are
//   `{index, relevanceScore}`, best first.
// - Google's ranking API (Discovery Engine `rankingConfigs.rank`, POST
//   /v1/projects/{p}/locations/{l}/rankingConfigs/default_ranking_config:rank on discoveryengine.googleapis.com):
//   records with an id and content (at most 200), `topN`; the answer is the records by score, best first, each with
//   its id, which Sluice set to the document's index.
import { invalidRequest, type LlmError } from "../errors.js";
import { arr, isObject, type JsonObject, num, str } from "../json.js";
import type { RequestMeta, RequestResult, ResponseResult, TranslateContext } from "./context.js";

interface RerankInput {
  model: string;
  query: string;
  documents: (string | JsonObject)[];
  topN?: number;
  maxTokensPerDoc?: number;
  returnDocuments: boolean;
}

/** What each client field becomes (docs/llm.md shows `rerankMarkdown()`). */
export const RERANK_FIELDS: readonly { field: string; bedrock: string; vertex: string }[] = [
  {
    field: "`model`",
    bedrock:
      "`rerankingConfiguration.bedrockRerankingConfiguration.modelConfiguration.modelArn` (`arn:aws:bedrock:{region}::foundation-model/{model}`; an ARN as it is)",
    vertex: "`model` (e.g. `semantic-ranker-default@latest`)",
  },
  {
    field: "`query`",
    bedrock: "`queries: [{type: TEXT, textQuery: {text}}]`",
    vertex: "`query`",
  },
  {
    field: "`documents[]` (strings, or objects)",
    bedrock:
      "`sources[]`: `{type: INLINE, inlineDocumentSource: {type: TEXT, textDocument: {text}}}`, an object other than `{text}` as `{type: JSON, jsonDocument}`",
    vertex:
      "`records[]`: `{id: <index>, content}` (an object's `text`; `title` kept); more than 200 refused (the API's limit)",
  },
  {
    field: "`top_n`",
    bedrock: "`numberOfResults`",
    vertex: "`topN`",
  },
  {
    field: "`max_tokens_per_doc`",
    bedrock: "`modelConfiguration.additionalModelRequestFields.max_tokens_per_doc` (Cohere's models read it)",
    vertex: "refused unless absent (the ranker truncates records itself)",
  },
  {
    field: "`return_documents` (v1)",
    bedrock: "each result's `document` (`{text}`) from the request",
    vertex: "the same",
  },
  {
    field: "answer",
    bedrock:
      "`results[]` `{index, relevanceScore}` → `{index, relevance_score}`, the provider's order; no token counts",
    vertex: "`records[]` `{id, score}` → `{index: id, relevance_score: score}`, the provider's order; no token counts",
  },
];

export function rerankMarkdown(): string {
  const lines = [
    "| rerank field | Bedrock `Rerank` | Google ranking API |",
    "|---|---|---|",
    ...RERANK_FIELDS.map((r) => `| ${r.field} | ${r.bedrock} | ${r.vertex} |`),
  ];
  return `${lines.join("\n")}\n`;
}

const KNOWN = new Set(["model", "query", "documents", "top_n", "max_tokens_per_doc", "return_documents"]);

function readRerank(body: unknown, providerModel: string | undefined): RerankInput | LlmError {
  if (!isObject(body)) return invalidRequest("request body must be a JSON object");
  for (const k of Object.keys(body))
    if (!KNOWN.has(k)) return invalidRequest(`${k} is not supported by this provider`, k);
  const model = providerModel ?? str(body.model);
  if (model === undefined || model === "") return invalidRequest("model is required", "model");
  const query = str(body.query);
  if (query === undefined || query === "") return invalidRequest("query is required", "query");
  const docs = arr(body.documents);
  if (docs.length === 0) return invalidRequest("documents must hold at least one document", "documents");
  const documents: (string | JsonObject)[] = [];
  for (const [i, d] of docs.entries()) {
    if (typeof d === "string") documents.push(d);
    else if (isObject(d)) documents.push(d as JsonObject);
    else return invalidRequest(`documents[${i}] must be a string or an object`, `documents[${i}]`);
  }
  const out: RerankInput = { model, query, documents, returnDocuments: body.return_documents === true };
  const top = num(body.top_n);
  if (top !== undefined) {
    if (!Number.isInteger(top) || top < 1) return invalidRequest("top_n must be a positive integer", "top_n");
    out.topN = top;
  }
  const mt = num(body.max_tokens_per_doc);
  if (mt !== undefined) out.maxTokensPerDoc = mt;
  return out;
}

const textOf = (d: string | JsonObject): string | undefined => (typeof d === "string" ? d : str(d.text));

/** What the answer needs of the request: how many documents, and them when the client wants them back. */
export interface RerankMeta extends RequestMeta {
  documents?: readonly (string | JsonObject)[];
}

function metaOf(r: RerankInput): RerankMeta {
  return {
    model: r.model,
    stream: false,
    includeUsage: false,
    ...(r.returnDocuments ? { documents: r.documents } : {}),
  };
}

/** The model arrives as an ARN (the ext_proc makes it one with the provider's region). */
export function rerankToBedrockRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readRerank(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  if (!r.model.startsWith("arn:"))
    return {
      ok: false,
      error: invalidRequest("the model must be a foundation model ARN for Bedrock's Rerank", "model"),
    };
  const modelConfiguration: JsonObject = { modelArn: r.model };
  if (r.maxTokensPerDoc !== undefined)
    modelConfiguration.additionalModelRequestFields = { max_tokens_per_doc: r.maxTokensPerDoc };
  const cfg: JsonObject = { modelConfiguration };
  // Bedrock refuses more results than sources; the client's top_n above the count means all of them.
  if (r.topN !== undefined) cfg.numberOfResults = Math.min(r.topN, r.documents.length);
  const out: JsonObject = {
    queries: [{ type: "TEXT", textQuery: { text: r.query } }],
    sources: r.documents.map((d) => {
      const text = textOf(d);
      const doc: JsonObject =
        text !== undefined && (typeof d === "string" || Object.keys(d).length === 1)
          ? { type: "TEXT", textDocument: { text } }
          : { type: "JSON", jsonDocument: d };
      return { type: "INLINE", inlineDocumentSource: doc };
    }),
    rerankingConfiguration: { type: "BEDROCK_RERANKING_MODEL", bedrockRerankingConfiguration: cfg },
  };
  return { ok: true, body: out, meta: metaOf(r) };
}

export function rerankToVertexRequest(body: unknown, providerModel: string | undefined): RequestResult {
  const r = readRerank(body, providerModel);
  if ("kind" in r) return { ok: false, error: r };
  if (r.maxTokensPerDoc !== undefined)
    return {
      ok: false,
      error: invalidRequest("max_tokens_per_doc is not supported by this provider", "max_tokens_per_doc"),
    };
  if (r.documents.length > 200)
    return { ok: false, error: invalidRequest("this provider ranks at most 200 documents", "documents") };
  const records: JsonObject[] = [];
  for (const [i, d] of r.documents.entries()) {
    const content = textOf(d);
    const title = typeof d === "string" ? undefined : str(d.title);
    if (content === undefined && title === undefined)
      return { ok: false, error: invalidRequest(`documents[${i}] needs a text`, `documents[${i}]`) };
    records.push({
      id: String(i),
      ...(title !== undefined ? { title } : {}),
      ...(content !== undefined ? { content } : {}),
    });
  }
  const out: JsonObject = { model: r.model, query: r.query, records, ignoreRecordDetailsInResponse: true };
  if (r.topN !== undefined) out.topN = r.topN;
  return { ok: true, body: out, meta: metaOf(r) };
}

function answer(results: JsonObject[], meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  const docs = (meta as RerankMeta).documents;
  if (docs !== undefined) {
    for (const x of results) {
      const d = docs[x.index as number];
      if (d !== undefined) x.document = typeof d === "string" ? { text: d } : d;
    }
  }
  return { ok: true, body: { id: ctx.id("rerank-"), results } };
}

const malformed: ResponseResult = {
  ok: false,
  error: { status: 502, kind: "server", message: "malformed rerank response from upstream" },
};

export function bedrockToRerankResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  if (!isObject(body) || !Array.isArray(body.results)) return malformed;
  const results: JsonObject[] = [];
  for (const x of body.results) {
    const index = isObject(x) ? num(x.index) : undefined;
    if (!isObject(x) || index === undefined) return malformed;
    results.push({ index, relevance_score: num(x.relevanceScore) ?? 0 });
  }
  return answer(results, meta, ctx);
}

export function vertexToRerankResponse(body: unknown, meta: RequestMeta, ctx: TranslateContext): ResponseResult {
  if (!isObject(body)) return malformed;
  const results: JsonObject[] = [];
  for (const x of arr(body.records)) {
    const index = isObject(x) ? Number(str(x.id)) : Number.NaN;
    if (!isObject(x) || !Number.isInteger(index)) return malformed;
    results.push({ index, relevance_score: num(x.score) ?? 0 });
  }
  return answer(results, meta, ctx);
}
