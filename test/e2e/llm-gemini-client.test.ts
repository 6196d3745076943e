// Google's own SDK (`@google/genai`) pointed at Sluice (its httpOptions.baseUrl), through a real Envoy, to a provider
// of every format Sluice serves: generateContent (Gemini, the body as the client wrote it), chat completions
// (OpenAI), messages (Anthropic), Converse (Bedrock, SigV4 verified) and Responses (a custom provider). Table-driven:
// every provider, buffered and streamed, plain text, a function declaration and a tool loop; the streamed answer the
// SDK reads, put together, equals the buffered one. The fakes check what the real services check (Gemini's unknown
// names and roles, Converse's toolConfig rule, Responses' call ids), so a translation they would refuse fails here.
// Errors reach the SDK as Google's error JSON, with the status it raises ApiError for. countTokens is counted by the
// provider's own API (Gemini, Anthropic's count_tokens, Bedrock's CountTokens) and answered as Google's.
// embedContent / batchEmbedContents reach Gemini as written and OpenAI's embeddings API translated, their tokens counted.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ApiError, type GenerateContentResponse, GoogleGenAI, type Part } from "@google/genai";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const AWS = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  region: "eu-west-1",
};

const PROVIDERS = {
  gemini: { yaml: "providerE: {}", auth: "auth: { secretRef: { name: keys, key: gemini } }", key: "g-key" },
  openai: { yaml: "providerA: {}", auth: "auth: { secretRef: { name: keys, key: openai } }", key: "sk-openai" },
  claude: { yaml: "providerD: {}", auth: "auth: { secretRef: { name: keys, key: anthropic } }", key: "sk-ant" },
  bedrock: {
    yaml: `providerG: { region: ${AWS.region}, model: "anthropic.claude-sonnet-4-5-20250929-v1:0" }`,
    auth: "auth: { cloudA: { secretRef: { name: aws } } }",
    key: undefined,
  },
  resp: {
    yaml: "custom: { formats: [{ type: Responses, path: /v1/responses }] }",
    auth: "auth: { key: sk-resp }",
    key: "sk-resp",
  },
} as const;
type Name = keyof typeof PROVIDERS;
const NAMES = Object.keys(PROVIDERS) as Name[];

function resources(f: Record<string, FakeProvider>): string {
  const backends = NAMES.map(
    (n) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${n}, namespace: default }
spec:
  ai:
    provider:
      ${PROVIDERS[n].yaml}
      host: 127.0.0.1
      port: ${f[n]?.port}
  policies:
    ${PROVIDERS[n].auth}
`,
  ).join("");
  const rules = NAMES.map(
    (n) => `
    - matches: [{ path: { type: PathPrefix, value: /${n}/ } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${n} }]`,
  ).join("");
  // The same OpenAI fake behind prompt guards, which read and mask the generateContent client's own texts.
  const guarded = `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: guarded, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${f.openai?.port} }
  policies:
    auth: { secretRef: { name: keys, key: openai } }
    ai:
      promptGuard:
        request:
          - regex: { matches: ["forbidden"], action: Reject }
            response: { message: "not here", statusCode: 422 }
          - regex: { builtins: [Email] }
        streaming: Enabled
        response:
          - regex: { matches: ["Paris"] }
`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: keys, namespace: default }
stringData: { anthropic: sk-ant, gemini: g-key, openai: sk-openai }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${AWS.accessKeyId}, secretKey: ${AWS.secretAccessKey} }
${backends}${guarded}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rules}
    - matches: [{ path: { type: PathPrefix, value: /guarded/ } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: guarded }]
    - name: metered
      matches: [{ path: { type: PathPrefix, value: /metered/ } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: openai }]
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: metered-tokens, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: llm, sectionName: metered }]
  traffic:
    rateLimit:
      local: [{ tokens: 6, unit: Minutes }]
`;
}

const weather = {
  name: "get_weather",
  description: "Weather of a city",
  parametersJsonSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** What a client reads of an answer: text, function calls, finish reason, usage. */
interface Answer {
  text: string;
  calls: { name: string | undefined; args: unknown }[];
  finish: string | undefined;
  usage: { prompt?: number | undefined; candidates?: number | undefined; total?: number | undefined };
}

function answerOf(responses: readonly GenerateContentResponse[]): Answer {
  const parts: Part[] = responses.flatMap((r) => r.candidates?.[0]?.content?.parts ?? []);
  const last = responses.at(-1);
  const finish = responses.map((r) => r.candidates?.[0]?.finishReason).filter((f) => f !== undefined);
  const u = [...responses].reverse().find((r) => r.usageMetadata !== undefined)?.usageMetadata;
  return {
    text: parts
      .filter((p) => typeof p.text === "string" && p.thought !== true)
      .map((p) => p.text)
      .join(""),
    calls: parts
      .filter((p) => p.functionCall !== undefined)
      .map((p) => ({ name: p.functionCall?.name, args: p.functionCall?.args })),
    finish: finish.at(-1) ?? last?.candidates?.[0]?.finishReason,
    usage: { prompt: u?.promptTokenCount, candidates: u?.candidatesTokenCount, total: u?.totalTokenCount },
  };
}

describe("generateContent clients (@google/genai) reach every provider format", { timeout: 120_000 }, () => {
  const fakes: Record<string, FakeProvider> = {};
  let env: LlmEnv;
  const client = (n: Name) =>
    new GoogleGenAI({ apiKey: "client-key", httpOptions: { baseUrl: `${env.baseUrl}/${n}` } });
  const seen = (n: Name) => fakes[n]?.requests.at(-1);

  before(async () => {
    for (const n of NAMES) {
      const key = PROVIDERS[n].key;
      fakes[n] = await startFakeProvider(
        n === "bedrock" ? { name: n, aws: AWS } : { name: n, ...(key !== undefined ? { apiKey: key } : {}) },
      );
    }
    env = await startLlmEnv(resources(fakes), "/openai/v1beta/models/m:generateContent");
  });
  after(async () => {
    await env?.stop();
    for (const f of Object.values(fakes)) await f.close();
  });

  async function both(n: Name, params: Parameters<GoogleGenAI["models"]["generateContent"]>[0]): Promise<Answer> {
    const ai = client(n);
    const buffered = answerOf([await ai.models.generateContent(params)]);
    const chunks: GenerateContentResponse[] = [];
    for await (const c of await ai.models.generateContentStream(params)) chunks.push(c);
    assert.ok(chunks.length > 1, `${n}: the answer came in several events`);
    const streamed = answerOf(chunks);
    assert.match(seen(n)?.path ?? "", n === "bedrock" ? /converse-stream$/ : /./);
    assert.deepEqual(streamed, buffered, `${n}: the streamed answer equals the buffered one`);
    return buffered;
  }

  for (const n of NAMES) {
    test(`${n}: text with a system instruction and generation settings, buffered = streamed`, async () => {
      // Responses has no stop sequences: asked for them, that provider is refused (a test below).
      const stop = n === "resp" ? {} : { stopSequences: ["END"] };
      const a = await both(n, {
        model: "m",
        contents: "Paris?",
        config: { systemInstruction: "Answer briefly.", temperature: 0.5, maxOutputTokens: 300, ...stop },
      });
      assert.match(a.text, new RegExp(`Hello from ${n}: Paris\\?`));
      assert.equal(a.finish, "STOP");
      assert.deepEqual(a.usage, { prompt: 11, candidates: 7, total: 18 });
      const body = seen(n)?.json ?? {};
      // Each provider got the instruction and settings under its own names.
      const expected: Record<Name, (b: Record<string, unknown>) => void> = {
        gemini: (b) => {
          assert.deepEqual(b.systemInstruction, { parts: [{ text: "Answer briefly." }], role: "user" });
          assert.deepEqual(b.generationConfig, { temperature: 0.5, maxOutputTokens: 300, stopSequences: ["END"] });
          assert.match(seen(n)?.path ?? "", /^\/v1beta\/models\/m:streamGenerateContent\?alt=sse$/);
        },
        openai: (b) => {
          assert.deepEqual(b.messages, [
            { role: "system", content: "Answer briefly." },
            { role: "user", content: "Paris?" },
          ]);
          assert.equal(b.temperature, 0.5);
          assert.equal(b.max_completion_tokens, 300);
          assert.deepEqual(b.stop, ["END"]);
        },
        claude: (b) => {
          assert.deepEqual(b.system, [{ type: "text", text: "Answer briefly." }]);
          assert.equal(b.max_tokens, 300);
          assert.deepEqual(b.stop_sequences, ["END"]);
        },
        bedrock: (b) => {
          assert.deepEqual(b.system, [{ text: "Answer briefly." }]);
          assert.deepEqual(b.inferenceConfig, { maxTokens: 300, temperature: 0.5, stopSequences: ["END"] });
        },
        resp: (b) => {
          assert.match(`${String(b.instructions ?? "")} ${JSON.stringify(b.input)}`, /Answer briefly\./);
          assert.equal(b.max_output_tokens, 300);
          assert.equal(b.temperature, 0.5);
        },
      };
      expected[n](body);
    });

    test(`${n}: a function declaration comes back as a whole functionCall, buffered = streamed`, async () => {
      const a = await both(n, {
        model: "m",
        contents: "Weather in Paris?",
        config: { tools: [{ functionDeclarations: [weather] }] },
      });
      assert.deepEqual(a.calls, [{ name: "get_weather", args: { city: "Paris" } }]);
      assert.equal(a.finish, "STOP");
    });

    test(`${n}: a tool loop (the model's call and the function's response) is a history the provider accepts`, async () => {
      const r = await client(n).models.generateContent({
        model: "m",
        contents: [
          { role: "user", parts: [{ text: "Weather in Paris?" }] },
          { role: "model", parts: [{ functionCall: { id: "call_1", name: "get_weather", args: { city: "Paris" } } }] },
          {
            role: "user",
            parts: [{ functionResponse: { id: "call_1", name: "get_weather", response: { temp: 21 } } }],
          },
        ],
        config: { tools: [{ functionDeclarations: [weather] }] },
      });
      assert.ok(r.candidates?.[0]?.content?.parts !== undefined);
      assert.equal(seen(n)?.path.includes("generateContent") || n !== "gemini", true);
      assert.match(seen(n)?.body ?? "", /21/, `${n} got the function's response`);
    });
  }

  for (const n of ["gemini", "claude", "bedrock"] as const) {
    test(`${n}: countTokens is answered as Google's {totalTokens}, counted by the provider's own API`, async () => {
      const contents = [
        { role: "user", parts: [{ text: "Weather in Paris?" }] },
        { role: "model", parts: [{ text: "Sunny." }] },
        { role: "user", parts: [{ text: "And tomorrow?" }] },
      ];
      const r = await client(n).models.countTokens({ model: "m", contents });
      assert.ok(typeof r.totalTokens === "number" && r.totalTokens > 0, JSON.stringify(r));
      const seen = fakes[n]?.requests.at(-1);
      const expected: Record<typeof n, RegExp> = {
        gemini: /^\/v1beta\/models\/m:countTokens$/,
        claude: /^\/v1\/messages\/count_tokens$/,
        bedrock: /\/count-tokens$/,
      };
      assert.match(seen?.path ?? "", expected[n]);
      assert.match(seen?.body ?? "", /And tomorrow\?/);
    });
  }

  test("countTokens to a provider without a token count API (OpenAI) is Google's 501 error", async () => {
    await assert.rejects(
      client("openai").models.countTokens({ model: "m", contents: "hi" }),
      (e: unknown) =>
        e instanceof ApiError && e.status === 501 && /"code":501/.test(e.message) && /does not serve/.test(e.message),
    );
  });

  test("a field Sluice cannot carry is Google's 400 naming it, and the provider is not called", async () => {
    const before = fakes.resp?.requests.length;
    await assert.rejects(
      client("resp").models.generateContent({ model: "m", contents: "hi", config: { topK: 5 } }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /generationConfig\.topK/.test(e.message),
    );
    await assert.rejects(
      client("resp").models.generateContent({ model: "m", contents: "hi", config: { stopSequences: ["END"] } }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /generationConfig\.stopSequences/.test(e.message),
    );
    await assert.rejects(
      client("claude").models.generateContent({ model: "m", contents: "hi", config: { candidateCount: 2 } }),
      (e: unknown) => e instanceof ApiError && e.status === 400 && /generationConfig\.candidateCount/.test(e.message),
    );
    assert.equal(fakes.resp?.requests.length, before);
  });

  test("prompt guards read a generateContent client's texts: masked, rejected in Google's error JSON, masked across a stream", async () => {
    const ai = new GoogleGenAI({ apiKey: "client-key", httpOptions: { baseUrl: `${env.baseUrl}/guarded` } });
    const r = await ai.models.generateContent({ model: "m", contents: "mail me at jo@example.com" });
    assert.match(r.text ?? "", /Hello from openai/);
    assert.doesNotMatch(JSON.stringify(fakes.openai?.requests.at(-1)?.json), /jo@example\.com/);
    await assert.rejects(
      ai.models.generateContent({ model: "m", contents: "something forbidden" }),
      (e: unknown) => e instanceof ApiError && e.status === 422 && /not here/.test(e.message),
      "the request guard rejects",
    );
    // The answer names Paris: the response guard masks it in the buffered answer and across the streamed events.
    const buffered = await ai.models.generateContent({ model: "m", contents: "Paris?" });
    let streamed = "";
    for await (const c of await ai.models.generateContentStream({ model: "m", contents: "Paris?" }))
      streamed += c.text ?? "";
    for (const text of [buffered.text ?? "", streamed]) {
      assert.match(text, /^Hello from openai: /);
      assert.doesNotMatch(text, /Paris/);
    }
    assert.equal(streamed, buffered.text);
  });

  test("embedContent / batchEmbedContents: Gemini gets them as written, OpenAI's embeddings API translated", async () => {
    const params = {
      model: "text-embedding-3-small",
      contents: ["What is the meaning of life?", "How do birds fly?"],
      config: { outputDimensionality: 5, taskType: "RETRIEVAL_DOCUMENT" },
    };
    // The SDK sends the batch form (batchEmbedContents, one request per content).
    const fromOpenai = await client("openai").models.embedContent(params);
    assert.deepEqual(
      fromOpenai.embeddings?.map((e) => e.values),
      [
        [0.1, 0.2, 0.3, 0.4, 0.5],
        [0.1, 0.2, 0.3, 0.4, 0.5],
      ],
    );
    assert.equal(seen("openai")?.path, "/v1/embeddings");
    assert.deepEqual(seen("openai")?.json?.input, params.contents);
    assert.equal(seen("openai")?.json?.dimensions, 5, "outputDimensionality → dimensions");
    assert.equal(seen("openai")?.json?.model, "text-embedding-3-small");
    const fromGemini = await client("gemini").models.embedContent({ ...params, model: "gemini-embedding-001" });
    assert.deepEqual(
      fromGemini.embeddings?.map((e) => e.values?.length),
      [5, 5],
    );
    assert.equal(seen("gemini")?.path, "/v1beta/models/gemini-embedding-001:batchEmbedContents");
    const asWritten = seen("gemini")?.json?.requests as Record<string, unknown>[];
    assert.deepEqual(
      asWritten.map((r) => [r.model, r.taskType, r.outputDimensionality]),
      [
        ["models/gemini-embedding-001", "RETRIEVAL_DOCUMENT", 5],
        ["models/gemini-embedding-001", "RETRIEVAL_DOCUMENT", 5],
      ],
    );
    // embedContent, one content (Google's REST reference; the SDK sends the batch form).
    const one = async (prefix: Name, model: string) => {
      const r = await fetch(`${env.baseUrl}/${prefix}/v1beta/models/${model}:embedContent`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-goog-api-key": "client-key" },
        body: JSON.stringify({ content: { parts: [{ text: "hi" }] }, outputDimensionality: 2 }),
      });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
    assert.deepEqual(await one("openai", "text-embedding-3-small"), {
      status: 200,
      body: { embedding: { values: [0.1, 0.2] } },
    });
    assert.deepEqual(seen("openai")?.json?.input, ["hi"]);
    assert.deepEqual(await one("gemini", "gemini-embedding-001"), {
      status: 200,
      body: { embedding: { values: [0.1, 0.2] } },
    });
    assert.equal(seen("gemini")?.path, "/v1beta/models/gemini-embedding-001:embedContent");
    // Anthropic has no embeddings API: Google's error JSON, the provider not called.
    const asked = fakes.claude?.requests.length;
    await assert.rejects(
      client("claude").models.embedContent(params),
      (e: unknown) => e instanceof ApiError && e.status === 501 && /does not serve/.test(e.message),
    );
    assert.equal(fakes.claude?.requests.length, asked);
  });

  test("embeddings' tokens count as the Embeddings route type's: a tokens limit fills up from them", async () => {
    const ai = new GoogleGenAI({ apiKey: "client-key", httpOptions: { baseUrl: `${env.baseUrl}/metered` } });
    const embed = () => ai.models.embedContent({ model: "text-embedding-3-small", contents: ["count me"] });
    // 4 prompt tokens per answer (OpenAI's usage), 6 per minute: two answers spend it.
    await embed();
    await embed();
    await assert.rejects(embed(), (e: unknown) => e instanceof ApiError && e.status === 429);
  });

  test("a provider's error reaches the SDK as Google's error JSON with the provider's status", async () => {
    const f = fakes.claude;
    assert.ok(f !== undefined);
    f.failWith = 529;
    try {
      await assert.rejects(
        client("claude").models.generateContent({ model: "m", contents: "hi" }),
        (e: unknown) => e instanceof ApiError && e.status === 529 && /"status":"UNAVAILABLE"/.test(e.message),
      );
    } finally {
      f.failWith = undefined;
    }
  });
});
