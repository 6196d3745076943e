// guardrailsA: Bedrock Guardrails' ApplyGuardrail, `POST {base}/guardrail/{identifier}/version/{version}/apply` with
// `{source: INPUT | OUTPUT, content: [{text: {text}}...]}` (one block per non-empty text), signed with SigV4 (service
// `bedrock`) or sent with a Bedrock API key as a bearer token.
//
// The answer: `action` NONE passes (a guardrail in detect mode answers NONE with `detected` assessments). With
// GUARDRAIL_INTERVENED, an assessment whose `action` is BLOCKED (a denied topic, a content or word filter, a PII type
// or regex set to block, contextual grounding) rejects, naming the policies but never the matched text; otherwise
// ANONYMIZED findings mask with `outputs[].text`, one output per block sent. Should the outputs not line up with the
// blocks, each text is asked on its own so every masked text lands where it came from. An intervention that names
// neither rejects, as the guardrail wanted the text changed in a way Sluice cannot reproduce.

import type { Dispatcher } from "undici";
import { signSigV4 } from "../../../../llm/codec/sigv4.js";
import type { AwsAuth } from "../../../../translate/llm/table.js";
import { type AwsCredentialSource, type RoleSession, roleSession } from "../../aws-credentials.js";
import { requestVariable, toCel } from "../../cel.js";
import { GuardError, type GuardInput, type GuardVerdict, type RemoteGuard } from "../types.js";
import { DEFAULT_GUARD_TIMEOUT_MS, type GuardKeyAuth, type GuardrailsAConfig } from "./config.js";
import {
  applyKey,
  baseUrl,
  deadline,
  envValue,
  isObj,
  type Json,
  mapLimit,
  postJson,
  textsToSend,
  within,
} from "./http.js";

const GUARD = "guardrailsA";
/** Texts asked one by one when the outputs do not line up; at most this many calls at once. */
const SPLIT_CONCURRENCY = 4;

export interface GuardrailsADeps {
  readonly dispatcher: Dispatcher;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly aws: AwsCredentialSource;
  readonly now: () => number;
}

type Answer =
  | { readonly kind: "pass" }
  | { readonly kind: "block"; readonly policies: readonly string[] }
  | { readonly kind: "anonymize"; readonly outputs: readonly string[] | undefined };

export class GuardrailsAGuard implements RemoteGuard {
  readonly #config: GuardrailsAConfig;
  readonly #deps: GuardrailsADeps;
  readonly #base: { readonly url: string } | { readonly error: string };
  readonly #timeoutMs: number;
  readonly #key: GuardKeyAuth | undefined;
  readonly #aws: AwsAuth;

  constructor(config: GuardrailsAConfig, deps: GuardrailsADeps) {
    this.#config = config;
    this.#deps = deps;
    const env = deps.env;
    this.#base = baseUrl(
      config.endpoint ??
        envValue(env.AWS_ENDPOINT_URL_BEDROCK_RUNTIME) ??
        envValue(env.AWS_ENDPOINT_URL) ??
        `https://bedrock-runtime.${config.region}.amazonaws.com`,
    );
    this.#timeoutMs = config.timeoutMs ?? DEFAULT_GUARD_TIMEOUT_MS;
    const auth = config.auth;
    this.#key = auth !== undefined && "key" in auth ? auth : undefined;
    // No auth: SigV4 with the default credential discovery, as `cloudA: {}`.
    this.#aws = auth !== undefined && "aws" in auth ? auth.aws : { region: "", service: "bedrock" };
  }

  async check(input: GuardInput, signal: AbortSignal): Promise<GuardVerdict> {
    const send = textsToSend(GUARD, this.#config.problem, this.#base, input.texts);
    if (send === undefined) return { action: "pass" };
    const bounded = deadline(signal, this.#timeoutMs);
    const { url: base, positions: sent, texts } = send;
    const answer = await this.#apply(base, input, texts, bounded);
    if (answer.kind === "pass") return { action: "pass" };
    if (answer.kind === "block") return reject(answer.policies);
    let masked = answer.outputs;
    if (masked === undefined) {
      // One call per text: each answer's outputs then belong to that text alone.
      const each = await mapLimit(texts, SPLIT_CONCURRENCY, (t) => this.#apply(base, input, [t], bounded));
      const blocked = each.filter((a) => a.kind === "block").flatMap((a) => a.policies);
      if (blocked.length > 0) return reject(blocked);
      masked = each.map((a, i) => (a.kind === "anonymize" && a.outputs !== undefined ? a.outputs[0] : texts[i]) ?? "");
    }
    const out = [...input.texts];
    sent.forEach((i, j) => {
      out[i] = masked[j] ?? "";
    });
    return out.every((t, i) => t === input.texts[i]) ? { action: "pass" } : { action: "mask", texts: out };
  }

  async #apply(base: string, input: GuardInput, texts: readonly string[], signal: AbortSignal): Promise<Answer> {
    const c = this.#config;
    const url = new URL(
      `${base}/guardrail/${encodeURIComponent(c.identifier)}/version/${encodeURIComponent(c.version)}/apply`,
    );
    const body = JSON.stringify({
      source: input.direction === "request" ? "INPUT" : "OUTPUT",
      content: texts.map((text) => ({ text: { text } })),
    });
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json" };
    if (this.#key !== undefined) applyKey(this.#key, headers, url);
    else Object.assign(headers, await this.#sign(input, url, body, signal));
    const answer = await postJson({
      guard: GUARD,
      url,
      headers,
      body,
      signal,
      timeoutMs: this.#timeoutMs,
      dispatcher: this.#deps.dispatcher,
      errorCode: (_status, h) => {
        // `x-amzn-errortype: AccessDeniedException:http://internal.amazon.com/...`; the body's message is left out.
        const t = h["x-amzn-errortype"];
        return (typeof t === "string" ? t : "").split(":")[0] ?? "";
      },
    });
    return interpret(answer, texts.length);
  }

  /** SigV4 headers for the call, with the guard's or discovered (or assumed-role) credentials. */
  async #sign(input: GuardInput, url: URL, body: string, signal: AbortSignal): Promise<Record<string, string>> {
    const aws = this.#aws;
    const region = aws.region !== "" ? aws.region : this.#config.region;
    let role: RoleSession | undefined;
    if (aws.assumeRole !== undefined) {
      // The role's expressions see the client request (`request`); `llm` is empty here, guards run before routing.
      const r = roleSession(aws.assumeRole, {
        request: requestVariable(Object.fromEntries(input.headers)),
        llm: toCel({}),
      });
      if ("error" in r) throw new GuardError(`${GUARD}: ${r.error}`);
      role = r;
    }
    const credentials = await within(
      GUARD,
      "AWS credentials",
      this.#deps.aws.credentials({ auth: aws, region, ...(role !== undefined ? { role } : {}) }),
      signal,
      this.#timeoutMs,
    );
    return signSigV4(
      {
        method: "POST",
        host: url.host,
        path: url.pathname,
        query: url.search.slice(1),
        headers: { "content-type": "application/json" },
        body,
      },
      {
        region,
        service: aws.service !== "" ? aws.service : "bedrock",
        credentials,
        date: new Date(this.#deps.now()),
      },
    ).headers;
  }
}

function reject(policies: readonly string[]): GuardVerdict {
  const names = [...new Set(policies)].sort().join(", ");
  return { action: "reject", reason: `${GUARD} blocked${names !== "" ? `: ${names}` : ""}` };
}

/** The ApplyGuardrail answer as a verdict; `sent` blocks were in the request. */
function interpret(answer: Json, sent: number): Answer {
  if (answer.action === "NONE") return { kind: "pass" };
  if (answer.action !== "GUARDRAIL_INTERVENED") {
    throw new GuardError(`${GUARD}: the answer has no known action (${JSON.stringify(answer.action)})`);
  }
  const assessments = Array.isArray(answer.assessments) ? answer.assessments : [];
  const blocked: string[] = [];
  let anonymized = false;
  for (const a of assessments) {
    if (!isObj(a)) continue;
    for (const [policy, v] of Object.entries(a)) {
      findings(policy, v, (label, action) => {
        if (action === "BLOCKED") blocked.push(label);
        else if (action === "ANONYMIZED") anonymized = true;
      });
    }
  }
  if (blocked.length > 0) return { kind: "block", policies: blocked };
  if (!anonymized) return { kind: "block", policies: ["an intervention without blocked or anonymized findings"] };
  const outputs = Array.isArray(answer.outputs) ? answer.outputs : [];
  const texts = outputs.map((o) => (isObj(o) && typeof o.text === "string" ? o.text : undefined));
  if (texts.length !== sent || texts.some((t) => t === undefined)) return { kind: "anonymize", outputs: undefined };
  return { kind: "anonymize", outputs: texts as string[] };
}

/**
 * Every finding under a policy assessment (`topicPolicy.topics[]`, `contentPolicy.filters[]`,
 * `sensitiveInformationPolicy.piiEntities[]` ...), labelled by where it is and its `name` or `type`, never its `match`.
 */
function findings(path: string, v: unknown, found: (label: string, action: string) => void): void {
  if (Array.isArray(v)) {
    for (const item of v) findings(path, item, found);
    return;
  }
  if (!isObj(v)) return;
  if (typeof v.action === "string") {
    const what = typeof v.name === "string" ? v.name : typeof v.type === "string" ? v.type : "";
    found(what !== "" ? `${path} ${what}` : path, v.action);
  }
  for (const [k, child] of Object.entries(v)) {
    if (isObj(child) || Array.isArray(child)) findings(`${path}.${k}`, child, found);
  }
}
