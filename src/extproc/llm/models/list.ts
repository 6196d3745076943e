// The `Models` route type between families (docs/llm.md, `Models`): a client's model list request becomes its
// provider's (the largest page it gives, or the one model), and the provider's answer the client's
// (llm/translate/model-list.ts). Same family: the request goes as it is (the client's query along) and so does the
// answer.

import type { ClientFormat } from "../../../llm/formats/names.js";
import type { JsonObject } from "../../../llm/json.js";
import { clientError, translateError } from "../../../llm/registry.js";
import {
  generationMethods,
  type ModelListCall,
  type ModelListFamily,
  PROVIDER_PAGE,
  translateModelList,
} from "../../../llm/translate/model-list.js";
import type { LlmProviderEntry } from "../../../translate/llm/table.js";
import { type ModelsRequest, modelListFamilyOf } from "../provider.js";

/** The format of the errors a model list client reads: its family's. */
export const LIST_ERROR_FORMAT: Readonly<Record<ModelListFamily, ClientFormat>> = {
  openai: "chat-completions",
  anthropic: "messages",
  gemini: "generate-content",
};

/** An attempt whose answer is translated: the client's family and call, and the provider's. */
export interface ListingAttempt {
  readonly client: ModelListFamily;
  readonly call: ModelListCall;
  readonly from: ModelListFamily;
  /** The provider's kind (LlmProviderIR), for Google's supportedGenerationMethods of its entries. */
  readonly kind: string;
}

/**
 * The provider's path for a model list request (`listPath`: where it lists its models, its own query included):
 * one model at `<list>/{id}`; a list in another family as the provider's largest page (PROVIDER_PAGE), a list in the
 * same family with the client's query (its own paging). `attempt` when the answer is to be translated.
 */
export function listingRequest(
  req: ModelsRequest,
  provider: LlmProviderEntry,
  listPath: string,
  clientPath: string,
): { readonly path: string; readonly attempt?: ListingAttempt } {
  const from = modelListFamilyOf(provider);
  const q = listPath.indexOf("?");
  const base = q < 0 ? listPath : listPath.slice(0, q);
  const own = q < 0 ? "" : listPath.slice(q + 1);
  const clientQuery = clientPath.includes("?") ? clientPath.slice(clientPath.indexOf("?") + 1) : "";
  const translated = from !== undefined && from !== req.client;
  const query =
    req.call.op === "get"
      ? own
      : [own, translated ? PROVIDER_PAGE[from] : clientQuery].filter((x) => x !== "").join("&");
  const path =
    (req.call.op === "get" ? `${base}/${encodeURIComponent(req.call.id.replace(/^models\//, ""))}` : base) +
    (query !== "" ? `?${query}` : "");
  return translated ? { path, attempt: { client: req.client, call: req.call, from, kind: provider.kind } } : { path };
}

/**
 * The provider's answer (`status`, `text`) in the client's family: its list or model, or its error. `truncated`: the
 * provider had more models than its largest page, which are not in the answer.
 */
export function listingAnswer(
  a: ListingAttempt,
  status: number,
  text: string,
  headers: Readonly<Record<string, string>>,
): { readonly status: number; readonly body: JsonObject; readonly truncated?: true } {
  const format = LIST_ERROR_FORMAT[a.client];
  if (status >= 400) {
    const e = translateError(format, status, text, headers);
    return { status: e.status, body: e.body };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const r = translateModelList(a.client, a.from, a.call, parsed, (m) => generationMethods(a.kind, m.id));
  if (!r.ok) return clientError(format, r.error);
  return r.more ? { status, body: r.body, truncated: true } : { status, body: r.body };
}
