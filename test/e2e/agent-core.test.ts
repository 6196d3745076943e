// GwBackend cloudA.agentCore (the cloudA agent runtime) through a real Envoy: whatever path the client calls, the
// request leaves Envoy as InvokeAgentRuntime on the runtime's endpoint (ARN percent-encoded in the path, the
// qualifier in the query), with a runtime session id (the client's, or a new one as the AWS SDKs make) and SigV4 for
// `bedrock-agentcore` in the ARN's region, which a stand-in for the service verifies with the AWS SDK's own signer.
// The endpoint is the Sluice process's AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, as the AWS SDKs read it. Streamed answers
// reach the client event by event. A runtime with an OAuth authorizer gets the GwBackend's bearer token instead.
// Bad input (an ARN that is not one, a missing Secret) is named in status and fails only its own route, closed.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type FakeAgentCore, startFakeAgentCore } from "../helpers/fake-agent-core.js";
import { type FakeAws, startFakeAws } from "../helpers/fake-aws.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { request } from "../helpers/net.js";
import { tempConfigDir } from "../helpers/processes.js";

const REGION = "us-west-2";
const IAM_RUNTIME = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/support_agent-Ab12Cd34Ef";
const OAUTH_RUNTIME = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/oauth_agent-Zz98Yy76Xx";
const BASE = { accessKeyId: "AKIDAGENTCOREBASE", secretAccessKey: "YWdlbnQtY29yZS1zZWNyZXQta2V5LWZvci10ZXN0cw" };
const BEARER = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJnYXRld2F5In0.runtime-oauth-token";
const SESSION = "x-amzn-bedrock-agentcore-runtime-session-id";
const ROLE = "arn:aws:iam::123456789012:role/invoke-agents";
const DENIED = "arn:aws:iam::123456789012:role/no-agents";

function resources(): string {
  const backend = (name: string, arn: string, more = "") => `---
apiVersion: sluice.dev/v1alpha1
kind: GwBackend
metadata: { name: ${name}, namespace: default }
spec:
  cloudA:
    agentCore: { agentRuntimeArn: "${arn}"${more} }
`;
  const routes = ["agent", "keys", "oauth", "bad", "nosecret", "role", "denied"];
  const role = (arn: string) => `  policies:
    auth:
      cloudA: { secretRef: { name: aws }, assumeRole: { roleArn: "${arn}", sessionName: gateway } }
`;
  return `${backend("agent", IAM_RUNTIME, ", qualifier: prod")}${backend("keys", IAM_RUNTIME)}  policies:
    auth:
      cloudA: { secretRef: { name: aws } }
${backend("oauth", OAUTH_RUNTIME)}  policies:
    auth:
      secretRef: { name: oauth-token }
${backend("bad", "arn:aws:bedrock-agentcore:us-west-2:123:runtime/x")}${backend("nosecret", IAM_RUNTIME)}${backend(
  "role",
  IAM_RUNTIME,
)}${role(ROLE)}${backend("denied", IAM_RUNTIME)}${role(DENIED)}---
apiVersion: sluice.dev/v1alpha1
kind: GwPolicy
metadata: { name: nosecret, namespace: default }
spec:
  targetRefs: [{ group: sluice.dev, kind: GwBackend, name: nosecret }]
  backend:
    auth:
      cloudA: { secretRef: { name: absent } }
---
apiVersion: v1
kind: Secret
metadata: { name: aws, namespace: default }
stringData: { accessKey: ${BASE.accessKeyId}, secretKey: ${BASE.secretAccessKey} }
---
apiVersion: v1
kind: Secret
metadata: { name: oauth-token, namespace: default }
stringData: { Authorization: "Bearer ${BEARER}" }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: agents, namespace: default }
spec:
  parentRefs: [{ name: gw }]
  rules:
${routes
  .map(
    (n) =>
      `    - matches: [{ path: { type: PathPrefix, value: /${n} } }]\n      backendRefs: [{ group: sluice.dev, kind: GwBackend, name: ${n} }]`,
  )
  .join("\n")}
`;
}

describe("GwBackend cloudA.agentCore: the agent runtime, signed, through Envoy", { timeout: 120_000 }, () => {
  let aws: FakeAws;
  let core: FakeAgentCore;
  let env: LlmEnv;
  const files = tempConfigDir();

  before(async () => {
    aws = await startFakeAws(REGION);
    aws.trust(BASE);
    aws.denied.add(DENIED);
    core = await startFakeAgentCore(
      [
        { arn: IAM_RUNTIME, auth: "iam" },
        { arn: OAUTH_RUNTIME, auth: "oauth", tokens: new Set([BEARER]) },
      ],
      (id) => aws.lookup(id) ?? aws.issued(id),
    );
    const none = join(files.dir, "absent");
    env = await startLlmEnv(resources(), "/bad", {
      AWS_ENDPOINT_URL_BEDROCK_AGENTCORE: core.url,
      AWS_CONTAINER_CREDENTIALS_FULL_URI: aws.containerUrl,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: aws.containerToken,
      AWS_ENDPOINT_URL_STS: aws.stsUrl,
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_CONFIG_FILE: none,
      AWS_SHARED_CREDENTIALS_FILE: none,
      AWS_ACCESS_KEY_ID: "",
      AWS_SECRET_ACCESS_KEY: "",
      AWS_SESSION_TOKEN: "",
      AWS_PROFILE: "",
      AWS_REGION: "",
      AWS_WEB_IDENTITY_TOKEN_FILE: "",
      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: "",
    });
  });
  after(async () => {
    await env?.stop();
    await core?.close();
    await aws?.close();
    files.cleanup();
  });

  const invoke = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    request(env.port, path, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", authorization: "Bearer client-token", ...headers },
    });

  test("any client path becomes InvokeAgentRuntime, signed with the default chain; a new session per call", async () => {
    const r = await invoke("/agent/ask?debug=1", { prompt: "hello" });
    assert.equal(r.status, 200, r.body);
    const seen = core.invocations.at(-1);
    assert.equal(
      seen?.rawPath,
      `/runtimes/${encodeURIComponent(IAM_RUNTIME)}/invocations?qualifier=prod`,
      "the ARN is one percent-encoded segment, the client's path and query are gone",
    );
    assert.equal(seen?.headers.host, `127.0.0.1:${core.port}`);
    assert.equal(seen?.qualifier, "prod");
    assert.equal(seen?.body, JSON.stringify({ prompt: "hello" }));
    // The container credentials (the default chain) signed, with their session token.
    assert.equal(aws.issued(seen?.signer ?? "")?.origin, "container");
    assert.match(
      String(seen?.headers.authorization),
      /^AWS4-HMAC-SHA256 Credential=ASIA\w+\/\d{8}\/us-west-2\/bedrock-agentcore\/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token;x-amzn-bedrock-agentcore-runtime-session-id,/,
    );
    const session = seen?.session ?? "";
    assert.match(session, /^[0-9a-f-]{36}$/);
    assert.equal(r.headers[SESSION], session, "the runtime's session header reaches the client");
    assert.deepEqual(JSON.parse(r.body), { runtime: IAM_RUNTIME, qualifier: "prod", session, prompt: "hello" });
    await invoke("/agent", { prompt: "again" });
    assert.notEqual(core.invocations.at(-1)?.session, session);
  });

  test("the client's session id is kept (and signed): the conversation continues", async () => {
    const session = "conversation-0001-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for (const prompt of ["one", "two"]) {
      const r = await invoke("/agent", { prompt }, { [SESSION]: session });
      assert.equal(r.status, 200, r.body);
      assert.equal(core.invocations.at(-1)?.session, session);
      assert.equal(r.headers[SESSION], session);
    }
  });

  test("a streamed answer reaches the client event by event, before the runtime has finished", async () => {
    const res = await fetch(`${env.baseUrl}/agent/stream`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ stream: 3 }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    const deadline = Date.now() + 10_000;
    // The runtime holds its last event: what arrives now was passed through unbuffered.
    while (!text.includes('"chunk":2') && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /data: \{"chunk":1\}\n\ndata: \{"chunk":2\}\n\n/);
    assert.doesNotMatch(text, /done/);
    core.release();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /data: \{"chunk":3,"done":true\}\n\n$/);
  });

  test("the GwBackend's own auth.cloudA keys sign instead; no qualifier: the runtime's default endpoint", async () => {
    const r = await invoke("/keys", { prompt: "k" });
    assert.equal(r.status, 200, r.body);
    const seen = core.invocations.at(-1);
    assert.equal(seen?.signer, BASE.accessKeyId);
    assert.equal(seen?.rawPath, `/runtimes/${encodeURIComponent(IAM_RUNTIME)}/invocations`);
    assert.equal(seen?.headers["x-amz-security-token"], undefined);
  });

  test("assumeRole: the role's credentials sign (STS called signed with the GwBackend's keys); a refused role fails closed", async () => {
    const r = await invoke("/role", { prompt: "r" });
    assert.equal(r.status, 200, r.body);
    assert.equal(aws.issued(core.invocations.at(-1)?.signer ?? "")?.origin, `role:${ROLE}:gateway`);
    assert.equal(aws.calls.find((c) => c.roleArn === ROLE)?.signedWith, BASE.accessKeyId);
    const n = core.invocations.length;
    const d = await invoke("/denied", { prompt: "d" });
    assert.equal(d.status, 503);
    assert.match(d.body, /backend\.auth\.cloudA: STS AssumeRole arn:aws:iam::123456789012:role\/no-agents/);
    assert.equal(core.invocations.length, n, "the runtime is never called without its credential");
  });

  test("a runtime with an OAuth authorizer gets the GwBackend's bearer token, not the client's, and no SigV4", async () => {
    const r = await invoke("/oauth/x", { prompt: "o" });
    assert.equal(r.status, 200, r.body);
    const seen = core.invocations.at(-1);
    assert.equal(seen?.signer, "bearer");
    assert.equal(seen?.arn, OAUTH_RUNTIME);
    assert.equal(seen?.headers.authorization, `Bearer ${BEARER}`);
    assert.equal(seen?.headers["x-amz-date"], undefined);
  });

  test("an ARN that is not one: the GwBackend's status names the field, its route fails, the others serve", async () => {
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwBackend" && x.name === "bad")?.status);
    assert.match(status, /"status":"False","reason":"Invalid"/);
    assert.match(status, /spec\.cloudA\.agentCore\.agentRuntimeArn: must be an agent runtime ARN/);
    const route = JSON.stringify(resources.find((x) => x.kind === "HTTPRoute" && x.name === "agents")?.status);
    assert.match(route, /"reason":"BackendNotFound","message":"GwBackend default\/bad not found"/);
    const n = core.invocations.length;
    assert.equal((await invoke("/bad", {})).status, 500);
    assert.equal(core.invocations.length, n);
    assert.doesNotMatch(
      JSON.stringify(resources.find((x) => x.kind === "GwBackend" && x.name === "agent")?.status),
      /NotYetSupported|"False"/,
    );
    assert.equal((await invoke("/agent", { prompt: "still" })).status, 200);
  });

  test("a Secret that is missing fails that runtime's route closed (503), the policy status naming the field", async () => {
    const n = core.invocations.length;
    const r = await invoke("/nosecret", { prompt: "x" });
    assert.equal(r.status, 503);
    assert.equal(core.invocations.length, n, "never sent without its credential");
    const { resources } = (await env.sluice.status()) as {
      resources: { kind: string; name: string; status: unknown }[];
    };
    const status = JSON.stringify(resources.find((x) => x.kind === "GwPolicy" && x.name === "nosecret")?.status);
    assert.match(status, /backend\.auth\.cloudA\.secretRef: Secret default\/absent key accessKey not found/);
  });

  test("the runtime refused nothing it should have taken; no key, session token or bearer in logs or Envoy's config", async () => {
    assert.deepEqual(core.refused, []);
    const secrets = [BASE.secretAccessKey, BEARER];
    for (const id of core.invocations.map((r) => r.signer)) {
      const c = aws.issued(id);
      if (c !== undefined) secrets.push(c.secretAccessKey, c.sessionToken);
    }
    const out = [...env.sluice.output, ...env.envoy.output].join("\n");
    const dump = JSON.stringify(await env.envoy.configDump());
    for (const s of secrets) {
      assert.ok(!out.includes(s), "a secret in the logs");
      assert.ok(!dump.includes(s), "a secret in Envoy's configuration");
    }
    assert.match(dump, /sluice\.credential_ext_proc/);
  });

  test("an agent's answer may take minutes: its routes have no 15 s default timeout", async () => {
    const dump = (await env.envoy.configDump()) as { configs: { dynamic_route_configs?: unknown[] }[] };
    const routes: { match?: { prefix?: string; path_separated_prefix?: string }; route?: { timeout?: string } }[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (typeof v === "object" && v !== null) {
        const o = v as Record<string, unknown>;
        if (typeof o.match === "object" && typeof o.route === "object") routes.push(o as (typeof routes)[number]);
        else Object.values(o).forEach(walk);
      }
    };
    walk(dump.configs);
    const timeout = (p: string) =>
      routes.find((r) => (r.match?.path_separated_prefix ?? r.match?.prefix) === p)?.route?.timeout;
    assert.equal(timeout("/agent"), "0s");
    assert.equal(timeout("/keys"), "0s");
  });
});
