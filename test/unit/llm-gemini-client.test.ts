// The generateContent client's field table (docs/llm.md) is the code's (GEMINI_FIELDS, whose rows the reader
// dispatches on), and each row does what it says on the way to chat completions: one case per row, request and
// answer, buffered and streamed.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { test } from "node:test";
import { findDirection } from "../../src/llm/registry.js";
import { GEMINI_FIELDS, geminiFieldsMarkdown } from "../../src/llm/translate/gemini-client-request.js";
import { GEMINI_FINISH, geminiMappingMarkdown } from "../../src/llm/translate/gemini-client-response.js";

const ctx = { id: (p: string) => `${p}1`, now: () => 1700000000 };
const base = { model: "gemini-2.5-flash", contents: [{ role: "user", parts: [{ text: "hi" }] }] };
const toChat = findDirection("generate-content", "chat-completions")!;

function chatOf(extra: Record<string, unknown>): Record<string, unknown> {
  const r = toChat.request({ ...base, ...extra }, undefined, ctx);
  assert.equal(r.ok, true, JSON.stringify(r));
  return r.ok ? r.body : {};
}
function refusal(extra: Record<string, unknown>): { message: string; param?: string } {
  const r = toChat.request({ ...base, ...extra }, undefined, ctx);
  assert.equal(r.ok, false, "refused");
  return r.ok ? { message: "" } : r.error;
}

test("docs/llm.md shows the generateContent field table and answer table the translators use", () => {
  const doc = readFileSync(resolve(import.meta.dirname, "../../../docs/llm.md"), "utf8");
  assert.ok(doc.includes(geminiFieldsMarkdown()), "docs/llm.md's generateContent table differs from the code's");
  assert.ok(
    doc.includes(geminiMappingMarkdown()),
    "docs/llm.md's generateContent answer table differs from the code's",
  );
});

/** One case per row of GEMINI_FIELDS, by the row's field text. */
const CASES: Record<string, () => void> = {
  "`contents` (`role` `user`, `model`)": () => {
    const c = chatOf({
      contents: [
        { role: "user", parts: [{ text: "a" }] },
        { role: "model", parts: [{ text: "b" }] },
        { parts: [{ text: "c" }] },
      ],
    });
    assert.deepEqual(c.messages, [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
      { role: "user", content: "c" },
    ]);
    assert.equal(refusal({ contents: [{ role: "system", parts: [{ text: "x" }] }] }).param, "contents[0].role");
  },
  "`contents[].parts[].text`": () => {
    const c = chatOf({ contents: [{ role: "model", parts: [{ text: "why", thought: true }, { text: "so" }] }] });
    assert.deepEqual(c.messages, [{ role: "assistant", content: "so" }]);
  },
  "`contents[].parts[].inlineData`": () => {
    const c = chatOf({
      contents: [
        {
          role: "user",
          parts: [
            { inlineData: { mimeType: "image/png", data: "iVBO" } },
            { inlineData: { mimeType: "application/pdf", data: "JVBE" } },
          ],
        },
      ],
    });
    assert.deepEqual(c.messages, [
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBO" } },
          { type: "file", file: { file_data: "data:application/pdf;base64,JVBE", filename: "document-2.pdf" } },
        ],
      },
    ]);
  },
  "`contents[].parts[].functionCall`": () => {
    const c = chatOf({
      contents: [
        { role: "user", parts: [{ text: "w?" }] },
        { role: "model", parts: [{ functionCall: { name: "w", args: { c: 1 } }, thoughtSignature: "sig" }] },
        { role: "user", parts: [{ functionResponse: { name: "w", response: { t: 2 } } }] },
      ],
    });
    const m = c.messages as Record<string, unknown>[];
    assert.deepEqual(m[1], {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "call_0",
          type: "function",
          function: { name: "w", arguments: '{"c":1}' },
          extra_content: { google: { thought_signature: "sig" } },
        },
      ],
    });
  },
  "`contents[].parts[].functionResponse`": () => {
    const c = chatOf({
      contents: [
        { role: "user", parts: [{ text: "w?" }] },
        {
          role: "model",
          parts: [
            { functionCall: { id: "a", name: "w", args: {} } },
            { functionCall: { id: "b", name: "w", args: {} } },
          ],
        },
        {
          role: "user",
          parts: [
            { functionResponse: { id: "b", name: "w", response: { n: 2 } } },
            { functionResponse: { name: "w", response: { n: 1 } } },
          ],
        },
      ],
    });
    const m = c.messages as Record<string, unknown>[];
    assert.deepEqual(m.slice(2), [
      { role: "tool", tool_call_id: "b", content: '{"n":2}' },
      { role: "tool", tool_call_id: "a", content: '{"n":1}' },
    ]);
    assert.match(
      refusal({ contents: [{ role: "user", parts: [{ functionResponse: { name: "w", response: {} } }] }] }).message,
      /no earlier functionCall/,
    );
  },
  "`contents[].parts[].fileData`, `executableCode`, `codeExecutionResult`, `videoMetadata`": () => {
    const e = refusal({ contents: [{ role: "user", parts: [{ fileData: { fileUri: "https://x/f" } }] }] });
    assert.equal(e.param, "contents[0].parts[0].fileData");
    assert.equal(
      refusal({ contents: [{ role: "model", parts: [{ executableCode: { code: "1" } }] }] }).param,
      "contents[0].parts[0].executableCode",
    );
  },
  "`systemInstruction`": () => {
    const c = chatOf({ systemInstruction: { parts: [{ text: "a" }, { text: "b" }] } });
    assert.deepEqual((c.messages as unknown[])[0], { role: "system", content: "a\nb" });
  },
  "`tools[].functionDeclarations`": () => {
    const c = chatOf({
      tools: [
        {
          functionDeclarations: [
            { name: "a", parametersJsonSchema: { type: "object" } },
            { name: "b", description: "d", parameters: { type: "OBJECT", properties: { x: { type: "STRING" } } } },
          ],
        },
      ],
    });
    assert.deepEqual(c.tools, [
      { type: "function", function: { name: "a", parameters: { type: "object" } } },
      {
        type: "function",
        function: {
          name: "b",
          description: "d",
          parameters: { type: "object", properties: { x: { type: "string" } } },
        },
      },
    ]);
  },
  "`tools[].googleSearch`": () => {
    assert.deepEqual(chatOf({ tools: [{ googleSearch: {} }] }).web_search_options, {});
    // Messages has no such tool: refused there, naming the client's field.
    const r = findDirection("generate-content", "messages")!.request(
      { ...base, tools: [{ googleSearch: {} }] },
      "c",
      ctx,
    );
    assert.equal(r.ok, false);
    if (!r.ok) assert.match(r.error.message, /^tools\[\]\.googleSearch: /);
  },
  "other `tools[]` (`codeExecution`, `urlContext`, `fileSearch`, `googleMaps` ...)": () => {
    assert.equal(refusal({ tools: [{ codeExecution: {} }] }).param, "tools[0].codeExecution");
  },
  "`toolConfig.functionCallingConfig`": () => {
    const tools = [{ functionDeclarations: [{ name: "a" }, { name: "b" }, { name: "c" }] }];
    const fc = (mode: string, names?: string[]) =>
      chatOf({
        tools,
        toolConfig: { functionCallingConfig: { mode, ...(names ? { allowedFunctionNames: names } : {}) } },
      });
    assert.equal(fc("AUTO").tool_choice, "auto");
    assert.equal(fc("NONE").tool_choice, "none");
    assert.deepEqual(fc("ANY", ["b"]).tool_choice, { type: "function", function: { name: "b" } });
    const some = fc("ANY", ["a", "c"]);
    assert.equal(some.tool_choice, "required");
    assert.deepEqual(
      (some.tools as { function: { name: string } }[]).map((t) => t.function.name),
      ["a", "c"],
    );
    assert.equal(
      refusal({ tools, toolConfig: { functionCallingConfig: { mode: "VALIDATED" } } }).param,
      "toolConfig.functionCallingConfig.mode",
    );
  },
  "`generationConfig.temperature`, `topP`": () => {
    const c = chatOf({ generationConfig: { temperature: 0.2, topP: 0.9 } });
    assert.deepEqual([c.temperature, c.top_p], [0.2, 0.9]);
  },
  "`generationConfig.topK`": () => {
    assert.equal(chatOf({ generationConfig: { topK: 5 } }).top_k, 5);
    const m = findDirection("generate-content", "messages")!.request(
      { ...base, generationConfig: { topK: 5 } },
      "c",
      ctx,
    );
    assert.equal(m.ok && m.body.top_k, 5);
    const cv = findDirection("generate-content", "converse")!.request(
      { ...base, generationConfig: { topK: 5 } },
      "anthropic.claude-sonnet-4-5-v1:0",
      ctx,
    );
    assert.deepEqual(cv.ok && cv.body.additionalModelRequestFields, { top_k: 5 });
    const rs = findDirection("generate-content", "responses")!.request(
      { ...base, generationConfig: { topK: 5 } },
      "g",
      ctx,
    );
    assert.equal(!rs.ok && rs.error.param, "generationConfig.topK");
  },
  "`generationConfig.maxOutputTokens`": () => {
    assert.equal(chatOf({ generationConfig: { maxOutputTokens: 77 } }).max_completion_tokens, 77);
  },
  "`generationConfig.stopSequences`": () => {
    assert.deepEqual(chatOf({ generationConfig: { stopSequences: ["x"] } }).stop, ["x"]);
  },
  "`generationConfig.candidateCount`": () => {
    assert.equal(chatOf({ generationConfig: { candidateCount: 2 } }).n, 2);
  },
  "`generationConfig.seed`, `presencePenalty`, `frequencyPenalty`": () => {
    const c = chatOf({ generationConfig: { seed: 3, presencePenalty: 0.1, frequencyPenalty: 0.2 } });
    assert.deepEqual([c.seed, c.presence_penalty, c.frequency_penalty], [3, 0.1, 0.2]);
  },
  "`generationConfig.responseMimeType`, `responseJsonSchema`, `responseSchema`": () => {
    const schema = { type: "object", properties: { a: { type: "string" } } };
    assert.deepEqual(
      chatOf({ generationConfig: { responseMimeType: "application/json", responseJsonSchema: schema } })
        .response_format,
      { type: "json_schema", json_schema: { name: "response", schema, strict: true } },
    );
    assert.deepEqual(
      chatOf({
        generationConfig: {
          responseMimeType: "application/json",
          responseSchema: { type: "OBJECT", properties: { a: { type: "STRING" } } },
        },
      }).response_format,
      { type: "json_schema", json_schema: { name: "response", schema, strict: true } },
    );
    assert.deepEqual(chatOf({ generationConfig: { responseMimeType: "application/json" } }).response_format, {
      type: "json_object",
    });
    assert.equal(chatOf({ generationConfig: { responseMimeType: "text/plain" } }).response_format, undefined);
    assert.equal(
      refusal({ generationConfig: { responseMimeType: "text/x.enum" } }).param,
      "generationConfig.responseMimeType",
    );
  },
  "`generationConfig.responseLogprobs`, `logprobs`": () => {
    const c = chatOf({ generationConfig: { responseLogprobs: true, logprobs: 3 } });
    assert.deepEqual([c.logprobs, c.top_logprobs], [true, 3]);
  },
  "`generationConfig.thinkingConfig`": () => {
    const effort = (tc: Record<string, unknown>) =>
      chatOf({ generationConfig: { thinkingConfig: tc } }).reasoning_effort;
    assert.equal(effort({ thinkingLevel: "LOW" }), "low");
    assert.equal(effort({ thinkingBudget: 0 }), "none");
    assert.equal(effort({ thinkingBudget: 8192, includeThoughts: true }), "medium");
    assert.equal(effort({ thinkingBudget: -1 }), undefined);
  },
  "`generationConfig.responseModalities`": () => {
    assert.equal(chatOf({ generationConfig: { responseModalities: ["TEXT"] } }).modalities, undefined);
    assert.equal(
      refusal({ generationConfig: { responseModalities: ["IMAGE"] } }).param,
      "generationConfig.responseModalities",
    );
  },
  "`generationConfig.mediaResolution`": () => {
    assert.deepEqual(chatOf({ generationConfig: { mediaResolution: "MEDIA_RESOLUTION_LOW" } }), chatOf({}));
  },
  "`generationConfig.speechConfig`, `imageConfig`, `audioTimestamp`, `enableAffectiveDialog`, `routingConfig`": () => {
    assert.equal(refusal({ generationConfig: { speechConfig: {} } }).param, "generationConfig.speechConfig");
  },
  "`safetySettings`": () => {
    assert.deepEqual(
      chatOf({ safetySettings: [{ category: "HARM_CATEGORY_HATE_SPEECH", threshold: "BLOCK_NONE" }] }),
      chatOf({}),
    );
  },
  "`cachedContent`": () => {
    assert.equal(refusal({ cachedContent: "cachedContents/1" }).param, "cachedContent");
  },
  "`labels`": () => {
    assert.deepEqual(chatOf({ labels: { team: "a" } }), chatOf({}));
  },
};

test("every row of the table has a case here, and every case a row", () => {
  assert.deepEqual(Object.keys(CASES).sort(), GEMINI_FIELDS.map((r) => r.field).sort());
});
for (const row of GEMINI_FIELDS) {
  test(`generateContent ${row.field} → chat: ${row.chat}`, () => CASES[row.field]?.());
}

test("a field Google does not know is refused as Google refuses it", () => {
  assert.match(refusal({ temperature: 1 }).message, /Unknown name "temperature"/);
  assert.match(refusal({ generationConfig: { max_tokens: 1 } }).message, /Unknown name "max_tokens"/);
});

test("the passthrough keeps the client's body and takes out the model and stream Sluice read from the URL", () => {
  const r = findDirection("generate-content", "generate-content")!.request(
    { ...base, stream: true, generationConfig: { topK: 3 } },
    "gemini-2.5-pro",
    ctx,
  );
  assert.equal(r.ok, true);
  if (r.ok) {
    assert.deepEqual(r.body, { contents: base.contents, generationConfig: { topK: 3 } });
    assert.deepEqual(r.meta, { model: "gemini-2.5-pro", stream: true, includeUsage: true });
  }
});

const chatAnswer = {
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  model: "gpt-x",
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: "It is sunny.",
        reasoning_content: "Look it up.",
        tool_calls: [{ id: "call_9", type: "function", function: { name: "w", arguments: '{"c":"Paris"}' } }],
      },
      logprobs: null,
      finish_reason: "tool_calls",
    },
  ],
  usage: {
    prompt_tokens: 20,
    completion_tokens: 9,
    total_tokens: 29,
    prompt_tokens_details: { cached_tokens: 4 },
    completion_tokens_details: { reasoning_tokens: 3 },
  },
};

test("a chat answer as a generateContent answer: parts, finish, Gemini's usage convention", () => {
  const meta = { model: "m", stream: false, includeUsage: false };
  const r = toChat.response(chatAnswer, meta, ctx);
  assert.equal(r.ok, true);
  if (!r.ok) return;
  assert.deepEqual(r.body, {
    candidates: [
      {
        content: {
          role: "model",
          parts: [
            { text: "Look it up.", thought: true },
            { text: "It is sunny." },
            { functionCall: { name: "w", args: { c: "Paris" }, id: "call_9" } },
          ],
        },
        finishReason: "STOP",
        index: 0,
      },
    ],
    usageMetadata: {
      promptTokenCount: 20,
      candidatesTokenCount: 6,
      totalTokenCount: 29,
      cachedContentTokenCount: 4,
      thoughtsTokenCount: 3,
    },
    modelVersion: "gpt-x",
    responseId: "chatcmpl-1",
  });
  for (const [chat, gemini] of Object.entries(GEMINI_FINISH)) {
    const x = toChat.response(
      { ...chatAnswer, choices: [{ ...chatAnswer.choices[0], finish_reason: chat }] },
      meta,
      ctx,
    );
    assert.equal(x.ok && (x.body.candidates as { finishReason: string }[])[0]?.finishReason, gemini);
  }
});

test("streamed: text as it comes, a call whole once its choice finishes, usage on the last event", () => {
  const meta = { model: "m", stream: true, includeUsage: true };
  const s = toChat.stream!(meta, ctx);
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    `data: ${JSON.stringify({ id: "c1", model: "gpt-x", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const te = new TextEncoder();
  let out = "";
  const td = new TextDecoder();
  for (const c of [
    chunk({ role: "assistant", content: "It is " }),
    chunk({ content: "sunny." }),
    chunk({ tool_calls: [{ index: 0, id: "call_9", function: { name: "w", arguments: '{"c":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
    chunk({}, "tool_calls"),
    `data: ${JSON.stringify({ id: "c1", model: "gpt-x", choices: [], usage: chatAnswer.usage })}\n\n`,
    "data: [DONE]\n\n",
  ])
    out += td.decode(s.push(te.encode(c)));
  out += td.decode(s.end());
  const events = out
    .split("\r\n\r\n")
    .filter((e) => e !== "")
    .map((e) => JSON.parse(e.replace(/^data: /, "")) as Record<string, unknown>);
  assert.deepEqual(
    events.map((e) => (e.candidates as { content: { parts: unknown[] } }[])[0]?.content.parts),
    [[{ text: "It is " }], [{ text: "sunny." }], [{ functionCall: { name: "w", args: { c: "Paris" }, id: "call_9" } }]],
  );
  const lastCandidates = (events[2]?.candidates ?? []) as { finishReason: string }[];
  assert.equal(lastCandidates[0]?.finishReason, "STOP");
  assert.deepEqual(events[2]?.usageMetadata, {
    promptTokenCount: 20,
    candidatesTokenCount: 6,
    totalTokenCount: 29,
    cachedContentTokenCount: 4,
    thoughtsTokenCount: 3,
  });
  assert.equal(s.usage()?.totalTokens, 29);
});

test("countTokens: Gemini gets the body as written, Vertex the counted fields, Anthropic and Bedrock their count bodies", () => {
  const contents = [{ role: "user", parts: [{ text: "hi" }] }];
  const gcr = {
    model: "g",
    generateContentRequest: {
      model: "models/g",
      contents,
      systemInstruction: { parts: [{ text: "be brief" }] },
      generationConfig: { temperature: 1 },
    },
  };
  const to = (p: "gemini-count-tokens" | "vertex-count-tokens" | "count-tokens" | "converse-count-tokens") =>
    findDirection("generate-content-count-tokens", p)!;
  const g = to("gemini-count-tokens").request(gcr, undefined, ctx);
  assert.deepEqual(g.ok && g.body, { generateContentRequest: gcr.generateContentRequest });
  const v = to("vertex-count-tokens").request(gcr, "gemini-2.5-pro", ctx);
  assert.deepEqual(v.ok && v.body, { contents, systemInstruction: { parts: [{ text: "be brief" }] } });
  const a = to("count-tokens").request({ model: "claude-x", contents }, undefined, ctx);
  assert.deepEqual(a.ok && a.body, {
    model: "claude-x",
    messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
  });
  const b = to("converse-count-tokens").request({ model: "x", contents }, "anthropic.claude-sonnet-4-5-v1:0", ctx);
  assert.deepEqual(b.ok && b.body, {
    input: { converse: { messages: [{ role: "user", content: [{ text: "hi" }] }] } },
  });
  const meta = { model: "m", stream: false, includeUsage: false };
  assert.deepEqual(to("count-tokens").response({ input_tokens: 12 }, meta, ctx), {
    ok: true,
    body: { totalTokens: 12 },
    usage: { inputTokens: 12, outputTokens: 0, totalTokens: 12 },
  });
  const c = to("converse-count-tokens").response({ inputTokens: 7 }, meta, ctx);
  assert.deepEqual(c.ok && c.body, { totalTokens: 7 });
});
