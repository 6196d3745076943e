// Response guards on streams (src/extproc/llm/guards/stream.ts). Regex stage: what is released at once (a delta that
// ends where no match can go on goes out as it came), what is held (a run that may still become a match, from its
// first possible start), and, over random texts split at random places in every client format, that the streamed
// answer is exactly the buffered masking. Webhook stage (a real HTTP webhook in this process): text goes out in
// checked segments, masks replace them, a reject part way ends the stream with the client format's error event, a
// silent webhook follows the failure mode within the stream's budget.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { loadAndTranslate } from "../../src/cli/load.js";
import { RegexScanner } from "../../src/extproc/llm/guards/regex.js";
import type { GuardContext } from "../../src/extproc/llm/guards/runner.js";
import { STREAM_CHECK_BUDGET_MS, StreamGuard, segmentEnd } from "../../src/extproc/llm/guards/stream.js";
import type { ClientFormat } from "../../src/llm/index.js";
import type { GuardBuiltin, GuardSpec } from "../../src/translate/llm/guards.js";
import { gatewayYaml, localService } from "../helpers/gateway.js";
import { tempConfigDir } from "../helpers/processes.js";

const td = new TextDecoder();
const te = new TextEncoder();
const ALL: GuardBuiltin[] = ["Ssn", "CreditCard", "PhoneNumber", "Email", "CaSin"];

const regex = (builtins: GuardBuiltin[], patterns: string[] = []): GuardSpec => ({
  kind: "regex",
  patterns,
  builtins,
  action: "Mask",
  path: "backend.ai.promptGuard.response[0]",
  response: { message: "no", statusCode: 403 },
});

const fresh = () => new Promise((resolve) => setTimeout(resolve, 2));
const ctx: GuardContext = { headers: new Map(), vars: () => ({}), log: () => {} };

async function push(g: StreamGuard, s: string | Uint8Array, end = false): Promise<string> {
  return td.decode(await g.push(typeof s === "string" ? te.encode(s) : s, end));
}

// ---- client formats: deltas in, text out ----

interface Format {
  readonly client: ClientFormat;
  readonly start: string;
  delta(text: string): string;
  readonly finish: string;
  /** The text of every delta in `out`, in order. */
  deltas(out: string): string[];
}

const events = (out: string) =>
  out
    .split("\n\n")
    .filter((e) => e.includes("data: {"))
    .map((e) => JSON.parse(e.slice(e.indexOf("data: ") + 6)) as Record<string, unknown>);

const chat: Format = {
  client: "chat-completions",
  start: `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] })}\n\n`,
  delta: (content) =>
    `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`,
  finish: `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`,
  deltas: (out) =>
    events(out).map((j) => (j.choices as { delta: { content?: string } }[] | undefined)?.[0]?.delta.content ?? ""),
};

const ev = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

const messages: Format = {
  client: "messages",
  start:
    ev("message_start", { message: { id: "m", role: "assistant", content: [] } }) +
    ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
  delta: (text) => ev("content_block_delta", { index: 0, delta: { type: "text_delta", text } }),
  finish:
    ev("content_block_stop", { index: 0 }) +
    ev("message_delta", { delta: { stop_reason: "end_turn" } }) +
    ev("message_stop", {}),
  deltas: (out) =>
    events(out)
      .filter((j) => j.type === "content_block_delta")
      .map((j) => (j.delta as { text: string }).text),
};

let seq = 0;
const rev = (type: string, data: object) => ev(type, { ...data, sequence_number: ++seq });
const responses: Format = {
  client: "responses",
  start: rev("response.created", { response: { id: "r", status: "in_progress", output: [] } }),
  delta: (delta) => rev("response.output_text.delta", { item_id: "i", output_index: 0, content_index: 0, delta }),
  finish: "",
  deltas: (out) =>
    events(out)
      .filter((j) => j.type === "response.output_text.delta")
      .map((j) => j.delta as string),
};
/** The responses format's closing events repeat the whole text. */
const responsesFinish = (text: string) =>
  rev("response.output_text.done", { item_id: "i", output_index: 0, content_index: 0, text }) +
  rev("response.completed", {
    response: {
      id: "r",
      status: "completed",
      output: [{ type: "message", content: [{ type: "output_text", text }] }],
    },
  });

describe("stream regex guard: what is released", () => {
  test("a delta that ends where no match can go on goes out as it came, the same bytes", async () => {
    const g = new StreamGuard("chat-completions", [regex(ALL)]);
    for (const chunk of [chat.start, chat.delta("Hello "), chat.delta("there, "), chat.delta("friend!")]) {
      const bytes = te.encode(chunk);
      assert.equal(g.push(bytes, false), bytes, chunk);
    }
  });

  test("a digit run is held from its first digit; the words before it go at once", async () => {
    const g = new StreamGuard("chat-completions", [regex(ALL)]);
    assert.deepEqual(chat.deltas(await push(g, chat.delta("call 555 "))), ["call "]);
    assert.deepEqual(chat.deltas(await push(g, chat.delta("123 45"))), []);
    // "now" may still be an e-mail's local part (Email is on): held until what follows it comes.
    assert.deepEqual(chat.deltas(await push(g, chat.delta("67 now"))), ["<PHONE_NUMBER> "]);
    assert.deepEqual(chat.deltas(await push(g, chat.delta("!"))), ["now!"]);
    // Spaces and dashes alone start nothing.
    assert.deepEqual(chat.deltas(await push(g, chat.delta(" - "))), [" - "]);
  });

  test("Email holds a trailing word (it may be a local part); without Email the word goes at once", async () => {
    const withEmail = new StreamGuard("chat-completions", [regex(ALL)]);
    assert.deepEqual(chat.deltas(await push(withEmail, chat.delta("write to jane"))), ["write to "]);
    assert.deepEqual(chat.deltas(await push(withEmail, chat.delta("@example"))), []);
    assert.deepEqual(chat.deltas(await push(withEmail, chat.delta(".com today"))), ["<EMAIL> "]);
    // A trailing "." may still go on into a local part ("friend.x@...").
    assert.deepEqual(chat.deltas(await push(withEmail, chat.delta(", friend."))), ["today, "]);
    const digits = new StreamGuard("chat-completions", [regex(["CreditCard", "Ssn", "PhoneNumber", "CaSin"])]);
    assert.deepEqual(chat.deltas(await push(digits, chat.delta("Hello"))), ["Hello"]);
  });

  test("chunks that repeat the role with their text (Ollama) are deltas: a card split across them is masked", async () => {
    const g = new StreamGuard("chat-completions", [regex(ALL)]);
    const chunk = (content: string) =>
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content }, finish_reason: null }] })}\n\n`;
    let out = "";
    for (const piece of ["card 4111 1111 ", "1111 1111", " ok!"]) {
      const o = await push(g, chunk(piece));
      // Every chunk still goes out, with the text it releases (the role with it).
      assert.equal(events(o).length, 1, o);
      out += o;
    }
    out += await push(g, chat.finish, true);
    assert.equal(chat.deltas(out).join(""), "card <CREDIT_CARD> ok!");
    assert.ok(!out.includes("4111"), out);
  });

  test("the last text sent with the finish reason is read with the deltas before it", async () => {
    const g = new StreamGuard("chat-completions", [regex(["CreditCard"])]);
    const last = (content: string) =>
      `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content }, finish_reason: "stop" }] })}\n\n`;
    let out = await push(g, chat.delta("card 4111 1111 1111 "));
    out += await push(g, `${last("1111")}data: [DONE]\n\n`, true);
    assert.equal(chat.deltas(out).join(""), "card <CREDIT_CARD>");
    assert.ok(!out.includes("4111"), out);
    const finish = events(out).at(-1) as { choices: { finish_reason: string }[] };
    assert.equal(finish.choices[0]?.finish_reason, "stop");
  });

  test("a run longer than any match is released up to the longest match", async () => {
    const g = new StreamGuard("chat-completions", [regex(["CreditCard"])]);
    const out = chat.deltas(await push(g, chat.delta("9".repeat(60))));
    // A card spans at most 37 characters: the rest of the run cannot start one that goes on.
    assert.equal(out.join(""), "9".repeat(60 - 37));
    const rest = chat.deltas(await push(g, chat.finish, true)).join("");
    assert.equal(rest, "9".repeat(37));
  });

  test("segments of webhook checks end after a sentence or a line, or at the size bound", () => {
    assert.equal(segmentEnd("One. Two"), 5);
    assert.equal(segmentEnd("One.Two"), 0);
    assert.equal(segmentEnd("a\nb"), 2);
    assert.equal(segmentEnd("no end yet"), 0);
    assert.equal(segmentEnd(`${"word ".repeat(250)}x`), 1250);
  });
});

// ---- adversarial splits ----

/** A small deterministic generator (mulberry32), so a failure can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** PII, near misses and glue: pieces are joined with or without separators, so runs of digits grow long. */
const PIECES = [
  "4111 1111 1111 1111",
  "4111-1111-1111-1111",
  "4111111111111112",
  "5500 0000 0000 0004",
  "123-45-6789",
  "046 454 286",
  "(555) 123-4567",
  "+1 555 123 4567",
  "+44 20 7946 0958",
  "jane.doe@example.com",
  "bob@mail.example.org",
  "a@b",
  "user@",
  "42",
  "2024-01-01",
  "-",
  " ",
  "  ",
  ", ",
  ". ",
  "\n",
  "Hello",
  "word",
  "x".repeat(70),
  "9".repeat(45),
  "sk-abc123",
  "é",
  "@",
  "+",
  "(",
];

const SEPARATORS = ["", "", " ", ", ", ". ", "\n", " and ", "! "];

function randomText(r: () => number): string {
  let s = "";
  const n = 5 + Math.floor(r() * 25);
  for (let i = 0; i < n; i++) {
    s += (PIECES[Math.floor(r() * PIECES.length)] as string) + SEPARATORS[Math.floor(r() * SEPARATORS.length)];
  }
  return s;
}

function randomSplit(r: () => number, text: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    const n = r() < 0.3 ? 1 : 1 + Math.floor(r() * 12);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

describe("stream regex guard: adversarial splits", () => {
  for (const format of [chat, messages, responses]) {
    test(`${format.client}: streamed masking equals buffered masking over random splits`, async () => {
      for (let seed = 1; seed <= 400; seed++) {
        // Builtins alone (held by run), and with a user pattern (held by window).
        const patterns = seed % 2 === 0 ? ["sk-[a-z0-9]{6}"] : [];
        const specs = [regex(ALL, patterns)];
        const scanner = new RegexScanner(patterns, ALL);
        const r = rng(seed);
        const text = randomText(r);
        const expected = RegexScanner.apply(text, scanner.scan(text));
        const g = new StreamGuard(format.client, specs);
        const pieces = randomSplit(r, text);
        const input = format.start + pieces.map(format.delta).join("") + format.finish;
        const closing = format.client === "responses" ? responsesFinish(text) : "";
        // The SSE framing is split at random places too, and bytes of a UTF-8 character apart.
        const bytes = te.encode(input + closing);
        let out = "";
        let at = 0;
        while (at < bytes.length) {
          const n = 1 + Math.floor(r() * 200);
          out += await push(g, bytes.subarray(at, at + n), at + n >= bytes.length);
          at += n;
        }
        const streamed = format.deltas(out);
        assert.equal(streamed.join(""), expected, `seed ${seed}: ${JSON.stringify(pieces)}`);
        if (format.client === "responses") {
          const done = events(out).find((j) => j.type === "response.output_text.done");
          assert.equal(done?.text, expected, `seed ${seed}: done event`);
        }
      }
    });
  }
});

// ---- webhook guards on streams ----

interface Hook {
  readonly server: Server;
  readonly calls: string[][];
  /** Delay of each answer, ms; undefined never answers. */
  delay: number | undefined;
}

/** A webhook speaking Sluice's protocol: rejects "forbidden", masks "secret", passes the rest. */
function startHook(): Promise<Hook> {
  const hook: Hook = { server: undefined as unknown as Server, calls: [], delay: 0 };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      const input = JSON.parse(body) as { direction: string; texts: string[] };
      assert.equal(input.direction, "response");
      hook.calls.push(input.texts);
      const answer = input.texts.some((t) => t.includes("forbidden"))
        ? { action: "reject", reason: "forbidden word" }
        : input.texts.some((t) => t.includes("secret"))
          ? { action: "mask", texts: input.texts.map((t) => t.replaceAll("secret", "[redacted]")) }
          : { action: "pass" };
      if (hook.delay === undefined) return;
      setTimeout(() => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(answer));
      }, hook.delay);
    });
  });
  (hook as { server: Server }).server = server;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(hook)));
}

describe("stream webhook guard", () => {
  let hook: Hook;
  let dead: number;
  const webhook = (failureMode: "FailClosed" | "FailOpen" = "FailClosed", port?: number): GuardSpec => ({
    kind: "webhook",
    service: "default/hook",
    targets: [{ host: "127.0.0.1", port: port ?? (hook.server.address() as AddressInfo).port }],
    headers: [],
    forwardHeaderMatches: [],
    failureMode,
    path: "backend.ai.promptGuard.response[1]",
    response: { message: "not in this answer", statusCode: 451 },
  });
  before(async () => {
    hook = await startHook();
    const s = createServer();
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    dead = (s.address() as AddressInfo).port;
    s.close();
  });
  after(() => {
    hook.server.closeAllConnections();
    hook.server.close();
  });

  test("text goes out in checked sentences; the open sentence waits; a mask replaces its segment", async () => {
    hook.calls.length = 0;
    hook.delay = 0;
    const g = new StreamGuard("chat-completions", [webhook()], ctx);
    const first = await push(g, chat.start + chat.delta("The plan ") + chat.delta("is ready. The sec"));
    // The role chunk goes at once; the first sentence after its check; "The sec" is not a sentence yet.
    assert.ok(first.startsWith(chat.start), first);
    assert.deepEqual(chat.deltas(first), ["", "The plan is ready. "]);
    assert.deepEqual(hook.calls, [["The plan is ready. "]]);
    const rest = await push(g, chat.delta("ret code"), false);
    assert.deepEqual(chat.deltas(rest), []);
    const end = await push(g, chat.finish, true);
    assert.deepEqual(chat.deltas(end), ["The [redacted] code", ""]);
    assert.deepEqual(hook.calls.at(-1), ["The secret code"]);
    assert.ok(end.endsWith("data: [DONE]\n\n"));
  });

  test("the last text sent with the finish reason is checked with its segment; the finish goes out after it", async () => {
    hook.calls.length = 0;
    hook.delay = 0;
    const g = new StreamGuard("chat-completions", [webhook()], ctx);
    const last = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: " secret. Bye." }, finish_reason: "stop" }] })}\n\n`;
    let out = await push(g, chat.start + chat.delta("One. Two"));
    await fresh();
    out += await push(g, `${last}data: [DONE]\n\n`, true);
    assert.deepEqual(chat.deltas(out), ["", "One. ", "Two [redacted]. Bye."]);
    assert.deepEqual(hook.calls, [["One. "], ["Two secret. Bye."]]);
    const all = events(out) as { choices: { finish_reason: string | null }[] }[];
    assert.equal(all.at(-1)?.choices[0]?.finish_reason, "stop");
    assert.ok(out.endsWith("data: [DONE]\n\n"));
  });

  test("regex guards mask first, the webhook sees masked text; a split card never reaches it", async () => {
    hook.calls.length = 0;
    const g = new StreamGuard("messages", [regex(["CreditCard"]), webhook()], ctx);
    let out = await push(g, messages.start + messages.delta("card 4111 11") + messages.delta("11 1111 1111"));
    out += await push(g, messages.delta(" ok. "));
    out += await push(g, messages.finish, true);
    assert.equal(messages.deltas(out).join(""), "card <CREDIT_CARD> ok. ");
    assert.ok(!JSON.stringify(hook.calls).includes("4111"), JSON.stringify(hook.calls));
  });

  for (const [format, check] of [
    [
      chat,
      (out: string) => {
        // The OpenAI SDKs raise an APIError for a data event holding `error`; no [DONE] follows.
        const last = events(out).at(-1) as { error?: { message: string; type: string } };
        assert.equal(last.error?.message, "not in this answer");
        assert.ok(!out.includes("[DONE]"));
      },
    ],
    [
      messages,
      (out: string) => {
        assert.match(out, /event: error\ndata: /);
        const last = events(out).at(-1) as { type: string; error: { type: string; message: string } };
        assert.deepEqual(last, { type: "error", error: { type: last.error.type, message: "not in this answer" } });
        assert.ok(!out.includes("message_stop"));
      },
    ],
    [
      responses,
      (out: string) => {
        assert.match(out, /event: error\ndata: /);
        const all = events(out);
        const last = all.at(-1) as { type: string; message: string; sequence_number: number };
        assert.equal(last.type, "error");
        assert.equal(last.message, "not in this answer");
        // After every event the client got.
        for (const e of all.slice(0, -1)) assert.ok((e.sequence_number as number) < last.sequence_number);
      },
    ],
  ] as const) {
    test(`${format.client}: a reject part way ends the stream with the format's error event`, async () => {
      hook.calls.length = 0;
      const g = new StreamGuard(format.client, [webhook()], ctx);
      const texts = (out: string) => format.deltas(out).filter((d) => d !== "");
      let out = await push(g, format.start + format.delta("All fine here. "));
      assert.deepEqual(texts(out), ["All fine here. "]);
      // Chunks that come later than right behind the check's answer (those join the next check).
      await fresh();
      out += await push(g, format.delta("Then a forbidden "));
      await fresh();
      out += await push(g, format.delta("thing. And more. "));
      check(out);
      assert.ok(!out.includes("forbidden"), out);
      assert.ok(!out.includes("And more"), out);
      // Nothing after the error, whatever comes.
      assert.equal(
        await push(
          g,
          format.delta("late text. ") + format.finish + (format === responses ? responsesFinish("x") : ""),
          true,
        ),
        "",
      );
      assert.deepEqual(texts(out), ["All fine here. "]);
    });
  }

  test("responses: the events repeating the whole text carry the masked text", async () => {
    const g = new StreamGuard("responses", [webhook()], ctx);
    const text = "My secret is safe. Really.";
    const out = await push(g, responses.start + responses.delta("My secret is ") + responses.delta("safe. Really."));
    const end = out + (await push(g, responsesFinish(text), true));
    assert.equal(responses.deltas(end).join(""), "My [redacted] is safe. Really.");
    const all = events(end);
    assert.equal(all.find((j) => j.type === "response.output_text.done")?.text, "My [redacted] is safe. Really.");
    assert.ok(!end.includes("My secret"), end);
  });

  test("a webhook that does not answer: FailClosed ends the stream within the budget, FailOpen passes", async () => {
    hook.delay = undefined;
    const t0 = performance.now();
    const closed = new StreamGuard("chat-completions", [webhook()], ctx);
    const out = await push(closed, chat.start + chat.delta("Hi there. ") + chat.finish, true);
    const took = performance.now() - t0;
    assert.ok(took >= STREAM_CHECK_BUDGET_MS - 50 && took < STREAM_CHECK_BUDGET_MS + 1000, `${took} ms`);
    assert.match(out, /not in this answer/);
    assert.ok(!out.includes("Hi there"));
    hook.delay = 0;
    const open = new StreamGuard("chat-completions", [webhook("FailOpen", dead)], ctx);
    const passed = await push(open, chat.start + chat.delta("Hi there. ") + chat.finish, true);
    assert.equal(chat.deltas(passed).join(""), "Hi there. ");
    const down = new StreamGuard("chat-completions", [webhook("FailClosed", dead)], ctx);
    assert.match(await push(down, chat.start + chat.delta("Hi there. ") + chat.finish, true), /not in this answer/);
  });

  test("chunks that waited behind a check join the next check instead of each waiting for one", async () => {
    hook.calls.length = 0;
    hook.delay = 30;
    const g = new StreamGuard("chat-completions", [webhook()], ctx);
    await push(g, chat.start + chat.delta("One. "));
    // Back to back after the answer, as Envoy's queued chunks come: no check of their own.
    const queued = g.push(te.encode(chat.delta("Two. ")), false);
    assert.ok(!(queued instanceof Promise));
    assert.deepEqual(chat.deltas(td.decode(queued)), []);
    await new Promise((r) => setTimeout(r, 5));
    const later = await push(g, chat.delta("Three. "));
    assert.deepEqual(chat.deltas(later), ["Two. Three. "]);
    assert.deepEqual(hook.calls, [["One. "], ["Two. Three. "]]);
    hook.delay = 0;
  });
});

test("status: a webhook response guard with streaming: Enabled is served on streams, no note about it", async () => {
  const cfg = tempConfigDir();
  cfg.write(
    "r.yaml",
    `${gatewayYaml(8080)}
${localService("hook", 9)}
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
      promptGuard:
        streaming: Enabled
        response: [{ regex: { builtins: [Email] } }, { webhook: { backendRef: { name: hook, port: 80 } } }]
`,
  );
  let result: Awaited<ReturnType<typeof loadAndTranslate>>["result"];
  try {
    result = (await loadAndTranslate([cfg.dir])).result;
  } finally {
    cfg.cleanup();
  }
  const guard = Object.values(Object.values([...result.llm.entries.values()][0]?.backends ?? {})[0]?.providers ?? {})[0]
    ?.ai.promptGuard;
  assert.equal(guard?.streaming, true);
  assert.deepEqual(
    guard?.response.map((g) => g.kind),
    ["regex", "webhook"],
  );
  const status = result.statuses.find((s) => s.kind === "GwPolicy" && s.name === "guard")?.status as
    | { ancestors: { conditions: { type: string; message: string }[] }[] }
    | undefined;
  const conditions = status?.ancestors[0]?.conditions ?? [];
  assert.ok(
    conditions.some((c) => c.type === "Attached"),
    JSON.stringify(conditions),
  );
  assert.ok(!conditions.some((c) => c.type === "Warning"), JSON.stringify(conditions));
});
