// MCP calls on /metrics and in traces end to end (issue 23): the MCP SDK's client through a real Envoy to Sluice's MCP
// service in front of two SDK targets. Each call to a target is counted by target and method (read with the
// Prometheus text parser), and appears as a span under Sluice's MCP span, itself a child of Envoy's, in one trace.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type LlmEnv, startLlmEnv } from "../helpers/llm-env.js";
import { mcpClient, mcpYaml } from "../helpers/mcp-env.js";
import { type SdkTarget, startSdkTarget } from "../helpers/mcp-targets.js";
import { waitFor } from "../helpers/net.js";
import { type OtlpReceiver, startOtlpReceiver, tracingYaml } from "../helpers/otlp.js";
import { sampleSum, scrape } from "../helpers/prom-text.js";

describe("MCP calls on /metrics and in traces through Envoy", { timeout: 90_000 }, () => {
  let alpha: SdkTarget;
  let beta: SdkTarget;
  let otlp: OtlpReceiver;
  let env: LlmEnv;
  let client: Client | undefined;

  before(async () => {
    [alpha, beta] = await Promise.all([startSdkTarget("alpha"), startSdkTarget("beta")]);
    otlp = await startOtlpReceiver();
    const yaml = `${mcpYaml([
      {
        name: "tools",
        targets: [
          { name: "alpha", port: alpha.port },
          { name: "beta", port: beta.port },
        ],
      },
    ])}${tracingYaml(otlp.port)}`;
    env = await startLlmEnv(yaml, "/tools/mcp", {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp.tracesUrl,
    });
  });
  after(async () => {
    await client?.close().catch(() => {});
    await env?.stop();
    await alpha?.kill();
    await beta?.kill();
    await otlp?.close();
  });

  test("tools/list fans out to both targets: one call each on /metrics, spans under Envoy's in one trace", async () => {
    client = (await mcpClient(env.baseUrl, "tools")).client;
    const before = await scrape(env.sluice.adminPort);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    assert.ok(tools.includes("alpha_echo") && tools.includes("beta_echo"), tools.join(","));
    const after = await scrape(env.sluice.adminPort);
    const calls = (target: string, m: typeof before) =>
      sampleSum(m, "sluice_mcp_target_requests_total", { backend: "default/tools", target, method: "tools/list" });
    assert.equal(after.get("sluice_mcp_target_requests_total")?.type, "counter");
    assert.equal(calls("alpha", after) - calls("alpha", before), 1);
    assert.equal(calls("beta", after) - calls("beta", before), 1);
    assert.equal(
      sampleSum(after, "sluice_mcp_target_errors_total", { method: "tools/list" }) -
        sampleSum(before, "sluice_mcp_target_errors_total", { method: "tools/list" }),
      0,
    );

    const found = await waitFor(
      "Sluice's mcp tools/list span under an Envoy span, with a child per target",
      async () => {
        for (const s of otlp.spans) {
          if (s.service !== "sluice" || s.name !== "mcp tools/list") continue;
          const parent = otlp.spans.find((e) => e.service !== "sluice" && e.spanId === s.parentSpanId);
          const children = otlp.spans.filter((c) => c.parentSpanId === s.spanId);
          if (parent !== undefined && children.length === 2) return { s, parent, children };
        }
        return undefined;
      },
      30_000,
    );
    assert.equal(found.s.traceId, found.parent.traceId);
    assert.deepEqual(found.children.map((c) => c.attributes["sluice.mcp.target"]).sort(), ["alpha", "beta"]);
    for (const c of found.children) {
      assert.equal(c.traceId, found.s.traceId);
      assert.equal(c.attributes["mcp.method.name"], "tools/list");
    }
  });
});
