// guardrailsB (Model Armor) on streamed responses (`streaming: Enabled`) through a real Envoy, with the official
// `openai` streaming client: each sentence is sent to the Model Armor fake's sanitizeModelResponse (test/helpers/
// fake-guards.ts) with a bearer token minted from the policy's service account key by the fake Google token endpoint; a
// sentence the fake de-identifies reaches the client masked, and a sentence it blocks ends the stream with the error
// event of the client's format, which the SDK raises as an APIError after the text that passed. The provider is paced
// (a pause after each sentence, as a model still generating), so the text before a block has gone out.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { type FakeGoogleAuth, startFakeGoogleAuth } from "../helpers/fake-google-auth.js";
import { type FakeModelArmor, startFakeModelArmor } from "../helpers/fake-guards.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";

const PAUSE_MS = 60;
const TEMPLATE = "projects/guard-project/locations/europe-west4/templates/guard-stream";

/** An OpenAI chat completions provider (Bearer sk-test) streaming the user's last message back one word per chunk. */
function startPacedProvider(): Promise<Server> {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", async () => {
      let b: { messages?: { role: string; content: unknown }[]; stream?: boolean } = {};
      try {
        b = JSON.parse(body) as typeof b;
      } catch {
        // The readiness probe (no body) gets the 400 below.
      }
      const authorized = req.headers.authorization === "Bearer sk-test";
      if (!authorized || b.stream !== true) {
        res.writeHead(authorized ? 400 : 401, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ error: { message: authorized ? "stream only" : "bad key", type: "invalid_request" } }),
        );
        return;
      }
      const last = b.messages?.at(-1)?.content;
      const words = (typeof last === "string" ? last : "").split(/(?<= )/);
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1700000000, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "" }));
      for (const w of words) {
        res.write(chunk({ content: w }));
        if (/[.!?] $/.test(w)) await new Promise((r) => setTimeout(r, PAUSE_MS));
      }
      res.end(`${chunk({}, "stop")}data: [DONE]\n\n`);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function resources(pacedPort: number, google: FakeGoogleAuth): string {
  const guard = `{ templateId: guard-stream, projectId: guard-project, location: europe-west4, policies: { auth: { cloudB: { secretRef: { name: gcp } } } } }`;
  return `apiVersion: v1
kind: Secret
metadata: { name: gcp, namespace: default }
stringData:
  credentials.json: ${JSON.stringify(JSON.stringify(google.serviceAccount))}
---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: grb-oa, namespace: default }
spec:
  ai:
    provider: { providerA: {}, host: 127.0.0.1, port: ${pacedPort} }
  policies:
    auth: { key: sk-test }
    ai:
      routes: { /v1/chat/completions: Completions }
      promptGuard:
        streaming: Enabled
        response: [{ guardrailsB: ${guard}, response: { message: "withheld by Model Armor" } }]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /grb-oa } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: grb-oa }]
`;
}

describe("guardrailsB (Model Armor) on a streamed response, end to end", { timeout: 60_000 }, () => {
  let env: LlmEnv;
  let paced: Server;
  let google: FakeGoogleAuth;
  let armor: FakeModelArmor;

  /** The text deltas an OpenAI chat stream gave, and the error it ended with (if any). */
  async function chatStream(content: string): Promise<{ deltas: string[]; error?: unknown }> {
    const client = new OpenAI({ apiKey: "c", baseURL: `${env.baseUrl}/grb-oa/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content }],
    });
    const deltas: string[] = [];
    try {
      for await (const c of stream) {
        const d = c.choices[0]?.delta.content;
        if (d) deltas.push(d);
      }
    } catch (error) {
      return { deltas, error };
    }
    return { deltas };
  }

  /** What the fake was asked since `from`: the method, the text, and whether the bearer token was one Google issued. */
  const asked = (from: number) =>
    armor.requests.slice(from).map((r) => {
      const auth = String(r.headers.authorization ?? "");
      return {
        path: r.path,
        text: (r.json as { modelResponseData?: { text?: string } }).modelResponseData?.text,
        validBearer: auth.startsWith("Bearer ") && google.issued(auth.slice(7)),
      };
    });
  const method = `/v1/${TEMPLATE}:sanitizeModelResponse`;

  before(async () => {
    paced = await startPacedProvider();
    google = await startFakeGoogleAuth();
    armor = await startFakeModelArmor({ templates: [TEMPLATE], bearer: (t) => google.issued(t) });
    armor.rai.set("bomb", "dangerous");
    armor.sdp.push({ pattern: /\b\d{3}-\d{2}-\d{4}\b/, infoType: "US_SOCIAL_SECURITY_NUMBER" });
    armor.sdpMode = "deidentify";
    const port = (paced.address() as AddressInfo).port;
    env = await startLlmEnv(resources(port, google), "/grb-oa/v1/chat/completions", {
      SLUICE_MODEL_ARMOR_ENDPOINT: armor.url,
    });
  });
  after(async () => {
    await env?.stop();
    paced?.closeAllConnections();
    paced?.close();
    await armor?.close();
    await google?.close();
  });

  test("a de-identified sentence reaches the client masked; Model Armor saw each sentence with a valid token", async () => {
    const from = armor.requests.length;
    const r = await chatStream("Hello there. My number is 123-45-6789 today. The end.");
    assert.equal(r.error, undefined);
    assert.equal(r.deltas.join(""), "Hello there. My number is [US_SOCIAL_SECURITY_NUMBER] today. The end.");
    // Text goes out in checked sentences (one or more, as they arrived while the previous was checked), never a word
    // at a time: the first sentence went out before the masked one was checked.
    assert.equal(r.deltas[0], "Hello there. ");
    assert.ok(
      r.deltas.every((d) => /[.!?] ?$/.test(d)),
      JSON.stringify(r.deltas),
    );
    const calls = asked(from);
    assert.ok(calls.length >= 2, JSON.stringify(calls));
    assert.ok(
      calls.every((c) => c.path === method && c.validBearer),
      JSON.stringify(calls),
    );
    assert.ok(
      calls.some((c) => c.text?.includes("123-45-6789")),
      JSON.stringify(calls),
    );
  });

  test("a blocked sentence ends the stream: the SDK raises an APIError after the text that passed", async () => {
    const from = armor.requests.length;
    const r = await chatStream("All fine here. Then how to build a bomb. More text.");
    assert.deepEqual(r.deltas, ["All fine here. "]);
    assert.ok(r.error instanceof OpenAI.APIError, String(r.error));
    assert.match(r.error.message, /withheld by Model Armor/);
    const calls = asked(from);
    assert.ok(
      calls.some((c) => c.text?.includes("bomb") && c.validBearer),
      JSON.stringify(calls),
    );
    // Nothing after the blocked sentence was checked or sent.
    assert.ok(!calls.some((c) => c.text?.includes("More text")), JSON.stringify(calls));
  });
});
