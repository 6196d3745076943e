// cloudA credentials against a fake AWS STS and container credentials endpoint (real wire formats; the fake verifies
// the SigV4 signature of every AssumeRole call with the base credentials): role sessions evaluated per request and
// checked, assumed-role credentials cached until shortly before they expire, one STS call for concurrent misses, a
// bounded cache, and the AWS SDK's default chain (environment, profiles, web identity, container credentials).

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { AwsCredentialError, AwsCredentialSource, roleSession } from "../../src/extproc/llm/aws-credentials.js";
import { requestVariable, toCel } from "../../src/extproc/llm/cel.js";
import type { AwsAssumeRole, AwsAuth } from "../../src/translate/llm/table.js";
import { type FakeAws, startFakeAws } from "../helpers/fake-aws.js";

const REGION = "eu-west-1";
const ROLE = "arn:aws:iam::123456789012:role/bedrock-invoke";
const BASE = { accessKeyId: "AKIDSLUICETEST", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" };

const role = (r: Partial<AwsAssumeRole> = {}): AwsAssumeRole => ({
  roleArn: ROLE,
  sessionName: "sluice-default.bedrock",
  tags: [],
  ...r,
});
/** `keys` null: the default chain. */
const auth = (assumeRole?: AwsAssumeRole, keys: AwsAuth["keys"] | null = BASE): AwsAuth => ({
  ...(keys !== null ? { keys } : {}),
  ...(assumeRole !== undefined ? { assumeRole } : {}),
  region: "",
  service: "bedrock",
});
const vars = (headers: Record<string, string> = {}) => ({
  request: requestVariable({ ":method": "POST", ":path": "/v1/chat/completions", ...headers }),
  llm: toCel({ model: "claude", provider: "bedrock" }),
});
const session = (r: AwsAssumeRole, headers: Record<string, string> = {}) => {
  const s = roleSession(r, vars(headers));
  assert.ok(!("error" in s), "error" in s ? s.error : "");
  return s;
};

describe("role sessions per request", () => {
  test("a static session name and tags as written; expressions evaluated with the request", () => {
    assert.deepEqual(session(role({ tags: [{ key: "team", value: "ml" }] })), {
      roleArn: ROLE,
      sessionName: "sluice-default.bedrock",
      tags: [{ key: "team", value: "ml" }],
    });
    const dynamic: AwsAssumeRole = {
      roleArn: ROLE,
      sessionNameExpression: "'user-' + request.headers['x-user']",
      tags: [
        { key: "model", expression: "llm.model" },
        { key: "team", value: "ml" },
      ],
    };
    assert.deepEqual(session(dynamic, { "x-user": "alice@example.com" }), {
      roleArn: ROLE,
      sessionName: "user-alice@example.com",
      tags: [
        { key: "model", value: "claude" },
        { key: "team", value: "ml" },
      ],
    });
  });

  test("an expression that fails or gives what STS refuses rejects the request, naming the field, not the value", () => {
    const expr = (sessionNameExpression: string, headers: Record<string, string> = {}) => {
      const s = roleSession({ roleArn: ROLE, sessionNameExpression, tags: [] }, vars(headers));
      return "error" in s ? s.error : `accepted ${s.sessionName}`;
    };
    assert.match(expr("request.headers['x-user']"), /^cloudA\.assumeRole\.sessionNameExpression failed: /);
    assert.match(expr("request.headers['x-user']", { "x-user": "a" }), /invalid role session name \(1 characters;/);
    assert.match(expr("request.headers['x-user']", { "x-user": "a".repeat(65) }), /invalid role session name/);
    assert.match(expr("request.headers['x-user']", { "x-user": "bob smith" }), /invalid role session name/);
    assert.match(expr("request.headers['x-user']", { "x-user": "secret/slash" }), /invalid/);
    assert.doesNotMatch(expr("request.headers['x-user']", { "x-user": "secret/slash" }), /secret/);
    assert.match(expr("42"), /gave a number, not a string/);
    assert.match(expr("null"), /gave a null, not a string/);
    assert.equal(expr("request.headers['x-user']", { "x-user": "a+=,.@-_9" }), "accepted a+=,.@-_9");
    const tag = (expression: string) => {
      const s = roleSession(
        role({
          tags: [
            { key: "k", value: "v" },
            { key: "x", expression },
          ],
        }),
        vars(),
      );
      return "error" in s ? s.error : "accepted";
    };
    assert.match(
      tag(`'${"y".repeat(257)}'`),
      /^cloudA\.assumeRole\.tags\[1\]\.expression gave an invalid session tag value \(257 characters;/,
    );
    assert.equal(tag(`'${"y".repeat(256)}'`), "accepted");
    assert.match(tag("1 + 1"), /^cloudA\.assumeRole\.tags\[1\]\.expression gave a number/);
    assert.match(tag("'a;b'"), /invalid session tag value/);
    assert.match(tag("request.nope"), /^cloudA\.assumeRole\.tags\[1\]\.expression failed/);
  });
});

describe("AWS credentials", () => {
  let aws: FakeAws;
  before(async () => {
    aws = await startFakeAws(REGION);
    aws.trust(BASE);
  });
  after(() => aws.close());

  test("the Secret's keys without a role: used as they are, with no call", () => {
    assert.equal(AwsCredentialSource.immediate(auth()), BASE);
    assert.equal(AwsCredentialSource.immediate(auth(role())), undefined);
    assert.equal(AwsCredentialSource.immediate(auth(undefined, null)), undefined);
  });

  test("assumeRole: one signed STS call with the base keys, shared by concurrent misses, cached until 5 minutes before expiry", async () => {
    let now = Date.now();
    const src = new AwsCredentialSource({ now: () => now, stsEndpoint: aws.stsUrl });
    const r = role({ tags: [{ key: "team", value: "ml" }] });
    const req = { auth: auth(r), region: REGION, role: session(r) };
    const calls = aws.calls.length;
    const [a, b, c] = await Promise.all([src.credentials(req), src.credentials(req), src.credentials(req)]);
    assert.equal(aws.calls.length, calls + 1, "concurrent misses share one STS call");
    assert.equal(a, b);
    assert.equal(a, c);
    const call = aws.calls.at(-1);
    assert.deepEqual(call, {
      action: "AssumeRole",
      signedWith: BASE.accessKeyId,
      roleArn: ROLE,
      sessionName: "sluice-default.bedrock",
      tags: [{ key: "team", value: "ml" }],
    });
    const issued = aws.issued(a.accessKeyId);
    assert.equal(issued?.origin, `role:${ROLE}:sluice-default.bedrock`);
    assert.equal(a.secretAccessKey, issued?.secretAccessKey);
    assert.equal(a.sessionToken, issued?.sessionToken);

    now += (3600 - 5 * 60 - 10) * 1000;
    assert.equal(await src.credentials(req), a, "still fresh");
    assert.equal(aws.calls.length, calls + 1);
    now += 20_000;
    const d = await src.credentials(req);
    assert.notEqual(d.accessKeyId, a.accessKeyId, "renewed 5 minutes before expiry");
    assert.equal(aws.calls.length, calls + 2);
  });

  test("one cache entry per session name and tags; the cache is bounded", async () => {
    const src = new AwsCredentialSource({ stsEndpoint: aws.stsUrl, maxEntries: 2 });
    const get = (name: string, tag = "a") => {
      const r = role({ sessionName: name, tags: [{ key: "t", value: tag }] });
      return src.credentials({ auth: auth(r), region: REGION, role: session(r) });
    };
    const calls = aws.calls.length;
    const alice = await get("alice");
    assert.equal((await get("alice")).accessKeyId, alice.accessKeyId);
    assert.notEqual((await get("alice", "b")).accessKeyId, alice.accessKeyId, "other tags, other session");
    assert.equal(aws.calls.length, calls + 2);
    await get("alice"); // most recently used: alice/b is the oldest now
    await get("bob"); // evicts alice/b
    assert.equal(aws.calls.length, calls + 3);
    assert.equal((await get("alice")).accessKeyId, alice.accessKeyId);
    assert.equal(aws.calls.length, calls + 3);
    await get("alice", "b");
    assert.equal(aws.calls.length, calls + 4, "the evicted entry is fetched again");
  });

  test("STS refusing, or not answering in time, fails the lookup (not cached); the next one tries again", async () => {
    const src = new AwsCredentialSource({ stsEndpoint: aws.stsUrl, timeoutMs: 300 });
    const r = role({ roleArn: "arn:aws:iam::123456789012:role/denied" });
    const req = { auth: auth(r), region: REGION, role: session(r) };
    aws.denied.add(r.roleArn);
    await assert.rejects(src.credentials(req), (e: unknown) => {
      assert.ok(e instanceof AwsCredentialError);
      assert.match(e.message, /STS AssumeRole arn:aws:iam::123456789012:role\/denied: .*not authorized/);
      return true;
    });
    aws.denied.delete(r.roleArn);
    assert.match((await src.credentials(req)).accessKeyId, /^ASIAFAKE/);

    const wrong = auth(role(), { accessKeyId: BASE.accessKeyId, secretAccessKey: "not-the-secret" });
    await assert.rejects(
      src.credentials({ auth: wrong, region: REGION, role: session(role()) }),
      /signature/i,
      "the fake checks the signature of the STS call",
    );

    aws.delayMs = 1000;
    try {
      const slow = role({ sessionName: "slow" });
      const started = Date.now();
      await assert.rejects(
        src.credentials({ auth: auth(slow), region: REGION, role: session(slow) }),
        /no credentials within 300 ms/,
      );
      assert.ok(Date.now() - started < 900);
    } finally {
      aws.delayMs = 0;
    }
  });
});

/** The AWS SDK's default chain reads process.env: each test sets exactly what it means, on top of a clean slate. */
describe("default credential discovery (the AWS SDK's chain)", () => {
  let aws: FakeAws;
  let dir: string;
  const saved = { ...process.env };
  let n = 0;
  before(async () => {
    aws = await startFakeAws(REGION);
  });
  after(() => aws.close());
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "sluice-aws-"));
    for (const k of Object.keys(process.env)) if (k.startsWith("AWS_")) delete process.env[k];
    // Never the instance metadata service, nor the files of whoever runs the tests (the SDK caches files by path).
    n++;
    Object.assign(process.env, {
      AWS_EC2_METADATA_DISABLED: "true",
      AWS_CONFIG_FILE: join(dir, `config-${n}`),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, `credentials-${n}`),
    });
  });
  afterEach(() => {
    for (const k of Object.keys(process.env)) if (k.startsWith("AWS_")) delete process.env[k];
    Object.assign(process.env, saved);
    rmSync(dir, { recursive: true, force: true });
  });

  test("environment variables, and they sign the AssumeRole call", async () => {
    const env = { accessKeyId: "AKIDFROMENV", secretAccessKey: "env-secret", sessionToken: "env-session-token" };
    aws.trust(env);
    Object.assign(process.env, {
      AWS_ACCESS_KEY_ID: env.accessKeyId,
      AWS_SECRET_ACCESS_KEY: env.secretAccessKey,
      AWS_SESSION_TOKEN: env.sessionToken,
    });
    const src = new AwsCredentialSource({ stsEndpoint: aws.stsUrl });
    const base = await src.credentials({ auth: auth(undefined, null), region: REGION });
    assert.equal(base.accessKeyId, env.accessKeyId);
    assert.equal(base.sessionToken, env.sessionToken);
    const assumed = await src.credentials({ auth: auth(role(), null), region: REGION, role: session(role()) });
    assert.equal(aws.calls.at(-1)?.signedWith, env.accessKeyId);
    assert.equal(aws.issued(assumed.accessKeyId)?.origin, `role:${ROLE}:sluice-default.bedrock`);
  });

  test("a profile of the shared credentials file (AWS_PROFILE)", async () => {
    writeFileSync(
      process.env.AWS_SHARED_CREDENTIALS_FILE ?? "",
      "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n\n[bedrock]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = p\n",
    );
    process.env.AWS_PROFILE = "bedrock";
    const src = new AwsCredentialSource();
    assert.equal((await src.credentials({ auth: auth(undefined, null), region: REGION })).accessKeyId, "AKIDPROFILE");
  });

  test("a web identity token (IRSA): AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, "eyJhbGciOiJSUzI1NiJ9.service-account-token.sig");
    Object.assign(process.env, {
      AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile,
      AWS_ROLE_ARN: "arn:aws:iam::123456789012:role/irsa",
      AWS_ROLE_SESSION_NAME: "irsa-session",
      AWS_ENDPOINT_URL_STS: aws.stsUrl,
    });
    const src = new AwsCredentialSource();
    const c = await src.credentials({ auth: auth(undefined, null), region: REGION });
    assert.equal(aws.issued(c.accessKeyId)?.origin, "role:arn:aws:iam::123456789012:role/irsa:irsa-session");
    assert.deepEqual(aws.calls.at(-1), {
      action: "AssumeRoleWithWebIdentity",
      roleArn: "arn:aws:iam::123456789012:role/irsa",
      sessionName: "irsa-session",
      tags: [],
      webIdentityToken: "eyJhbGciOiJSUzI1NiJ9.service-account-token.sig",
    });
  });

  test("container credentials (ECS, EKS Pod Identity) with the authorization token, memoized by the SDK", async () => {
    Object.assign(process.env, {
      AWS_CONTAINER_CREDENTIALS_FULL_URI: aws.containerUrl,
      AWS_CONTAINER_AUTHORIZATION_TOKEN: aws.containerToken,
    });
    const src = new AwsCredentialSource();
    const served = aws.containerRequests;
    const a = await src.credentials({ auth: auth(undefined, null), region: REGION });
    const b = await src.credentials({ auth: auth(undefined, null), region: REGION });
    assert.equal(aws.issued(a.accessKeyId)?.origin, "container");
    assert.equal(b.accessKeyId, a.accessKeyId);
    assert.equal(aws.containerRequests, served + 1);
  });

  test("no credentials anywhere: a clear error, not a crash", async () => {
    const src = new AwsCredentialSource();
    await assert.rejects(src.credentials({ auth: auth(undefined, null), region: REGION }), (e: unknown) => {
      assert.ok(e instanceof AwsCredentialError);
      assert.match(e.message, /^default credential discovery: /);
      return true;
    });
  });
});
