// Prompt guards (src/extproc/llm/guards): the builtin detectors with positive and negative samples (a card number or
// a SIN that fails the Luhn check is not masked), user patterns on the linear-time engine, the texts of every client
// format read and masked in place, a streamed match split across chunks caught, and the schema walk that keeps
// `promptGuard` from being dropped silently again.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { BackendAI } from "../../src/api/backend-policy.js";
import { loadAndTranslate } from "../../src/cli/load.js";
import { luhn } from "../../src/extproc/llm/guards/builtins.js";
import { RegexScanner } from "../../src/extproc/llm/guards/regex.js";
import { runGuards } from "../../src/extproc/llm/guards/runner.js";
import { StreamGuard } from "../../src/extproc/llm/guards/stream.js";
import { requestSlots, responseSlots } from "../../src/extproc/llm/guards/text.js";
import type { GuardBuiltin, GuardSpec } from "../../src/translate/llm/guards.js";
import { linearRegex } from "../../src/translate/llm/linear-regex.js";
import { gatewayYaml } from "../helpers/gateway.js";
import { tempConfigDir } from "../helpers/processes.js";

const mask = (builtins: GuardBuiltin[], text: string, patterns: string[] = []) => {
  const s = new RegexScanner(patterns, builtins);
  return RegexScanner.apply(text, s.scan(text));
};

describe("builtins", () => {
  test("Luhn", () => {
    assert.ok(luhn("4111111111111111"));
    assert.ok(luhn("4111-1111-1111-1111"));
    assert.ok(!luhn("4111111111111112"));
    assert.ok(luhn("046454286"));
  });

  test("CreditCard: valid numbers in every grouping, Luhn failures and short numbers kept", () => {
    for (const n of [
      "4111111111111111",
      "4111 1111 1111 1111",
      "4111-1111-1111-1111",
      "5500 0000 0000 0004",
      "378282246310005", // 15 digits (Amex)
      "4222222222222", // 13 digits
      "6011000990139424",
    ]) {
      assert.equal(mask(["CreditCard"], `pay with ${n} today`), "pay with <CREDIT_CARD> today", n);
    }
    for (const n of ["4111111111111112", "4111 1111 1111 1112", "1234567890", "41111111111111111111111"]) {
      assert.equal(mask(["CreditCard"], `number ${n}.`), `number ${n}.`, n);
    }
  });

  test("Ssn", () => {
    assert.equal(mask(["Ssn"], "ssn 123-45-6789."), "ssn <SSN>.");
    assert.equal(mask(["Ssn"], "ssn 123 45 6789"), "ssn <SSN>");
    for (const n of [
      "000-12-3456",
      "666-12-3456",
      "900-12-3456",
      "123-00-4567",
      "123-45-0000",
      "123-456789",
      "1234-56-7890",
    ]) {
      assert.equal(mask(["Ssn"], `id ${n}`), `id ${n}`, n);
    }
  });

  test("CaSin: Luhn-valid only", () => {
    assert.equal(mask(["CaSin"], "SIN 046 454 286"), "SIN <CA_SIN>");
    assert.equal(mask(["CaSin"], "SIN 046-454-286"), "SIN <CA_SIN>");
    assert.equal(mask(["CaSin"], "SIN 046454286"), "SIN <CA_SIN>");
    assert.equal(mask(["CaSin"], "SIN 046 454 287"), "SIN 046 454 287");
    assert.equal(mask(["CaSin"], "SIN 046-454 286"), "SIN 046-454 286");
  });

  test("PhoneNumber", () => {
    for (const n of ["(555) 123-4567", "555-123-4567", "555.123.4567", "+1 555 123 4567", "+44 20 7946 0958"]) {
      assert.equal(mask(["PhoneNumber"], `call ${n} now`), "call <PHONE_NUMBER> now", n);
    }
    for (const n of ["123-4567", "12345", "2024-01-15"]) {
      assert.equal(mask(["PhoneNumber"], `call ${n} now`), `call ${n} now`, n);
    }
  });

  test("Email", () => {
    assert.equal(mask(["Email"], "mail jane.doe+x@mail.example.co.uk."), "mail <EMAIL>.");
    assert.equal(mask(["Email"], "a@b.io, c_d@e-f.org"), "<EMAIL>, <EMAIL>");
    for (const t of ["not@an", "@example.com", "a@b", "user at example dot com"]) {
      assert.equal(mask(["Email"], t), t);
    }
  });

  test("a card number is masked as a card, not as a phone number", () => {
    const all: GuardBuiltin[] = ["Ssn", "CreditCard", "PhoneNumber", "Email", "CaSin"];
    assert.equal(mask(all, "4111111111111111 and 555-123-4567"), "<CREDIT_CARD> and <PHONE_NUMBER>");
  });

  test("builtins stay fast on adversarial text", () => {
    const text = `${"1 ".repeat(20_000)}${"a".repeat(20_000)}@${"b-".repeat(10_000)}`;
    const s = new RegexScanner([], ["Ssn", "CreditCard", "PhoneNumber", "Email", "CaSin"]);
    const t0 = performance.now();
    s.scan(text);
    assert.ok(performance.now() - t0 < 500, `scan took ${performance.now() - t0} ms`);
  });
});

describe("user patterns", () => {
  test("linear-time engine: catastrophic patterns run in linear time; lookaround refused", () => {
    const r = linearRegex("(a+)+b");
    assert.ok("ok" in r);
    const t0 = performance.now();
    assert.equal(r.ok.test(`${"a".repeat(50_000)}c`), false);
    assert.ok(performance.now() - t0 < 500);
    assert.ok("error" in linearRegex("(?=secret)"));
    assert.ok("error" in linearRegex("(a)\\1"));
  });

  test("patterns mask with <MASKED>, additive with builtins", () => {
    assert.equal(mask(["Email"], "key sk-abc123 for x@y.com", ["sk-[a-z0-9]+"]), "key <MASKED> for <EMAIL>");
  });
});

describe("texts of every client format", () => {
  test("requests: system, messages, parts, tool results; masked in place", () => {
    const chat = {
      messages: [
        { role: "system", content: "sys a@b.io" },
        {
          role: "user",
          content: [
            { type: "text", text: "u1" },
            { type: "image_url", image_url: { url: "x" } },
          ],
        },
        { role: "tool", tool_call_id: "t", content: "tool out" },
      ],
    };
    const s = requestSlots("chat-completions", chat);
    assert.deepEqual(s.texts(), ["sys a@b.io", "u1", "tool out"]);
    s.write(["A", "B", "C"]);
    assert.equal(chat.messages[0]?.content, "A");
    assert.deepEqual(chat.messages[1]?.content, [
      { type: "text", text: "B" },
      { type: "image_url", image_url: { url: "x" } },
    ]);
    const messages = {
      system: [{ type: "text", text: "S" }],
      messages: [
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "text", text: "R" }] }] },
        { role: "assistant", content: "A" },
      ],
    };
    assert.deepEqual(requestSlots("messages", messages).texts(), ["S", "R", "A"]);
    const responses = {
      instructions: "I",
      input: [
        { role: "user", content: [{ type: "input_text", text: "U" }] },
        { type: "function_call_output", call_id: "c", output: "O" },
      ],
    };
    assert.deepEqual(requestSlots("responses", responses).texts(), ["I", "U", "O"]);
    assert.deepEqual(requestSlots("embeddings", { input: ["e1", "e2"] }).texts(), ["e1", "e2"]);
    assert.deepEqual(requestSlots("rerank", { query: "q", documents: ["d", { text: "t" }] }).texts(), ["q", "d", "t"]);
  });

  test("responses", () => {
    assert.deepEqual(
      responseSlots("chat-completions", { choices: [{ message: { role: "assistant", content: "hi" } }] }).texts(),
      ["hi"],
    );
    assert.deepEqual(
      responseSlots("messages", { content: [{ type: "text", text: "hi" }, { type: "tool_use" }] }).texts(),
      ["hi"],
    );
    assert.deepEqual(
      responseSlots("responses", {
        output: [{ type: "message", content: [{ type: "output_text", text: "hi" }] }],
      }).texts(),
      ["hi"],
    );
  });
});

const regexGuard = (
  builtins: GuardBuiltin[],
  action: "Mask" | "Reject" = "Mask",
  patterns: string[] = [],
): GuardSpec => ({
  kind: "regex",
  patterns,
  builtins,
  action,
  path: "backend.ai.promptGuard.request[0]",
  response: { message: "no", statusCode: 403 },
});

describe("runner", () => {
  const ctx = { headers: new Map<string, string>(), vars: () => ({}), log: () => {} };
  test("regex guards run synchronously, in order, masks seen by the next guard; Reject ends the chain", () => {
    const o = runGuards("request", [regexGuard(["Email"]), regexGuard(["Email"], "Reject")], ["x a@b.io"], ctx);
    assert.deepEqual(o, { action: "mask", texts: ["x <EMAIL>"] });
    const r = runGuards("request", [regexGuard(["CreditCard"], "Reject")], ["4111111111111111"], ctx);
    assert.ok(!(r instanceof Promise) && r.action === "reject");
    // Responses always mask.
    const m = runGuards("response", [regexGuard(["CreditCard"], "Reject")], ["4111111111111111"], ctx);
    assert.deepEqual(m, { action: "mask", texts: ["<CREDIT_CARD>"] });
  });
});

describe("streams", () => {
  const td = new TextDecoder();
  const te = new TextEncoder();
  const chatChunk = (content: string) =>
    `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
  const contentOf = (out: string) =>
    out
      .split("\n\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[] })
      .map((j) => j.choices[0]?.delta.content ?? "")
      .join("");

  test("a card number split across chunks is masked; text before it is not held longer than needed", () => {
    const g = new StreamGuard("chat-completions", [regexGuard(["CreditCard", "Email"])]);
    let out = "";
    const first = td.decode(g.push(te.encode(chatChunk("Your card is ")), false));
    // "Your card is " ends in a space: only the tail that may start a match is held.
    assert.equal(contentOf(first), "Your card is");
    out += first;
    for (const piece of ["4111 11", "11 1111 ", "1111", " thanks"])
      out += td.decode(g.push(te.encode(chatChunk(piece)), false));
    const finish = `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;
    out += td.decode(g.push(te.encode(finish), true));
    assert.equal(contentOf(out), "Your card is <CREDIT_CARD> thanks");
    assert.ok(!out.includes("4111"));
    assert.ok(out.endsWith("data: [DONE]\n\n"));
  });

  test("messages format: text_delta events, flushed before content_block_stop", () => {
    const g = new StreamGuard("messages", [regexGuard(["Email"])]);
    const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const input = [
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "mail jane@exa" } }),
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: "mple.com" } }),
      ev("content_block_stop", { index: 0 }),
    ].join("");
    // One byte at a time: SSE framing split anywhere.
    let out = "";
    const bytes = te.encode(input);
    for (let i = 0; i < bytes.length; i++) out += td.decode(g.push(bytes.subarray(i, i + 1), i === bytes.length - 1));
    const texts = out
      .split("\n\n")
      .filter((e) => e.includes("text_delta"))
      .map((e) => (JSON.parse(e.slice(e.indexOf("data: ") + 6)) as { delta: { text: string } }).delta.text);
    assert.equal(texts.join(""), "mail <EMAIL>");
    assert.ok(out.indexOf("content_block_stop") > out.lastIndexOf("text_delta"));
  });
});

describe("no silent drops", () => {
  // Every field of AIPromptGuard must be compiled into the LLM table (translate/llm/guards.ts) or reported; this list
  // says where each one goes. A field added to the schema and not listed fails here.
  const HANDLED: Record<string, string> = {
    streaming: "PromptGuardEntry.streaming",
    request: "PromptGuardEntry.request",
    response: "PromptGuardEntry.response",
    "request[].regex": "RegexGuardSpec",
    "request[].regex.matches": "RegexGuardSpec.patterns (bad ones reported Ignored)",
    "request[].regex.builtins": "RegexGuardSpec.builtins",
    "request[].regex.action": "RegexGuardSpec.action",
    "request[].webhook": "WebhookGuardSpec",
    "request[].webhook.backendRef": "WebhookGuardSpec.targets (unresolved reported)",
    "request[].webhook.headers": "WebhookGuardSpec.headers",
    "request[].webhook.forwardHeaderMatches": "WebhookGuardSpec.forwardHeaderMatches",
    "request[].webhook.failureMode": "WebhookGuardSpec.failureMode",
    "request[].moderationA": "RemoteGuardSpec (NotYetSupported until served)",
    "request[].guardrailsA": "RemoteGuardSpec (NotYetSupported until served)",
    "request[].guardrailsB": "RemoteGuardSpec (NotYetSupported until served)",
    "request[].response": "GuardSpec.response",
    "request[].response.message": "GuardCustomResponse.message",
    "request[].response.statusCode": "GuardCustomResponse.statusCode",
    "response[].regex": "RegexGuardSpec",
    "response[].regex.matches": "RegexGuardSpec.patterns",
    "response[].regex.builtins": "RegexGuardSpec.builtins",
    "response[].regex.action": "reported Ignored when Reject",
    "response[].webhook": "WebhookGuardSpec",
    "response[].webhook.backendRef": "WebhookGuardSpec.targets",
    "response[].webhook.headers": "WebhookGuardSpec.headers",
    "response[].webhook.forwardHeaderMatches": "WebhookGuardSpec.forwardHeaderMatches",
    "response[].webhook.failureMode": "WebhookGuardSpec.failureMode",
    "response[].guardrailsA": "RemoteGuardSpec",
    "response[].guardrailsB": "RemoteGuardSpec",
    "response[].response": "GuardSpec.response",
    "response[].response.message": "GuardCustomResponse.message",
    "response[].response.statusCode": "GuardCustomResponse.statusCode",
  };
  // Below these, the fields are the settings of a guard kind as a whole (the remote guard's config, the backendRef).
  const OPAQUE = /\.(moderationA|guardrailsA|guardrailsB|backendRef|headers|forwardHeaderMatches)$/;

  test("every AIPromptGuard field is compiled or reported", () => {
    const seen: string[] = [];
    const walk = (schema: Record<string, unknown>, path: string) => {
      const props = (schema.properties ?? (schema.items as Record<string, unknown> | undefined)?.properties) as
        | Record<string, Record<string, unknown>>
        | undefined;
      if (props === undefined) return;
      const prefix = schema.items !== undefined ? `${path}[]` : path;
      for (const [k, v] of Object.entries(props)) {
        const p = prefix === "" ? k : `${prefix}.${k}`;
        seen.push(p);
        if (!OPAQUE.test(p)) walk(v, p);
      }
    };
    const guard = (BackendAI as unknown as { properties: Record<string, Record<string, unknown>> }).properties
      .promptGuard as Record<string, unknown>;
    walk(guard, "");
    const missing = seen.filter((p) => HANDLED[p] === undefined);
    assert.deepEqual(missing, [], `fields neither compiled nor reported: ${missing.join(", ")}`);
    assert.ok(seen.length >= 20);
  });
});

describe("translation", () => {
  test("guards reach the table with the spec's defaults; what is not served is in the status", async () => {
    const cfg = tempConfigDir();
    cfg.write(
      "r.yaml",
      `${gatewayYaml(8080)}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: llm, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: 9 }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: r, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules: [{ backendRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }] }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: guard, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
  backend:
    ai:
      routes: { /v1/realtime: Realtime, "*": Completions }
      promptGuard:
        streaming: Enabled
        request:
          - regex: { matches: ["ok-[0-9]+", "(?=bad)"], builtins: [CreditCard] }
          - moderationA: { model: omni-moderation-latest }
        response:
          - regex: { builtins: [Email] }
            response: { statusCode: 451 }
`,
    );
    let result: Awaited<ReturnType<typeof loadAndTranslate>>["result"];
    try {
      result = (await loadAndTranslate([cfg.dir])).result;
    } finally {
      cfg.cleanup();
    }
    const entry = [...result.llm.entries.values()][0];
    const providers = Object.values(entry?.backends ?? {})[0]?.providers ?? {};
    const guard = Object.values(providers)[0]?.ai.promptGuard;
    assert.ok(guard !== undefined, "promptGuard reaches the LLM table");
    assert.equal(guard.streaming, true);
    assert.deepEqual(guard.request[0], {
      kind: "regex",
      patterns: ["ok-[0-9]+"],
      builtins: ["CreditCard"],
      action: "Mask",
      path: "backend.ai.promptGuard.request[0]",
      response: { message: "The request was rejected due to inappropriate content", statusCode: 403 },
    });
    assert.equal(guard.request[1]?.kind, "moderationA");
    assert.deepEqual(guard.response[0]?.response, {
      message: "The response was rejected due to inappropriate content",
      statusCode: 451,
    });
    const status = result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "guard");
    const ancestors = (status?.status ?? { ancestors: [] }) as {
      ancestors: { conditions: { type: string; reason: string; message: string }[] }[];
    };
    const conditions = ancestors.ancestors[0]?.conditions;
    const warning = conditions?.find((c) => c.type === "Warning");
    assert.ok(warning !== undefined, JSON.stringify(conditions));
    assert.match(
      warning.message,
      /backend\.ai\.promptGuard\.request\[0\]\.regex\.matches\[1\]: pattern "\(\?=bad\)" is left out/,
    );
    assert.match(
      warning.message,
      /backend\.ai\.promptGuard\.request\[1\]\.moderationA: the moderationA guard is accepted but not served yet/,
    );
    assert.match(warning.message, /route types Realtime are forwarded unread/);
    assert.ok(conditions?.some((c) => c.type === "Attached"));
  });
});
