// providerG (Bedrock Converse) with cloudA credentials end to end through a real Envoy: the official `openai` and
// `@anthropic-ai/sdk` clients, a fake STS (Query API; verifies the SigV4 of AssumeRole with the base credentials) and a
// fake container credentials endpoint (what ECS and EKS Pod Identity give a pod), and a fake Bedrock that accepts only
// credentials the fake issued: a request signed with the base keys instead of the role's would be refused. Sluice's
// own environment is the source of discovered credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI), STS is found at
// AWS_ENDPOINT_URL_STS, and the instance metadata service is disabled so nothing leaves this machine.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { type FakeAws, fakeAwsEnv, startFakeAws } from "../helpers/fake-aws.js";
import { type FakeProvider, startFakeProvider } from "../helpers/fake-providers.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { tempConfigDir } from "../helpers/processes.js";

const REGION = "eu-west-1";
const BASE = { accessKeyId: "AKIDSECRETREF", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const ROLE = "arn:aws:iam::123456789012:role/bedrock-invoke";
const MODEL = "anthropic.claude-3-haiku-20240307-v1:0";

function resources(port: number): string {
  const backend = (name: string, auth: string) => `---
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
    auth: ${auth}
    ai:
      routes:
        /v1/chat/completions: Completions
        /v1/messages: Messages
`;
  const rule = (name: string) => `
    - matches: [{ path: { type: PathPrefix, value: /${name} } }]
      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${name} }]`;
  return `
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${BASE.accessKeyId}, secretKey: ${BASE.secretAccessKey} }
${backend(
  "role",
  `
      cloudA:
        secretRef: { name: aws }
        assumeRole:
          roleArn: ${ROLE}
          sessionNameExpression: "'user-' + request.headers['x-user']"
          tags:
            - { key: team, value: ml }
            - { key: model, expression: "llm.model" }`,
)}
${backend("ambient-role", `{ cloudA: { assumeRole: { roleArn: "${ROLE}" } } }`)}
${backend("ambient", "{ cloudA: {} }")}
${backend("denied", `{ cloudA: { secretRef: { name: aws }, assumeRole: { roleArn: "arn:aws:iam::123456789012:role/denied" } } }`)}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: llm, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:${rule("role")}${rule("ambient-role")}${rule("ambient")}${rule("denied")}
`;
}

describe("providerG (Bedrock) with cloudA credentials end to end", { timeout: 60_000 }, () => {
  let aws: FakeAws;
  let bedrock: FakeProvider;
  let env: LlmEnv;
  const files = tempConfigDir();
  const openai = (prefix: string, user?: string) =>
    new OpenAI({
      apiKey: "client-key",
      baseURL: `${env.baseUrl}/${prefix}/v1`,
      maxRetries: 0,
      ...(user !== undefined ? { defaultHeaders: { "x-user": user } } : {}),
    });
  /** The issued credentials the last Bedrock request was signed with (the fake has verified the signature). */
  const signer = () => {
    const seen = bedrock.requests.at(-1);
    const key = /Credential=([^/]+)\//.exec(String(seen?.headers.authorization))?.[1] ?? "";
    const issued = aws.issued(key);
    assert.ok(issued !== undefined, `signed with ${key}, which the fake did not issue`);
    assert.equal(seen?.headers["x-amz-security-token"], issued.sessionToken);
    return issued;
  };

  before(async () => {
    aws = await startFakeAws(REGION);
    aws.trust(BASE);
    // Bedrock accepts only what the fake issued (assumed roles, container credentials), never the Secret's keys.
    bedrock = await startFakeProvider({ name: "bedrock", aws: { region: REGION, lookup: (id) => aws.issued(id) } });
    env = await startLlmEnv(
      resources(bedrock.port),
      "/role/v1/chat/completions",
      fakeAwsEnv(aws, join(files.dir, "absent")),
    );
  });
  after(async () => {
    await env?.stop();
    await bedrock?.close();
    await aws?.close();
    files.cleanup();
  });

  test("assumeRole with the Secret's keys: a session per user, tags from the request, signed with the role's credentials", async () => {
    const calls = aws.calls.length;
    const r = await openai("role", "alice").chat.completions.create({
      model: "claude-haiku",
      messages: [{ role: "user", content: "as alice" }],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from bedrock: as alice");
    assert.equal(bedrock.requests.at(-1)?.path, `/model/${encodeURIComponent(MODEL)}/converse`);
    assert.equal(signer().origin, `role:${ROLE}:user-alice`);
    assert.equal(aws.calls.length, calls + 1);
    assert.deepEqual(aws.calls.at(-1), {
      action: "AssumeRole",
      signedWith: BASE.accessKeyId,
      roleArn: ROLE,
      sessionName: "user-alice",
      tags: [
        { key: "team", value: "ml" },
        { key: "model", value: "claude-haiku" },
      ],
    });

    // The same session again (streamed this time): the cached credentials, no STS call.
    const stream = await openai("role", "alice").chat.completions.create({
      model: "claude-haiku",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.equal(text, "Hello from bedrock: stream");
    assert.equal(signer().origin, `role:${ROLE}:user-alice`);
    assert.equal(aws.calls.length, calls + 1);

    // Another user is another session.
    const a = new Anthropic({
      apiKey: "client",
      baseURL: `${env.baseUrl}/role`,
      maxRetries: 0,
      defaultHeaders: { "x-user": "bob" },
    });
    const m = await a.messages.create({
      model: "claude-haiku",
      max_tokens: 20,
      messages: [{ role: "user", content: "as bob" }],
    });
    assert.deepEqual(m.content[0], { type: "text", text: "Hello from bedrock: as bob" });
    assert.equal(signer().origin, `role:${ROLE}:user-bob`);
    assert.equal(aws.calls.length, calls + 2);
  });

  test("a session name expression that fails or gives an invalid name: 400 in the client's format, no call", async () => {
    const requests = bedrock.requests.length;
    const calls = aws.calls.length;
    await assert.rejects(
      openai("role").chat.completions.create({ model: "m", messages: [{ role: "user", content: "anonymous" }] }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.APIError);
        assert.equal(e.status, 400);
        assert.match(e.message, /cloudA\.assumeRole\.sessionNameExpression failed/);
        return true;
      },
    );
    const a = new Anthropic({
      apiKey: "client",
      baseURL: `${env.baseUrl}/role`,
      maxRetries: 0,
      defaultHeaders: { "x-user": "has spaces" },
    });
    await assert.rejects(
      a.messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
      (e: unknown) => {
        assert.ok(e instanceof Anthropic.BadRequestError);
        assert.equal((e.error as { error?: { type?: string } }).error?.type, "invalid_request_error");
        assert.match(e.message, /invalid role session name/);
        assert.doesNotMatch(e.message, /has spaces/);
        return true;
      },
    );
    assert.equal(bedrock.requests.length, requests);
    assert.equal(aws.calls.length, calls);
  });

  test("without a secretRef: the container credentials assume the role, under the default session name", async () => {
    const r = await openai("ambient-role").chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "ambient role" }],
    });
    assert.equal(r.choices[0]?.message.content, "Hello from bedrock: ambient role");
    assert.equal(signer().origin, `role:${ROLE}:sluice-default.ambient-role`);
    const call = aws.calls.at(-1);
    assert.equal(call?.sessionName, "sluice-default.ambient-role");
    assert.equal(
      aws.issued(call?.signedWith ?? "")?.origin,
      "container",
      "STS was called with the discovered credentials",
    );
  });

  test("without a secretRef nor a role: the discovered credentials sign, fetched once", async () => {
    const served = aws.containerRequests;
    for (const content of ["one", "two"]) {
      const r = await openai("ambient").chat.completions.create({ model: "m", messages: [{ role: "user", content }] });
      assert.equal(r.choices[0]?.message.content, `Hello from bedrock: ${content}`);
      assert.equal(signer().origin, "container");
    }
    assert.ok(aws.containerRequests <= served + 1, "the SDK memoizes the container credentials");
  });

  test("a role STS refuses: 500 in the client's format, the reason in Sluice's log, Bedrock not called", async () => {
    aws.denied.add("arn:aws:iam::123456789012:role/denied");
    const requests = bedrock.requests.length;
    await assert.rejects(
      openai("denied").chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
      (e: unknown) => {
        assert.ok(e instanceof OpenAI.APIError);
        assert.equal(e.status, 500);
        assert.match(e.message, /credentials of provider default are not available/);
        return true;
      },
    );
    assert.equal(bedrock.requests.length, requests);
    assert.ok(
      env.sluice.output.some((l) => /STS AssumeRole arn:aws:iam::123456789012:role\/denied: .*not authorized/.test(l)),
    );
    assert.ok(!env.sluice.output.some((l) => l.includes(BASE.secretAccessKey)), "no secret in the log");
  });
});
