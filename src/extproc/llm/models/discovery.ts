// Model discovery: the Public models of a listener, answered in the shape of the client's own API. OpenAI clients
// (chat completions, responses, embeddings) get `GET /v1/models`'s list object; Anthropic clients (messages, token
// counting) get `GET /v1/models` with `data`, `has_more`, `first_id`, `last_id` and its `limit` / `after_id` /
// `before_id` paging. Sluice serves no generateContent clients, so there is no Google `models.list` answer.
// Only exact matches are listed: a wildcard (`gpt-*`, `*`) names no model a client could ask for.

import type { ClientFormat } from "../../../llm/formats/names.js";
import type { ListenerModelTable, ModelIR } from "../../../translate/model/ir.js";
import { MODEL_PROVIDER_ROWS } from "../../../translate/model/providers.js";

export interface ListedModel {
  readonly id: string;
  /** RFC 3339; the GwModel's creationTimestamp, else the epoch. */
  readonly createdAt: string;
  /** Who serves it: the provider's service (`OpenAI` ...), `sluice` for a virtual model. */
  readonly ownedBy: string;
}

/** The names a client may ask for on this listener, each once (the best match wins), sorted by name. */
export function publicModels(table: ListenerModelTable): ListedModel[] {
  const out = new Map<string, ListedModel>();
  for (const id of table.models) {
    const m: ModelIR | undefined = table.byId[id];
    if (m === undefined || m.visibility !== "Public" || m.match.kind !== "exact" || out.has(m.match.literal)) continue;
    const ownedBy = m.type === "virtual" ? "sluice" : (MODEL_PROVIDER_ROWS[m.providerName]?.service ?? m.providerName);
    out.set(m.match.literal, { id: m.match.literal, createdAt: m.createdAt ?? "1970-01-01T00:00:00Z", ownedBy });
  }
  return [...out.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export type DiscoveryShape = "openai" | "anthropic";

/** The discovery shape a client format's SDK expects. */
export function discoveryShape(format: ClientFormat): DiscoveryShape {
  return format === "messages" || format === "count-tokens" ? "anthropic" : "openai";
}

/** Anthropic's paging query (`limit` 1..1000, default 20; `after_id` / `before_id`). */
export interface ListPage {
  readonly limit?: number;
  readonly afterId?: string;
  readonly beforeId?: string;
}

const seconds = (rfc3339: string) => {
  const t = Date.parse(rfc3339);
  return Number.isNaN(t) ? 0 : Math.floor(t / 1000);
};

/** The body of a models list answer in the client format's shape. */
export function listModels(table: ListenerModelTable, format: ClientFormat, page: ListPage = {}): object {
  const models = publicModels(table);
  if (discoveryShape(format) === "openai") {
    return {
      object: "list",
      data: models.map((m) => ({ id: m.id, object: "model", created: seconds(m.createdAt), owned_by: m.ownedBy })),
    };
  }
  // Anthropic lists the most recent first.
  models.sort((a, b) => (a.createdAt !== b.createdAt ? (a.createdAt < b.createdAt ? 1 : -1) : a.id < b.id ? -1 : 1));
  const limit = Math.min(Math.max(page.limit ?? 20, 1), 1000);
  let from = 0;
  let to = models.length;
  if (page.afterId !== undefined) from = models.findIndex((m) => m.id === page.afterId) + 1;
  if (page.beforeId !== undefined) {
    const i = models.findIndex((m) => m.id === page.beforeId);
    to = i < 0 ? models.length : i;
  }
  // before_id pages backwards: the `limit` entries right before it.
  const window = models.slice(from, to);
  const shown =
    page.beforeId !== undefined && page.afterId === undefined ? window.slice(-limit) : window.slice(0, limit);
  const data = shown.map((m) => ({ type: "model", id: m.id, display_name: m.id, created_at: m.createdAt }));
  return {
    data,
    has_more: shown.length < window.length,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
  };
}
