// Route types forwarded as they are (Passthrough, Models) to a providerG (Bedrock) backend, through a real Envoy: the
// request goes with a SigV4 signature over its method, path, query and body (Bedrock refuses `UNSIGNED-PAYLOAD`, so
// the body is read for its hash), which the fake Bedrock verifies as the real one does; on a route served in one stage
// and on one served by the upstream stage after a URL rewrite. Realtime (a websocket) cannot be signed: Bedrock has no
// websocket API, and the request is refused (501) without reaching it.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";

const REGION = "eu-west-1";
const KEYS = { accessKeyId: "AKIDPASSTHROUGH", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const MODEL = "anthropic.claude-3-haiku-20240307-v1:0";

function resources(port: number): string {
  const backend = (name: string) => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  ai:
    provider:
      providerG: { region: ${REGION}, model: ${MODEL} }
      host: 127.0.0.1
      port: ${port}
  policies:
    auth: { cloudA: { secretRef: { name: aws } } }
    ai:
      routes:
        /invoke: Passthrough
        /foundation-models: Models
        /realtime: Realtime
        /v1/chat/completions: Completions
`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${KEYS.accessKeyId}, secretKey: ${KEYS.secretAccessKey} }
${backend("bedrock")}${backend("bedrock-b")}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
    - matches: [{ path: { type: PathPrefix, value: /two/model } }]
      filters:
        - type: URLRewrite
          urlRewrite: { path: { type: ReplacePrefixMatch, replacePrefixMatch: /model } }
      backendRefs:
        - { group: sluice.dev, kind: GwBackend, name: bedrock }
        - { group: sluice.dev, kind: GwBackend, name: bedrock-b }
    - matches: [{ path: { type: PathPrefix, value: / } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: bedrock }]
`;
}

describe("providerG (Bedrock): route types forwarded as they are go signed", { timeout: 60_000 }, () => {
  let bedrock: FakeProvider;
  let env: LlmEnv;
  const invokeBody = JSON.stringify({
    anthropic_version: "bedrock-2023-05-31",
    max_tokens: 64,
    messages: [{ role: "user", content: "native été" }],
  });

  before(async () => {
    bedrock = await startFakeProvider({ name: "bedrock", aws: { region: REGION, ...KEYS } });
    env = await startLlmEnv(resources(bedrock.port), "/v1/chat/completions");
  });
  after(async () => {
    await env?.stop();
    await bedrock?.close();
  });

  const invoke = (path: string) =>
    request(env.port, path, {
      method: "POST",
      // The client's own credential never reaches Bedrock; nor does a session token it sends.
      headers: { "content-type": "application/json", authorization: "Bearer client", "x-amz-security-token": "x" },
      body: invokeBody,
    });

  test("Passthrough (InvokeModel, one stage): signed over the body as sent, which arrives unchanged", async () => {
    const path = `/model/${encodeURIComponent(MODEL)}/invoke`;
    const r = await invoke(path);
    assert.equal(r.status, 200, r.body);
    assert.equal(
      (JSON.parse(r.body) as { content: { text: string }[] }).content[0]?.text,
      "Hello from bedrock: native été",
    );
    const seen = bedrock.requests.at(-1);
    assert.equal(seen?.path, path);
    assert.equal(seen?.body, invokeBody);
    assert.match(
      String(seen?.headers.authorization),
      /^AWS4-HMAC-SHA256 Credential=AKIDPASSTHROUGH\/\d{8}\/eu-west-1\/bedrock\//,
    );
    assert.equal(seen?.headers["x-amz-security-token"], undefined);
  });

  test("Passthrough through the upstream stage after a URL rewrite: the rewritten path is the one signed", async () => {
    const r = await invoke(`/two/model/${encodeURIComponent(MODEL)}/invoke`);
    assert.equal(r.status, 200, r.body);
    assert.equal(bedrock.requests.at(-1)?.path, `/model/${encodeURIComponent(MODEL)}/invoke`);
    assert.equal(bedrock.requests.at(-1)?.body, invokeBody);
  });

  test("Models (GET, no body, a query): signed with the empty payload's hash and the canonical query", async () => {
    const r = await request(env.port, "/foundation-models?byProvider=anthropic", {
      headers: { authorization: "Bearer client" },
    });
    assert.equal(r.status, 200, r.body);
    assert.deepEqual(JSON.parse(r.body), {
      modelSummaries: [{ modelId: MODEL, providerName: "Anthropic" }],
    });
    assert.equal(bedrock.requests.at(-1)?.method, "GET");
  });

  test("Realtime cannot be signed (Bedrock has no websocket API): 501 naming the provider, Bedrock not called", async () => {
    const before = bedrock.requests.length;
    const r = await request(env.port, "/realtime?model=x");
    assert.equal(r.status, 501, r.body);
    assert.match(
      r.body,
      /provider \S+ \(providerG\) signs every request with SigV4; Realtime requests cannot be signed/,
    );
    assert.equal(bedrock.requests.length, before);
  });
});
