// Model discovery: the Public models of a listener, answered in the shape of the client's own API
// (llm/translate/model-list.ts): OpenAI's `GET /v1/models` list object, Anthropic's paged `GET /v1/models`, Google's
// paged `GET /v1beta/models`, and one model of each (`.../models/{id}`).
// Only exact matches are listed: a wildcard (`gpt-*`, `*`) names no model a client could ask for.

import type { LlmError } from "../../../llm/errors.js";
import type { JsonObject } from "../../../llm/json.js";
import {
  generationMethods,
  type ListedModel,
  type ModelListCall,
  type ModelListFamily,
  newestFirst,
  writeModel,
  writeModelList,
} from "../../../llm/translate/model-list.js";
import type { ListenerModelTable, ModelIR } from "../../../translate/model/ir.js";
import { MODEL_PROVIDER_ROWS } from "../../../translate/model/providers.js";

const seconds = (rfc3339: string | undefined) => {
  const t = rfc3339 === undefined ? Number.NaN : Date.parse(rfc3339);
  return Number.isNaN(t) ? 0 : Math.floor(t / 1000);
};

/** The names a client may ask for on this listener, each once (the best match wins), sorted by name. */
export function publicModels(table: ListenerModelTable): ListedModel[] {
  const out = new Map<string, ListedModel>();
  for (const id of table.models) {
    const m: ModelIR | undefined = table.byId[id];
    if (m === undefined || m.visibility !== "Public" || m.match.kind !== "exact" || out.has(m.match.literal)) continue;
    const name = m.match.literal;
    const ownedBy = m.type === "virtual" ? "sluice" : (MODEL_PROVIDER_ROWS[m.providerName]?.service ?? m.providerName);
    // What a Google client can do with it: what Sluice serves its provider (a virtual model: generateContent).
    const kind = m.type === "concrete" ? (m.provider?.kind ?? "") : "";
    out.set(name, {
      id: name,
      created: seconds(m.createdAt),
      ownedBy,
      methods: m.type === "virtual" ? ["generateContent"] : generationMethods(kind, name),
    });
  }
  return [...out.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * The models list (or one model) of a listener in the client family's shape: sorted by name, Anthropic's most recent
 * first; a model not listed is a 404.
 */
export function listModels(
  table: ListenerModelTable,
  family: ModelListFamily,
  call: ModelListCall,
): { readonly ok: true; readonly body: JsonObject } | { readonly ok: false; readonly error: LlmError } {
  const models = publicModels(table);
  if (call.op === "get") {
    const m = models.find((x) => x.id === call.id.replace(/^models\//, ""));
    if (m === undefined)
      return { ok: false, error: { status: 404, kind: "not_found", message: `model ${call.id} is not listed` } };
    return { ok: true, body: writeModel(family, m) };
  }
  return writeModelList(family, family === "anthropic" ? newestFirst(models) : models, call.page);
}
