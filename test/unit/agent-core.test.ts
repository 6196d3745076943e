// GwBackend cloudA.agentCore in unit: the runtime's endpoint and invocation path from its ARN (and the process's
// endpoint override), every bad input named by its field, and the credential plan's rewrite and signature as the
// credential ext_proc writes them (checked against the AWS SDK's own signer).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { Minter } from "../../src/credentials/mint.js";
import { agentCoreEndpointFromEnv, agentCorePlan, resolveAgentCore } from "../../src/translate/backend/agent-core.js";

const ARN = "arn:aws:bedrock-agentcore:ap-southeast-2:123456789012:runtime/my_agent-Ab12Cd34Ef";
const KEYS = { accessKeyId: "AKIDUNIT", secretAccessKey: "dW5pdC10ZXN0LXNlY3JldA" };

describe("resolveAgentCore", () => {
  test("the regional endpoint over TLS, the ARN one percent-encoded segment, the qualifier in the query", () => {
    const r = resolveAgentCore({ agentCore: { agentRuntimeArn: ARN, qualifier: "prod" } }, "ns/a");
    assert.ok(r.ok);
    assert.deepEqual(r.endpoint, { tls: true, host: "bedrock-agentcore.ap-southeast-2.amazonaws.com", port: 443 });
    assert.deepEqual(r.ir, {
      backend: "ns/a",
      region: "ap-southeast-2",
      path: "/runtimes/arn%3Aaws%3Abedrock-agentcore%3Aap-southeast-2%3A123456789012%3Aruntime%2Fmy_agent-Ab12Cd34Ef/invocations?qualifier=prod",
      authority: "bedrock-agentcore.ap-southeast-2.amazonaws.com",
    });
  });

  test("the aws-cn partition's suffix; an override URL (its port in the authority unless the scheme's)", () => {
    const cn = resolveAgentCore(
      { agentCore: { agentRuntimeArn: "arn:aws-cn:bedrock-agentcore:cn-north-1:123456789012:runtime/a" } },
      "ns/a",
    );
    assert.ok(cn.ok);
    assert.equal(cn.endpoint.host, "bedrock-agentcore.cn-north-1.amazonaws.com.cn");
    const local = resolveAgentCore({ agentCore: { agentRuntimeArn: ARN } }, "ns/a", "http://127.0.0.1:8123");
    assert.ok(local.ok);
    assert.deepEqual(local.endpoint, { tls: false, host: "127.0.0.1", port: 8123 });
    assert.equal(local.ir.authority, "127.0.0.1:8123");
    const vpce = resolveAgentCore({ agentCore: { agentRuntimeArn: ARN } }, "ns/a", "https://vpce-1.example.com");
    assert.ok(vpce.ok);
    assert.equal(vpce.ir.authority, "vpce-1.example.com");
    assert.equal(
      agentCoreEndpointFromEnv({ AWS_ENDPOINT_URL: "https://a", AWS_ENDPOINT_URL_BEDROCK_AGENTCORE: "https://b" }),
      "https://b",
    );
    assert.equal(agentCoreEndpointFromEnv({ AWS_ENDPOINT_URL: " " }), undefined);
  });

  test("bad input is named by its field", () => {
    const cases: [unknown, string | undefined, RegExp][] = [
      [
        { agentCore: { agentRuntimeArn: "arn:aws:bedrock:us-east-1:123456789012:agent/x" } },
        undefined,
        /agentRuntimeArn$/,
      ],
      [
        { agentCore: { agentRuntimeArn: "arn:aws:bedrock-agentcore:us-east-1:1:runtime/x" } },
        undefined,
        /agentRuntimeArn$/,
      ],
      [{ agentCore: { agentRuntimeArn: ARN, qualifier: "a/b" } }, undefined, /qualifier$/],
      [{}, undefined, /^spec\.cloudA\.agentCore$/],
      [{ agentCore: { agentRuntimeArn: ARN } }, "ftp://x", /^spec\.cloudA\.agentCore$/],
    ];
    for (const [value, override, field] of cases) {
      const r = resolveAgentCore(value, "ns/a", override);
      assert.ok(!r.ok, JSON.stringify(value));
      assert.match(r.field, field);
    }
  });
});

describe("the agent runtime's credential plan, minted", () => {
  const core = resolveAgentCore({ agentCore: { agentRuntimeArn: ARN, qualifier: "v2" } }, "ns/a");
  assert.ok(core.ok);
  const minter = (env: Record<string, string> = {}) =>
    new Minter({ aws: { credentials: async () => KEYS } as never, env, now: () => Date.parse("2026-01-02T03:04:05Z") });

  test("default: the path and authority rewritten, a new session, SigV4 the AWS SDK's signer agrees with", async () => {
    const plan = agentCorePlan(core.ir, undefined, undefined);
    assert.ok(plan.ok);
    const body = new TextEncoder().encode('{"prompt":"hi"}');
    const r = await minter().mint(plan.plan, {
      headers: {
        ":method": "POST",
        ":path": "/client/path?x=1",
        ":authority": "gw.example",
        "content-type": "application/json",
      },
      body,
    });
    assert.ok("ok" in r);
    const set = r.ok.set;
    assert.equal(set[":path"], core.ir.path);
    assert.equal(set[":authority"], "bedrock-agentcore.ap-southeast-2.amazonaws.com");
    const session = set["x-amzn-bedrock-agentcore-runtime-session-id"] ?? "";
    assert.equal(session.length, 36);
    const signer = new SignatureV4({
      credentials: KEYS,
      region: "ap-southeast-2",
      service: "bedrock-agentcore",
      sha256: Sha256,
    });
    const want = await signer.sign(
      {
        method: "POST",
        protocol: "https:",
        hostname: "bedrock-agentcore.ap-southeast-2.amazonaws.com",
        path: core.ir.path.split("?")[0] as string,
        query: { qualifier: "v2" },
        headers: {
          host: "bedrock-agentcore.ap-southeast-2.amazonaws.com",
          "content-type": "application/json",
          "x-amzn-bedrock-agentcore-runtime-session-id": session,
        },
        body,
      },
      { signingDate: new Date("2026-01-02T03:04:05Z") },
    );
    assert.equal(set.authorization, want.headers.authorization);
  });

  test("the client's session is kept; a bearer form writes its token and signs nothing", async () => {
    const plan = agentCorePlan(
      core.ir,
      {
        value: { key: "runtime-token" },
        from: { kind: "GwBackend", name: "ns/a", level: "gwBackend", target: "x" } as never,
      },
      undefined,
    );
    assert.ok(plan.ok);
    assert.doesNotMatch(plan.plan.id, /runtime-token/);
    const session = "s".repeat(40);
    const r = await minter().mint(plan.plan, {
      headers: { ":method": "POST", ":path": "/", "x-amzn-bedrock-agentcore-runtime-session-id": session },
    });
    assert.ok("ok" in r);
    assert.equal(r.ok.set["x-amzn-bedrock-agentcore-runtime-session-id"], undefined);
    assert.equal(r.ok.set.authorization, "Bearer runtime-token");
    assert.equal(r.ok.set["x-amz-date"], undefined);
    assert.equal(r.ok.set[":path"], core.ir.path);
  });
});
