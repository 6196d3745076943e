// cloudB (Google) credentials on guarded Realtime sessions through a real Envoy: the official @google/genai client's
// Live API (Vertex AI mode, through the gateway as its proxy base URL, no Google credentials of its own) → Envoy →
// Sluice's Realtime relay, which gets an access token for the provider's service account from a fake Google token
// endpoint (the JWT bearer grant, its signature verified there) and opens a fake Vertex AI Live API with it as
// `Authorization: Bearer`; the prompt guards read the Live API's messages (the setup's system instruction and the
// client's turns masked; the model's text and its audio transcript masked across deltas; a Reject closing the session
// 1008 with the guard's message). An ID token (`cloudB.type: IdToken`, as a Cloud Run service behind IAM takes) opens
// an OpenAI-style Realtime provider; credentials the token endpoint refuses answer the upgrade 500, the provider not
// called.

import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { GoogleGenAI, type LiveServerMessage, Modality, type Session } from "@google/genai";
import { decodeJwt, jwtVerify } from "jose";
import { type FakeGeminiLive, LIVE_PATH, startFakeGeminiLive } from "../helpers/fake-gemini-live.js";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { type FakeRealtime, startFakeRealtime } from "../helpers/fake-realtime.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { type Family, sampleSum, scrape } from "../helpers/prom-text.js";
import { openRealtime, refusedUpgrade } from "../helpers/realtime-client.js";

const CARD = "4111 1111 1111 1111";
const tokens = (m: Map<string, Family>, type: string) =>
  sampleSum(m, "sluice_llm_tokens_total", { gateway: "default/gw", provider: "default", type });
const MODEL = "projects/my-project/locations/us-central1/publishers/google/models/gemini-live-2.5-flash";

function resources(
  live: FakeGeminiLive,
  rejecting: FakeGeminiLive,
  run: FakeRealtime,
  google: FakeGoogleAuth,
  metered: FakeGeminiLive,
): string {
  const json = (o: unknown) => JSON.stringify(JSON.stringify(o));
  const otherKey = generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs8", format: "pem" })
    .toString();
  const vertex = (name: string, port: number, secret: string, guard: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider: { providerF: { projectId: my-project, region: us-central1 }, host: 127.0.0.1, port: ${port} }
  policies:
    auth: { cloudB: { secretRef: { name: ${secret} } } }
    ai:
      routes: { /BidiGenerateContent: Realtime }
      promptGuard:
${guard}
`;
  const rule = (name: string, from: string, to: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name}${from} } }]
      filters: [{ type: URLRewrite, urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: ${to} } } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  const masking = `        streaming: Enabled
        request: [{ regex: { builtins: [CreditCard] } }]
        response: [{ regex: { builtins: [CreditCard] } }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData:
  credentials.json: ${json(google.serviceAccount)}
---
apiVersion: v1
kind: Secret
metadata: { name: gcp-wrong-key, namespace: default }
stringData:
  credentials.json: ${json({ ...google.serviceAccount, private_key: otherKey })}
${vertex("vertex", live.port, "gcp", masking)}
${vertex(
  "strict",
  rejecting.port,
  "gcp",
  `        request:
          - regex: { builtins: [CreditCard], action: Reject }
            response: { message: "no card numbers here", statusCode: 422 }`,
)}
${vertex("wrongkey", live.port, "gcp-wrong-key", masking)}
${vertex("metered", metered.port, "gcp", masking)}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: run, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${run.port} }
  policies:
    auth: { cloudB: { secretRef: { name: gcp }, type: IdToken, audience: "https://realtime-abc123-uc.a.run.app" } }
    ai:
      routes: { /v1/realtime: Realtime }
      promptGuard:
        request: [{ regex: { builtins: [CreditCard] } }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("vertex", "/ws", "/ws")}${rule("strict", "/ws", "/ws")}${rule("wrongkey", "/ws", "/ws")}${rule("run", "/v1", "/v1")}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: metered, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("metered", "/ws", "/ws")}
---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: budget, namespace: default }
spec:
  targetRefs: [{ group: gateway.networking.k8s.io, kind: HTTPRoute, name: metered }]
  traffic:
    rateLimit: { local: [{ tokens: 50, unit: Hours }] }
`;
}

/** A Live API session through the gateway, as the @google/genai SDK opens one behind a proxy; messages queued. */
async function live(
  env: LlmEnv,
  prefix: string,
  config: Parameters<GoogleGenAI["live"]["connect"]>[0]["config"],
): Promise<{
  session: Session;
  next: () => Promise<LiveServerMessage>;
  closed: Promise<{ code: number; reason: string }>;
}> {
  const ai = new GoogleGenAI({
    vertexai: true,
    // The gateway holds the credentials: the client sends none of Google's (its own key header is not forwarded).
    httpOptions: { baseUrl: `http://127.0.0.1:${env.port}/${prefix}${LIVE_PATH}`, headers: { "x-goog-api-key": "k" } },
  });
  const queue: LiveServerMessage[] = [];
  const waiting: ((m: LiveServerMessage) => void)[] = [];
  let onClose: (c: { code: number; reason: string }) => void = () => {};
  const closed = new Promise<{ code: number; reason: string }>((r) => {
    onClose = r;
  });
  const session = await ai.live.connect({
    model: MODEL,
    ...(config !== undefined ? { config } : {}),
    callbacks: {
      onmessage: (m) => {
        const w = waiting.shift();
        if (w !== undefined) w(m);
        else queue.push(m);
      },
      onclose: (e) => onClose({ code: e.code, reason: e.reason }),
    },
  });
  const next = () => {
    const m = queue.shift();
    if (m !== undefined) return Promise.resolve(m);
    return new Promise<LiveServerMessage>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error("no message within 15 s")), 15_000);
      waiting.push((x) => {
        clearTimeout(t);
        resolve(x);
      });
    });
  };
  return { session, next, closed };
}

/** Messages until one with `turnComplete`, inclusive. */
async function turn(next: () => Promise<LiveServerMessage>): Promise<LiveServerMessage[]> {
  const out: LiveServerMessage[] = [];
  for (;;) {
    const m = await next();
    out.push(m);
    if (m.serverContent?.turnComplete === true) return out;
  }
}

describe("cloudB credentials on guarded Realtime sessions (Vertex AI's Live API)", { timeout: 90_000 }, () => {
  let google: FakeGoogleAuth;
  let vertex: FakeGeminiLive;
  let strict: FakeGeminiLive;
  let run: FakeRealtime;
  let metered: FakeGeminiLive;
  let env: LlmEnv;
  const audience = "https://realtime-abc123-uc.a.run.app";

  before(async () => {
    google = await startFakeGoogleAuth();
    // The card number comes split across deltas (and across the transcript's deltas).
    const deltas = ["Your card ", "4111 1111 ", "1111 1111 is on file. ", "Anything else?"];
    vertex = await startFakeGeminiLive({ bearer: (t) => google.issued(t), deltas });
    strict = await startFakeGeminiLive({ bearer: (t) => google.issued(t), deltas: ["ok"] });
    run = await startFakeRealtime({
      name: "run",
      apiKey: "",
      // Cloud Run's IAM check: a Google-signed ID token for the service's URL.
      authorize: (a) => {
        const t = /^Bearer (\S+)$/.exec(a)?.[1];
        if (t === undefined) return false;
        const c = decodeJwt(t);
        return c.aud === audience && c.iss === "https://accounts.google.com";
      },
    });
    // Reports that grow as a session total would (16, 36, 56): each turn charged its growth (usage.ts).
    metered = await startFakeGeminiLive({
      bearer: (t) => google.issued(t),
      deltas: ["ok"],
      usage: (n) => ({
        promptTokenCount: 9 + 14 * (n - 1),
        responseTokenCount: 7 + 6 * (n - 1),
        totalTokenCount: 16 + 20 * (n - 1),
      }),
    });
    env = await startLlmEnv(resources(vertex, strict, run, google, metered), "/run/v1/realtime");
  });
  after(async () => {
    await env?.stop();
    for (const s of [vertex, strict, run, google, metered]) await s?.close();
  });

  test("the Live API session opens with a service account's token; the guards mask both ways", async () => {
    const grants = google.grants.filter((g) => g.kind === "jwt-bearer").length;
    const { session, next } = await live(env, "vertex", {
      responseModalities: [Modality.TEXT],
      systemInstruction: `The customer's card is ${CARD}.`,
    });
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: `Charge ${CARD} please` }] }] });
    const messages = await turn(next);
    session.close();
    // The provider's websocket: the path as the client asked, a token Google's endpoint issued to the service account.
    const h = vertex.handshakes.at(-1);
    assert.equal(h?.path, LIVE_PATH);
    const token = /^Bearer (\S+)$/.exec(String(h?.headers.authorization))?.[1];
    assert.ok(token !== undefined && google.issued(token), String(h?.headers.authorization));
    assert.equal(h?.headers["x-goog-api-key"], undefined);
    assert.ok(google.grants.filter((g) => g.kind === "jwt-bearer").length <= grants + 1);
    // What reached the provider: the setup (the model as the client named it) and the turn, masked.
    const setup = vertex.messages.at(-2)?.setup as { model?: string; systemInstruction?: unknown } | undefined;
    assert.equal(setup?.model, MODEL);
    assert.match(JSON.stringify(setup?.systemInstruction), /<CREDIT_CARD>/);
    assert.doesNotMatch(JSON.stringify(vertex.messages), /4111/);
    assert.match(JSON.stringify(vertex.messages.at(-1)), /Charge <CREDIT_CARD> please/);
    // The model's text: the card split across deltas is caught whole; the rest is as the provider sent it.
    const text = messages
      .map((m) => m.serverContent?.modelTurn?.parts?.map((p) => p.text ?? "").join("") ?? "")
      .join("");
    assert.equal(text, "Your card <CREDIT_CARD> is on file. Anything else?");
    assert.ok(messages.some((m) => m.serverContent?.generationComplete === true));
    assert.equal(messages.at(-1)?.usageMetadata?.totalTokenCount, 16);
  });

  test("audio answers: the audio passes, its output transcription is masked", async () => {
    const { session, next } = await live(env, "vertex", {
      responseModalities: [Modality.AUDIO],
      outputAudioTranscription: {},
    });
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: "Read my card back" }] }] });
    const messages = await turn(next);
    session.close();
    const transcript = messages.map((m) => m.serverContent?.outputTranscription?.text ?? "").join("");
    assert.equal(transcript, "Your card <CREDIT_CARD> is on file. Anything else?");
    const audio = messages.flatMap((m) => m.serverContent?.modelTurn?.parts ?? []).filter((p) => p.inlineData);
    assert.equal(audio.length, 4);
    assert.equal(audio[0]?.inlineData?.mimeType, "audio/pcm;rate=24000");
  });

  test("a Reject guard closes the Live session 1008 with its message; the turn never reaches the provider", async () => {
    const { session, next, closed } = await live(env, "strict", { responseModalities: [Modality.TEXT] });
    assert.equal((await next()).setupComplete !== undefined, true);
    const before = strict.messages.length;
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: `my card is ${CARD}` }] }] });
    const c = await closed;
    assert.equal(c.code, 1008);
    assert.equal(c.reason, "no card numbers here");
    assert.equal(strict.messages.length, before);
    assert.equal(strict.closes.at(-1)?.code, 1008);
  });

  test("usageMetadata is counted by its growth; the turn that spends the route's tokens budget ends the session 1008", async () => {
    const before = await scrape(env.sluice.adminPort);
    const { session, next, closed } = await live(env, "metered", { responseModalities: [Modality.TEXT] });
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: "one" }] }] });
    assert.equal((await turn(next)).at(-1)?.usageMetadata?.totalTokenCount, 16);
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: "two" }] }] });
    assert.equal((await turn(next)).at(-1)?.usageMetadata?.totalTokenCount, 36);
    const after = await scrape(env.sluice.adminPort);
    // 9 + 14 input and 7 + 6 output (the growth), not 9 + 23 and 7 + 13.
    assert.equal(tokens(after, "input") - tokens(before, "input"), 23);
    assert.equal(tokens(after, "output") - tokens(before, "output"), 13);
    // 50 - 16 - 20 = 14 left: the third turn (20 more) is served, then the session ends, with no foreign error event.
    session.sendClientContent({ turns: [{ role: "user", parts: [{ text: "three" }] }] });
    const third = await turn(next);
    assert.equal(third.at(-1)?.usageMetadata?.totalTokenCount, 56);
    assert.deepEqual(await closed, { code: 1008, reason: "token rate limit exceeded" });
    // The next session's upgrade is refused 429 by the LLM ext_proc, the provider not called.
    const handshakes = metered.handshakes.length;
    const r = await refusedUpgrade(env.port, `/metered${LIVE_PATH}`);
    assert.equal(r.status, 429);
    assert.equal(metered.handshakes.length, handshakes);
  });

  test("cloudB IdToken: an OpenAI-style Realtime service behind IAM gets a Google-signed ID token", async () => {
    const { ws, next } = await openRealtime(env.port, "/run/v1/realtime", "client-key");
    assert.equal((await next()).type, "session.created");
    ws.close();
    const token = /^Bearer (\S+)$/.exec(String(run.handshakes.at(-1)?.headers.authorization))?.[1] ?? "";
    const { payload } = await jwtVerify(token, google.idTokenKey, { audience, issuer: "https://accounts.google.com" });
    assert.match(String(payload.email), /@my-project\.iam\.gserviceaccount\.com$/);
    assert.doesNotMatch(JSON.stringify(run.handshakes.at(-1)?.headers), /client-key/);
  });

  test("an upgrade to a path the routes do not name Realtime is refused 400 (not left waiting for a body)", async () => {
    const handshakes = vertex.handshakes.length;
    const r = await refusedUpgrade(env.port, "/vertex/ws/google.cloud.aiplatform.v1beta1.PredictionService/Predict");
    assert.equal(r.status, 400);
    assert.match(r.body, /only paths the AI policy's routes name Realtime take websockets/);
    assert.equal(vertex.handshakes.length, handshakes);
  });

  test("credentials the token endpoint refuses: the upgrade is answered 500, the provider not called", async () => {
    const handshakes = vertex.handshakes.length;
    const r = await refusedUpgrade(env.port, `/wrongkey${LIVE_PATH}`);
    assert.equal(r.status, 500);
    assert.match(r.body, /credentials of provider default are not available/);
    assert.doesNotMatch(r.body, /PRIVATE KEY|assertion/);
    assert.equal(vertex.handshakes.length, handshakes);
  });
});
