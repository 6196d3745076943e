// The differential property of the chat-completions translators, shared by the bounded unit test and the long run
// under bench/: random valid chat requests (fast-check arbitraries) translated to Messages, Converse and
// generateContent must satisfy the rules each real service checks and keep every field the mapping table
// (docs/llm.md) marks as carried.
import assert from "node:assert/strict";
import fc from "fast-check";
import { findDirection } from "../../src/llm/registry.js";

const words = ["weather", "Paris", "tool", "json", "hello", "été", "東京", "a\nb", '"quoted"'];
/** Text a client sends: known words (newlines, quotes, non-Latin scripts) and now and then any graphemes after one,
 * never empty or blank (the providers refuse blank text blocks; so does a sane client). */
const text: fc.Arbitrary<string> = fc
  .tuple(
    fc.array(fc.constantFrom(...words), { minLength: 1, maxLength: 4 }),
    fc.option(fc.string({ unit: "grapheme", minLength: 1, maxLength: 12 }), { freq: 4 }),
  )
  .map(([ws, extra]) => (extra === null ? ws.join(" ") : `${ws.join(" ")} ${extra}`));

const TOOLS = ["get_weather", "search_docs", "run_sql"] as const;
const schema = { type: "object", properties: { q: { type: "string" } }, required: ["q"] };

// Now and then a name the model made up (models do), which Bedrock's name pattern refuses in the history.
const calledName = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom(...TOOLS) },
  { weight: 1, arbitrary: fc.constant("browser.tabs.open") },
);

/** One assistant turn: text, or tool calls (with their results following) and maybe replayed thinking. */
const assistantTurn = fc.oneof(
  fc.record({ kind: fc.constant("text" as const), text }),
  fc.record({
    kind: fc.constant("tools" as const),
    content: fc.option(text),
    calls: fc.array(fc.record({ name: calledName, q: text, result: text }), { minLength: 1, maxLength: 2 }),
    thinking: fc.option(text, { freq: 3 }),
  }),
);
const userTurn = fc.oneof(
  { weight: 7, arbitrary: text },
  { weight: 3, arbitrary: text.map((t) => [{ type: "text", text: t }]) },
);

/** A random chat request a real OpenAI endpoint would accept (tool turns well formed, ids matching). */
export const chatRequest: fc.Arbitrary<Record<string, unknown>> = fc
  .record(
    {
      system: fc.option(fc.record({ role: fc.constantFrom("system", "developer"), content: text })),
      turns: fc.array(fc.tuple(userTurn, assistantTurn), { maxLength: 3 }),
      last: userTurn,
      temperature: fc.integer({ min: 0, max: 100 }).map((n) => n / 100),
      top_p: fc.integer({ min: 0, max: 100 }).map((n) => n / 100),
      max_completion_tokens: fc.constantFrom(256, 3000, 20000, 64000),
      stop: fc.oneof(fc.constant("END"), fc.constant(["END", "STOP"])),
      tools: fc.subarray([...TOOLS], { minLength: 1 }),
      toolDescription: text,
      tool_choice: fc.constantFrom("auto", "required", "none"),
      response_format: fc.oneof(
        fc.constant({ type: "json_object" }),
        fc.constant({ type: "json_schema", json_schema: { name: "out", schema, strict: true } }),
      ),
      reasoning_effort: fc.constantFrom("minimal", "low", "medium", "high"),
      stream: fc.constant(true),
      seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    },
    { requiredKeys: ["turns", "last"] },
  )
  .map((g) => {
    const messages: Record<string, unknown>[] = [];
    if (g.system) messages.push(g.system);
    let call = 0;
    for (const [user, a] of g.turns) {
      messages.push({ role: "user", content: user });
      if (a.kind === "text") {
        messages.push({ role: "assistant", content: a.text });
        continue;
      }
      const calls = a.calls.map((c) => ({
        id: `call_${++call}`,
        type: "function",
        function: { name: c.name, arguments: JSON.stringify({ q: c.q }) },
      }));
      const m: Record<string, unknown> = { role: "assistant", content: a.content, tool_calls: calls };
      if (a.thinking !== null)
        m.thinking_blocks = [{ type: "thinking", thinking: a.thinking, signature: `sig${call}` }];
      messages.push(m);
      for (const [i, c] of a.calls.entries())
        messages.push({ role: "tool", tool_call_id: calls[i]!.id, content: c.result });
    }
    messages.push({ role: "user", content: g.last });
    const body: Record<string, unknown> = { model: "m", messages };
    for (const k of [
      "temperature",
      "top_p",
      "max_completion_tokens",
      "stop",
      "response_format",
      "reasoning_effort",
      "stream",
      "seed",
    ] as const)
      if (g[k] !== undefined) body[k] = g[k];
    if (g.tools !== undefined) {
      body.tools = g.tools.map((name) => ({
        type: "function",
        function: { name, description: g.toolDescription ?? name, parameters: schema },
      }));
      if (g.tool_choice !== undefined) body.tool_choice = g.tool_choice;
    }
    return body;
  });

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
export function checkCarried(target: string, req: Record<string, unknown>, body: Record<string, unknown>): void {
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

/** What the Responses API checks: input items of its roles or types, each function call output answering a call made
 * before it, flat function tools, no stop sequences (it has none: a request with `stop` is refused instead). */
function checkResponses(body: Record<string, unknown>): void {
  const calls = new Set<string>();
  for (const [i, it] of (body.input as Record<string, unknown>[]).entries()) {
    if (it.type === "function_call") {
      assert.equal(typeof it.name, "string", `input[${i}].name`);
      calls.add(it.call_id as string);
    } else if (it.type === "function_call_output") {
      assert.ok(calls.has(it.call_id as string), `input[${i}]: output of an unknown call`);
    } else assert.ok(["user", "assistant", "system", "developer"].includes(it.role as string), `input[${i}].role`);
  }
  for (const t of (body.tools ?? []) as Record<string, unknown>[]) assert.equal(typeof t.name, "string", "flat tools");
  assert.equal(body.store, false, "nothing stored unless asked");
}

function checkCarriedResponses(req: Record<string, unknown>, body: Record<string, unknown>): void {
  assert.equal(body.temperature, req.temperature, "temperature carried");
  assert.equal(body.top_p, req.top_p, "top_p carried");
  assert.equal(body.max_output_tokens, req.max_completion_tokens, "max tokens carried");
  const names = ((req.tools as { function: { name: string } }[] | undefined) ?? []).map((t) => t.function.name);
  assert.deepEqual(
    ((body.tools ?? []) as { name: string }[]).map((t) => t.name),
    names,
    "tools carried",
  );
  if (req.tool_choice !== undefined) assert.equal(body.tool_choice, req.tool_choice, "tool_choice carried");
  const rf = req.response_format as { type: string } | undefined;
  if (rf !== undefined)
    assert.equal((body.text as { format?: { type: string } } | undefined)?.format?.type, rf.type, "format carried");
  if (req.reasoning_effort !== undefined)
    assert.deepEqual(body.reasoning, { effort: req.reasoning_effort }, "reasoning_effort carried");
  // Every call and result of the history, in order.
  const msgs = req.messages as Record<string, unknown>[];
  const ids = msgs.flatMap((m) => [
    ...((m.tool_calls ?? []) as { id: string }[]).map((c) => `call:${c.id}`),
    ...(m.role === "tool" ? [`out:${m.tool_call_id as string}`] : []),
  ]);
  const got = (body.input as Record<string, unknown>[]).flatMap((it) =>
    it.type === "function_call"
      ? [`call:${it.call_id}`]
      : it.type === "function_call_output"
        ? [`out:${it.call_id}`]
        : [],
  );
  assert.deepEqual(got, ids, "tool calls and results carried in order");
}

export const TARGETS = [
  { target: "messages", model: undefined, check: checkMessages, refusable: "max_completion_tokens" },
  {
    target: "converse",
    model: "anthropic.claude-sonnet-4-5-20250929-v1:0",
    check: checkConverse,
    refusable: "max_completion_tokens",
  },
  { target: "generate-content", model: "gemini-2.5-flash", check: checkGemini, refusable: "max_completion_tokens" },
  // Responses has no stop sequences: a request with `stop` is refused naming it (docs/llm.md's table).
  { target: "responses", model: undefined, check: checkResponses, refusable: "stop" },
] as const;

const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };

/** The property for one target: a request translates (or meets the one documented refusal) and its translation
 * passes the format's rules and keeps the carried fields. Returns whether it translated. */
export function translatesFaithfully(t: (typeof TARGETS)[number], asked: Record<string, unknown>): boolean {
  const d = findDirection("chat-completions", t.target)!;
  let req = asked;
  if (t.refusable === "stop" && asked.stop !== undefined) {
    // Refused naming the field; the rest of the request is then checked without it.
    const refused = d.request(asked, t.model, ctx);
    assert.ok(!refused.ok && refused.error.param === "stop", "stop sequences refused");
    const { stop: _stop, ...rest } = asked;
    req = rest;
  }
  const res = d.request(req, t.model, ctx);
  // The only refusal a valid request may meet here: too few max tokens for a thinking budget, or stop sequences where
  // the format has none (both documented).
  if (!res.ok) {
    assert.equal(res.error.param, t.refusable, res.error.message);
    return false;
  }
  t.check(res.body as Record<string, unknown>);
  if (t.target === "responses") checkCarriedResponses(req, res.body as Record<string, unknown>);
  else checkCarried(t.target, req, res.body as Record<string, unknown>);
  return true;
}

/** Runs the property for every target; fast-check shrinks a failure to a small request and names its seed. */
export function checkAllTargets(
  params: fc.Parameters<[Record<string, unknown>]>,
): { target: string; translated: number; runs: number }[] {
  return TARGETS.map((t) => {
    let translated = 0;
    let runs = 0;
    fc.assert(
      fc.property(chatRequest, (req) => {
        runs++;
        if (translatesFaithfully(t, req)) translated++;
      }),
      params,
    );
    return { target: t.target, translated, runs };
  });
}
