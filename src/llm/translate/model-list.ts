// Model lists between the three families' shapes (docs/llm.md, `Models`): OpenAI's `GET /v1/models` list object (no
// paging), Anthropic's `GET /v1/models` (`limit`, `after_id`, `before_id`; `has_more`, `first_id`, `last_id`) and
// Google's `GET /v1beta/models` (`pageSize`, `pageToken`; `nextPageToken`), and one model of each (`.../models/{id}`).
// A list is read into neutral entries, then written in the client's shape with the client's paging applied here: the
// provider is asked for its largest page (PROVIDER_PAGE), so Sluice holds the whole list up to that bound and pages it
// itself (a page token of Sluice's is the id of the last model shown).

import { invalidRequest, type LlmError } from "../errors.js";
import { isObject, type JsonObject, num, str } from "../json.js";

export type ModelListFamily = "openai" | "anthropic" | "gemini";

export interface ListedModel {
  /** The name a client asks for (Google's `models/` prefix taken off). */
  readonly id: string;
  readonly displayName?: string;
  /** Unix seconds (OpenAI `created`, Anthropic `created_at`); Google has no date. */
  readonly created?: number;
  readonly ownedBy?: string;
  readonly description?: string;
  readonly version?: string;
  readonly inputTokenLimit?: number;
  readonly outputTokenLimit?: number;
  /** Google's `supportedGenerationMethods`. */
  readonly methods?: readonly string[];
}

/** The query that asks a provider for its largest page: Anthropic's `limit` and Google's `pageSize` stop at 1000. */
export const PROVIDER_PAGE: Readonly<Record<ModelListFamily, string>> = {
  openai: "",
  anthropic: "limit=1000",
  gemini: "pageSize=1000",
};

/** Who a family's entries belong to, where its list does not say (OpenAI's `owned_by`). */
const OWNER: Readonly<Record<ModelListFamily, string>> = { openai: "openai", anthropic: "anthropic", gemini: "google" };

const EPOCH = "1970-01-01T00:00:00Z";

function rfc3339(seconds: number | undefined): string {
  return seconds === undefined ? EPOCH : new Date(seconds * 1000).toISOString().replace(/\.000Z$/, "Z");
}

function seconds(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = Date.parse(text);
  return Number.isNaN(t) ? undefined : Math.floor(t / 1000);
}

const malformed = (what: string): LlmError => ({
  status: 502,
  kind: "server",
  message: `malformed ${what} from upstream`,
});

/** One entry of a family's list (or its answer to a get); undefined when it has no name. */
function readEntry(family: ModelListFamily, v: unknown): ListedModel | undefined {
  if (!isObject(v)) return undefined;
  switch (family) {
    case "openai": {
      const id = str(v.id);
      if (id === undefined) return undefined;
      const created = num(v.created);
      return { id, ownedBy: str(v.owned_by) ?? OWNER.openai, ...(created !== undefined ? { created } : {}) };
    }
    case "anthropic": {
      const id = str(v.id);
      if (id === undefined) return undefined;
      const created = seconds(str(v.created_at));
      const displayName = str(v.display_name);
      return {
        id,
        ownedBy: OWNER.anthropic,
        ...(displayName !== undefined ? { displayName } : {}),
        ...(created !== undefined ? { created } : {}),
      };
    }
    case "gemini": {
      const name = str(v.name);
      if (name === undefined) return undefined;
      const out: { -readonly [K in keyof ListedModel]: ListedModel[K] } = {
        id: name.replace(/^models\//, ""),
        ownedBy: OWNER.gemini,
      };
      const displayName = str(v.displayName);
      if (displayName !== undefined) out.displayName = displayName;
      const description = str(v.description);
      if (description !== undefined) out.description = description;
      const version = str(v.version);
      if (version !== undefined) out.version = version;
      const input = num(v.inputTokenLimit);
      if (input !== undefined) out.inputTokenLimit = input;
      const output = num(v.outputTokenLimit);
      if (output !== undefined) out.outputTokenLimit = output;
      if (Array.isArray(v.supportedGenerationMethods))
        out.methods = v.supportedGenerationMethods.filter((m): m is string => typeof m === "string");
      return out;
    }
  }
}

/** A provider's list answer: its entries in its order, and whether it has more pages than the one asked for. */
export function readModelList(
  family: ModelListFamily,
  body: unknown,
): { readonly models: ListedModel[]; readonly more: boolean } | LlmError {
  if (!isObject(body)) return malformed("model list");
  const items = family === "gemini" ? body.models : body.data;
  // Google leaves `models` out of an empty list.
  if (items === undefined && family === "gemini") return { models: [], more: false };
  if (!Array.isArray(items)) return malformed("model list");
  const models = items.flatMap((x) => readEntry(family, x) ?? []);
  const token = str(body.nextPageToken);
  const more = family === "anthropic" ? body.has_more === true : token !== undefined && token !== "";
  return { models, more };
}

/** A provider's answer to a get (`.../models/{id}`). */
export function readModel(family: ModelListFamily, body: unknown): ListedModel | LlmError {
  return readEntry(family, body) ?? malformed("model");
}

/** The client's paging, from its query. */
export interface ListPage {
  readonly limit?: number;
  readonly afterId?: string;
  readonly beforeId?: string;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

export function readListPage(query: URLSearchParams): ListPage {
  const out: { -readonly [K in keyof ListPage]: ListPage[K] } = {};
  const n = (k: string) => {
    const v = query.get(k);
    return v === null || v === "" || !Number.isFinite(Number(v)) ? undefined : Math.trunc(Number(v));
  };
  const limit = n("limit");
  if (limit !== undefined) out.limit = limit;
  const pageSize = n("pageSize");
  if (pageSize !== undefined) out.pageSize = pageSize;
  const after = query.get("after_id");
  if (after !== null) out.afterId = after;
  const before = query.get("before_id");
  if (before !== null) out.beforeId = before;
  const token = query.get("pageToken");
  if (token !== null && token !== "") out.pageToken = token;
  return out;
}

/** Anthropic lists the most recent first; entries without a date keep their order, after the dated ones. */
export function newestFirst(models: readonly ListedModel[]): ListedModel[] {
  return models
    .map((m, i) => [m, i] as const)
    .sort(([a, i], [b, j]) => (b.created ?? -1) - (a.created ?? -1) || i - j)
    .map(([m]) => m);
}

/** Provider kinds (LlmProviderIR kind) whose token counting API Sluice serves a generateContent client's countTokens. */
const COUNTS = new Set(["anthropic", "gemini", "vertex", "bedrock"]);
/** Provider kinds with an embeddings API Sluice serves embedContent / batchEmbedContents to. */
const EMBEDS = new Set(["openai", "azure-openai", "azure-foundry", "custom", "gemini", "vertex", "bedrock"]);

/**
 * Google's supportedGenerationMethods of a model of a provider of `kind` that does not list them: what Sluice serves
 * a Google client there. Neither OpenAI's nor Anthropic's list says what a model does: an embedding model is known by
 * its name (`embed` in it).
 */
export function generationMethods(kind: string, id: string): string[] {
  if (/embed/i.test(id)) return EMBEDS.has(kind) ? ["embedContent", "batchEmbedContents"] : [];
  return COUNTS.has(kind) ? ["generateContent", "countTokens"] : ["generateContent"];
}

/** One model in a family's shape (`methods`: Google's methods where the entry has none of its own). */
export function writeModel(
  family: ModelListFamily,
  m: ListedModel,
  methods?: (m: ListedModel) => readonly string[],
): JsonObject {
  switch (family) {
    case "openai":
      return { id: m.id, object: "model", created: m.created ?? 0, owned_by: m.ownedBy ?? "sluice" };
    case "anthropic":
      return { type: "model", id: m.id, display_name: m.displayName ?? m.id, created_at: rfc3339(m.created) };
    case "gemini": {
      const out: JsonObject = { name: `models/${m.id}` };
      if (m.version !== undefined) out.version = m.version;
      out.displayName = m.displayName ?? m.id;
      if (m.description !== undefined) out.description = m.description;
      if (m.inputTokenLimit !== undefined) out.inputTokenLimit = m.inputTokenLimit;
      if (m.outputTokenLimit !== undefined) out.outputTokenLimit = m.outputTokenLimit;
      out.supportedGenerationMethods = [...(m.methods ?? methods?.(m) ?? [])];
      return out;
    }
  }
}

/**
 * A whole list in the client's shape, paged as the client asked: OpenAI's has no paging (every entry); Anthropic's
 * `limit` (1..1000, default 20), `after_id`, `before_id` (the `limit` entries right before it); Google's `pageSize`
 * (1..1000, default 50) and `pageToken`, a token of Sluice's (the last id shown). An unknown page token is a 400.
 */
export function writeModelList(
  family: ModelListFamily,
  models: readonly ListedModel[],
  page: ListPage,
  methods?: (m: ListedModel) => readonly string[],
): { readonly ok: true; readonly body: JsonObject } | { readonly ok: false; readonly error: LlmError } {
  const entry = (m: ListedModel) => writeModel(family, m, methods);
  switch (family) {
    case "openai":
      return { ok: true, body: { object: "list", data: models.map(entry) } };
    case "anthropic": {
      const limit = Math.min(Math.max(page.limit ?? 20, 1), 1000);
      let from = 0;
      let to = models.length;
      if (page.afterId !== undefined) from = models.findIndex((m) => m.id === page.afterId) + 1;
      if (page.beforeId !== undefined) {
        const i = models.findIndex((m) => m.id === page.beforeId);
        to = i < 0 ? models.length : i;
      }
      const window = models.slice(from, to);
      const shown =
        page.beforeId !== undefined && page.afterId === undefined ? window.slice(-limit) : window.slice(0, limit);
      const data = shown.map(entry);
      return {
        ok: true,
        body: {
          data,
          has_more: shown.length < window.length,
          first_id: shown[0]?.id ?? null,
          last_id: shown[shown.length - 1]?.id ?? null,
        },
      };
    }
    case "gemini": {
      const size = page.pageSize === undefined || page.pageSize <= 0 ? 50 : Math.min(page.pageSize, 1000);
      let from = 0;
      if (page.pageToken !== undefined) {
        const i = models.findIndex((m) => m.id === page.pageToken);
        if (i < 0) return { ok: false, error: invalidRequest("pageToken: the page token is not valid", "pageToken") };
        from = i + 1;
      }
      const shown = models.slice(from, from + size);
      const out: JsonObject = { models: shown.map(entry) };
      const last = shown[shown.length - 1];
      if (from + size < models.length && last !== undefined) out.nextPageToken = last.id;
      return { ok: true, body: out };
    }
  }
}

/** What a client asked of a model list: the list (with its paging), or one model. */
export type ModelListCall =
  | { readonly op: "list"; readonly page: ListPage }
  | { readonly op: "get"; readonly id: string };

/**
 * A provider's answer (list or get) in the client family's shape. `methods`: Google's supportedGenerationMethods of
 * an entry whose provider does not list them. `more`, for a list: the provider had more than the page asked for.
 */
export function translateModelList(
  client: ModelListFamily,
  provider: ModelListFamily,
  call: ModelListCall,
  body: unknown,
  methods?: (m: ListedModel) => readonly string[],
):
  | { readonly ok: true; readonly body: JsonObject; readonly more: boolean }
  | { readonly ok: false; readonly error: LlmError } {
  if (call.op === "get") {
    const m = readModel(provider, body);
    return "kind" in m ? { ok: false, error: m } : { ok: true, body: writeModel(client, m, methods), more: false };
  }
  const r = readModelList(provider, body);
  if ("kind" in r) return { ok: false, error: r };
  const models = client === "anthropic" ? newestFirst(r.models) : r.models;
  const out = writeModelList(client, models, call.page, methods);
  return out.ok ? { ok: true, body: out.body, more: r.more } : out;
}
