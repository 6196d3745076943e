// A differential property test of the chat-completions translators: random valid chat requests (a seeded generator,
// so a failure names its seed and replays), translated to Messages, Converse and generateContent, must satisfy the
// rules each real service checks, and must keep every field the mapping table (docs/llm.md) marks as carried.
import assert from "node:assert/strict";
import { test } from "node:test";
import { findDirection } from "../../src/llm/registry.js";

/** mulberry32: a small seeded PRNG. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type R = () => number;
const pick = <T>(r: R, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const chance = (r: R, p: number): boolean => r() < p;
const words = ["weather", "Paris", "tool", "json", "hello", "été", "東京", "a\nb", '"quoted"'];
const text = (r: R): string => Array.from({ length: 1 + Math.floor(r() * 4) }, () => pick(r, words)).join(" ");

const TOOLS = ["get_weather", "search_docs", "run_sql"];
const schema = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };

/** A random chat request a real OpenAI endpoint would accept (tool turns well formed, ids matching). */
function chatRequest(r: R): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  if (chance(r, 0.5)) messages.push({ role: pick(r, ["system", "developer"]), content: text(r) });
  const turns = 1 + Math.floor(r() * 4);
  let call = 0;
  const usedTools = new Set<string>();
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: chance(r, 0.7) ? text(r) : [{ type: "text", text: text(r) }] });
    if (t === turns - 1) break;
    if (chance(r, 0.5)) {
      const calls = Array.from({ length: 1 + Math.floor(r() * 2) }, () => {
        // Now and then a name the model made up (models do), which Bedrock's name pattern refuses in the history.
        const name = chance(r, 0.1) ? "browser.tabs.open" : pick(r, TOOLS);
        usedTools.add(name);
        return {
          id: `call_${++call}`,
          type: "function",
          function: { name, arguments: JSON.stringify({ q: text(r) }) },
        };
      });
      const m: Record<string, unknown> = {
        role: "assistant",
        content: chance(r, 0.5) ? text(r) : null,
        tool_calls: calls,
      };
      if (chance(r, 0.3)) m.thinking_blocks = [{ type: "thinking", thinking: text(r), signature: `sig${call}` }];
      messages.push(m);
      for (const c of calls) messages.push({ role: "tool", tool_call_id: c.id, content: text(r) });
    } else messages.push({ role: "assistant", content: text(r) });
  }
  const body: Record<string, unknown> = { model: "m", messages };
  if (chance(r, 0.5)) body.temperature = Math.round(r() * 100) / 100;
  if (chance(r, 0.5)) body.top_p = Math.round(r() * 100) / 100;
  if (chance(r, 0.4)) body.max_completion_tokens = pick(r, [256, 3000, 20000, 64000]);
  if (chance(r, 0.3)) body.stop = chance(r, 0.5) ? "END" : ["END", "STOP"];
  if (chance(r, 0.5))
    body.tools = TOOLS.filter(() => chance(r, 0.7)).map((name) => ({
      type: "function",
      function: { name, description: text(r), parameters: schema },
    }));
  if (Array.isArray(body.tools) && body.tools.length > 0 && chance(r, 0.5))
    body.tool_choice = pick(r, ["auto", "required", "none"]);
  if (chance(r, 0.3))
    body.response_format = chance(r, 0.5)
      ? { type: "json_object" }
      : { type: "json_schema", json_schema: { name: "out", schema, strict: true } };
  if (chance(r, 0.3)) body.reasoning_effort = pick(r, ["minimal", "low", "medium", "high"]);
  if (chance(r, 0.3)) body.stream = true;
  if (chance(r, 0.2)) body.seed = 42;
  void usedTools;
  return body;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const blocksOf = (m: Record<string, unknown>): Record<string, unknown>[] =>
  Array.isArray(m.content) ? (m.content as Record<string, unknown>[]) : [];

/** What the Messages API checks: alternating roles from user, no system role in messages, tool results answering the
 * previous turn's tool uses, thinking first and its budget below max_tokens. */
function checkMessages(body: Record<string, unknown>): void {
  const msgs = body.messages as Record<string, unknown>[];
  assert.equal(typeof body.max_tokens, "number", "max_tokens is required");
  assert.equal(msgs[0]?.role, "user", "the first message is the user's");
  for (let i = 0; i < msgs.length; i++) {
    const m = msgs[i]!;
    assert.ok(m.role === "user" || m.role === "assistant", `messages.${i}.role`);
    if (i > 0) assert.notEqual(m.role, msgs[i - 1]!.role, `messages.${i}: roles alternate`);
    const blocks = blocksOf(m);
    for (const b of blocks) {
      if (b.type === "tool_result") {
        assert.equal(m.role, "user");
        const prev = blocksOf(msgs[i - 1] ?? {});
        assert.ok(
          prev.some((p) => p.type === "tool_use" && p.id === b.tool_use_id),
          `messages.${i}: orphan result`,
        );
      }
    }
    const firstOther = blocks.findIndex((b) => b.type !== "thinking" && b.type !== "redacted_thinking");
    const lastThinking = blocks.findLastIndex((b) => b.type === "thinking" || b.type === "redacted_thinking");
    if (lastThinking >= 0) assert.ok(firstOther === -1 || lastThinking < firstOther, "thinking comes first");
  }
  const th = body.thinking;
  if (isObj(th) && th.type === "enabled") {
    assert.ok((th.budget_tokens as number) >= 1024);
    assert.ok((th.budget_tokens as number) < (body.max_tokens as number), "budget below max_tokens");
  }
}

/** What Converse checks: alternating roles from user, toolConfig whenever toolUse / toolResult blocks are present,
 * tool names of its pattern, a JSON-text schema in outputConfig, a thinking budget below maxTokens. */
function checkConverse(body: Record<string, unknown>): void {
  const msgs = body.messages as Record<string, unknown>[];
  assert.equal(msgs[0]?.role, "user");
  for (let i = 1; i < msgs.length; i++) assert.notEqual(msgs[i]!.role, msgs[i - 1]!.role, `messages[${i}] alternate`);
  const blocks = msgs.flatMap(blocksOf);
  const tc = body.toolConfig as { tools?: { toolSpec?: { name: string } }[]; toolChoice?: unknown } | undefined;
  if (blocks.some((b) => "toolUse" in b || "toolResult" in b))
    assert.ok(tc !== undefined, "toolConfig is required with toolUse / toolResult blocks");
  // Tool names (declared and used) match Bedrock's pattern; a history call need not name a declared tool.
  for (const t of tc?.tools ?? []) if (t.toolSpec) assert.match(t.toolSpec.name, /^[a-zA-Z0-9_-]{1,64}$/);
  for (const b of blocks) if (isObj(b.toolUse)) assert.match(b.toolUse.name as string, /^[a-zA-Z0-9_-]{1,64}$/);
  if (tc !== undefined) assert.ok((tc.tools ?? []).length > 0, "toolConfig.tools is not empty");
  const oc = body.outputConfig as { textFormat?: { structure?: { jsonSchema?: { schema?: unknown } } } } | undefined;
  if (oc !== undefined) {
    const s = oc.textFormat?.structure?.jsonSchema?.schema;
    assert.equal(typeof s, "string", "the schema is JSON text");
    JSON.parse(s as string);
  }
  const th = isObj(body.additionalModelRequestFields) ? body.additionalModelRequestFields.thinking : undefined;
  if (isObj(th) && th.type === "enabled") {
    const max = (body.inferenceConfig as { maxTokens?: number } | undefined)?.maxTokens;
    assert.ok(max !== undefined && (th.budget_tokens as number) < max, "budget below maxTokens");
  }
}

/** What generateContent checks: user / model roles, function responses in user turns, never both a thinking level
 * and a budget. */
function checkGemini(body: Record<string, unknown>): void {
  for (const [i, c] of (body.contents as Record<string, unknown>[]).entries()) {
    assert.ok(c.role === "user" || c.role === "model", `contents[${i}].role`);
    for (const p of c.parts as Record<string, unknown>[])
      if ("functionResponse" in p) assert.equal(c.role, "user", `contents[${i}]: function responses are the user's`);
  }
  const tc = isObj(body.generationConfig) ? body.generationConfig.thinkingConfig : undefined;
  if (isObj(tc)) assert.ok(!("thinkingLevel" in tc && "thinkingBudget" in tc), "a level or a budget, not both");
}

/** The fields the table marks as carried, found again in the provider body. */
function checkCarried(target: string, req: Record<string, unknown>, body: Record<string, unknown>): void {
  const gc = (body.generationConfig ?? {}) as Record<string, unknown>;
  const inf = (body.inferenceConfig ?? {}) as Record<string, unknown>;
  const temp = target === "messages" ? body.temperature : target === "converse" ? inf.temperature : gc.temperature;
  assert.equal(temp, req.temperature, "temperature carried");
  const topP = target === "messages" ? body.top_p : target === "converse" ? inf.topP : gc.topP;
  assert.equal(topP, req.top_p, "top_p carried");
  if (req.stop !== undefined) {
    const stops =
      target === "messages" ? body.stop_sequences : target === "converse" ? inf.stopSequences : gc.stopSequences;
    assert.deepEqual(stops, typeof req.stop === "string" ? [req.stop] : req.stop, "stop carried");
  }
  const max = req.max_completion_tokens as number | undefined;
  const outMax = target === "messages" ? body.max_tokens : target === "converse" ? inf.maxTokens : gc.maxOutputTokens;
  if (max !== undefined) assert.equal(outMax, max, "max tokens carried");
  const names = ((req.tools as { function: { name: string } }[] | undefined) ?? []).map((t) => t.function.name);
  if (names.length > 0 && !(target === "converse" && req.tool_choice === "none")) {
    const got =
      target === "messages"
        ? (body.tools as { name: string }[]).map((t) => t.name)
        : target === "converse"
          ? (body.toolConfig as { tools: { toolSpec: { name: string } }[] }).tools.map((t) => t.toolSpec.name)
          : (body.tools as { functionDeclarations?: { name: string }[] }[]).flatMap((t) =>
              (t.functionDeclarations ?? []).map((d) => d.name),
            );
    assert.deepEqual(got, names, "tools carried");
  }
  const rf = req.response_format as { type: string } | undefined;
  if (rf?.type === "json_schema") {
    const carried =
      target === "messages" ? body.output_config : target === "converse" ? body.outputConfig : gc.responseJsonSchema;
    assert.ok(carried !== undefined, "response_format json_schema carried");
  }
  // A tool loop whose last assistant turn lost its thinking: Claude would refuse thinking, so it is left off (documented).
  // (The tool results and any user text after them are one user turn in Messages and Converse.)
  const msgs = req.messages as Record<string, unknown>[];
  const lastAssistant = msgs.findLastIndex((m) => m.role === "assistant");
  const a = msgs[lastAssistant];
  const loopWithoutThinking =
    a?.tool_calls !== undefined &&
    a.thinking_blocks === undefined &&
    msgs.slice(lastAssistant + 1).some((m) => m.role === "tool");
  if (req.reasoning_effort !== undefined && !(loopWithoutThinking && target !== "generate-content")) {
    const carried =
      target === "messages"
        ? body.thinking
        : target === "converse"
          ? (body.additionalModelRequestFields as Record<string, unknown> | undefined)?.thinking
          : gc.thinkingConfig;
    assert.ok(carried !== undefined, "reasoning_effort carried");
  }
  if (target === "generate-content" && req.seed !== undefined) assert.equal(gc.seed, req.seed, "seed carried");
}

const TARGETS = [
  { target: "messages", model: undefined, check: checkMessages },
  { target: "converse", model: "anthropic.claude-sonnet-4-5-20250929-v1:0", check: checkConverse },
  { target: "generate-content", model: "gemini-2.5-flash", check: checkGemini },
] as const;

const RUNS = 400;
const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };

for (const { target, model, check } of TARGETS) {
  test(`${RUNS} random chat requests to ${target}: accepted by the format's rules, carried fields kept`, () => {
    let translated = 0;
    for (let seed = 1; seed <= RUNS; seed++) {
      const req = chatRequest(rng(seed));
      const res = findDirection("chat-completions", target)!.request(req, model, ctx);
      // The only refusal a valid request may meet here: too few max tokens for a thinking budget (documented).
      if (!res.ok) {
        assert.equal(res.error.param, "max_completion_tokens", `seed ${seed}: ${res.error.message}`);
        continue;
      }
      translated++;
      try {
        check(res.body as Record<string, unknown>);
        checkCarried(target, req, res.body as Record<string, unknown>);
      } catch (e) {
        throw new Error(`seed ${seed} (${JSON.stringify(req)}): ${(e as Error).message}`);
      }
    }
    assert.ok(translated > RUNS * 0.8, `most requests translate (${translated})`);
  });
}
