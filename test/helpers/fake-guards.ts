// Local stand-ins for the three remote guard services, speaking their real wire formats (from their public API
// references) and checking what the real services check:
// - OpenAI's moderation endpoint (`POST /v1/moderations`): the Bearer key, the `input` (a string, strings, or text
//   parts) and `model`; answers `{id, model, results: [{flagged, categories, category_scores,
//   category_applied_input_types}]}`, one result per input, flagging the inputs that contain configured words.
// - Bedrock Guardrails' ApplyGuardrail (`POST /guardrail/{id}/version/{version}/apply`): the SigV4 signature
//   (verified as AWS does, against the keys the test trusts or a fake STS issued) or a Bedrock API key as a bearer,
//   the guardrail and version, `source` and `content`; blocks texts with configured words (denied topic / content
//   filter / custom word) and anonymizes configured PII patterns, answering `{usage, action, outputs, assessments,
//   guardrailCoverage}` as Bedrock does (a block answers the guardrail's blocked messaging as the one output).
// - Google Cloud Model Armor (`POST /v1/projects/{p}/locations/{l}/templates/{t}:sanitizeUserPrompt` or
//   `:sanitizeModelResponse`): the OAuth Bearer token (one the fake Google token endpoint issued), the template, the
//   method's own data field; answers a `sanitizationResult` with every filter's result: rai (per type),
//   pi_and_jailbreak, malicious_uris, csam, and sdp in inspect (basic) or de-identify (advanced) mode.
// Each records its requests and can fail (a status) or stall (a delay) on demand.

import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { AwsCredentials } from "../../src/llm/codec/sigv4.js";
import { verifySigV4 } from "./sigv4-verify.js";

export interface GuardRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly json: unknown;
}

interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body: unknown;
}

export interface FakeGuardServer {
  readonly port: number;
  readonly url: string;
  readonly requests: GuardRequest[];
  /** Every request answers this status (with the service's error shape) while set. */
  failWith: number | undefined;
  /** Delay before answering, ms. */
  delayMs: number;
  close(): Promise<void>;
}

async function serve(
  fake: { failWith: number | undefined; delayMs: number; requests: GuardRequest[] },
  failure: (status: number) => Answer,
  handle: (req: GuardRequest) => Answer,
): Promise<{ port: number; close: () => Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const r: GuardRequest = { method: req.method ?? "", path: req.url ?? "/", headers: req.headers, body, json };
      fake.requests.push(r);
      const answer = fake.failWith !== undefined ? failure(fake.failWith) : handle(r);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
        res.end(JSON.stringify(answer.body));
      };
      if (fake.delayMs > 0) setTimeout(send, fake.delayMs).unref();
      else send();
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

// ---- OpenAI moderation ----

const MODERATION_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/intent",
  "self-harm/instructions",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic",
];
const MODERATION_MODELS = ["omni-moderation-latest", "omni-moderation-2024-09-26", "text-moderation-latest"];

export interface FakeModeration extends FakeGuardServer {
  /** Base URL as OPENAI_BASE_URL takes it (`.../v1`). */
  readonly baseUrl: string;
  /** Inputs containing a word (case-insensitive) are flagged in its category. */
  readonly flag: Map<string, string>;
}

export async function startFakeModeration(opts: { readonly key: string }): Promise<FakeModeration> {
  const state = { failWith: undefined as number | undefined, delayMs: 0, requests: [] as GuardRequest[] };
  const error = (status: number, message: string, type: string, code: string | null): Answer => ({
    status,
    body: { error: { message, type, param: null, code } },
  });
  const flag = new Map<string, string>();
  let n = 0;
  const server = await serve(
    state,
    (status) => error(status, "The server had an error while processing your request.", "server_error", null),
    (req) => {
      if (req.method !== "POST" || new URL(req.path, "http://x").pathname !== "/v1/moderations") {
        return error(404, `Invalid URL (${req.method} ${req.path})`, "invalid_request_error", null);
      }
      const auth = String(req.headers.authorization ?? "");
      if (!auth.startsWith("Bearer ")) {
        return error(
          401,
          "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth.",
          "invalid_request_error",
          null,
        );
      }
      if (auth.slice(7) !== opts.key) {
        const k = auth.slice(7);
        return error(
          401,
          `Incorrect API key provided: ${k.slice(0, 3)}*****${k.slice(-4)}.`,
          "invalid_request_error",
          "invalid_api_key",
        );
      }
      const body = req.json;
      if (!isObj(body))
        return error(400, "We could not parse the JSON body of your request.", "invalid_request_error", null);
      const model = body.model ?? "omni-moderation-latest";
      if (typeof model !== "string" || !MODERATION_MODELS.includes(model)) {
        return error(404, `The model \`${String(model)}\` does not exist`, "invalid_request_error", "model_not_found");
      }
      const raw = body.input;
      let inputs: string[];
      if (typeof raw === "string") inputs = [raw];
      else if (Array.isArray(raw) && raw.length > 0 && raw.every((x) => typeof x === "string")) inputs = raw;
      else if (Array.isArray(raw) && raw.length > 0 && raw.every((x) => isObj(x) && x.type === "text")) {
        inputs = [raw.map((x) => String((x as Record<string, unknown>).text)).join(" ")];
      } else {
        return error(400, "'input' is a required property", "invalid_request_error", null);
      }
      const results = inputs.map((text) => {
        const hit = new Set<string>();
        for (const [word, category] of flag) if (text.toLowerCase().includes(word.toLowerCase())) hit.add(category);
        return {
          flagged: hit.size > 0,
          categories: Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, hit.has(c)])),
          category_scores: Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, hit.has(c) ? 0.97 : 0.0001])),
          category_applied_input_types: Object.fromEntries(MODERATION_CATEGORIES.map((c) => [c, ["text"]])),
        };
      });
      return { status: 200, body: { id: `modr-${++n}`, model: `${model}-fake`, results } };
    },
  );
  const url = `http://127.0.0.1:${server.port}`;
  return Object.assign(state, {
    port: server.port,
    url,
    baseUrl: `${url}/v1`,
    flag,
    close: server.close,
  });
}

// ---- Bedrock Guardrails ApplyGuardrail ----

export interface BedrockBlockRule {
  /** Case-insensitive word that blocks. */
  readonly word: string;
  /** Which policy blocks it: a denied topic (named), a content filter (typed), or a custom word. */
  readonly policy: "topic" | "content" | "word";
  /** Topic name or content filter type (VIOLENCE, HATE ...). */
  readonly name?: string;
}

export interface BedrockAnonymizeRule {
  readonly pattern: RegExp;
  /** PII entity type (EMAIL, PHONE, US_SOCIAL_SECURITY_NUMBER ...): the text becomes `{TYPE}`. */
  readonly type: string;
}

export interface FakeBedrockGuardrails extends FakeGuardServer {
  readonly block: BedrockBlockRule[];
  readonly anonymize: BedrockAnonymizeRule[];
  /** Answer one output with every block's text joined, instead of one output per block. */
  joinOutputs: boolean;
  /** Long-term keys the fake accepts (temporary ones come from `lookup`). */
  trust(c: AwsCredentials): void;
  /** Bedrock API keys accepted as `Authorization: Bearer`. */
  readonly apiKeys: Set<string>;
  /** Requests whose signature was verified, by access key. */
  readonly signedBy: string[];
}

export const BEDROCK_BLOCKED_MESSAGE = "Sorry, the model cannot answer this question.";

export async function startFakeBedrockGuardrails(opts: {
  readonly region: string;
  /** Guardrail identifier (id or ARN) and version that exist. */
  readonly guardrail: { readonly identifier: string; readonly version: string };
  /** Another issuer's keys (a fake STS). */
  readonly lookup?: (accessKeyId: string) => AwsCredentials | undefined;
}): Promise<FakeBedrockGuardrails> {
  const state = {
    failWith: undefined as number | undefined,
    delayMs: 0,
    requests: [] as GuardRequest[],
    joinOutputs: false,
  };
  const known = new Map<string, AwsCredentials>();
  const block: BedrockBlockRule[] = [];
  const anonymize: BedrockAnonymizeRule[] = [];
  const apiKeys = new Set<string>();
  const signedBy: string[] = [];
  const awsError = (status: number, type: string, message: string): Answer => ({
    status,
    headers: {
      "x-amzn-errortype": `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      "x-amzn-requestid": randomBytes(8).toString("hex"),
    },
    body: { message },
  });
  const server = await serve(
    state,
    (status) =>
      status === 429
        ? awsError(429, "ThrottlingException", "Too many requests, please wait before trying again.")
        : awsError(status, status === 503 ? "ServiceUnavailableException" : "InternalServerException", "Internal"),
    (req) => {
      const m = /^\/guardrail\/([^/]+)\/version\/([^/]+)\/apply$/.exec(req.path);
      if (req.method !== "POST" || m === null) return awsError(404, "UnknownOperationException", "Unknown operation");
      const auth = String(req.headers.authorization ?? "");
      if (auth.startsWith("Bearer ")) {
        if (!apiKeys.has(auth.slice(7))) {
          return awsError(403, "UnrecognizedClientException", "The security token included in the request is invalid.");
        }
      } else {
        const check = verifySigV4(
          { method: req.method, path: req.path, headers: req.headers, body: req.body },
          { region: opts.region, service: "bedrock" },
          (id) => known.get(id) ?? opts.lookup?.(id),
        );
        if ("error" in check) {
          return check.error === "unknown access key"
            ? awsError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
            : awsError(
                403,
                "InvalidSignatureException",
                `The request signature we calculated does not match the signature you provided (${check.error}).`,
              );
        }
        signedBy.push(check.ok.accessKeyId);
      }
      const id = decodeURIComponent(m[1] ?? "");
      const version = decodeURIComponent(m[2] ?? "");
      if (id !== opts.guardrail.identifier || version !== opts.guardrail.version) {
        return awsError(
          404,
          "ResourceNotFoundException",
          "The guardrail identifier or version provided does not exist.",
        );
      }
      const body = req.json;
      const content = isObj(body) ? body.content : undefined;
      if (!isObj(body) || (body.source !== "INPUT" && body.source !== "OUTPUT")) {
        return awsError(
          400,
          "ValidationException",
          "1 validation error detected: Value at 'source' failed to satisfy constraint",
        );
      }
      if (
        !Array.isArray(content) ||
        content.length === 0 ||
        !content.every((c) => isObj(c) && isObj(c.text) && typeof c.text.text === "string" && c.text.text !== "")
      ) {
        return awsError(
          400,
          "ValidationException",
          "1 validation error detected: Value at 'content' failed to satisfy constraint",
        );
      }
      const texts = content.map((c) => (c as { text: { text: string } }).text.text);
      const chars = texts.reduce((s, t) => s + t.length, 0);
      const topics: unknown[] = [];
      const filters: unknown[] = [];
      const customWords: unknown[] = [];
      for (const r of block) {
        if (!texts.some((t) => t.toLowerCase().includes(r.word.toLowerCase()))) continue;
        if (r.policy === "topic")
          topics.push({ name: r.name ?? "Denied", type: "DENY", action: "BLOCKED", detected: true });
        else if (r.policy === "content") {
          filters.push({
            type: r.name ?? "VIOLENCE",
            confidence: "HIGH",
            filterStrength: "HIGH",
            action: "BLOCKED",
            detected: true,
          });
        } else customWords.push({ match: r.word, action: "BLOCKED", detected: true });
      }
      const piiEntities: unknown[] = [];
      const outputs = texts.map((t) => {
        let out = t;
        for (const r of anonymize) {
          out = out.replace(
            new RegExp(r.pattern.source, r.pattern.flags.includes("g") ? r.pattern.flags : `${r.pattern.flags}g`),
            (match) => {
              piiEntities.push({ match, type: r.type, action: "ANONYMIZED", detected: true });
              return `{${r.type}}`;
            },
          );
        }
        return out;
      });
      const blocked = topics.length + filters.length + customWords.length > 0;
      const assessment: Record<string, unknown> = {
        invocationMetrics: {
          guardrailProcessingLatency: 120,
          usage: { topicPolicyUnits: 1, contentPolicyUnits: 1, wordPolicyUnits: 1, sensitiveInformationPolicyUnits: 1 },
          guardrailCoverage: { textCharacters: { guarded: chars, total: chars } },
        },
      };
      if (topics.length > 0) assessment.topicPolicy = { topics };
      if (filters.length > 0) assessment.contentPolicy = { filters };
      if (customWords.length > 0) assessment.wordPolicy = { customWords, managedWordLists: [] };
      if (piiEntities.length > 0) assessment.sensitiveInformationPolicy = { piiEntities, regexes: [] };
      const intervened = blocked || piiEntities.length > 0;
      return {
        status: 200,
        body: {
          usage: {
            topicPolicyUnits: 1,
            contentPolicyUnits: 1,
            wordPolicyUnits: 1,
            sensitiveInformationPolicyUnits: 1,
            sensitiveInformationPolicyFreeUnits: 0,
            contextualGroundingPolicyUnits: 0,
          },
          action: intervened ? "GUARDRAIL_INTERVENED" : "NONE",
          ...(intervened ? { actionReason: blocked ? "Guardrail blocked." : "Guardrail masked." } : {}),
          outputs: !intervened
            ? []
            : blocked
              ? [{ text: BEDROCK_BLOCKED_MESSAGE }]
              : state.joinOutputs
                ? [{ text: outputs.join(" ") }]
                : outputs.map((text) => ({ text })),
          assessments: [assessment],
          guardrailCoverage: { textCharacters: { guarded: chars, total: chars } },
        },
      };
    },
  );
  const url = `http://127.0.0.1:${server.port}`;
  return Object.assign(state, {
    port: server.port,
    url,
    block,
    anonymize,
    apiKeys,
    signedBy,
    trust: (c: AwsCredentials) => {
      known.set(c.accessKeyId, c);
    },
    close: server.close,
  });
}

// ---- Google Cloud Model Armor ----

export interface FakeModelArmor extends FakeGuardServer {
  /** Words the rai filter matches, with their type (dangerous, hate_speech, harassment, sexually_explicit). */
  readonly rai: Map<string, string>;
  /** Words the prompt injection and jailbreak filter matches. */
  readonly jailbreak: string[];
  /** Sensitive data patterns with their info type; `sdpMode` says what the sdp filter does with them. */
  readonly sdp: { readonly pattern: RegExp; readonly infoType: string }[];
  /** Basic (inspect: a match is a finding) or advanced with a de-identify template (matches replaced). */
  sdpMode: "inspect" | "deidentify";
}

export async function startFakeModelArmor(opts: {
  /** Templates that exist, `projects/{p}/locations/{l}/templates/{t}`. */
  readonly templates: readonly string[];
  /** Whether a bearer token is valid (the fake Google token endpoint issued it). */
  readonly bearer: (token: string) => boolean;
}): Promise<FakeModelArmor> {
  const state = {
    failWith: undefined as number | undefined,
    delayMs: 0,
    requests: [] as GuardRequest[],
    sdpMode: "inspect" as "inspect" | "deidentify",
  };
  const rai = new Map<string, string>();
  const jailbreak: string[] = [];
  const sdp: { pattern: RegExp; infoType: string }[] = [];
  const gError = (code: number, status: string, message: string): Answer => ({
    status: code,
    body: { error: { code, message, status } },
  });
  const STATUS: Record<number, string> = { 500: "INTERNAL", 503: "UNAVAILABLE", 429: "RESOURCE_EXHAUSTED" };
  const server = await serve(
    state,
    (status) => gError(status, STATUS[status] ?? "UNKNOWN", "Internal error encountered."),
    (req) => {
      const m =
        /^\/v1\/(projects\/[^/]+\/locations\/[^/]+\/templates\/[^/:]+):(sanitizeUserPrompt|sanitizeModelResponse)$/.exec(
          req.path,
        );
      if (req.method !== "POST" || m === null) return gError(404, "NOT_FOUND", "The requested URL was not found.");
      const auth = String(req.headers.authorization ?? "");
      if (!auth.startsWith("Bearer ") || !opts.bearer(auth.slice(7))) {
        return gError(
          401,
          "UNAUTHENTICATED",
          "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        );
      }
      const name = decodeURIComponent(m[1] ?? "");
      if (!opts.templates.includes(name)) return gError(404, "NOT_FOUND", `Template ${name} not found.`);
      const body = req.json;
      const field = m[2] === "sanitizeUserPrompt" ? "userPromptData" : "modelResponseData";
      const data = isObj(body) ? body[field] : undefined;
      if (!isObj(data) || typeof data.text !== "string") {
        return gError(400, "INVALID_ARGUMENT", `Invalid value at '${field}' or missing required field.`);
      }
      const text = data.text;
      const lower = text.toLowerCase();
      const state_ = (b: boolean) => (b ? "MATCH_FOUND" : "NO_MATCH_FOUND");
      const raiTypes = ["sexually_explicit", "hate_speech", "harassment", "dangerous"];
      const raiHits = new Set([...rai].filter(([w]) => lower.includes(w.toLowerCase())).map(([, t]) => t));
      const jb = jailbreak.some((w) => lower.includes(w.toLowerCase()));
      const findings: { infoType: string; quote: string }[] = [];
      let deidentified = text;
      for (const s of sdp) {
        const re = new RegExp(
          s.pattern.source,
          s.pattern.flags.includes("g") ? s.pattern.flags : `${s.pattern.flags}g`,
        );
        deidentified = deidentified.replace(re, (quote) => {
          findings.push({ infoType: s.infoType, quote });
          return `[${s.infoType}]`;
        });
      }
      const ok = { executionState: "EXECUTION_SUCCESS" };
      const sdpResult =
        state.sdpMode === "inspect"
          ? {
              inspectResult: {
                ...ok,
                matchState: state_(findings.length > 0),
                findings: findings.map((f) => ({ infoType: f.infoType, likelihood: "VERY_LIKELY" })),
              },
            }
          : {
              deidentifyResult: {
                ...ok,
                matchState: state_(findings.length > 0),
                ...(findings.length > 0
                  ? {
                      data: { text: deidentified },
                      transformedBytes: String(findings.reduce((n, f) => n + Buffer.byteLength(f.quote), 0)),
                      infoTypes: [...new Set(findings.map((f) => f.infoType))],
                    }
                  : {}),
              },
            };
      const any = raiHits.size > 0 || jb || findings.length > 0;
      return {
        status: 200,
        body: {
          sanitizationResult: {
            filterMatchState: state_(any),
            filterResults: {
              csam: { csamFilterFilterResult: { ...ok, matchState: "NO_MATCH_FOUND" } },
              malicious_uris: { maliciousUriFilterResult: { ...ok, matchState: "NO_MATCH_FOUND" } },
              rai: {
                raiFilterResult: {
                  ...ok,
                  matchState: state_(raiHits.size > 0),
                  raiFilterTypeResults: Object.fromEntries(
                    raiTypes.map((t) => [
                      t,
                      raiHits.has(t)
                        ? { confidenceLevel: "HIGH", matchState: "MATCH_FOUND" }
                        : { matchState: "NO_MATCH_FOUND" },
                    ]),
                  ),
                },
              },
              pi_and_jailbreak: {
                piAndJailbreakFilterResult: {
                  ...ok,
                  matchState: state_(jb),
                  ...(jb ? { confidenceLevel: "HIGH" } : {}),
                },
              },
              sdp: { sdpFilterResult: sdpResult },
            },
            invocationResult: "SUCCESS",
            sanitizationMetadata: {},
          },
        },
      };
    },
  );
  const url = `http://127.0.0.1:${server.port}`;
  return Object.assign(state, { port: server.port, url, rai, jailbreak, sdp, close: server.close });
}
