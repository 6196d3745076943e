// moderationA: OpenAI's moderation endpoint, `POST {base}/moderations` with `{model?, input: [texts]}` (one call for
// all the texts; empty ones are not sent). The answer has one result per input with `flagged` and `categories`; any
// flagged result rejects, naming the flagged categories. The endpoint classifies only: it never masks.

import type { Dispatcher } from "undici";
import { GuardError, type GuardInput, type GuardVerdict, type RemoteGuard } from "../types.js";
import { DEFAULT_GUARD_TIMEOUT_MS, type ModerationAConfig } from "./config.js";
import { applyKey, baseUrl, deadline, envValue, isObj, postJson, textsToSend } from "./http.js";

const GUARD = "moderationA";
/** The OpenAI SDKs' default base URL (it carries the /v1). */
export const OPENAI_DEFAULT_BASE = "https://api.openai.com/v1";

export class ModerationAGuard implements RemoteGuard {
  readonly #config: ModerationAConfig;
  readonly #base: { readonly url: string } | { readonly error: string };
  readonly #timeoutMs: number;
  readonly #dispatcher: Dispatcher;

  constructor(
    config: ModerationAConfig,
    deps: { readonly dispatcher: Dispatcher; readonly env: Readonly<Record<string, string | undefined>> },
  ) {
    this.#config = config;
    this.#base = baseUrl(config.endpoint ?? envValue(deps.env.OPENAI_BASE_URL) ?? OPENAI_DEFAULT_BASE);
    this.#timeoutMs = config.timeoutMs ?? DEFAULT_GUARD_TIMEOUT_MS;
    this.#dispatcher = deps.dispatcher;
  }

  async check(input: GuardInput, signal: AbortSignal): Promise<GuardVerdict> {
    const send = textsToSend(GUARD, this.#config.problem, this.#base, input.texts);
    if (send === undefined) return { action: "pass" };
    const texts = send.texts;
    const url = new URL(`${send.url}/moderations`);
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.#config.auth !== undefined) applyKey(this.#config.auth, headers, url);
    const model = this.#config.model;
    const answer = await postJson({
      guard: GUARD,
      url,
      headers,
      body: JSON.stringify({ ...(model !== undefined ? { model } : {}), input: texts }),
      signal: deadline(signal, this.#timeoutMs),
      timeoutMs: this.#timeoutMs,
      dispatcher: this.#dispatcher,
      errorCode: (_status, _headers, body) => {
        // `{"error": {"message", "type", "code"}}`; the message can quote the key, so only type and code are kept.
        const e = isObj(body) && isObj(body.error) ? body.error : {};
        return [e.type, e.code].filter((v) => typeof v === "string" && v !== "").join("/");
      },
    });
    const results = answer.results;
    if (!Array.isArray(results) || results.length !== texts.length) {
      throw new GuardError(`${GUARD}: the answer has no result per input (${texts.length} sent)`);
    }
    const categories = new Set<string>();
    let flagged = 0;
    for (const r of results) {
      if (!isObj(r) || typeof r.flagged !== "boolean") throw new GuardError(`${GUARD}: a result has no flagged`);
      if (!r.flagged) continue;
      flagged++;
      if (isObj(r.categories)) for (const [k, v] of Object.entries(r.categories)) if (v === true) categories.add(k);
    }
    if (flagged === 0) return { action: "pass" };
    const names = [...categories].sort().join(", ");
    return {
      action: "reject",
      reason: `${GUARD} flagged ${flagged} of ${texts.length} texts${names !== "" ? `: ${names}` : ""}`,
    };
  }
}
