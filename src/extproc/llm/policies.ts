// AI request policies (Document 2, `backend.ai`) applied to the client's request body, in the client's format, before
// translation: prompt enrichment, defaults (the client's value wins), overrides, then modelAliases at translation.
// Fields are top-level body fields or dotted paths (`metadata.user`).

import type { ClientFormat } from "../../llm/index.js";
import type { AiPolicy } from "../../translate/llm/table.js";
import { evaluateText, requestVariable, toCel } from "./cel.js";

/** What a transformation's CEL expression sees: `request` (method, path, headers) and `llm` (model, body, stream). */
export interface PolicyRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  /** `jwt`, `apiKey`, `basicAuth`, `extauthz` where the request has them (cel.ts identityVariables). */
  readonly identity?: Readonly<Record<string, unknown>>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function getPath(o: Obj, path: string): unknown {
  let cur: unknown = o;
  for (const k of path.split(".")) {
    if (!isObj(cur)) return undefined;
    cur = cur[k];
  }
  return cur;
}

function setPath(o: Obj, path: string, value: unknown): void {
  const keys = path.split(".");
  let cur = o;
  for (const k of keys.slice(0, -1)) {
    const next = cur[k];
    if (!isObj(next)) cur[k] = {};
    cur = cur[k] as Obj;
  }
  const last = keys[keys.length - 1];
  if (last !== undefined) cur[last] = value;
}

const isSystem = (role: string) => role.toLowerCase() === "system";

function enrich(client: ClientFormat, body: Obj, prompt: NonNullable<AiPolicy["prompt"]>): void {
  const pre = prompt.prepend ?? [];
  const post = prompt.append ?? [];
  if (pre.length === 0 && post.length === 0) return;
  const msg = (m: { role: string; content: string }) => ({ role: m.role.toLowerCase(), content: m.content });
  if (client === "chat-completions") {
    const messages = Array.isArray(body.messages) ? body.messages : [];
    body.messages = [...pre.map(msg), ...messages, ...post.map(msg)];
  } else if (client === "messages") {
    // The messages format has no system role: system prompts go to the top-level `system` field.
    const sys = (list: typeof pre) => list.filter((m) => isSystem(m.role)).map((m) => m.content);
    const preSys = sys(pre);
    const postSys = sys(post);
    if (preSys.length > 0 || postSys.length > 0) {
      const current = body.system;
      if (Array.isArray(current)) {
        body.system = [
          ...preSys.map((text) => ({ type: "text", text })),
          ...current,
          ...postSys.map((text) => ({ type: "text", text })),
        ];
      } else {
        body.system = [...preSys, ...(typeof current === "string" ? [current] : []), ...postSys].join("\n");
      }
    }
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const rest = (list: typeof pre) => list.filter((m) => !isSystem(m.role)).map(msg);
    body.messages = [...rest(pre), ...messages, ...rest(post)];
  } else if (client === "generate-content") {
    // Gemini has no system role either: system prompts join systemInstruction; the others are user / model turns.
    const sys = [...pre, ...post].filter((m) => isSystem(m.role));
    if (sys.length > 0) {
      const current =
        isObj(body.systemInstruction) && Array.isArray(body.systemInstruction.parts)
          ? body.systemInstruction.parts
          : [];
      const text = (list: typeof pre) => list.filter((m) => isSystem(m.role)).map((m) => ({ text: m.content }));
      body.systemInstruction = { parts: [...text(pre), ...current, ...text(post)] };
    }
    const turn = (m: { role: string; content: string }) => ({
      role: m.role.toLowerCase() === "assistant" ? "model" : "user",
      parts: [{ text: m.content }],
    });
    const rest = (list: typeof pre) => list.filter((m) => !isSystem(m.role)).map(turn);
    const contents = Array.isArray(body.contents) ? body.contents : [];
    body.contents = [...rest(pre), ...contents, ...rest(post)];
  } else if (client === "responses") {
    const input =
      typeof body.input === "string"
        ? [{ role: "user", content: body.input }]
        : Array.isArray(body.input)
          ? body.input
          : [];
    body.input = [...pre.map(msg), ...input, ...post.map(msg)];
  }
}

/** A new body with the policies applied (the input is not modified). */
export function applyAiPolicy(
  client: ClientFormat,
  input: Obj,
  policy: AiPolicy,
  request?: PolicyRequest,
  provider?: string,
): Obj {
  if (
    policy.prompt === undefined &&
    policy.defaults === undefined &&
    policy.overrides === undefined &&
    policy.transformations === undefined
  )
    return input;
  const body: Obj = structuredClone(input);
  if (policy.prompt !== undefined) enrich(client, body, policy.prompt);
  for (const d of policy.defaults ?? []) if (getPath(body, d.field) === undefined) setPath(body, d.field, d.value);
  for (const o of policy.overrides ?? []) setPath(body, o.field, o.value);
  if (policy.transformations !== undefined) {
    const model = typeof input.model === "string" ? input.model : undefined;
    const streaming = input.stream === true;
    const vars = {
      ...request?.identity,
      request: requestVariable({
        ":method": request?.method ?? "POST",
        ":path": request?.path ?? "/",
        ...request?.headers,
      }),
      // `model`, `stream` and `body` are the request as the client sent it; `requestModel`, `streaming` and
      // `provider` are the names the `llm` variable has everywhere else (cost expressions after completion ...).
      llm: toCel({
        model: model ?? null,
        stream: streaming,
        body: input,
        ...(model !== undefined ? { requestModel: model } : {}),
        streaming,
        ...(provider !== undefined ? { provider } : {}),
      }),
    };
    // Transformations win over overrides; one that fails to evaluate leaves the field as it was.
    for (const t of policy.transformations) {
      const v = evaluateText(t.expression, vars);
      if (v !== undefined) setPath(body, t.field, v);
    }
  }
  return body;
}

/** The model the provider is asked for: the provider's own override, then the alias table, then the client's. */
export function providerModel(
  settings: Readonly<Record<string, unknown>>,
  policy: AiPolicy,
  requested: unknown,
): string | undefined {
  if (typeof settings.model === "string") return settings.model;
  if (typeof requested !== "string") return undefined;
  return policy.modelAliases?.[requested];
}
