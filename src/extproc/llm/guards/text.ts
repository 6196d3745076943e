// Where the text a guard reads sits in each client format, requests and responses: every place is a slot (the object
// or array holding the string, and its key), so a masked text is written back in place and the body keeps its format.
// Requests: system prompts, every message's text (string content or text parts), tool results; responses: the
// assistant's text. Tool call arguments, images and other non-text parts are not read.

import type { ClientFormat } from "../../../llm/index.js";

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

export interface Slot {
  readonly holder: Obj | unknown[];
  readonly key: string | number;
}

export class Slots {
  readonly list: Slot[] = [];

  /** Adds `holder[key]` when it is a string. */
  add(holder: unknown, key: string | number): void {
    if (
      Array.isArray(holder)
        ? typeof holder[key as number] === "string"
        : isObj(holder) && typeof holder[key] === "string"
    )
      this.list.push({ holder: holder as Obj, key });
  }

  texts(): string[] {
    return this.list.map((s) => (s.holder as Record<string | number, string>)[s.key] as string);
  }

  write(texts: readonly string[]): void {
    this.list.forEach((s, i) => {
      const t = texts[i];
      if (t !== undefined) (s.holder as Record<string | number, unknown>)[s.key] = t;
    });
  }
}

/** Text parts of a content array: `{type: "text" | "input_text" | "output_text", text}`, tool results inside. */
function parts(content: unknown, out: Slots): void {
  if (typeof content === "string") return;
  if (!Array.isArray(content)) return;
  for (const p of content) {
    if (!isObj(p)) continue;
    if (typeof p.text === "string") out.add(p, "text");
    // Anthropic tool_result blocks carry their content as a string or as blocks.
    if (p.type === "tool_result") {
      if (typeof p.content === "string") out.add(p, "content");
      else parts(p.content, out);
    }
  }
}

function content(holder: Obj, key: string, out: Slots): void {
  const c = holder[key];
  if (typeof c === "string") out.add(holder, key);
  else parts(c, out);
}

function messages(list: unknown, out: Slots): void {
  if (!Array.isArray(list)) return;
  for (const m of list) if (isObj(m)) content(m, "content", out);
}

/** Every text of a client's request body, in document order. */
export function requestSlots(client: ClientFormat, body: Obj): Slots {
  const out = new Slots();
  switch (client) {
    case "chat-completions":
      messages(body.messages, out);
      break;
    case "messages":
    case "count-tokens":
      content(body, "system", out);
      messages(body.messages, out);
      break;
    case "responses": {
      out.add(body, "instructions");
      const input = body.input;
      if (typeof input === "string") out.add(body, "input");
      else if (Array.isArray(input)) {
        for (const item of input) {
          if (!isObj(item)) continue;
          if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
            if (typeof item.output === "string") out.add(item, "output");
            else parts(item.output, out);
          } else content(item, "content", out);
        }
      }
      break;
    }
    case "generate-content":
      geminiParts(body.systemInstruction, out);
      for (const c of Array.isArray(body.contents) ? body.contents : []) geminiParts(c, out);
      break;
    case "generate-content-count-tokens": {
      const g = isObj(body.generateContentRequest) ? body.generateContentRequest : body;
      geminiParts(g.systemInstruction, out);
      for (const c of Array.isArray(g.contents) ? g.contents : []) geminiParts(c, out);
      break;
    }
    case "embed-content":
      geminiParts(body.content, out);
      break;
    case "batch-embed-contents":
      for (const r of Array.isArray(body.requests) ? body.requests : []) if (isObj(r)) geminiParts(r.content, out);
      break;
    case "embeddings": {
      const input = body.input;
      if (typeof input === "string") out.add(body, "input");
      else if (Array.isArray(input)) for (let i = 0; i < input.length; i++) out.add(input, i);
      break;
    }
    case "rerank": {
      out.add(body, "query");
      const docs = body.documents;
      if (Array.isArray(docs)) {
        docs.forEach((d, i) => {
          if (typeof d === "string") out.add(docs, i);
          else if (isObj(d)) out.add(d, "text");
        });
      }
      break;
    }
  }
  return out;
}

/** The assistant's text of a client's (non-streamed) response body. */
export function responseSlots(client: ClientFormat, body: unknown): Slots {
  const out = new Slots();
  if (!isObj(body)) return out;
  switch (client) {
    case "chat-completions":
      for (const c of Array.isArray(body.choices) ? body.choices : []) {
        if (isObj(c) && isObj(c.message)) content(c.message, "content", out);
      }
      break;
    case "messages":
      parts(body.content, out);
      break;
    case "responses":
      responsesOutput(body.output, out);
      break;
    case "generate-content":
      geminiCandidates(body, out);
      break;
    default:
  }
  return out;
}

/** The text parts of a generateContent `Content` (a thought part is the model's reasoning, not its answer). */
function geminiParts(content: unknown, out: Slots): void {
  if (!isObj(content) || !Array.isArray(content.parts)) return;
  for (const p of content.parts) if (isObj(p) && p.thought !== true) out.add(p, "text");
}

function geminiCandidates(body: Obj, out: Slots): void {
  for (const c of Array.isArray(body.candidates) ? body.candidates : []) if (isObj(c)) geminiParts(c.content, out);
}

function responsesOutput(output: unknown, out: Slots): void {
  for (const item of Array.isArray(output) ? output : []) if (isObj(item)) parts(item.content, out);
}

/**
 * The text of one streamed event (client format) that is complete in itself, not a delta: the `done` events of the
 * responses format repeat the whole text, `response.completed` the whole response.
 */
export function eventSlots(client: ClientFormat, json: Obj): Slots {
  const out = new Slots();
  if (client === "chat-completions") {
    for (const c of Array.isArray(json.choices) ? json.choices : []) {
      if (isObj(c) && isObj(c.delta)) out.add(c.delta, "content");
    }
  } else if (client === "messages") {
    if (isObj(json.delta)) out.add(json.delta, "text");
    if (isObj(json.content_block)) out.add(json.content_block, "text");
  } else if (client === "generate-content") {
    geminiCandidates(json, out);
  } else if (client === "responses") {
    out.add(json, "delta");
    out.add(json, "text");
    if (isObj(json.part)) out.add(json.part, "text");
    if (isObj(json.item)) parts(json.item.content, out);
    if (isObj(json.response)) responsesOutput(json.response.output, out);
  }
  return out;
}

/**
 * A streamed event that only adds text to one stream of text (its channel): chat-completions choice deltas with
 * content only, messages `text_delta`s, responses `output_text.delta`s. Other events end what came before them.
 */
export function textDelta(client: ClientFormat, json: Obj): { channel: string; holder: Obj; key: string } | undefined {
  if (client === "chat-completions") {
    const choices = json.choices;
    if (!Array.isArray(choices) || choices.length !== 1 || (json.usage !== undefined && json.usage !== null))
      return undefined;
    const c = choices[0];
    if (!isObj(c) || (c.finish_reason !== undefined && c.finish_reason !== null) || !isObj(c.delta)) return undefined;
    const d = c.delta;
    if (typeof d.content !== "string") return undefined;
    // The first chunk names the role: it goes out as it is (the client learns the role before any text).
    for (const k of Object.keys(d)) if (k !== "content" && d[k] !== null) return undefined;
    return { channel: String(c.index ?? 0), holder: d, key: "content" };
  }
  if (client === "messages") {
    if (json.type !== "content_block_delta" || !isObj(json.delta) || json.delta.type !== "text_delta") return undefined;
    return typeof json.delta.text === "string"
      ? { channel: String(json.index ?? 0), holder: json.delta, key: "text" }
      : undefined;
  }
  if (client === "generate-content") {
    // Every generateContent event adds text: one candidate with one text part and nothing else is a delta.
    const cands = json.candidates;
    if (!Array.isArray(cands) || cands.length !== 1 || json.usageMetadata !== undefined) return undefined;
    const c = cands[0];
    if (!isObj(c) || c.finishReason !== undefined || !isObj(c.content) || !Array.isArray(c.content.parts))
      return undefined;
    const parts = c.content.parts;
    const p = parts[0];
    if (parts.length !== 1 || !isObj(p) || typeof p.text !== "string" || p.thought === true) return undefined;
    return { channel: String(c.index ?? 0), holder: p, key: "text" };
  }
  if (client === "responses") {
    if (json.type !== "response.output_text.delta" || typeof json.delta !== "string") return undefined;
    return { channel: `${String(json.output_index)}/${String(json.content_index)}`, holder: json, key: "delta" };
  }
  return undefined;
}
