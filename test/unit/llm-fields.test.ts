// The field and reasoning tables of docs/llm.md are the code's (src/llm/translate/chat-fields.ts), and every refusal in it answers a
// 400 naming the field for each target it is refused for, before anything reaches the provider.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { findDirection } from "../../src/llm/registry.js";
import { type ChatTarget, chatFieldsMarkdown } from "../../src/llm/translate/chat-fields.js";
import {
  converseReasoning,
  effortOfBudget,
  geminiThinkingConfig,
  messagesThinking,
} from "../../src/llm/translate/reasoning.js";

const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };
const messages = [{ role: "user", content: "hi" }];

test("docs/llm.md shows the field table the translators use", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  assert.ok(doc.includes(chatFieldsMarkdown()), "docs/llm.md's field table differs from chatFieldsMarkdown()");
});

const REFUSED: { field: Record<string, unknown>; param: string; targets: ChatTarget[] }[] = [
  { field: { frequency_penalty: 0.5 }, param: "frequency_penalty", targets: ["messages", "converse"] },
  { field: { presence_penalty: -1 }, param: "presence_penalty", targets: ["messages", "converse"] },
  { field: { logprobs: true }, param: "logprobs", targets: ["messages", "converse"] },
  { field: { top_logprobs: 2 }, param: "top_logprobs", targets: ["messages", "converse"] },
  {
    field: { logit_bias: { "50256": -100 } },
    param: "logit_bias",
    targets: ["messages", "converse", "generate-content"],
  },
  { field: { n: 2 }, param: "n", targets: ["messages", "converse"] },
  { field: { service_tier: "flex" }, param: "service_tier", targets: ["messages", "generate-content"] },
  {
    field: { modalities: ["text", "audio"] },
    param: "modalities",
    targets: ["messages", "converse", "generate-content"],
  },
  { field: { verbosity: "low" }, param: "verbosity", targets: ["messages", "converse", "generate-content"] },
  { field: { function_call: "auto" }, param: "function_call", targets: ["messages", "converse", "generate-content"] },
  { field: { web_search_options: {} }, param: "web_search_options", targets: ["messages", "converse"] },
  {
    field: { tools: [{ type: "custom", custom: { name: "sql" } }] },
    param: "tools[0].type",
    targets: ["messages", "converse", "generate-content"],
  },
  {
    field: { reasoning_effort: "huge" },
    param: "reasoning_effort",
    targets: ["messages", "converse", "generate-content"],
  },
  {
    field: { response_format: { type: "json_schema", json_schema: { name: "x" } } },
    param: "response_format.json_schema.schema",
    targets: ["messages", "converse", "generate-content"],
  },
];

for (const r of REFUSED) {
  for (const target of ["messages", "converse", "generate-content"] as const) {
    const refused = r.targets.includes(target);
    test(`${JSON.stringify(r.field)} to ${target}: ${refused ? "400 naming it" : "accepted"}`, () => {
      const d = findDirection("chat-completions", target)!;
      const res = d.request({ model: "m", messages, ...r.field }, "anthropic.claude-sonnet-4-5-v1:0", ctx);
      if (refused) {
        assert.equal(res.ok, false);
        if (!res.ok) {
          assert.equal(res.error.status, 400);
          assert.equal(res.error.param, r.param);
        }
      } else assert.equal(res.ok, true, JSON.stringify(res));
    });
  }
}

test("carried fields reach each target under their own names", () => {
  const body = {
    model: "m",
    messages,
    seed: 3,
    presence_penalty: 0.25,
    response_format: { type: "json_schema", json_schema: { name: "r", schema: { type: "object" } } },
    reasoning_effort: "low",
    service_tier: "priority",
  };
  const { service_tier: _t, ...noTier } = body;
  const gem = findDirection("chat-completions", "generate-content")!.request(noTier, "gemini-2.5-flash", ctx);
  assert.ok(gem.ok);
  assert.deepEqual((gem.body as Record<string, Record<string, unknown>>).generationConfig, {
    seed: 3,
    presencePenalty: 0.25,
    responseMimeType: "application/json",
    responseJsonSchema: { type: "object" },
    thinkingConfig: { thinkingBudget: 2048, includeThoughts: true },
  });
  const { presence_penalty: _p, ...rest } = body;
  const msg = findDirection("chat-completions", "messages")!.request(rest, undefined, ctx);
  assert.ok(msg.ok);
  assert.equal(msg.body.service_tier, "auto");
  assert.deepEqual(msg.body.thinking, { type: "enabled", budget_tokens: 2048 });
  assert.deepEqual(msg.body.output_config, { format: { type: "json_schema", schema: { type: "object" } } });
  const cv = findDirection("chat-completions", "converse")!.request(rest, "anthropic.claude-sonnet-4-5-v1:0", ctx);
  assert.ok(cv.ok);
  assert.deepEqual(cv.body.serviceTier, { type: "priority" });
  assert.deepEqual(cv.body.additionalModelRequestFields, { thinking: { type: "enabled", budget_tokens: 2048 } });
});

test("docs/llm.md's reasoning table is what the translators send", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  const rows = new Map<string, string[]>();
  for (const line of doc.split("\n")) {
    const m = /^\| `([a-z]+)`[^|]* \|(.*)\|$/.exec(line);
    if (m !== null && ["none", "minimal", "low", "medium", "high", "xhigh"].includes(m[1]!))
      rows.set(
        m[1]!,
        m[2]!.split("|").map((c) => c.trim().replaceAll("`", "")),
      );
  }
  assert.equal(rows.size, 6, "the table has a row per effort");
  for (const effort of ["minimal", "low", "medium", "high", "xhigh"] as const) {
    const [anthropic, gemini2, gemini3, nova] = rows.get(effort)!;
    const t = messagesThinking(effort, undefined, 4096, "max");
    assert.ok(!("kind" in t));
    assert.equal(String((t.thinking as { budget_tokens: number }).budget_tokens), anthropic, `${effort}: Anthropic`);
    assert.equal(String(geminiThinkingConfig(effort, "gemini-2.5-flash").thinkingBudget), gemini2, `${effort}: 2.x`);
    assert.equal(geminiThinkingConfig(effort, "gemini-3-flash").thinkingLevel, gemini3, `${effort}: 3+`);
    const n = converseReasoning(effort, "us.amazon.nova-2-lite-v1:0", undefined, 4096, "max", "effort");
    assert.ok(!("kind" in n));
    assert.equal((n.fields.reasoningConfig as { maxReasoningEffort: string }).maxReasoningEffort, nova);
    const o = converseReasoning(effort, "openai.gpt-oss-120b-1:0", undefined, 4096, "max", "effort");
    assert.ok(!("kind" in o));
    assert.equal(o.fields.reasoning_effort, nova, `${effort}: gpt-oss`);
  }
  const none = rows.get("none")!;
  assert.equal(String(geminiThinkingConfig("none", "gemini-2.5-flash").thinkingBudget), none[1]);
  assert.equal(geminiThinkingConfig("none", "gemini-3-pro").thinkingLevel, none[2]);
  // The bands of the last column.
  assert.deepEqual([4095, 4096, 16383, 16384].map(effortOfBudget), ["low", "medium", "medium", "high"]);
  assert.equal(rows.get("low")![4], "below 4096");
  assert.equal(rows.get("medium")![4], "4096 to 16383");
  assert.equal(rows.get("high")![4], "16384 and above");
});
