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
    const first = td.decode(g.push(te.encode(chatChunk("Your card is ")), false) as Uint8Array);
    // "Your card is " ends in a space no match can start with: nothing is held.
    assert.equal(contentOf(first), "Your card is ");
    out += first;
    for (const piece of ["4111 11", "11 1111 ", "1111", " thanks"])
      out += td.decode(g.push(te.encode(chatChunk(piece)), false) as Uint8Array);
    const finish = `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;
    out += td.decode(g.push(te.encode(finish), true) as Uint8Array);
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
    for (let i = 0; i < bytes.length; i++) {
      out += td.decode(g.push(bytes.subarray(i, i + 1), i === bytes.length - 1) as Uint8Array);
    }
    const texts = out
      .split("\n\n")
      .filter((e) => e.includes("text_delta"))
      .map((e) => (JSON.parse(e.slice(e.indexOf("data: ") + 6)) as { delta: { text: string } }).delta.text);
    assert.equal(texts.join(""), "mail <EMAIL>");
    assert.ok(out.indexOf("content_block_stop") > out.lastIndexOf("text_delta"));
  });
});

/** Where each field of the remote guards of `direction` goes (translate/llm/guards.ts remoteConfig). */
function remoteGuardFields(direction: string, kinds: readonly string[]): Record<string, string> {
  const own: Record<string, Record<string, string>> = {
    moderationA: { model: "ModerationAConfig.model" },
    guardrailsA: {
      identifier: "GuardrailsAConfig.identifier",
      version: "GuardrailsAConfig.version",
      region: "GuardrailsAConfig.region",
    },
    guardrailsB: {
      templateId: "GuardrailsBConfig.templateId",
      projectId: "GuardrailsBConfig.projectId",
      location: "GuardrailsBConfig.location",
    },
  };
  const policies: Record<string, string> = {
    policies: "RemoteGuardConfig",
    "policies.tcp":
      "GuardConnection.connectTimeoutMs / keepAliveMs / keepAliveProbes (keepalive retries and interval reported Ignored before Node.js 26 or through a tunnel)",
    "policies.tls": "GuardConnection.tls",
    "policies.http": "RemoteGuardConfig",
    "policies.http.version": "GuardConnection.http2",
    "policies.http.requestTimeout": "RemoteGuardConfig.timeoutMs (above the budget reported Ignored)",
    "policies.tunnel": "GuardConnection.tunnel (unresolved: RemoteGuardConfig.problem, fails closed)",
    "policies.auth": "compileGuardAuth; problems reported and RemoteGuardConfig.problem (fails closed)",
    "policies.auth.key": "GuardKeyAuth.key",
    "policies.auth.secretRef": "GuardKeyAuth.key",
    "policies.auth.location": "GuardKeyAuth.location",
    "policies.auth.cloudA": "GuardrailsAConfig.auth.aws",
    "policies.auth.cloudB": "GuardrailsBConfig.auth.google",
  };
  const out: Record<string, string> = {};
  for (const kind of kinds) {
    out[`${direction}[].${kind}`] = "RemoteGuardSpec.config";
    for (const [f, where] of Object.entries({ ...own[kind], ...policies })) out[`${direction}[].${kind}.${f}`] = where;
  }
  return out;
}

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
    ...remoteGuardFields("request", ["moderationA", "guardrailsA", "guardrailsB"]),
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
    ...remoteGuardFields("response", ["guardrailsA", "guardrailsB"]),
    "response[].response": "GuardSpec.response",
    "response[].response.message": "GuardCustomResponse.message",
    "response[].response.statusCode": "GuardCustomResponse.statusCode",
  };
  // Below these, the fields are a setting as a whole: a reference, a map, a connection setting reported whole, or a
  // credential the LLM table's compiler reads as it does a provider's `auth` (table.ts resolveAuth).
  const OPAQUE =
    /\.(backendRef|headers|forwardHeaderMatches|policies\.(tcp|tls|tunnel)|auth\.(secretRef|location|cloudA|cloudB))$/;

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
          - regex: { matches: ["ok-[0-9]+"], builtins: [CreditCard] }
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
    // (A pattern outside the linear-time subset is refused by the schema: test/support/validate-cases.ts.)
    assert.doesNotMatch(warning.message, /not served yet/);
    // Realtime sessions go through Sluice's relay: their text is guarded, their audio is not (and the status says so).
    assert.doesNotMatch(warning.message, /forwarded unread/);
    assert.match(warning.message, /Realtime sessions are guarded on their text events only: audio .* is not read/);
    assert.ok(conditions?.some((c) => c.type === "Attached"));
  });

  test("remote guards: credentials from the policy's Secrets as for providers; connection settings carried; a missing Secret or proxy fails closed and is named, never a secret", async () => {
    const OPENAI_KEY = "sk-guard-0123456789";
    const AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYGUARD";
    const PRIVATE_KEY = "-----BEGIN PRIVATE KEY-----\\nMIIfake\\n-----END PRIVATE KEY-----\\n";
    const cfg = tempConfigDir();
    cfg.write(
      "r.yaml",
      `${gatewayYaml(8080)}
---
apiVersion: v1
kind: Secret
metadata: { name: openai, namespace: default }
stringData: { Authorization: "Bearer ${OPENAI_KEY}" }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: AKIDGUARD, secretKey: "${AWS_SECRET}" }
---
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData:
  credentials.json: '{"type":"service_account","client_email":"g@p.iam.gserviceaccount.com","private_key":"${PRIVATE_KEY}"}'
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
metadata: { name: remote, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: llm }]
  backend:
    ai:
      promptGuard:
        request:
          - moderationA:
              model: omni-moderation-latest
              policies: { auth: { secretRef: { name: openai } }, http: { requestTimeout: 10s } }
          - guardrailsA:
              identifier: gr-1
              version: "2"
              region: eu-west-1
              policies:
                auth:
                  cloudA:
                    secretRef: { name: aws }
                    assumeRole: { roleArn: "arn:aws:iam::123456789012:role/guard" }
          - guardrailsA:
              identifier: gr-1
              version: "2"
              region: eu-west-1
              policies: { auth: { secretRef: { name: bedrock-key } }, http: { requestTimeout: 1500ms } }
          - guardrailsB:
              templateId: t1
              projectId: p1
              location: europe-west4
              policies:
                auth: { cloudB: { secretRef: { name: gcp } } }
                tls: { insecureSkipVerify: All }
                tcp: { connectTimeout: 2s, keepalive: { time: 30s, retries: 3 } }
                http: { version: HTTP2 }
          - moderationA:
              policies:
                auth: { key: ${OPENAI_KEY}, location: { header: { name: X-Api-Key } } }
                tunnel: { backendRef: { name: proxy, port: 3128 } }
        response:
          - guardrailsB: { templateId: t2, projectId: p1, policies: { auth: { cloudB: {} } } }
          - guardrailsA: { identifier: gr-2, version: DRAFT, region: us-east-1 }
`,
    );
    let result: Awaited<ReturnType<typeof loadAndTranslate>>["result"];
    try {
      result = (await loadAndTranslate([cfg.dir])).result;
    } finally {
      cfg.cleanup();
    }
    const entry = [...result.llm.entries.values()][0];
    const guard = Object.values(Object.values(entry?.backends ?? {})[0]?.providers ?? {})[0]?.ai.promptGuard;
    assert.ok(guard !== undefined);
    const configs = (specs: readonly GuardSpec[]) =>
      specs.map((g) => (g.kind === "regex" || g.kind === "webhook" ? undefined : g.config));
    const [moderation, signed, keyed, armor, tunnelled] = configs(guard.request);
    assert.deepEqual(moderation, {
      kind: "moderationA",
      model: "omni-moderation-latest",
      // The Bearer prefix of the Secret's default key is stripped (as for providers); the client writes it again.
      auth: { key: OPENAI_KEY, location: { header: { name: "Authorization", prefix: "Bearer" } } },
      timeoutMs: 4000,
    });
    assert.deepEqual(signed, {
      kind: "guardrailsA",
      identifier: "gr-1",
      version: "2",
      region: "eu-west-1",
      auth: {
        aws: {
          keys: { accessKeyId: "AKIDGUARD", secretAccessKey: AWS_SECRET },
          assumeRole: {
            roleArn: "arn:aws:iam::123456789012:role/guard",
            sessionName: "sluice-default.remote",
            tags: [],
          },
          region: "",
          service: "bedrock",
        },
      },
    });
    assert.deepEqual(keyed, {
      kind: "guardrailsA",
      identifier: "gr-1",
      version: "2",
      region: "eu-west-1",
      timeoutMs: 1500,
      problem: "Secret default/bedrock-key key Authorization not found",
    });
    assert.equal(armor?.kind, "guardrailsB");
    assert.deepEqual(
      armor?.kind === "guardrailsB" ? armor.auth?.google?.credentials?.client_email : undefined,
      "g@p.iam.gserviceaccount.com",
    );
    assert.equal(armor?.kind === "guardrailsB" ? armor.location : undefined, "europe-west4");
    // Connection settings are served: the guard's calls get a pool of their own with them.
    assert.deepEqual(armor?.connection, {
      tls: { insecure: "All" },
      http2: true,
      connectTimeoutMs: 2000,
      keepAliveMs: 30_000,
    });
    // A tunnel whose proxy cannot be found: every check fails closed, never around the proxy.
    assert.deepEqual(tunnelled, {
      kind: "moderationA",
      auth: { key: OPENAI_KEY, location: { header: { name: "X-Api-Key" } } },
      problem: "policies.tunnel: backendRef: Service default/proxy not found",
    });
    assert.deepEqual(configs(guard.response), [
      {
        kind: "guardrailsB",
        templateId: "t2",
        projectId: "p1",
        location: "us-central1",
        auth: { google: { type: "AccessToken" } },
      },
      { kind: "guardrailsA", identifier: "gr-2", version: "DRAFT", region: "us-east-1" },
    ]);

    const status = result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "remote");
    const text = JSON.stringify(status);
    for (const secret of [OPENAI_KEY, AWS_SECRET, "MIIfake"])
      assert.ok(!text.includes(secret), `status gives away ${secret}`);
    const ancestors = (status?.status ?? { ancestors: [] }) as {
      ancestors: { conditions: { type: string; message: string }[] }[];
    };
    const warning = ancestors.ancestors[0]?.conditions.find((c) => c.type === "Warning");
    const lines = warning?.message.split("; ") ?? [];
    const at = (i: number, kind: string) => `backend.ai.promptGuard.request[${i}].${kind}`;
    assert.ok(
      lines.includes(
        `${at(0, "moderationA")}.policies.http.requestTimeout: cut to 4000 ms: a direction's guards must answer within that, before Envoy's ext_proc timeout`,
      ),
      warning?.message,
    );
    assert.ok(
      lines.some((l) =>
        l.startsWith(
          `${at(2, "guardrailsA")}.policies.auth: Secret default/bedrock-key key Authorization not found: every check by this guard fails (fail closed)`,
        ),
      ),
      warning?.message,
    );
    assert.ok(!lines.some((l) => l.includes(".policies.tls")), warning?.message);
    assert.ok(
      lines.some((l) =>
        l.startsWith(`${at(3, "guardrailsB")}.policies.tcp.keepalive: retries and interval not applied`),
      ),
      warning?.message,
    );
    assert.ok(
      lines.includes(
        `${at(4, "moderationA")}.policies.tunnel: backendRef: Service default/proxy not found: every check by this guard fails (fail closed) until it is resolved`,
      ),
      warning?.message,
    );
    assert.ok(!lines.some((l) => l.includes("not served yet")), warning?.message);
  });
});
