// guardrailsB: Google Cloud Model Armor, `POST {base}/v1/projects/{project}/locations/{location}/templates/{template}`
// `:sanitizeUserPrompt` with `{userPromptData: {text}}` (requests) or `:sanitizeModelResponse` with
// `{modelResponseData: {text}}` (responses), with a bearer access token from the cloudB credentials.
//
// Model Armor sanitizes one text per call, so the non-empty texts are sent joined by a blank line. The answer's
// `sanitizationResult`: `filterMatchState` NO_MATCH_FOUND passes. With MATCH_FOUND, a matching filter (rai,
// pi_and_jailbreak, malicious_uris, csam, virus scan, or sdp in basic inspect mode) rejects, naming the filters. When
// the only match is the sdp filter's de-identification (`sdpFilterResult.deidentifyResult`, advanced mode with a
// de-identify template), the texts are masked with `deidentifyResult.data.text`: for one text directly, for several
// each text is then sanitized on its own, so each masked text lands where it came from. `invocationResult` FAILURE
// (no filter ran) is a GuardError; PARTIAL still counts the matches of the filters that ran.

import type { Dispatcher } from "undici";
import type { GoogleTokens } from "../../google-tokens.js";
import { GuardError, type GuardInput, type GuardVerdict, type RemoteGuard } from "../types.js";
import { DEFAULT_GUARD_TIMEOUT_MS, type GuardrailsBConfig } from "./config.js";
import { baseUrl, deadline, envValue, isObj, type Json, mapLimit, postJson, textsToSend, within } from "./http.js";

const GUARD = "guardrailsB";
export const MODEL_ARMOR_DEFAULT_LOCATION = "us-central1";
const SPLIT_CONCURRENCY = 4;
const JOINER = "\n\n";

export interface GuardrailsBDeps {
  readonly dispatcher: Dispatcher;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly google: GoogleTokens;
}

type Answer =
  | { readonly kind: "pass" }
  | { readonly kind: "block"; readonly filters: readonly string[] }
  | { readonly kind: "deidentify"; readonly text: string };

export class GuardrailsBGuard implements RemoteGuard {
  readonly #config: GuardrailsBConfig;
  readonly #deps: GuardrailsBDeps;
  readonly #base: { readonly url: string } | { readonly error: string };
  readonly #timeoutMs: number;
  readonly #location: string;

  constructor(config: GuardrailsBConfig, deps: GuardrailsBDeps) {
    this.#config = config;
    this.#deps = deps;
    this.#location = config.location ?? MODEL_ARMOR_DEFAULT_LOCATION;
    this.#base = baseUrl(
      config.endpoint ??
        envValue(deps.env.SLUICE_MODEL_ARMOR_ENDPOINT) ??
        `https://modelarmor.${this.#location}.rep.googleapis.com`,
    );
    this.#timeoutMs = config.timeoutMs ?? DEFAULT_GUARD_TIMEOUT_MS;
  }

  async check(input: GuardInput, signal: AbortSignal): Promise<GuardVerdict> {
    const c = this.#config;
    const send = textsToSend(GUARD, c.problem, this.#base, input.texts);
    if (send === undefined) return { action: "pass" };
    const { url: base, positions: sent, texts } = send;
    const bounded = deadline(signal, this.#timeoutMs);
    const google = c.auth?.google ?? {};
    const token = await within(
      GUARD,
      "Google credentials",
      this.#deps.google.token({
        type: google.type ?? "AccessToken",
        ...(google.credentials !== undefined ? { credentials: google.credentials } : {}),
        ...(google.audience !== undefined ? { audience: google.audience } : {}),
      }),
      bounded,
      this.#timeoutMs,
    );
    const method = input.direction === "request" ? "sanitizeUserPrompt" : "sanitizeModelResponse";
    const url = new URL(
      `${base}/v1/projects/${encodeURIComponent(c.projectId)}/locations/${encodeURIComponent(this.#location)}/templates/${encodeURIComponent(c.templateId)}:${method}`,
    );
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json",
      authorization: `Bearer ${token}`,
    };
    // User credentials bill the quota project they name (Google's libraries send the same header).
    const quota = google.credentials?.quota_project_id;
    if (typeof quota === "string" && quota !== "") headers["x-goog-user-project"] = quota;
    const sanitize = async (text: string): Promise<Answer> => {
      const body = input.direction === "request" ? { userPromptData: { text } } : { modelResponseData: { text } };
      const answer = await postJson({
        guard: GUARD,
        url,
        headers,
        body: JSON.stringify(body),
        signal: bounded,
        timeoutMs: this.#timeoutMs,
        dispatcher: this.#deps.dispatcher,
        errorCode: (_status, _headers, b) => {
          // `{"error": {"code", "message", "status": "PERMISSION_DENIED"}}`; the message is left out.
          const e = isObj(b) && isObj(b.error) ? b.error : {};
          return typeof e.status === "string" ? e.status : "";
        },
      });
      return interpret(answer);
    };
    const whole = await sanitize(texts.join(JOINER));
    if (whole.kind === "pass") return { action: "pass" };
    if (whole.kind === "block") return reject(whole.filters);
    let masked: string[];
    if (texts.length === 1) masked = [whole.text];
    else {
      const each = await mapLimit(texts, SPLIT_CONCURRENCY, sanitize);
      const blocked = each.flatMap((a) => (a.kind === "block" ? a.filters : []));
      if (blocked.length > 0) return reject(blocked);
      masked = each.map((a, i) => (a.kind === "deidentify" ? a.text : (texts[i] as string)));
    }
    const out = [...input.texts];
    sent.forEach((i, j) => {
      out[i] = masked[j] as string;
    });
    return out.every((t, i) => t === input.texts[i]) ? { action: "pass" } : { action: "mask", texts: out };
  }
}

function reject(filters: readonly string[]): GuardVerdict {
  return { action: "reject", reason: `${GUARD} matched: ${[...new Set(filters)].sort().join(", ")}` };
}

function interpret(answer: Json): Answer {
  const r = answer.sanitizationResult;
  if (!isObj(r)) throw new GuardError(`${GUARD}: the answer has no sanitizationResult`);
  if (r.invocationResult === "FAILURE") throw new GuardError(`${GUARD}: no filter of the template ran (FAILURE)`);
  const blocked: string[] = [];
  let deidentified: string | undefined;
  // A map keyed by filter name ("rai", "sdp" ...); each value holds one `<kind>FilterResult` (or csam's
  // `csamFilterFilterResult`).
  const results = isObj(r.filterResults) ? Object.entries(r.filterResults) : [];
  for (const [name, entry] of results) {
    if (!isObj(entry)) continue;
    for (const [kind, result] of Object.entries(entry)) {
      if (!isObj(result)) continue;
      if (kind === "sdpFilterResult") {
        const inspect = result.inspectResult;
        const deid = result.deidentifyResult;
        if (isObj(inspect) && inspect.matchState === "MATCH_FOUND") blocked.push(name);
        if (isObj(deid) && deid.matchState === "MATCH_FOUND") {
          const text = isObj(deid.data) ? deid.data.text : undefined;
          if (typeof text === "string") deidentified = text;
          else blocked.push(`${name} (de-identified without text)`);
        }
        continue;
      }
      if (result.matchState !== "MATCH_FOUND") continue;
      const types = isObj(result.raiFilterTypeResults)
        ? Object.entries(result.raiFilterTypeResults)
            .filter(([, t]) => isObj(t) && t.matchState === "MATCH_FOUND")
            .map(([t]) => t)
        : [];
      blocked.push(types.length > 0 ? `${name} (${types.sort().join(", ")})` : name);
    }
  }
  if (blocked.length > 0) return { kind: "block", filters: blocked };
  if (deidentified !== undefined) return { kind: "deidentify", text: deidentified };
  if (r.filterMatchState === "MATCH_FOUND") return { kind: "block", filters: ["an unnamed filter"] };
  if (r.filterMatchState === "NO_MATCH_FOUND") return { kind: "pass" };
  throw new GuardError(`${GUARD}: the answer has no known filterMatchState`);
}
